package s3

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/toolhost/toolhost/objstore"
)

// The test servers: gofakes3 (in memory), behind a handler that verifies
// every request's signature and payload hash the way S3 does, and a shim
// for the two places where gofakes3 v1.2.0 departs from S3 (see
// TestGofakes3Gaps, which pins them).

const testBucket = "bkt"

var testCreds = objstore.Credentials{
	AccessKeyID:     "AKIDTESTACCESSKEY0001",
	SecretAccessKey: "tEsTsEcReT/k3y+0123456789abcdefghijSECRET",
	SessionToken:    "SeSsIoNtOkEn-0123456789-abcdefSESSION",
}

type fake struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu       sync.Mutex
	requests []seenRequest // what the verifier saw, in order
}

// seenRequest is what the verifier saw of one request.
type seenRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte // kept up to 1 KiB
	BodyLen                int64
}

type fakeOptions struct {
	tls    bool
	noShim bool
	// wrap, if set, wraps the whole handler (to inject failures).
	wrap func(http.Handler) http.Handler
}

func newFake(t testing.TB, o fakeOptions) *fake {
	t.Helper()
	f := &fake{backend: s3mem.New()}
	if err := f.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	g := gofakes3.New(f.backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	h := g.Server()
	if !o.noShim {
		h = f.shim(h)
	}
	h = f.verify(h, testCreds)
	if o.wrap != nil {
		h = o.wrap(h)
	}
	if o.tls {
		f.srv = httptest.NewTLSServer(h)
	} else {
		f.srv = httptest.NewServer(h)
	}
	t.Cleanup(f.srv.Close)
	return f
}

// store is a client of bucket on f with testCreds.
func (f *fake) store(t testing.TB, bucket string, o Options) *Store {
	t.Helper()
	creds := testCreds
	creds.Endpoint = f.srv.URL
	if o.HTTPClient == nil {
		o.HTTPClient = f.srv.Client()
	}
	s, err := New(bucket, creds, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fake) seen() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.requests...)
}

func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}

// verify checks each request as S3 does, independently of sign.go: the
// SigV4 signature over what arrived on the wire with secret, and the
// payload: a plain body whose SHA-256 is x-amz-content-sha256 (never
// aws-chunked or UNSIGNED-PAYLOAD). It answers 403
// SignatureDoesNotMatch, or 400 XAmzContentSHA256Mismatch.
func (f *fake) verify(next http.Handler, creds objstore.Credentials) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeS3Error(w, 400, "IncompleteBody", err.Error())
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, seenRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: body[:min(len(body), 1024)], BodyLen: int64(len(body))})
		f.mu.Unlock()

		claimed := r.Header.Get("X-Amz-Content-Sha256")
		sum := sha256.Sum256(body)
		switch {
		case r.Header.Get("Content-Encoding") != "" || len(r.TransferEncoding) > 0 ||
			r.Header.Get("X-Amz-Decoded-Content-Length") != "":
			writeS3Error(w, 400, "InvalidRequest", "not a plain body")
			return
		case claimed != hex.EncodeToString(sum[:]):
			writeS3Error(w, 400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
			return
		case r.ContentLength != int64(len(body)):
			writeS3Error(w, 400, "IncompleteBody", "Content-Length")
			return
		}
		if msg := checkSignature(r, creds, claimed); msg != "" {
			writeS3Error(w, 403, "SignatureDoesNotMatch", msg)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

var authRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$`)

// checkSignature is a second, separate SigV4 check, written from AWS's
// description: it rebuilds the canonical request from the request line as
// sent. It says what is wrong, or "".
func checkSignature(r *http.Request, creds objstore.Credentials, payloadHash string) string {
	m := authRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return "malformed Authorization"
	}
	if m[1] != creds.AccessKeyID {
		return "unknown access key"
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if len(amzDate) != 16 || amzDate[:8] != m[2] {
		return "x-amz-date does not match the scope"
	}
	if r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return "wrong session token"
	}
	signed := strings.Split(m[4], ";")
	for _, must := range []string{"host", "x-amz-content-sha256", "x-amz-date"} {
		if !contains(signed, must) {
			return "unsigned " + must
		}
	}
	if creds.SessionToken != "" && !contains(signed, "x-amz-security-token") {
		return "unsigned x-amz-security-token"
	}
	// The path as it came on the wire must be the strict encoding of the
	// decoded path (S3 re-encodes what it decoded).
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	if rawPath != awsEscape(r.URL.Path, true) {
		return fmt.Sprintf("path %q is not strictly encoded", rawPath)
	}
	var pairs [][2]string
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			pairs = append(pairs, [2]string{awsEscape(k, false), awsEscape(v, false)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	var qs []string
	for _, p := range pairs {
		qs = append(qs, p[0]+"="+p[1])
	}
	if rawQuery != strings.Join(qs, "&") {
		return fmt.Sprintf("query %q is not in canonical form", rawQuery)
	}
	var ch strings.Builder
	for _, h := range signed {
		v := r.Header.Values(h)
		if h == "host" {
			v = []string{r.Host}
		}
		ch.WriteString(h + ":" + strings.TrimSpace(strings.Join(v, ",")) + "\n")
	}
	creq := strings.Join([]string{r.Method, rawPath, rawQuery, ch.String(), m[4], payloadHash}, "\n")
	ch256 := sha256.Sum256([]byte(creq))
	sts := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + m[2] + "/" + m[3] + "/s3/aws4_request\n" + hex.EncodeToString(ch256[:])
	mac := func(k []byte, s string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(s)); return h.Sum(nil) }
	key := mac(mac(mac(mac([]byte("AWS4"+creds.SecretAccessKey), m[2]), m[3]), "s3"), "aws4_request")
	if want := hex.EncodeToString(mac(key, sts)); want != m[5] {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// awsEscape percent-encodes all but A-Za-z0-9-._~ (and '/' if keepSlash).
func awsEscape(s string, keepSlash bool) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", c) >= 0 ||
			(keepSlash && c == '/') {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// shim makes gofakes3 behave as S3 does where v1.2.0 does not:
//   - DeleteObject with If-Match: gofakes3 deletes whatever the ETag; S3
//     answers 412 PreconditionFailed when it does not match (and 404
//     NoSuchKey for a missing object).
//   - CompleteMultipartUpload: gofakes3 answers the multipart ETag
//     ("md5-of-md5s-N") but stores the object under the MD5 of its
//     bytes, which HEAD, GET and List then report; S3 reports one ETag
//     everywhere. The shim answers the stored one.
func (f *fake) shim(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		_, upload := r.URL.Query()["uploadId"]
		switch {
		case r.Method == http.MethodDelete && key != "" && !upload && r.Header.Get("If-Match") != "":
			obj, err := f.backend.HeadObject(bucket, key)
			if err != nil {
				writeS3Error(w, 404, "NoSuchKey", "The specified key does not exist.")
				return
			}
			if !sameETag(hex.EncodeToString(obj.Hash), r.Header.Get("If-Match")) {
				writeS3Error(w, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
				return
			}
		case r.Method == http.MethodPost && upload:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code == 200 {
				if obj, err := f.backend.HeadObject(bucket, key); err == nil {
					body = regexp.MustCompile(`<ETag>[^<]*</ETag>`).ReplaceAll(body,
						[]byte("<ETag>&#34;"+hex.EncodeToString(obj.Hash)+"&#34;</ETag>"))
				}
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		next.ServeHTTP(w, r)
	})
}
