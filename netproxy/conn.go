package netproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// session is one client connection being served: its reader, and the
// clock its idle and total timeouts are measured by.
type session struct {
	p *Proxy
	// client is the client connection, wrapped for the timeouts; raw is
	// the connection itself.
	client *timedConn
	raw    net.Conn
	// lr bounds what br may read of a header: maxHeaderBytes while one is
	// read, unbounded for a body. Only the handler's goroutine uses them.
	lr *io.LimitedReader
	br *bufio.Reader

	start time.Time
	// idle and total are the configured timeouts (0: none); end is
	// start+total. timed says either is set.
	idle, total time.Duration
	end         time.Time
	timed       bool
	// last is when a byte last moved in either direction, in nanoseconds
	// since start; every reader and writer of the session updates it.
	last atomic.Int64
}

// newSession wraps the client connection c.
func (p *Proxy) newSession(c net.Conn) *session {
	s := &session{
		p:     p,
		raw:   c,
		start: time.Now(),
		idle:  p.cfg.IdleTimeout,
		total: p.cfg.TotalTimeout,
	}
	s.end = s.start.Add(s.total)
	s.timed = s.idle > 0 || s.total > 0
	s.client = s.wrap(c, nil)
	s.lr = &io.LimitedReader{R: s.client, N: maxHeaderBytes}
	s.br = bufio.NewReader(s.lr)
	return s
}

// wrap returns c with the session's timeouts; counts, if not nil, gets
// the bytes read and written.
func (s *session) wrap(c net.Conn, counts *allowedCounts) *timedConn {
	return &timedConn{Conn: c, s: s, counts: counts}
}

// touch records that a byte moved now.
func (s *session) touch() {
	if s.timed {
		s.last.Store(int64(time.Since(s.start)))
	}
}

// expiresAt returns when the session ends if nothing moves from now on.
func (s *session) expiresAt() time.Time {
	var t time.Time
	if s.idle > 0 {
		t = s.start.Add(time.Duration(s.last.Load()) + s.idle)
	}
	if s.total > 0 && (t.IsZero() || s.end.Before(t)) {
		t = s.end
	}
	return t
}

// opContext returns the context of a lookup and a dial: cancelled by
// Close, and ended when the session expires, since no byte moves
// meanwhile.
func (s *session) opContext() (context.Context, context.CancelFunc) {
	if t := s.expiresAt(); !t.IsZero() {
		return context.WithDeadline(s.p.ctx, t)
	}
	return context.WithCancel(s.p.ctx)
}

// expired reports whether the session is over its idle or total timeout.
func (s *session) expired() bool {
	t := s.expiresAt()
	return !t.IsZero() && !time.Now().Before(t)
}

// slack is how far a deadline may lag behind the one it would be set to
// before it is moved: moving it on every read would cost a timer update
// each time. A deadline that fires early is harmless: the read or write
// sees the session still alive and carries on.
func (s *session) slack() time.Duration { return s.idle / 16 }

// timedConn is a connection whose reads and writes end when the session
// expires, and which counts its bytes: the client connection while a
// request is read and answered, and a plain-HTTP upstream connection.
// (Tunnels relay the raw connections, timed by their watchdog.) Headers
// and bodies without a length go through Read and Write; a body of a
// known length goes through copyFrom, which splices. Its reading side
// (Read, copyFrom's src) is used by one goroutine at a time and its
// writing side (Write, copyFrom's c) by one goroutine at a time, which
// own rdl and wdl respectively.
type timedConn struct {
	net.Conn
	s *session
	// counts gets bytes read in BytesIn and bytes written in BytesOut;
	// nil for the client connection.
	counts   *allowedCounts
	rdl, wdl time.Time // the read and write deadlines last set
}

// nextDeadline returns the deadline to set now for a read or write whose
// deadline is cur, and whether it must be set.
func (c *timedConn) nextDeadline(cur time.Time, force bool) (time.Time, bool) {
	s := c.s
	var want time.Time
	if force {
		want = s.expiresAt()
	} else {
		if s.idle > 0 {
			want = time.Now().Add(s.idle)
		}
		if s.total > 0 && (want.IsZero() || s.end.Before(want)) {
			want = s.end
		}
	}
	if force || cur.IsZero() || want.Sub(cur) > s.slack() {
		return want, true
	}
	return cur, false
}

// Read reads, with the read deadline following the session's timeouts.
func (c *timedConn) Read(b []byte) (int, error) {
	force := false
	for {
		if c.s.timed {
			if d, set := c.nextDeadline(c.rdl, force); set {
				c.rdl = d
				c.Conn.SetReadDeadline(d)
			}
		}
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.s.touch()
			if c.counts != nil {
				c.counts.bytesIn.Add(int64(n))
			}
		}
		if n == 0 && err != nil && c.s.timed && isTimeout(err) && !c.s.expired() {
			// The other direction moved since this deadline was set.
			force = true
			continue
		}
		return n, err
	}
}

// Write writes, with the write deadline following the session's timeouts.
func (c *timedConn) Write(b []byte) (int, error) {
	written := 0
	force := false
	for {
		if c.s.timed {
			if d, set := c.nextDeadline(c.wdl, force); set {
				c.wdl = d
				c.Conn.SetWriteDeadline(d)
			}
		}
		n, err := c.Conn.Write(b[written:])
		if n > 0 {
			written += n
			c.s.touch()
			if c.counts != nil {
				c.counts.bytesOut.Add(int64(n))
			}
		}
		if err != nil && c.s.timed && isTimeout(err) && !c.s.expired() {
			force = true
			continue
		}
		return written, err
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// isTemporaryAccept reports whether an accept error is worth waiting out.
func isTemporaryAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.ECONNABORTED)
}

// moveChunk is the most copyChunks moves at a time: one splice(2) of
// Go's takes up to 1 MiB (its pipe's size) from the source. Smaller
// chunks (64 KiB) cost many times the splices and context switches, and
// made a curl download through the proxy markedly slower against a direct
// one.
const moveChunk = 1 << 20

// copyBufSize is the buffer of a copy that cannot splice.
const copyBufSize = 64 << 10

// copyBufs holds *[copyBufSize]byte.
var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// copyChunks copies src to dst until limit bytes have moved or src ends,
// moveChunk at a time. Between two TCP connections each chunk is spliced
// (io.Copy's TCPConn.ReadFrom uses splice(2) through a pipe: the bytes
// never enter the process); otherwise it is copied through a pooled
// buffer. step runs before the first chunk, with 0 and nil, and after
// each, with the bytes it moved and its error: it counts them, records
// activity and sets the next chunk's deadlines, and after an error it
// says whether the copy goes on, which it may only if the error is a
// read deadline's (a splice cut short by one has its pipe empty: nothing
// is lost; one cut by a write deadline may lose what its pipe held).
// copyChunks returns the bytes moved, and nil when limit is reached or
// src ends.
func copyChunks(dst, src net.Conn, limit int64, step func(k int64, err error) bool) (int64, error) {
	_, dtcp := dst.(*net.TCPConn)
	_, stcp := src.(*net.TCPConn)
	var buf []byte
	if !dtcp || !stcp {
		b := copyBufs.Get().(*[copyBufSize]byte)
		defer copyBufs.Put(b)
		buf = b[:]
	}
	step(0, nil)
	var total int64
	for total < limit {
		want := min(limit-total, moveChunk)
		lr := &io.LimitedReader{R: src, N: want}
		var k int64
		var err error
		if buf == nil {
			k, err = io.Copy(dst, lr)
		} else {
			k, err = io.CopyBuffer(writerOnly{dst}, lr, buf)
		}
		total += k
		goOn := step(k, err)
		switch {
		case err != nil && !goOn:
			return total, err
		case err == nil && k < want: // src ended before the chunk did
			return total, nil
		}
	}
	return total, nil
}

// writerOnly hides a writer's ReadFrom, so that io.CopyBuffer uses the
// buffer.
type writerOnly struct{ io.Writer }

// probe returns how far ahead a chunk's read deadline is set while the
// idle timeout runs: a chunk still being read then reports the bytes it
// moved, so that a source that trickles less than a chunk per idle
// timeout is seen busy, a quarter of the timeout late at most.
func (s *session) probe() time.Duration { return s.idle / 4 }

// copyFrom copies exactly n bytes from src to c with copyChunks (spliced
// between TCP connections), on c's writing side and src's reading side,
// as Write and Read would, and counts them likewise. Before each chunk,
// c's write deadline is set to when the session expires if nothing moves
// from then on, and src's read deadline a probe ahead, no later: a
// chunk cut by the read deadline reports its bytes and the copy goes on,
// one cut by the write deadline (a client that has not taken what was
// read for it within the idle timeout) ends it, as does the session's
// expiry. The caller closes both connections on an error, which is
// io.ErrUnexpectedEOF if src ends first.
func (c *timedConn) copyFrom(src *timedConn, n int64) error {
	s := c.s
	moved, err := copyChunks(c.Conn, src.Conn, n, func(k int64, err error) bool {
		if k > 0 {
			s.touch()
			if src.counts != nil {
				src.counts.bytesIn.Add(k)
			}
			if c.counts != nil {
				c.counts.bytesOut.Add(k)
			}
		}
		if !s.timed {
			return err == nil
		}
		// A timeout before the write deadline is the read deadline's.
		if err != nil && !(isTimeout(err) && time.Now().Before(c.wdl) && !s.expired()) {
			return false
		}
		c.wdl = s.expiresAt()
		src.rdl = c.wdl
		if s.idle > 0 {
			if p := time.Now().Add(s.probe()); p.Before(src.rdl) {
				src.rdl = p
			}
		}
		c.Conn.SetWriteDeadline(c.wdl)
		src.Conn.SetReadDeadline(src.rdl)
		return true
	})
	if err == nil && moved < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// closeWriter is a connection that can end one direction (TCP, unix).
type closeWriter interface{ CloseWrite() error }

// tunnel relays bytes both ways between the client and up until both
// directions end: pending (bytes the client sent ahead, already read)
// first, then each direction on a goroutine of its own, while this one,
// their owner, waits for them and watches the session's timeouts,
// closing both connections when it expires. A direction that ends
// cleanly half-closes its destination, so that the peer sees the end and
// can still answer; one that fails closes both connections, ending the
// other. counts gets the bytes each way. The caller closes up afterwards.
func (s *session) tunnel(up net.Conn, counts *allowedCounts, pending []byte) {
	// The directions have no write deadlines and only relay's read
	// deadlines, which never end them: the watchdog below keeps time.
	s.raw.SetDeadline(time.Time{})
	up.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	started := 0
	if s.p.goTracked(func() {
		defer func() { done <- struct{}{} }()
		if len(pending) > 0 {
			if _, err := up.Write(pending); err != nil {
				s.abort(up)
				return
			}
			counts.bytesOut.Add(int64(len(pending)))
			s.touch()
		}
		s.relay(up, s.raw, &counts.bytesOut, up)
	}) {
		started++
	}
	if s.p.goTracked(func() {
		defer func() { done <- struct{}{} }()
		s.relay(s.raw, up, &counts.bytesIn, up)
	}) {
		started++
	}
	if started < 2 { // closing
		s.abort(up)
	}
	var expiry <-chan time.Time
	if s.timed {
		t := time.NewTimer(time.Until(s.expiresAt()))
		defer t.Stop()
		expiry = t.C
		for started > 0 {
			select {
			case <-done:
				started--
			case <-expiry:
				if s.expired() {
					s.abort(up)
					expiry = nil
					continue
				}
				t.Reset(time.Until(s.expiresAt()))
			}
		}
		return
	}
	for ; started > 0; started-- {
		<-done
	}
}

// relay copies src to dst with copyChunks until src ends, then
// half-closes dst; on an error it closes both the client and up. n gets
// the bytes moved. Each chunk records activity, and while the idle
// timeout runs src's read deadline is set a probe ahead of each, so that
// a trickle is seen too: the watchdog, not a deadline, ends the tunnel.
func (s *session) relay(dst, src net.Conn, n *atomic.Int64, up net.Conn) {
	_, err := copyChunks(dst, src, math.MaxInt64, func(k int64, err error) bool {
		if k > 0 {
			n.Add(k)
			s.touch()
		}
		if err != nil && !isTimeout(err) {
			return false
		}
		if s.idle > 0 {
			src.SetReadDeadline(time.Now().Add(s.probe()))
		}
		return true
	})
	if err == nil {
		if cw, ok := dst.(closeWriter); ok && cw.CloseWrite() == nil {
			return
		}
	}
	s.abort(up)
}

// abort ends both connections of a tunnel.
func (s *session) abort(up net.Conn) {
	s.raw.Close()
	up.Close()
}

// unboundedHeader lifts the header bound, for a body or a tunnel.
func (s *session) unboundedHeader() { s.lr.N = math.MaxInt64 }

// buffered returns a copy of what br holds beyond what was parsed.
func (s *session) buffered() []byte {
	n := s.br.Buffered()
	if n == 0 {
		return nil
	}
	b, _ := s.br.Peek(n)
	return append([]byte(nil), b...)
}
