package httpgate

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// slotWriter is the ResponseWriter of a request that holds a slot of its
// principal's cap. A handler that takes the connection (Hijack, as a
// parked event stream does) takes the slot with it: the request is in
// flight until that connection is closed.
type slotWriter struct {
	http.ResponseWriter
	release func()
	// taken is set by Hijack: the connection's Close releases the slot,
	// not the end of ServeHTTP. Only the request's goroutine reads and
	// writes it.
	taken bool
}

// Unwrap gives http.ResponseController the writer beneath.
func (w *slotWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack takes the connection, with the slot.
func (w *slotWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.taken = true
	return &slotConn{Conn: c, release: w.release}, rw, nil
}

// slotConn is a taken connection holding its request's slot until it is
// closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
