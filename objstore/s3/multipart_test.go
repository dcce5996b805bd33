package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// pattern is a ReaderAt of size bytes computed from their offset: a large
// body that takes no memory.
type pattern struct{ size int64 }

func (p pattern) ReadAt(b []byte, off int64) (int, error) {
	if off >= p.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.size-off))
	for i := 0; i < n; {
		i += copy(b[i:n], patternTable[(off+int64(i))%int64(len(patternTable)):])
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// patternTable repeats every 65,521 bytes (a prime: no two parts alike).
var patternTable = func() []byte {
	b := make([]byte, 65521)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}()

// partServer is a minimal S3 multipart endpoint that keeps nothing: it
// hashes each part as it arrives (checking x-amz-content-sha256), and
// records the calls. fail, if set, may refuse a request first.
type partServer struct {
	mu        sync.Mutex
	calls     []string    // "POST uploads", "PUT part 3", "POST complete", "DELETE upload"
	completes http.Header // the headers of the last Complete
	partSums  map[int][]byte
	inFlight  atomic.Int64
	maxFlight atomic.Int64
	fail      func(w http.ResponseWriter, r *http.Request) bool
	complete  string // the body Complete answers, if set
	getSize   int64  // the size of the object GET serves (pattern bytes)
}

func (p *partServer) record(s string) {
	p.mu.Lock()
	p.calls = append(p.calls, s)
	p.mu.Unlock()
}

func (p *partServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if p.fail != nil && p.fail(w, r) {
		return
	}
	switch {
	case r.Method == "POST" && q.Has("uploads"):
		p.record("POST uploads")
		fmt.Fprint(w, `<?xml version="1.0"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>up-1</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == "PUT" && q.Has("partNumber"):
		n := p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		for {
			m := p.maxFlight.Load()
			if n <= m || p.maxFlight.CompareAndSwap(m, n) {
				break
			}
		}
		num, _ := strconv.Atoi(q.Get("partNumber"))
		h := sha256.New()
		got, _ := io.Copy(h, r.Body)
		sum := h.Sum(nil)
		if hex.EncodeToString(sum) != r.Header.Get("X-Amz-Content-Sha256") || got != r.ContentLength {
			writeS3Error(w, 400, "XAmzContentSHA256Mismatch", "part "+q.Get("partNumber"))
			return
		}
		p.mu.Lock()
		p.calls = append(p.calls, "PUT part "+q.Get("partNumber"))
		if p.partSums == nil {
			p.partSums = map[int][]byte{}
		}
		p.partSums[num] = sum
		p.mu.Unlock()
		w.Header().Set("ETag", `"etag-`+q.Get("partNumber")+`"`)
	case r.Method == "POST" && q.Get("uploadId") == "up-1":
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.calls = append(p.calls, "POST complete")
		p.completes = r.Header.Clone()
		p.mu.Unlock()
		if !strings.Contains(string(body), `<Part><PartNumber>1</PartNumber><ETag>&#34;etag-1&#34;</ETag></Part>`) {
			writeS3Error(w, 400, "InvalidPart", string(body))
			return
		}
		if p.complete != "" {
			fmt.Fprint(w, p.complete)
			return
		}
		fmt.Fprint(w, `<?xml version="1.0"?><CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>"final-etag-3"</ETag></CompleteMultipartUploadResult>`)
	case r.Method == "DELETE" && q.Get("uploadId") == "up-1":
		p.record("DELETE upload")
		w.WriteHeader(204)
	case r.Method == "GET" && p.getSize > 0:
		w.Header().Set("ETag", `"final-etag-3"`)
		w.Header().Set("Content-Length", strconv.FormatInt(p.getSize, 10))
		io.Copy(w, io.NewSectionReader(pattern{p.getSize}, 0, p.getSize))
	default:
		writeS3Error(w, 400, "Unexpected", r.Method+" "+r.URL.String())
	}
}

func (p *partServer) count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func partStore(t testing.TB, p *partServer, o Options) *Store {
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	c := testCreds
	c.Endpoint = srv.URL
	s, err := New("b", c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Complete carries the condition's headers, and its version is the one
// it answers.
func TestMultipartCompleteConditions(t *testing.T) {
	ctx := context.Background()
	for _, cond := range []objstore.Condition{{IfMatch: `"old"`}, {IfMatch: "bare"}, {IfNoneMatch: true}, {}} {
		p := &partServer{}
		s := partStore(t, p, Options{PartSize: 5 << 20})
		obj, err := s.Put(ctx, "k", pattern{12 << 20}, 12<<20, cond)
		if err != nil {
			t.Fatal(err)
		}
		if obj.Version != `"final-etag-3"` || obj.Size != 12<<20 {
			t.Errorf("put answered %+v", obj)
		}
		if n := p.count("PUT part"); n != 3 {
			t.Errorf("%d parts", n)
		}
		wantIfMatch := map[string]string{`"old"`: `"old"`, "bare": `"bare"`, "": ""}[cond.IfMatch]
		if got := p.completes.Get("If-Match"); got != wantIfMatch {
			t.Errorf("%+v: Complete's If-Match %q, want %q", cond, got, wantIfMatch)
		}
		if got := p.completes.Get("If-None-Match"); (got == "*") != cond.IfNoneMatch || (got != "" && got != "*") {
			t.Errorf("%+v: Complete's If-None-Match %q", cond, got)
		}
		for _, c := range p.calls {
			if c == "DELETE upload" {
				t.Error("a successful upload was aborted")
			}
		}
	}
}

// Any failure aborts the upload: a refused part, a refused Complete
// (412), a Complete that answers 200 and then an <Error>, a canceled
// context.
func TestMultipartAborts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   func(w http.ResponseWriter, r *http.Request) bool
		answer string
		cancel bool
		want   error
	}{
		{name: "part refused", fail: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Query().Get("partNumber") == "2" {
				writeS3Error(w, 400, "EntityTooSmall", "no")
				return true
			}
			return false
		}},
		{name: "complete 412", want: objstore.ErrPrecondition, fail: func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == "POST" && r.URL.Query().Has("uploadId") {
				writeS3Error(w, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
				return true
			}
			return false
		}},
		{name: "complete 200 with an error", answer: `<?xml version="1.0"?>` + "\n   \n" +
			`<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>`},
		{name: "canceled", cancel: true, want: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &partServer{fail: tc.fail, complete: tc.answer}
			if tc.cancel {
				p.fail = func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Query().Get("partNumber") == "2" {
						// The part is never answered: the client's cancel
						// ends it, closing the connection, which ends the
						// request's context here once its body is read.
						cancel()
						io.Copy(io.Discard, r.Body)
						<-r.Context().Done()
						return true
					}
					return false
				}
			}
			s := partStore(t, p, Options{PartSize: 5 << 20, Concurrency: 1})
			_, err := s.Put(ctx, "k", pattern{16 << 20}, 16<<20, objstore.Condition{IfNoneMatch: true})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
			if n := p.count("DELETE upload"); n != 1 {
				t.Errorf("%v: aborted %d times, want 1 (calls %v)", err, n, p.calls)
			}
			assertNoSecret(t, err)
		})
	}
}

// A 1 GiB upload (256 MiB under -race) holds a few small buffers per
// worker, never a part: the parts are hashed and sent straight from the
// ReaderAt. A read of as much streams. Parts go up Concurrency at a time.
func TestLargeStreamsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB each way")
	}
	size := int64(1 << 30)
	if raceEnabled {
		size = 256 << 20 // the race detector makes 1 GiB take minutes
	}
	nparts := int(size >> 24)
	ctx := context.Background()
	p := &partServer{getSize: size}
	s := partStore(t, p, Options{Concurrency: 4}) // 16 MiB parts: 64 of them (16 under -race)

	measure := func(f func()) (peak uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base && ms.HeapAlloc-base > peak {
					peak = ms.HeapAlloc - base
				}
				select {
				case <-done:
					return
				case <-tick.C:
				}
			}
		})
		f()
		close(done)
		wg.Wait()
		return peak
	}

	start := time.Now()
	peak := measure(func() {
		obj, err := s.Put(ctx, "big", pattern{size}, size, objstore.Condition{})
		if err != nil {
			t.Fatal(err)
		}
		if obj.Version != `"final-etag-3"` {
			t.Error("no version")
		}
	})
	t.Logf("%d MiB multipart put: %v, heap peak +%.1f MiB, %d parts at most %d at once",
		size>>20, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20), p.count("PUT part"), p.maxFlight.Load())
	if peak > 24<<20 {
		t.Errorf("the upload's heap grew %.1f MiB (parts are 16 MiB)", float64(peak)/(1<<20))
	}
	if p.count("PUT part") != nparts || p.maxFlight.Load() > 4 || p.maxFlight.Load() < 2 {
		t.Errorf("%d parts, %d at once", p.count("PUT part"), p.maxFlight.Load())
	}
	// The parts the server hashed are the bytes of the ReaderAt.
	for i := 1; i <= nparts; i++ {
		h := sha256.New()
		io.Copy(h, io.NewSectionReader(pattern{size}, int64(i-1)<<24, 1<<24))
		if !bytes.Equal(h.Sum(nil), p.partSums[i]) {
			t.Fatalf("part %d differs", i)
		}
	}

	start = time.Now()
	peak = measure(func() {
		rc, obj, err := s.Open(ctx, "big", `"final-etag-3"`)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		n, err := io.Copy(io.Discard, rc)
		if err != nil || n != size || obj.Size != size {
			t.Fatalf("read %d of %d, %v", n, obj.Size, err)
		}
	})
	t.Logf("%d MiB open: %v, heap peak +%.1f MiB", size>>20, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
	if peak > 16<<20 {
		t.Errorf("the read's heap grew %.1f MiB", float64(peak)/(1<<20))
	}
}

// Throughput of a 64 MiB Put (multipart, 16 MiB parts, 4 at once) and
// Open: against a server that only hashes what it receives (the client's
// own cost), and against gofakes3 over plain http and TLS on loopback
// (gofakes3 in memory, behind the verifying handler: their cost
// dominates the put). Run: go test -run X -bench 64MiB -benchtime 3x.
func BenchmarkPut64MiB(b *testing.B)  { bench64MiB(b, false) }
func BenchmarkOpen64MiB(b *testing.B) { bench64MiB(b, true) }

func bench64MiB(b *testing.B, open bool) {
	const size = 64 << 20
	ctx := context.Background()
	body := make([]byte, size)
	pattern{size}.ReadAt(body, 0)
	stores := []struct {
		name string
		s    func(b *testing.B) *Store
	}{
		{"hashing-server", func(b *testing.B) *Store { return partStore(b, &partServer{getSize: size}, Options{}) }},
		{"gofakes3-http", func(b *testing.B) *Store { return newFake(b, fakeOptions{}).store(b, testBucket, Options{}) }},
		{"gofakes3-https", func(b *testing.B) *Store {
			return newFake(b, fakeOptions{tls: true}).store(b, testBucket, Options{})
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.s(b)
			obj, err := s.Put(ctx, "big", bytes.NewReader(body), size, objstore.Condition{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				if !open {
					if _, err := s.Put(ctx, "big", bytes.NewReader(body), size, objstore.Condition{}); err != nil {
						b.Fatal(err)
					}
					continue
				}
				rc, _, err := s.Open(ctx, "big", obj.Version)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, rc)
				rc.Close()
				if err != nil || n != size {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// List decodes keys the store URL-encoded (encoding-type=url: a space is
// "+", a "+" is "%2B"), pages with continuation tokens, and refuses a
// truncated page without a token instead of looping.
func TestListEncodingAndPages(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		queries = append(queries, r.URL.RawQuery)
		if q.Get("encoding-type") != "url" || q.Get("list-type") != "2" || q.Get("max-keys") != "1000" {
			writeS3Error(w, 400, "Bad", r.URL.RawQuery)
			return
		}
		switch q.Get("continuation-token") {
		case "":
			fmt.Fprint(w, `<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated><NextContinuationToken>t/1+=</NextContinuationToken>`+
				`<Contents><Key>p/a+b</Key><Size>3</Size><ETag>&quot;e1&quot;</ETag><LastModified>2024-01-02T03:04:05.000Z</LastModified></Contents>`+
				`<Contents><Key>p/a%2Bb</Key><Size>4</Size><ETag>e2</ETag></Contents></ListBucketResult>`)
		case "t/1+=":
			fmt.Fprint(w, `<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>`+
				`<Contents><Key>p/%01%C3%BC</Key><Size>5</Size></Contents></ListBucketResult>`)
		}
	}))
	defer srv.Close()
	c := testCreds
	c.Endpoint = srv.URL
	s, err := New("b", c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []objstore.Object
	err = s.List(context.Background(), "p/", func(o objstore.Object) error { got = append(got, o); return nil })
	if err == nil || !strings.Contains(err.Error(), "continuation token") {
		t.Errorf("a truncated page without a token: %v", err)
	}
	want := []objstore.Object{
		{Key: "p/a b", Size: 3, Version: `"e1"`, ModTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
		{Key: "p/a+b", Size: 4, Version: `"e2"`},
		{Key: "p/\x01ü", Size: 5},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %+v\nwant %+v", got, want)
	}
	if len(queries) != 2 || !strings.Contains(queries[1], "continuation-token=t%2F1%2B%3D") {
		t.Errorf("queries %q", queries)
	}
	// An error from fn stops the listing and is returned as it is.
	stop := errors.New("stop")
	if err := s.List(context.Background(), "p/", func(objstore.Object) error { return stop }); err != stop {
		t.Errorf("List returned %v, want fn's error", err)
	}
}
