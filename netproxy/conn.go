package netproxy

import (
	"bufio"
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
// expires, and which counts its bytes. Its Read is used by one goroutine
// at a time and its Write by one goroutine at a time, which own rdl and
// wdl respectively. It deliberately has no ReadFrom or WriteTo, so that
// io.CopyBuffer goes through Read and Write.
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

// copyBufSize is the buffer of each direction of a tunnel.
const copyBufSize = 64 << 10

// copyBufs holds *[copyBufSize]byte.
var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// closeWriter is a connection that can end one direction (TCP, unix).
type closeWriter interface{ CloseWrite() error }

// tunnel relays bytes both ways between the client and up until both
// directions end: pending (bytes the client sent ahead, already read)
// first, then client to up on a second goroutine, and up to client here.
// A direction that ends cleanly half-closes its destination, so that the
// peer sees the end and can still answer; one that fails closes both
// connections, ending the other. The caller closes up afterwards.
func (s *session) tunnel(up *timedConn, pending []byte) {
	done := make(chan struct{})
	if !s.p.goTracked(func() {
		defer close(done)
		if len(pending) > 0 {
			if _, err := up.Write(pending); err != nil {
				s.abort(up)
				return
			}
		}
		s.pipe(up, s.client, up)
	}) {
		return
	}
	s.pipe(s.client, up, up)
	<-done
}

// pipe copies src to dst until src ends, then half-closes dst; on an
// error it closes both the client and up.
func (s *session) pipe(dst, src *timedConn, up *timedConn) {
	buf := copyBufs.Get().(*[copyBufSize]byte)
	defer copyBufs.Put(buf)
	_, err := io.CopyBuffer(dst, src, buf[:])
	if err == nil {
		if cw, ok := dst.Conn.(closeWriter); ok && cw.CloseWrite() == nil {
			return
		}
	}
	s.abort(up)
}

// abort ends both connections of a tunnel.
func (s *session) abort(up *timedConn) {
	s.raw.Close()
	up.Conn.Close()
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
