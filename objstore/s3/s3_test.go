package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/storetest"
)

func init() { retryBase = 5 * time.Millisecond }

// The conformance suite against gofakes3, over plain http on 127.0.0.1
// and over TLS, every request checked by the signature verifier. The
// multipart case is 11 MiB in parts of 5 MiB (S3's smallest): 3 parts.
func TestConformance(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) {
			f := newFake(t, fakeOptions{tls: tls})
			o := Options{PartSize: 5 << 20, Concurrency: 3}
			storetest.Run(t, f.store(t, testBucket, o), f.store(t, "no-such-bucket", o),
				storetest.Options{Large: 11 << 20})
			// Each request was signed and carried a plain, hashed body
			// (the verifier refuses any other); no part is left behind.
			if n := countUploads(t, f); n != 0 {
				t.Errorf("%d multipart uploads left", n)
			}
		})
	}
}

// The suite against gofakes3 as it is, without the shim: it ignores
// If-Match on DELETE, so the run is told it ignores conditions (its
// Multipart case is left out: gofakes3's Complete answers another ETag
// than the object then has).
func TestConformanceRawGofakes3(t *testing.T) {
	f := newFake(t, fakeOptions{noShim: true})
	o := Options{PartSize: 5 << 20}
	storetest.Run(t, f.store(t, testBucket, o), f.store(t, "no-such-bucket", o),
		storetest.Options{IgnoresConditions: true})
}

// TestGofakes3Gaps pins exactly where gofakes3 v1.2.0 does not honour
// conditions, so that an upgrade that fixes them is noticed.
func TestGofakes3Gaps(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, fakeOptions{noShim: true})
	s := f.store(t, testBucket, Options{PartSize: 5 << 20})
	v1, err := s.Put(ctx, "k", strings.NewReader("one"), 3, objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.Put(ctx, "k", strings.NewReader("two"), 3, objstore.Condition{IfMatch: v1.Version})
	if err != nil {
		t.Fatal(err)
	}

	// PutObject: If-Match and If-None-Match are honoured.
	if _, err := s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.Condition{IfMatch: v1.Version}); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("gofakes3 PutObject If-Match stale: %v, want 412", err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.Condition{IfNoneMatch: true}); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("gofakes3 PutObject If-None-Match *: %v, want 412", err)
	}

	// GetObject: If-Match is ignored (200 with the current object)...
	resp, err := s.do(ctx, &request{op: "get", key: "k", method: "GET", path: s.objectPath("k"),
		header: http.Header{"If-Match": {v1.Version}}})
	if err != nil {
		t.Fatalf("gofakes3 GET If-Match stale: %v (it now honours If-Match on GET?)", err)
	}
	resp.Body.Close()
	// ... which Open catches by the ETag answered.
	if _, _, err := s.Open(ctx, "k", v1.Version); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Open of a stale version on gofakes3: %v, want ErrPrecondition", err)
	}
	if rc, obj, err := s.Open(ctx, "k", v2.Version); err != nil || obj.Version != v2.Version {
		t.Errorf("Open of the current version: %+v, %v", obj, err)
	} else {
		rc.Close()
	}

	// CompleteMultipartUpload answers "md5-N", then HEAD reports the MD5
	// of the bytes; conditions on Complete are not checked.
	big := make([]byte, 6<<20)
	mp, err := s.Put(ctx, "big", bytes.NewReader(big), int64(len(big)), objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Head(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if mp.Version == h.Version || !strings.HasSuffix(mp.Version, `-2"`) {
		t.Errorf("gofakes3 multipart ETag %s, HEAD %s: it now answers one ETag?", mp.Version, h.Version)
	}
	if _, err := s.Put(ctx, "big", bytes.NewReader(big), int64(len(big)), objstore.Condition{IfNoneMatch: true}); err != nil {
		t.Errorf("gofakes3 Complete with If-None-Match over an object: %v (it now checks conditions on Complete?)", err)
	}

	// DeleteObject: If-Match is ignored: a stale one deletes.
	if err := s.Delete(ctx, "k", objstore.Condition{IfMatch: v1.Version}); err != nil {
		t.Fatalf("gofakes3 DELETE If-Match stale: %v (it now honours If-Match on DELETE?)", err)
	}
	if _, err := s.Head(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("after gofakes3's DELETE with a stale If-Match: %v, want the object gone", err)
	}
}

// countUploads is the number of multipart uploads in progress on f.
func countUploads(t *testing.T, f *fake) int {
	s := f.store(t, testBucket, Options{})
	resp, err := s.do(context.Background(), &request{op: "list", method: "GET", path: s.bucketPath(),
		query: url.Values{"uploads": {""}}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Count(string(b), "<Upload>")
}

func TestNewRefuses(t *testing.T) {
	good := testCreds
	for _, tc := range []struct {
		name   string
		bucket string
		creds  func(c *objstore.Credentials)
		kind   string
		want   string
	}{
		{"http to a LAN address", "b", func(c *objstore.Credentials) { c.Endpoint = "http://10.0.0.5:9000" }, "", "http://10.0.0.5:9000 is refused"},
		{"http to a name", "b", func(c *objstore.Credentials) { c.Endpoint = "http://minio.example.com" }, "", "is refused"},
		{"http to 0.0.0.0", "b", func(c *objstore.Credentials) { c.Endpoint = "http://0.0.0.0:9000" }, "", "is refused"},
		{"http to a loopback-looking name", "b", func(c *objstore.Credentials) { c.Endpoint = "http://127.0.0.1.example.com" }, "", "is refused"},
		{"another scheme", "b", func(c *objstore.Credentials) { c.Endpoint = "ftp://127.0.0.1" }, "", "not https"},
		{"no scheme", "b", func(c *objstore.Credentials) { c.Endpoint = "s3.example.com" }, "", "not a URL"},
		{"user in the endpoint", "b", func(c *objstore.Credentials) { c.Endpoint = "https://u:pw@s3.example.com" }, "", "user name or password"},
		{"no access key", "b", func(c *objstore.Credentials) { c.AccessKeyID = "" }, "", "no accessKeyId"},
		{"no secret key", "b", func(c *objstore.Credentials) { c.SecretAccessKey = "" }, "", "no secretAccessKey"},
		{"r2 without endpoint", "b", func(c *objstore.Credentials) {}, "r2", "r2: the credentials have no endpoint"},
		{"bad kind", "b", func(c *objstore.Credentials) {}, "gcs", "unknown kind"},
		{"no bucket", "", func(c *objstore.Credentials) {}, "", "not a bucket name"},
		{"slash in bucket", "a/b", func(c *objstore.Credentials) {}, "", "not a bucket name"},
		{"bad region", "b", func(c *objstore.Credentials) { c.Region = "x.evil.com/" }, "", "not a region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.creds(&c)
			_, err := New(tc.bucket, c, Options{Kind: tc.kind})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
			assertNoSecret(t, err)
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("the error shows the endpoint's password: %v", err)
			}
		})
	}
	for _, ep := range []string{"http://127.0.0.1:9000", "http://127.9.8.7", "http://[::1]:9000", "http://localhost:9000", "HTTP://LOCALHOST", "https://s3.example.com/base/"} {
		c := good
		c.Endpoint = ep
		if _, err := New("b", c, Options{Kind: "r2"}); err != nil {
			t.Errorf("endpoint %s: %v", ep, err)
		}
	}
}

// TestAddressing checks the URL and the signing region of each kind of
// store, with a transport that answers nothing but records.
func TestAddressing(t *testing.T) {
	for _, tc := range []struct {
		name, bucket, kind string
		creds              objstore.Credentials
		url, region        string
	}{
		{"aws default region", "my-bucket", "", objstore.Credentials{}, "https://my-bucket.s3.us-east-1.amazonaws.com/dir/a%20b%2Bc", "us-east-1"},
		{"aws region", "my-bucket", "s3", objstore.Credentials{Region: "eu-west-3"}, "https://my-bucket.s3.eu-west-3.amazonaws.com/dir/a%20b%2Bc", "eu-west-3"},
		{"aws dotted bucket", "my.bucket", "s3", objstore.Credentials{Region: "eu-west-3"}, "https://s3.eu-west-3.amazonaws.com/my.bucket/dir/a%20b%2Bc", "eu-west-3"},
		{"s3-compatible", "b", "s3", objstore.Credentials{Endpoint: "https://minio.example.com:9000"}, "https://minio.example.com:9000/b/dir/a%20b%2Bc", "us-east-1"},
		{"endpoint with a path", "b", "s3", objstore.Credentials{Endpoint: "https://gw.example.com/s3/"}, "https://gw.example.com/s3/b/dir/a%20b%2Bc", "us-east-1"},
		{"r2", "b", "r2", objstore.Credentials{Endpoint: "https://acct.r2.cloudflarestorage.com"}, "https://acct.r2.cloudflarestorage.com/b/dir/a%20b%2Bc", "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			rt := roundTripper(func(r *http.Request) (*http.Response, error) {
				got = r
				return &http.Response{StatusCode: 200, Header: http.Header{"Etag": {`"e"`}, "Content-Length": {"0"}},
					Body: http.NoBody, Request: r}, nil
			})
			c := tc.creds
			c.AccessKeyID, c.SecretAccessKey = testCreds.AccessKeyID, testCreds.SecretAccessKey
			s, err := New(tc.bucket, c, Options{Kind: tc.kind, HTTPClient: &http.Client{Transport: rt}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Head(context.Background(), "dir/a b+c"); err != nil {
				t.Fatal(err)
			}
			if u := got.URL.String(); u != tc.url {
				t.Errorf("URL %s, want %s", u, tc.url)
			}
			if a := got.Header.Get("Authorization"); !strings.Contains(a, "/"+tc.region+"/s3/aws4_request") {
				t.Errorf("Authorization %s, want region %s", a, tc.region)
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAuthorizationExact checks one captured request's headers against a
// signature computed here by hand, step by step.
func TestAuthorizationExact(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("ETag", `"abc"`)
	}))
	defer srv.Close()
	creds := testCreds
	creds.Endpoint = srv.URL
	creds.Region = "eu-central-1"
	s, err := New("bkt", creds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Date(2024, 2, 29, 23, 59, 58, 0, time.UTC) }
	if _, err := s.Put(context.Background(), "dir/a b+c$.txt", strings.NewReader("hello"), 5, objstore.Condition{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	const helloSHA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	creq := "PUT\n/bkt/dir/a%20b%2Bc%24.txt\n\n" +
		"host:" + host + "\n" +
		"if-none-match:*\n" +
		"x-amz-content-sha256:" + helloSHA + "\n" +
		"x-amz-date:20240229T235958Z\n" +
		"x-amz-security-token:" + testCreds.SessionToken + "\n\n" +
		"host;if-none-match;x-amz-content-sha256;x-amz-date;x-amz-security-token\n" + helloSHA
	sum := sha256.Sum256([]byte(creq))
	sts := "AWS4-HMAC-SHA256\n20240229T235958Z\n20240229/eu-central-1/s3/aws4_request\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+testCreds.SecretAccessKey), "20240229")
	k = hmacSHA256(k, "eu-central-1")
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	want := "AWS4-HMAC-SHA256 Credential=" + testCreds.AccessKeyID + "/20240229/eu-central-1/s3/aws4_request, " +
		"SignedHeaders=host;if-none-match;x-amz-content-sha256;x-amz-date;x-amz-security-token, " +
		"Signature=" + hex.EncodeToString(hmacSHA256(k, sts))
	if a := got.Header.Get("Authorization"); a != want {
		t.Errorf("Authorization\n%s\nwant\n%s", a, want)
	}
	if got.RequestURI != "/bkt/dir/a%20b%2Bc%24.txt" {
		t.Errorf("request URI %s", got.RequestURI)
	}
	if got.ContentLength != 5 || got.Header.Get("X-Amz-Content-Sha256") != helloSHA {
		t.Errorf("Content-Length %d, x-amz-content-sha256 %s", got.ContentLength, got.Header.Get("X-Amz-Content-Sha256"))
	}
}

// A wrong secret (or token) is refused by the verifying server: ErrAuth.
func TestWrongSecret(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, fakeOptions{})
	for name, mutate := range map[string]func(*objstore.Credentials){
		"secret": func(c *objstore.Credentials) { c.SecretAccessKey += "x" },
		"token":  func(c *objstore.Credentials) { c.SessionToken = "other-token-0123456789" },
	} {
		t.Run(name, func(t *testing.T) {
			c := testCreds
			mutate(&c)
			c.Endpoint = f.srv.URL
			s, err := New(testBucket, c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Put(ctx, "k", strings.NewReader("v"), 1, objstore.Condition{})
			var oe *objstore.Error
			if !errors.Is(err, objstore.ErrAuth) || !errors.As(err, &oe) || oe.Status != 403 || oe.Code != "SignatureDoesNotMatch" {
				t.Fatalf("put with a wrong %s: %v, want ErrAuth", name, err)
			}
			if err := s.List(ctx, "", func(objstore.Object) error { return nil }); !errors.Is(err, objstore.ErrAuth) {
				t.Errorf("list: %v", err)
			}
			if _, err := s.Head(ctx, "k"); !errors.Is(err, objstore.ErrAuth) {
				t.Errorf("head: %v", err)
			}
			assertNoSecret(t, err, c.SecretAccessKey, c.SessionToken)
		})
	}
}

func assertNoSecret(t *testing.T, err error, extra ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, form := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		for _, sec := range append([]string{testCreds.AccessKeyID, testCreds.SecretAccessKey, testCreds.SessionToken}, extra...) {
			if sec != "" && strings.Contains(form, sec) {
				t.Errorf("an error shows a credential: %s", form)
			}
		}
	}
}

// No error holds a credential, whatever fails: a missing bucket, a store
// that echoes the request's headers in its refusal, 5xx to the end, a
// refused connection, a certificate the client does not trust.
func TestNoSecretInErrors(t *testing.T) {
	ctx := context.Background()
	ops := func(s *Store) []error {
		var errs []error
		errs = append(errs, s.List(ctx, "p/", func(objstore.Object) error { return nil }))
		_, _, err := s.Open(ctx, "k", `"v"`)
		errs = append(errs, err)
		_, err = s.Head(ctx, "k")
		errs = append(errs, err)
		_, err = s.Put(ctx, "k", strings.NewReader("v"), 1, objstore.Condition{IfMatch: `"v"`})
		errs = append(errs, err)
		_, err = s.Put(ctx, "big", bytes.NewReader(make([]byte, 6<<20)), 6<<20, objstore.Condition{})
		errs = append(errs, err)
		errs = append(errs, s.Delete(ctx, "k", objstore.Condition{}))
		return errs
	}
	check := func(t *testing.T, s *Store, want error) {
		t.Helper()
		for i, err := range ops(s) {
			if err == nil {
				t.Errorf("op %d: no error", i)
				continue
			}
			w := want
			if i == 2 && want == objstore.ErrNoBucket {
				// A HEAD's 404 has no body to tell a missing bucket by.
				w = objstore.ErrNotFound
			}
			if w != nil && !errors.Is(err, w) {
				t.Errorf("op %d: %v, want %v", i, err, w)
			}
			assertNoSecret(t, err)
		}
	}
	newStore := func(t *testing.T, endpoint string, c *http.Client) *Store {
		creds := testCreds
		creds.Endpoint = endpoint
		s, err := New("bkt", creds, Options{PartSize: 5 << 20, HTTPClient: c})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("missing bucket", func(t *testing.T) {
		f := newFake(t, fakeOptions{})
		check(t, f.store(t, "nope", Options{PartSize: 5 << 20}), objstore.ErrNoBucket)
	})
	t.Run("echoing 403", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var all strings.Builder
			r.Header.Write(&all)
			writeS3Error(w, 403, "AccessDenied "+testCreds.AccessKeyID, "you sent "+xmlEscape(all.String())+
				" and your secret is "+testCreds.SecretAccessKey)
		}))
		defer srv.Close()
		check(t, newStore(t, srv.URL, nil), objstore.ErrAuth)
	})
	t.Run("500 to the end", func(t *testing.T) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			writeS3Error(w, 500, "InternalError", "token "+testCreds.SessionToken)
		}))
		defer srv.Close()
		check(t, newStore(t, srv.URL, nil), nil)
		if n.Load() < 8 {
			t.Errorf("%d requests: the reads were not retried", n.Load())
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		check(t, newStore(t, "http://"+addr, nil), nil)
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		defer srv.Close()
		check(t, newStore(t, srv.URL, nil), nil)
	})
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The bytes stored are the bytes sent: bodies that look like aws-chunked
// framing come back as they were, single and multipart, and every body
// on the wire was plain with its SHA-256 (the verifier refuses any other).
func TestBytesExact(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, fakeOptions{})
	s := f.store(t, testBucket, Options{PartSize: 5 << 20})
	framing := []byte("5;chunk-signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\r\nhello\r\n0;chunk-signature=x\r\n\r\n")
	big := make([]byte, 11<<20+7)
	rand.Read(big)
	copy(big[5<<20-10:], framing) // across the first part boundary
	for key, body := range map[string][]byte{"small": framing, "empty": {}, "multi": big} {
		obj, err := s.Put(ctx, key, bytes.NewReader(body), int64(len(body)), objstore.Condition{})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		stored, err := f.backend.GetObject(testBucket, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(stored.Contents)
		stored.Contents.Close()
		if !bytes.Equal(b, body) {
			t.Errorf("%s: stored %d bytes, sent %d (equal %v)", key, len(b), len(body), bytes.Equal(b, body))
		}
		if obj.Size != int64(len(body)) {
			t.Errorf("%s: size %d", key, obj.Size)
		}
	}
	var parts int
	for _, r := range f.seen() {
		if sha := r.Header.Get("X-Amz-Content-Sha256"); sha == "UNSIGNED-PAYLOAD" || strings.HasPrefix(sha, "STREAMING-") {
			t.Errorf("%s %s sent x-amz-content-sha256 %s", r.Method, r.Path, sha)
		}
		if r.Header.Get("Content-Encoding") != "" || r.Header.Get("X-Amz-Trailer") != "" {
			t.Errorf("%s %s sent Content-Encoding %q", r.Method, r.Path, r.Header.Get("Content-Encoding"))
		}
		if strings.Contains(r.RawQuery, "partNumber=") {
			parts++
		}
		if r.Header.Get("Authorization") == "" {
			t.Errorf("%s %s was not signed", r.Method, r.Path)
		}
	}
	if parts != 3 {
		t.Errorf("%d parts sent, want 3", parts)
	}
}

// Reads, parts and unconditional writes are retried after 5xx and a
// broken connection; conditional writes are not; retries are bounded.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	var (
		failNext  atomic.Int64 // how many matching requests to fail yet
		mode      atomic.Value // "503" or "reset"
		partsOnly atomic.Bool  // fail only UploadPart requests
		calls     atomic.Int64
	)
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if (!partsOnly.Load() || r.URL.Query().Has("partNumber")) && failNext.Add(-1) >= 0 {
				if mode.Load() == "reset" {
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.(*net.TCPConn).SetLinger(0)
					conn.Close()
					return
				}
				writeS3Error(w, 503, "SlowDown", "Please reduce your request rate.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	f := newFake(t, fakeOptions{wrap: wrap})
	s := f.store(t, testBucket, Options{PartSize: 5 << 20, Concurrency: 1})
	v, err := s.Put(ctx, "k", strings.NewReader("v"), 1, objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"503", "reset"} {
		mode.Store(m)
		for _, op := range []struct {
			name string
			do   func() error
		}{
			{"get", func() error {
				rc, _, err := s.Open(ctx, "k", v.Version)
				if err == nil {
					rc.Close()
				}
				return err
			}},
			{"head", func() error { _, err := s.Head(ctx, "k"); return err }},
			{"list", func() error { return s.List(ctx, "", func(objstore.Object) error { return nil }) }},
			{"delete", func() error { return s.Delete(ctx, "gone", objstore.Condition{}) }},
			{"put", func() error {
				_, err := s.Put(ctx, "k", strings.NewReader("v"), 1, objstore.Condition{})
				return err
			}},
			{"part", func() error {
				partsOnly.Store(true)
				defer partsOnly.Store(false)
				_, err := s.Put(ctx, "m", bytes.NewReader(make([]byte, 6<<20)), 6<<20, objstore.Condition{})
				return err
			}},
		} {
			failNext.Store(2)
			if err := op.do(); err != nil {
				t.Errorf("%s after two %s: %v", op.name, m, err)
			}
			if n := failNext.Load(); n >= 0 {
				t.Errorf("%s: %d failures left unused", op.name, n+1)
			}
		}
		// A conditional put is not retried.
		failNext.Store(1)
		calls.Store(0)
		if _, err := s.Put(ctx, "k", strings.NewReader("w"), 1, objstore.Condition{IfMatch: v.Version}); err == nil {
			t.Errorf("conditional put after a %s: no error", m)
		}
		if calls.Load() != 1 {
			t.Errorf("conditional put after a %s: %d requests, want 1", m, calls.Load())
		}
		// Retries are bounded.
		failNext.Store(100)
		calls.Store(0)
		if _, err := s.Head(ctx, "k"); err == nil {
			t.Errorf("head after endless %s: no error", m)
		}
		if m == "503" && calls.Load() != maxRetries+1 {
			t.Errorf("head after endless 503: %d requests, want %d", calls.Load(), maxRetries+1)
		}
		failNext.Store(0)
	}
}

// cutWriter passes left bytes of a response body, then breaks the
// connection.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if len(b) > w.left {
		w.ResponseWriter.Write(b[:w.left])
		w.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	w.left -= len(b)
	return w.ResponseWriter.Write(b)
}

// A read broken off mid-way resumes with a ranged GET of the same
// version; if the object changed meanwhile, the read fails with
// ErrPrecondition rather than join two versions.
func TestOpenResumes(t *testing.T) {
	ctx := context.Background()
	var cuts atomic.Int64   // how many GETs to break yet
	var change atomic.Bool  // write the object anew before a ranged GET
	var ranges atomic.Int64 // ranged GETs seen
	var f *fake
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/obj") {
				if r.Header.Get("Range") != "" {
					ranges.Add(1)
					if change.Load() {
						f.backend.PutObject(testBucket, "obj", map[string]string{}, bytes.NewReader(make([]byte, 1<<20)), 1<<20, nil)
					}
				}
				if cuts.Add(-1) >= 0 {
					w = &cutWriter{ResponseWriter: w, left: 100 << 10}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	f = newFake(t, fakeOptions{wrap: wrap, noShim: true})
	s := f.store(t, testBucket, Options{})
	body := make([]byte, 1<<20)
	rand.Read(body)
	obj, err := s.Put(ctx, "obj", bytes.NewReader(body), int64(len(body)), objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}

	cuts.Store(2) // the first GET and the first resume break off
	rc, _, err := s.Open(ctx, "obj", obj.Version)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes (equal %v), %v", len(got), bytes.Equal(got, body), err)
	}
	if ranges.Load() != 2 {
		t.Errorf("%d ranged GETs, want 2", ranges.Load())
	}

	cuts.Store(1)
	change.Store(true)
	rc, _, err = s.Open(ctx, "obj", obj.Version)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("a read resumed on a changed object: %v, want ErrPrecondition", err)
	}

	cuts.Store(100) // every resume breaks: bounded
	change.Store(false)
	rc, _, err = s.Open(ctx, "obj", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	if err == nil {
		t.Error("a read that always breaks off succeeded")
	}
	cuts.Store(0)
}
