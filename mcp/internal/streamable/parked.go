package streamable

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Parked streams. A GET's stream is most of an idle session's life, and
// an HTTP request held open for it costs two goroutines of net/http's
// (the handler's and the connection's background read) and the
// connection's buffers: more memory than the session itself. On HTTP/1.1
// the request is parked instead: once its response headers are written
// its connection is taken from net/http (Hijack) and kept with no
// goroutine. A goroutine writes it only while it has events to write
// (drain), and returns once they are written. The response is chunked,
// with Connection: close, as net/http writes a streamed response.
//
// What a parked stream gives up is hearing at once that its client went
// away, which net/http's background read did. A write to a gone client
// fails (the stream's events stay kept, for a GET to resume it); and
// before a parked stream is let stand in the way of anything, it is
// probed (alive): before a GET without Last-Event-ID is refused 409
// because the standalone stream is held, and before an idle session is
// kept open for it. A client that vanished without closing its
// connection is noticed by the connection's TCP keepalives (Go's
// default: 15 s idle, then 9 probes 15 s apart) and then by the probe.
// HTTP/2 has no Hijack: a GET over it is held, as is any POST.

const (
	// parkedWriteTimeout bounds one write to a parked stream: a client
	// that reads nothing for that long is dropped (its events are kept).
	parkedWriteTimeout = time.Minute
	// parkedCloseTimeout bounds the writes to a parked stream once its
	// session has ended: the end of the response, which a client that
	// reads gets at once.
	parkedCloseTimeout = time.Second
	// probeTimeout is how long alive waits to hear a connection's end.
	probeTimeout = 50 * time.Millisecond
)

// parked is an outlet's connection, taken from net/http.
type parked struct {
	conn net.Conn
	// draining is set while a drain of the outlet runs, and stays set once
	// the outlet has ended (its connection closed), so that no drain
	// starts after it; guarded by the Transport's mu.
	draining bool
}

// park parks o, the outlet of s, a GET's stream whose headers are set on
// w, if the request is HTTP/1.1 and its connection can be taken: it
// writes the response's head (and, if greet, an SSE comment so that
// proxies pass the head on), and from then on a drain writes s's events.
// It reports whether it took the connection; if not, nothing was written
// and the request is to be served held.
func (t *Transport) park(w http.ResponseWriter, r *http.Request, s *stream, o *outlet, greet bool) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false // HTTP/2, or a writer that cannot: held
	}
	// What net/http had buffered of the connection is dropped: a GET has
	// no body, and a client reads this response to its end before it
	// sends anything more (Connection: close).
	p := &parked{conn: conn}
	h := w.Header().Clone()
	h.Del("Content-Length")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	head := b.Bytes()
	if greet {
		head = appendChunk(head, []byte(": ok\n\n"))
	}
	err = p.write(head, parkedWriteTimeout)

	t.mu.Lock()
	if err != nil || s.out != o || t.closed {
		// The client went away, or the stream was resumed elsewhere or
		// ended while the head was written.
		t.releaseLocked(s, o)
		t.mu.Unlock()
		p.finish(err == nil)
		return true
	}
	o.parked = p
	t.drainLocked(s, o) // what came meanwhile
	t.mu.Unlock()
	return true
}

// drainLocked starts a drain of o, the parked outlet of s, unless one is
// running or o has ended.
func (t *Transport) drainLocked(s *stream, o *outlet) {
	if o.parked.draining {
		return
	}
	o.parked.draining = true
	t.h.drains.Add(1)
	go t.drain(s, o) // owned by the Handler, whose Close waits on drains
}

// drain writes s's events on its parked outlet o until none is left to
// write, and returns; or ends o (its response ended, its connection
// closed) once s has ended and all are written, a write failed, o was
// replaced or dropped, or the session ended. The callbacks of each event
// run after it was written, before the next is written, with no lock
// held.
func (t *Transport) drain(s *stream, o *outlet) {
	defer t.h.drains.Done()
	p := o.parked
	for {
		t.mu.Lock()
		if s.out != o || t.closed {
			t.mu.Unlock()
			p.finish(true)
			return
		}
		batch, gap := t.takeLocked(s, o)
		if len(batch) == 0 && !gap && !(s.ended && o.sent == s.next) {
			p.draining = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()

		n, err := writeAll(batch, func(ev *event) error {
			return p.write(appendChunk(nil, appendEvent(make([]byte, 0, len(ev.data)+len(s.id)+32), s, ev)), parkedWriteTimeout)
		})

		t.mu.Lock()
		finished := t.advanceLocked(s, o, n, err == nil && !gap)
		if err != nil || gap || finished {
			t.releaseLocked(s, o)
			t.mu.Unlock()
			p.finish(err == nil)
			return
		}
		t.mu.Unlock()
	}
}

// dropLocked ends o's hold on s, o being parked and its client found
// gone: s is left for a GET, and o's drain closes its connection.
func (t *Transport) dropLocked(s *stream, o *outlet) {
	t.releaseLocked(s, o)
	t.drainLocked(s, o)
}

// write writes b on p's connection within d.
func (p *parked) write(b []byte, d time.Duration) error {
	if err := p.conn.SetWriteDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	_, err := p.conn.Write(b)
	return err
}

// hurry makes p's writes, the one in progress included, end within
// parkedCloseTimeout: its session has ended.
func (p *parked) hurry() {
	_ = p.conn.SetWriteDeadline(time.Now().Add(parkedCloseTimeout))
}

// finish ends p's response, if clean (its connection is sound), and
// closes its connection. Only the outlet's last writer calls it.
func (p *parked) finish(clean bool) {
	if clean {
		_ = p.write([]byte("0\r\n\r\n"), parkedCloseTimeout)
	}
	_ = p.conn.Close()
}

// alive probes whether p's client is still there: a read that ends
// (the client closed the connection, or it broke) within probeTimeout
// says it is not; one still waiting says it is. A client that sent
// something is there. It may run beside a drain: a read beside a write.
func (p *parked) alive() bool {
	if err := p.conn.SetReadDeadline(time.Now().Add(probeTimeout)); err != nil {
		return false
	}
	var b [1]byte
	n, err := p.conn.Read(b[:])
	return n > 0 || errors.Is(err, os.ErrDeadlineExceeded)
}

// appendChunk appends data to b as one chunk of a chunked body.
func appendChunk(b, data []byte) []byte {
	b = strconv.AppendInt(b, int64(len(data)), 16)
	b = append(append(append(b, "\r\n"...), data...), "\r\n"...)
	return b
}
