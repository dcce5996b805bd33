package streamable

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestParked: a GET over HTTP/1.1 is parked: its answer is chunked, with
// Connection: close, events reach it, and once it is idle no goroutine
// of the handler serves it.
func TestParked(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	get := newSSE(t, c.do(http.MethodGet, ""))
	if !get.resp.Close || len(get.resp.TransferEncoding) != 1 || get.resp.TransferEncoding[0] != "chunked" {
		t.Errorf("GET answered with Close %v, Transfer-Encoding %q: want a chunked body and Connection: close", get.resp.Close, get.resp.TransferEncoding)
	}
	if prime, ok := get.next(); !ok || prime.ID == "" {
		t.Fatalf("first event %+v, want a priming event", prime)
	}
	// Goroutines have no event to wait on for their end: poll.
	waitGoroutines(t, func(stacks string) bool {
		return !strings.Contains(stacks, "streamable.(*Handler).serveGET") && !strings.Contains(stacks, "streamable.(*Transport).drain")
	})
	tr := f.transport(c.sid)
	for i := range 3 {
		if err := tr.Notify(context.Background(), "notifications/test", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		if ev := get.until("notifications/test"); message(t, ev)["params"].(map[string]any)["i"] != float64(i) {
			t.Errorf("event %d: %s", i, ev.Data)
		}
	}
}

// TestParkedGone: a GET for the standalone stream is 409 while the
// parked one's client is there, and takes the stream over once that
// client has closed its connection, without Last-Event-ID: the probe
// hears the close.
func TestParkedGone(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	first := newSSE(t, c.do(http.MethodGet, ""))
	if _, ok := first.next(); !ok {
		t.Fatal("no priming event")
	}
	c.status(c.do(http.MethodGet, ""), http.StatusConflict)
	first.resp.Body.Close()
	second := newSSE(t, c.do(http.MethodGet, ""))
	if err := f.transport(c.sid).Notify(context.Background(), "notifications/test", map[string]any{"on": "second"}); err != nil {
		t.Fatal(err)
	}
	second.until(`"second"`)
}

// TestParkedEnds: a parked stream ends cleanly (the chunked body's end,
// not a cut connection) when its session is deleted, and when the
// Handler closes.
func TestParkedEnds(t *testing.T) {
	f := newFixture(t, Options{})
	for _, end := range []string{"DELETE", "Close"} {
		c := &rawClient{t: t, url: f.srv.URL}
		c.open()
		get := newSSE(t, c.do(http.MethodGet, ""))
		if _, ok := get.next(); !ok {
			t.Fatal("no priming event")
		}
		if end == "DELETE" {
			c.status(c.do(http.MethodDelete, ""), http.StatusNoContent)
		} else {
			f.h.Close()
		}
		if rest, err := io.ReadAll(get.br); err != nil || len(rest) != 0 {
			t.Errorf("after %s the stream read %q, %v: want its clean end", end, rest, err)
		}
	}
}

// TestParkedIdle: an idle session whose parked stream's client is there
// is kept open when SessionTimeout passes; once that client has gone it
// is closed.
func TestParkedIdle(t *testing.T) {
	logs := &logLines{seen: make(chan struct{}, 1)}
	f := newFixture(t, Options{SessionTimeout: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	tr := f.transport(c.sid)
	get := newSSE(t, c.do(http.MethodGet, ""))
	if _, ok := get.next(); !ok {
		t.Fatal("no priming event")
	}
	logs.wait(t, "kept open")
	select {
	case <-tr.Done():
		t.Fatal("the session was closed while its stream's client was there")
	default:
	}
	get.resp.Body.Close()
	<-tr.Done()
	c.status(c.do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), http.StatusNotFound)
}

// TestHeldOverHTTP2: HTTP/2 cannot be parked (no Hijack): its GET is held
// by its request, and serves as well.
func TestHeldOverHTTP2(t *testing.T) {
	f := newFixture(t, Options{})
	srv := httptest.NewUnstartedServer(f.h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer func() {
		f.h.Close() // its held GET ends: then the server can close
		srv.Close()
	}()
	c := &rawClient{t: t, url: srv.URL, hc: srv.Client()}
	c.open()
	get := newSSE(t, c.do(http.MethodGet, ""))
	if get.resp.ProtoMajor != 2 {
		t.Fatalf("GET over %s, want HTTP/2", get.resp.Proto)
	}
	if _, ok := get.next(); !ok {
		t.Fatal("no priming event")
	}
	c.status(c.do(http.MethodGet, ""), http.StatusConflict)
	if err := f.transport(c.sid).Notify(context.Background(), "notifications/test", map[string]any{"on": "h2"}); err != nil {
		t.Fatal(err)
	}
	get.until(`"h2"`)
	if ev := c.call(2, "echo", `{"text":"over h2"}`).until(`"result"`); !strings.Contains(ev.Data, "over h2") {
		t.Errorf("echo over HTTP/2: %s", ev.Data)
	}
}

// waitGoroutines polls the stacks of every goroutine until ok holds of
// them, for 10 s at most.
func waitGoroutines(t *testing.T, ok func(stacks string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 1<<20)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if ok(stacks) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines did not settle:\n%s", stacks)
		}
		<-tick.C
	}
}

// logLines is a log's writer that signals each line written.
type logLines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
	return len(p), nil
}

// wait waits until a line holding sub was written, for 10 s at most.
func (l *logLines) wait(t *testing.T, sub string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		l.mu.Lock()
		found := strings.Contains(l.buf.String(), sub)
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-l.seen:
		case <-ctx.Done():
			t.Fatal(errors.New("no log line with " + sub))
		}
	}
}

// TestParkedResumeEnded: a GET resuming a POST's stream after its last
// event ends at once, cleanly, with nothing: the stream has ended.
func TestParkedResumeEnded(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	evs := c.call(2, "echo", `{"text":"x"}`).all()
	if len(evs) != 2 {
		t.Fatalf("the call's stream: %+v, want a priming event and the result", evs)
	}
	get := newSSE(t, c.do(http.MethodGet, "", headerLastEvent, evs[1].ID))
	if rest, err := io.ReadAll(get.br); err != nil || len(rest) != 0 {
		t.Errorf("resuming after the last event read %q, %v: want the stream's clean end", rest, err)
	}
}
