package gcs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/storetest"
)

const testBucket = "toolhost-test"

// fastRetry keeps the tests' waits short.
var fastRetry = retryPolicy{attempts: 4, base: time.Millisecond, max: 5 * time.Millisecond}

// newFake starts fake-gcs-server on 127.0.0.1 over plain http, with an
// empty bucket testBucket.
func newFake(t *testing.T) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", NoListener: false})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: testBucket})
	return srv
}

func newStore(t *testing.T, bucket, endpoint, token string, chunk int64) *Store {
	t.Helper()
	s, err := New(bucket, objstore.Credentials{Endpoint: endpoint, SessionToken: token}, Options{ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	s.retry = fastRetry
	return s
}

// TestConformance runs the objstore suite on fake-gcs-server, with a chunk
// of 256 KiB so that the large object goes up in four chunks of a
// resumable upload.
//
// fake-gcs-server v1.56.1 ignores ifGenerationMatch on DELETE (and on
// GET, where the client checks the generation the server answers with
// itself), so the suite cannot see a stale delete refused: it runs with
// IgnoresConditions, and TestConditions checks every refusal the fake
// does make, and TestConditionsSent that the client asks for them all.
func TestConformance(t *testing.T) {
	srv := newFake(t)
	s := newStore(t, testBucket, srv.URL(), "", ChunkUnit)
	missing := newStore(t, "no-such-bucket", srv.URL(), "", ChunkUnit)
	storetest.Run(t, s, missing, storetest.Options{Large: 3*ChunkUnit + 12345, IgnoresConditions: true})
}

// TestConditions runs the conditional writes of storetest's
// ConditionalWrites on the fake, through both upload paths, leaving out
// the one refusal the fake does not make (a stale delete), which
// TestFakeIgnoresDeleteCondition pins down.
func TestConditions(t *testing.T) {
	srv := newFake(t)
	s := newStore(t, testBucket, srv.URL(), "", ChunkUnit)
	ctx := context.Background()
	for _, size := range []int{3, 2*ChunkUnit + 7} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) {
			key := fmt.Sprintf("cond/%d", size)
			body := func(c byte) []byte { return bytes.Repeat([]byte{c}, size) }
			put := func(c byte, cond objstore.Condition) (objstore.Object, error) {
				return s.Put(ctx, key, bytes.NewReader(body(c)), int64(size), cond)
			}
			v1, err := put('1', objstore.Condition{IfNoneMatch: true})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			v2, err := put('2', objstore.Condition{IfMatch: v1.Version})
			if err != nil {
				t.Fatalf("put if-match the current generation: %v", err)
			}
			if v2.Version == v1.Version {
				t.Fatalf("a write kept generation %s", v1.Version)
			}
			if _, err := put('3', objstore.Condition{IfMatch: v1.Version}); !errors.Is(err, objstore.ErrPrecondition) {
				t.Errorf("put if-match a stale generation: %v, want ErrPrecondition", err)
			}
			if _, err := put('4', objstore.Condition{IfNoneMatch: true}); !errors.Is(err, objstore.ErrPrecondition) {
				t.Errorf("create over an object: %v, want ErrPrecondition", err)
			}
			var e *objstore.Error
			if _, err := put('4', objstore.Condition{IfNoneMatch: true}); !errors.As(err, &e) || e.Status != 412 || e.Code != "conditionNotMet" {
				t.Errorf("a refused create is %#v, want status 412 and the reason conditionNotMet", err)
			}
			rc, got, err := s.Open(ctx, key, "")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(b, body('2')) || got.Version != v2.Version || got.Size != int64(size) {
				t.Errorf("after the refused writes: %d bytes (the second write's: %v), %+v; want version %s", len(b), bytes.Equal(b, body('2')), got, v2.Version)
			}
			if _, _, err := s.Open(ctx, key, v1.Version); !errors.Is(err, objstore.ErrPrecondition) {
				t.Errorf("open of a stale generation: %v, want ErrPrecondition", err)
			}
			if err := s.Delete(ctx, key, objstore.Condition{IfMatch: v2.Version}); err != nil {
				t.Errorf("delete if-match the current generation: %v", err)
			}
			if err := s.Delete(ctx, key, objstore.Condition{}); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("delete of a deleted object: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestFakeIgnoresDeleteCondition records what fake-gcs-server v1.56.1
// does with a delete whose ifGenerationMatch is stale: it deletes. Real
// GCS answers 412 (TestConditionsSent checks the client asks for it and
// reads the 412). When this fails, the fake has learnt the condition, and
// TestConformance can drop IgnoresConditions.
func TestFakeIgnoresDeleteCondition(t *testing.T) {
	srv := newFake(t)
	s := newStore(t, testBucket, srv.URL(), "", 0)
	ctx := context.Background()
	v1, err := s.Put(ctx, "d", strings.NewReader("1"), 1, objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "d", strings.NewReader("2"), 1, objstore.Condition{IfMatch: v1.Version}); err != nil {
		t.Fatal(err)
	}
	err = s.Delete(ctx, "d", objstore.Condition{IfMatch: v1.Version})
	if err != nil {
		t.Fatalf("the fake refused a stale delete (%v): it honours ifGenerationMatch on DELETE now; drop IgnoresConditions from TestConformance", err)
	}
	if _, err := s.Head(ctx, "d"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("after the fake's delete: %v", err)
	}
}

// recorder is an httptest server that records the requests it gets and
// answers them with answer.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []*http.Request
	bodies [][]byte
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, r)
		rec.bodies = append(rec.bodies, b)
		rec.mu.Unlock()
		answer(w, r, b)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) requests() []*http.Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]*http.Request(nil), rec.reqs...)
}

func jsonError(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"domain":"global","reason":%q,"message":%q}]}}`, code, message, reason, message)
}

// TestConditionsSent checks the requests of each operation, their
// conditions among them, against a recorder that refuses every one with
// GCS's 412.
func TestConditionsSent(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		jsonError(w, 412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.")
	})
	s := newStore(t, testBucket, rec.URL, "tok", ChunkUnit)
	ctx := context.Background()
	key := "dir/a b+c#d?e"
	const escaped = "dir%2Fa%20b%2Bc%23d%3Fe"
	check := func(name string, err error, method, path string, query map[string]string) {
		t.Helper()
		if !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("%s: %v, want ErrPrecondition", name, err)
		}
		reqs := rec.requests()
		r := reqs[len(reqs)-1]
		if r.Method != method || r.URL.EscapedPath() != path {
			t.Errorf("%s sent %s %s, want %s %s", name, r.Method, r.URL.EscapedPath(), method, path)
		}
		for k, v := range query {
			if got := r.URL.Query().Get(k); got != v {
				t.Errorf("%s sent %s=%q, want %q (query %s)", name, k, got, v, r.URL.RawQuery)
			}
		}
		if got := r.Header.Get("Authorization"); got != "Bearer tok" {
			t.Errorf("%s sent Authorization %q", name, got)
		}
	}
	objPath := "/storage/v1/b/" + testBucket + "/o/" + escaped
	upPath := "/upload/storage/v1/b/" + testBucket + "/o"

	_, _, err := s.Open(ctx, key, "17")
	check("open", err, "GET", objPath, map[string]string{"alt": "media", "ifGenerationMatch": "17"})
	err = s.Delete(ctx, key, objstore.Condition{IfMatch: "17"})
	check("delete if-match", err, "DELETE", objPath, map[string]string{"ifGenerationMatch": "17"})
	err = s.Delete(ctx, key, objstore.Condition{IfNoneMatch: true})
	check("delete if-none-match", err, "DELETE", objPath, map[string]string{"ifGenerationMatch": "0"})
	_, err = s.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{IfMatch: "17"})
	check("put if-match", err, "POST", upPath, map[string]string{"uploadType": "media", "name": key, "ifGenerationMatch": "17"})
	_, err = s.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{IfNoneMatch: true})
	check("put if-none-match", err, "POST", upPath, map[string]string{"uploadType": "media", "name": key, "ifGenerationMatch": "0"})
	big := make([]byte, ChunkUnit+1)
	_, err = s.Put(ctx, key, bytes.NewReader(big), int64(len(big)), objstore.Condition{IfMatch: "17"})
	check("resumable put if-match", err, "POST", upPath, map[string]string{"uploadType": "resumable", "name": key, "ifGenerationMatch": "17"})

	// A refused write is not retried: one request each.
	if n := len(rec.requests()); n != 6 {
		t.Errorf("%d requests for 6 refused operations", n)
	}
	var e *objstore.Error
	if _, _, err := s.Open(ctx, key, "17"); !errors.As(err, &e) || e.Code != "conditionNotMet" || !strings.Contains(e.Message, "pre-conditions") || e.Op != "get" || e.Key != key || e.Status != 412 {
		t.Errorf("a 412 reads as %#v", err)
	}
	if _, err := s.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{IfMatch: "v1"}); err == nil || errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("a version that is no generation: %v", err)
	}
}

// TestHTTPRefused: plain http:// goes only to loopback.
func TestHTTPRefused(t *testing.T) {
	for _, ep := range []string{"http://example.com", "http://storage.googleapis.com:80", "http://10.1.2.3:4443", "http://[fe80::1]:80", "http://127.example.com", "localhost:4443", "ftp://127.0.0.1", "https://"} {
		if _, err := New(testBucket, objstore.Credentials{Endpoint: ep}, Options{}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
	for _, ep := range []string{"", "https://example.com", "https://storage.googleapis.com/storage/v1/", "http://127.0.0.1:4443", "http://127.3.2.1", "http://[::1]:4443", "http://localhost:4443/", "http://LOCALHOST"} {
		s, err := New(testBucket, objstore.Credentials{Endpoint: ep}, Options{})
		if err != nil {
			t.Errorf("endpoint %q refused: %v", ep, err)
			continue
		}
		if strings.HasSuffix(s.base.String(), "/") || strings.HasSuffix(s.base.Path, "/storage/v1") {
			t.Errorf("endpoint %q kept as %q", ep, s.base)
		}
	}
	if _, err := New(testBucket, objstore.Credentials{Endpoint: "https://user:hunter2@example.com"}, Options{}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an endpoint with a password: %v", err)
	}
	for _, b := range []string{"", "a", "Bucket", "b/c", "b?c"} {
		if _, err := New(b, objstore.Credentials{}, Options{}); err == nil {
			t.Errorf("bucket %q accepted", b)
		}
	}
	for _, c := range []int64{-1, 1000, ChunkUnit + 1} {
		if _, err := New(testBucket, objstore.Credentials{}, Options{ChunkSize: c}); err == nil {
			t.Errorf("chunk size %d accepted", c)
		}
	}
}

const secret = "ya29.a0AfB_byC-SECRET-token_0123456789"

// noToken fails t if err, as any verb formats it, holds the token.
func noToken(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if s := fmt.Sprintf(f, err); strings.Contains(s, secret) {
			t.Errorf("%s: the error holds the token (%s): %s", what, f, s)
		}
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("%s: the error holds the token: %v", what, err)
	}
}

// everyOp runs each operation of s and returns its error.
func everyOp(s *Store) map[string]error {
	ctx := context.Background()
	errs := map[string]error{}
	errs["list"] = s.List(ctx, "p/", func(objstore.Object) error { return nil })
	_, _, errs["open"] = s.Open(ctx, "k", "")
	_, _, errs["open version"] = s.Open(ctx, "k", "5")
	_, errs["head"] = s.Head(ctx, "k")
	_, errs["put"] = s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.Condition{})
	big := make([]byte, 2*ChunkUnit)
	_, errs["resumable put"] = s.Put(ctx, "k", bytes.NewReader(big), int64(len(big)), objstore.Condition{IfNoneMatch: true})
	errs["delete"] = s.Delete(ctx, "k", objstore.Condition{IfMatch: "5"})
	return errs
}

func TestTokenNeverInErrors(t *testing.T) {
	t.Run("MissingBucket", func(t *testing.T) {
		srv := newFake(t)
		s := newStore(t, "no-such-bucket", srv.URL(), secret, ChunkUnit)
		for op, err := range everyOp(s) {
			noToken(t, op, err)
			if op == "list" || strings.Contains(op, "put") {
				if !errors.Is(err, objstore.ErrNoBucket) {
					t.Errorf("%s in a missing bucket: %v, want ErrNoBucket", op, err)
				}
			} else if !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("%s in a missing bucket: %v, want ErrNotFound", op, err)
			}
		}
	})
	t.Run("Forbidden", func(t *testing.T) {
		// A server that quotes the request's Authorization back in its
		// error, as a careless proxy might: the client blanks it out.
		rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			jsonError(w, 403, "forbidden", "caller with "+r.Header.Get("Authorization")+" does not have storage.objects.get access")
		})
		s := newStore(t, testBucket, rec.URL, secret, ChunkUnit)
		for op, err := range everyOp(s) {
			noToken(t, op, err)
			var e *objstore.Error
			if !errors.Is(err, objstore.ErrAuth) || !errors.As(err, &e) || e.Status != 403 || e.Code != "forbidden" || !strings.Contains(e.Message, "storage.objects.get") {
				t.Errorf("%s answered 403: %#v, want ErrAuth with the reason and message", op, err)
			}
		}
		if len(rec.requests()) != 7 {
			t.Errorf("%d requests for 7 refused operations: a 403 is not retried", len(rec.requests()))
		}
	})
	t.Run("Unauthorized", func(t *testing.T) {
		rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/"`)
			jsonError(w, 401, "required", "Invalid Credentials")
		})
		s := newStore(t, testBucket, rec.URL, secret, ChunkUnit)
		for op, err := range everyOp(s) {
			noToken(t, op, err)
			if !errors.Is(err, objstore.ErrAuth) {
				t.Errorf("%s answered 401: %v, want ErrAuth", op, err)
			}
		}
	})
	t.Run("ConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		s := newStore(t, testBucket, "http://"+addr, secret, ChunkUnit)
		for op, err := range everyOp(s) {
			noToken(t, op, err)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("%s to a closed port: %v, want ECONNREFUSED", op, err)
			}
			if strings.Contains(err.Error(), "http://") {
				t.Errorf("%s: the error quotes a URL: %v", op, err)
			}
		}
	})
	t.Run("BadToken", func(t *testing.T) {
		_, err := New(testBucket, objstore.Credentials{SessionToken: secret + "\r\nX-Evil: 1"}, Options{})
		noToken(t, "a token with a newline", err)
	})
}

// TestBearerSent: the token goes as Authorization: Bearer on every request;
// without one, none goes.
func TestBearerSent(t *testing.T) {
	srv := newFake(t)
	var mu sync.Mutex
	var auths []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		srv.HTTPHandler().ServeHTTP(w, r)
	}))
	defer proxy.Close()
	for _, token := range []string{secret, ""} {
		mu.Lock()
		auths = nil
		mu.Unlock()
		s := newStore(t, testBucket, proxy.URL, token, ChunkUnit)
		everyOp(s)
		mu.Lock()
		// The resumable put: a start, then its chunks and a cancel,
		// all to the proxy's origin.
		if len(auths) < 9 {
			t.Errorf("only %d requests", len(auths))
		}
		for i, a := range auths {
			want := ""
			if token != "" {
				want = "Bearer " + token
			}
			if a != want {
				t.Errorf("request %d (token %v) sent Authorization %q", i, token != "", a)
			}
		}
		mu.Unlock()
	}
}

// TestNames: names of every sort round-trip through each operation, on
// both upload paths.
func TestNames(t *testing.T) {
	srv := newFake(t)
	s := newStore(t, testBucket, srv.URL(), "", ChunkUnit)
	ctx := context.Background()
	names := []string{
		"names/a b", "names/a+b", "names/a#b", "names/a?b=c&d", "names/ünï😀cødé",
		"names/deep/dir/x", "names/%2F%20", "names/semi;colon,comma", "names/quote\"'", "names/~tilde@at:colon$",
		"names/back\\slash", "names/dot/./..", "names/trailing/",
	}
	for i, name := range names {
		size := 5 + i
		if i == 3 {
			size = ChunkUnit + 100 // this one through a resumable upload
		}
		body := make([]byte, size)
		rand.Read(body)
		obj, err := s.Put(ctx, name, bytes.NewReader(body), int64(size), objstore.Condition{IfNoneMatch: true})
		if err != nil {
			t.Errorf("put %q: %v", name, err)
			continue
		}
		if obj.Key != name {
			t.Errorf("put %q answered key %q", name, obj.Key)
		}
		h, err := s.Head(ctx, name)
		if err != nil || h.Key != name || h.Version != obj.Version || h.Size != int64(size) {
			t.Errorf("head %q: %+v, %v", name, h, err)
		}
		rc, got, err := s.Open(ctx, name, obj.Version)
		if err != nil {
			t.Errorf("open %q: %v", name, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, body) || got.Version != obj.Version || got.Size != int64(size) || got.Key != name {
			t.Errorf("open %q: %d bytes (equal %v), %+v, %v", name, len(b), bytes.Equal(b, body), got, err)
		}
	}
	var listed []string
	if err := s.List(ctx, "names/", func(o objstore.Object) error {
		listed = append(listed, o.Key)
		if o.ModTime.IsZero() || o.Version == "" {
			t.Errorf("listed %+v", o)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(names) {
		t.Errorf("listed %q, want the %d names", listed, len(names))
	}
	for _, name := range names {
		if err := s.Delete(ctx, name, objstore.Condition{}); err != nil {
			t.Errorf("delete %q: %v", name, err)
		}
	}
	stop := errors.New("stop")
	if err := s.List(ctx, "names/", func(o objstore.Object) error { return fmt.Errorf("still listed %q: %w", o.Key, stop) }); err != nil {
		t.Error(err)
	}
	if _, err := s.Put(ctx, "", strings.NewReader(""), 0, objstore.Condition{}); err == nil {
		t.Error("an empty name was written")
	}
}

// TestListStopsOnError: fn's error ends the listing and is returned as is.
func TestListStopsOnError(t *testing.T) {
	srv := newFake(t)
	s := newStore(t, testBucket, srv.URL(), "", 0)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Put(ctx, k, strings.NewReader(k), 1, objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	n := 0
	err := s.List(ctx, "", func(objstore.Object) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("list returned %v after %d calls", err, n)
	}
}

// TestRetries: reads are retried on 503 and 429; an unconditional write
// is not; a conditional one is.
func TestRetries(t *testing.T) {
	var mu sync.Mutex
	fails := map[string]int{} // method → answers of 503 still to give
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		mu.Lock()
		n := fails[r.Method]
		if n > 0 {
			fails[r.Method] = n - 1
		}
		mu.Unlock()
		if n > 0 {
			if n%2 == 0 {
				w.Header().Set("Retry-After", "0")
				jsonError(w, 429, "rateLimitExceeded", "slow down")
			} else {
				jsonError(w, 503, "backendError", "try again")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name":"k","size":"1","generation":"42","updated":"2026-01-02T03:04:05.678Z"}`)
	})
	s := newStore(t, testBucket, rec.URL, "", 0)
	ctx := context.Background()

	fails["GET"] = 3
	o, err := s.Head(ctx, "k")
	if err != nil || o.Version != "42" || o.Size != 1 || !o.ModTime.Equal(time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)) {
		t.Errorf("head after 3 failures: %+v, %v", o, err)
	}
	fails["GET"] = 4
	if _, err := s.Head(ctx, "k"); err == nil || !strings.Contains(err.Error(), "try again") {
		t.Errorf("head after 4 failures: %v, want the last 503", err)
	}

	n := len(rec.requests())
	fails["POST"] = 1
	if _, err := s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.Condition{}); err == nil {
		t.Error("an unconditional put was retried after a 503")
	}
	if got := len(rec.requests()) - n; got != 1 {
		t.Errorf("an unconditional put sent %d requests", got)
	}
	fails["POST"] = 1
	if o, err := s.Put(ctx, "k", strings.NewReader("x"), 1, objstore.Condition{IfMatch: "41"}); err != nil || o.Version != "42" {
		t.Errorf("a conditional put after a 503: %+v, %v", o, err)
	}
	fails["DELETE"] = 1
	if err := s.Delete(ctx, "k", objstore.Condition{}); err == nil {
		t.Error("an unconditional delete was retried after a 503")
	}
	fails["DELETE"] = 1
	if err := s.Delete(ctx, "k", objstore.Condition{IfMatch: "42"}); err != nil {
		t.Errorf("a conditional delete after a 503: %v", err)
	}
}

// session is a resumable upload session as GCS keeps one, with failures
// to inject.
type session struct {
	mu       sync.Mutex
	data     []byte
	size     int64
	done     bool
	canceled bool
	// fail says what to do with the n-th chunk PUT (from 1): "" answers
	// it, "503" keeps part of it and answers 503, "reset" keeps part of
	// it and drops the connection, "400" refuses it.
	fail  func(n int) string
	puts  int
	auths []string
}

func newSessionServer(t *testing.T, sess *session, location func(base string) string) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		sess.auths = append(sess.auths, r.Header.Get("Authorization"))
		switch {
		case r.Method == "POST" && r.URL.Query().Get("uploadType") == "resumable":
			sess.size, _ = strconv.ParseInt(r.Header.Get("X-Upload-Content-Length"), 10, 64)
			w.Header().Set("Location", location(srv.URL)+"/session?upload_id=xyz")
			return
		case r.URL.Path != "/session":
			http.NotFound(w, r)
			return
		case r.Method == "DELETE":
			sess.canceled = true
			w.WriteHeader(499)
			return
		}
		incomplete := func() {
			if len(sess.data) > 0 {
				w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", len(sess.data)-1))
			}
			w.WriteHeader(http.StatusPermanentRedirect)
		}
		cr := r.Header.Get("Content-Range")
		if strings.HasPrefix(cr, "bytes */") {
			if sess.done {
				fmt.Fprintf(w, `{"name":"big","size":"%d","generation":"7"}`, len(sess.data))
				return
			}
			incomplete()
			return
		}
		var from, to, total int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &from, &to, &total); err != nil || total != sess.size {
			http.Error(w, "bad Content-Range "+cr, 400)
			return
		}
		if from != int64(len(sess.data)) {
			http.Error(w, fmt.Sprintf("chunk at %d, the session holds %d", from, len(sess.data)), 400)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if int64(len(b)) != to-from+1 {
			http.Error(w, "short chunk", 400)
			return
		}
		sess.puts++
		switch sess.fail(sess.puts) {
		case "503":
			sess.data = append(sess.data, b[:len(b)/3]...)
			http.Error(w, "backend", 503)
			return
		case "503-none":
			http.Error(w, "backend", 503)
			return
		case "reset":
			sess.data = append(sess.data, b[:len(b)/2]...)
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		case "400":
			http.Error(w, "no", 400)
			return
		}
		sess.data = append(sess.data, b...)
		if int64(len(sess.data)) == sess.size {
			sess.done = true
			fmt.Fprintf(w, `{"name":"big","size":"%d","generation":"7"}`, len(sess.data))
			return
		}
		incomplete()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResumableRecovers: a chunk answered 503 or cut off is resumed from
// what the session says it holds, even mid-chunk; the bytes arrive whole.
func TestResumableRecovers(t *testing.T) {
	sess := &session{fail: func(n int) string {
		switch n {
		case 2:
			return "503"
		case 4:
			return "reset"
		}
		return ""
	}}
	srv := newSessionServer(t, sess, func(base string) string { return base })
	s := newStore(t, testBucket, srv.URL, secret, ChunkUnit)
	body := make([]byte, 4*ChunkUnit+99)
	rand.Read(body)
	obj, err := s.Put(context.Background(), "big", bytes.NewReader(body), int64(len(body)), objstore.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	// Chunk requests from 0, 256 Ki (503: a third kept), 341⅓ Ki, 597⅓
	// Ki (cut off: half kept), 725⅓ Ki, and the rest from 981⅓ Ki: each
	// sent from where the session said it was.
	if sess.puts != 6 {
		t.Errorf("%d chunk requests, want 6", sess.puts)
	}
	if obj.Version != "7" || obj.Size != int64(len(body)) || !bytes.Equal(sess.data, body) {
		t.Errorf("put answered %+v; the session holds %d bytes (equal %v)", obj, len(sess.data), bytes.Equal(sess.data, body))
	}
	if sess.canceled {
		t.Error("a completed upload was cancelled")
	}
	for i, a := range sess.auths {
		if a != "Bearer "+secret {
			t.Errorf("request %d to the session's own origin sent Authorization %q", i, a)
		}
	}
}

// TestResumableCancelled: an upload refused mid-way cancels its session.
func TestResumableCancelled(t *testing.T) {
	sess := &session{fail: func(n int) string {
		if n == 2 {
			return "400"
		}
		return ""
	}}
	srv := newSessionServer(t, sess, func(base string) string { return base })
	s := newStore(t, testBucket, srv.URL, "", ChunkUnit)
	body := make([]byte, 3*ChunkUnit)
	_, err := s.Put(context.Background(), "big", bytes.NewReader(body), int64(len(body)), objstore.Condition{})
	var e *objstore.Error
	if !errors.As(err, &e) || e.Status != 400 {
		t.Errorf("a refused chunk: %#v", err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if !sess.canceled {
		t.Error("the failed upload's session was not cancelled")
	}

	// One that fails every time gives up after the policy's attempts.
	sess = &session{fail: func(int) string { return "503-none" }}
	srv = newSessionServer(t, sess, func(base string) string { return base })
	s = newStore(t, testBucket, srv.URL, "", ChunkUnit)
	_, err = s.Put(context.Background(), "big", bytes.NewReader(body), int64(len(body)), objstore.Condition{})
	if !errors.As(err, &e) || e.Status != 503 {
		t.Errorf("a chunk refused every time: %#v", err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if !sess.canceled || sess.puts > 2*fastRetry.attempts {
		t.Errorf("cancelled %v after %d chunks", sess.canceled, sess.puts)
	}
}

// TestSessionElsewhere: a session on another origin than the endpoint's
// gets no token.
func TestSessionElsewhere(t *testing.T) {
	sess := &session{fail: func(int) string { return "" }}
	srv := newSessionServer(t, sess, func(base string) string { return strings.Replace(base, "127.0.0.1", "localhost", 1) })
	s := newStore(t, testBucket, srv.URL, secret, ChunkUnit)
	body := make([]byte, 2*ChunkUnit+1)
	if _, err := s.Put(context.Background(), "big", bytes.NewReader(body), int64(len(body)), objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.auths[0] != "Bearer "+secret {
		t.Errorf("the upload's start sent Authorization %q", sess.auths[0])
	}
	for i, a := range sess.auths[1:] {
		if a != "" {
			t.Errorf("request %d to the session on another origin sent Authorization %q", i+1, a)
		}
	}
}

// TestOpenStreams: Open answers before the body has been read, and the
// object's size and generation come from the headers.
func TestOpenStreams(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
		}
		w.Header().Set("X-Goog-Generation", "9")
		w.Header().Set("Content-Length", "10")
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.Write([]byte("01234"))
		w.(http.Flusher).Flush()
		<-release
		w.Write([]byte("56789"))
	})
	s := newStore(t, testBucket, rec.URL, "", 0)
	rc, obj, err := s.Open(context.Background(), "k", "")
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || string(b) != "0123456789" || obj.Version != "9" || obj.Size != 10 || obj.ModTime.Year() != 2006 {
		t.Errorf("open: %q, %+v, %v", b, obj, err)
	}
	if _, _, err := s.Open(context.Background(), "k", "8"); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("a server that sent generation 9 for 8: %v", err)
	}
}
