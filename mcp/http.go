package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"reflect"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/mcp/internal/streamable"
)

// MCP over HTTP (issue 37): the Streamable HTTP transport
// (internal/streamable) is a transport beside stdio, not a second server.
// Each of its sessions is one more connection of a shared Server (as a
// --persist front's is), with its own splicer and outlet, and the
// principal the HTTP gate named: what it makes is that principal's
// (principals.go). An ephemeral 2026-07-28 exchange is a connection for
// one POST.

// HTTPOptions configure the Streamable HTTP transport of a Server.
type HTTPOptions struct {
	// MaxBody is the largest POST body, in bytes (0: 4 MiB); a larger one
	// is 413.
	MaxBody int64
	// SessionTimeout closes a session idle that long (0: never).
	SessionTimeout time.Duration
	// EventBytes bounds the events a session keeps for a stream to be
	// resumed with Last-Event-ID (0: 1 MiB).
	EventBytes int
	// Principal names who sent a request (the HTTP gate's answer).
	Principal func(*http.Request) string
	// Attach, if set, is told of each HTTP session as it opens, and the
	// function it returns once the session has ended: a holder keeps its
	// shared server from lingering while one is open.
	Attach func() (detach func())
}

// HTTPHandler serves a shared Server over MCP's Streamable HTTP.
type HTTPHandler struct {
	s      *Server
	h      *streamable.Handler
	attach func() (detach func())
	// wg counts the sessions that have not been forgotten since they
	// opened (httpSession.end); Close waits for them.
	wg sync.WaitGroup
}

// HTTPHandler returns the handler that serves s over Streamable HTTP, at
// whatever path it is mounted. s must be shared (Options.Shared): its
// toolhost session and tasks outlive each HTTP session.
func (s *Server) HTTPHandler(o HTTPOptions) *HTTPHandler {
	hh := &HTTPHandler{s: s, attach: o.Attach}
	hh.h = streamable.NewHandler(streamable.Options{
		MaxBody:        o.MaxBody,
		SessionTimeout: o.SessionTimeout,
		EventBytes:     o.EventBytes,
		Log:            s.log,
		Principal:      o.Principal,
		Open:           hh.open,
		Lift:           stdio.Lift,
	})
	return hh
}

// ServeHTTP serves one request of the transport.
func (hh *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { hh.h.ServeHTTP(w, r) }

// Sessions is the number of HTTP sessions open.
func (hh *HTTPHandler) Sessions() int { return hh.h.Sessions() }

// Close ends every HTTP session and waits until each connection is gone.
// The Server goes on: its Close ends it.
func (hh *HTTPHandler) Close() {
	hh.h.Close()
	hh.wg.Wait()
}

// open serves a new HTTP session (or ephemeral exchange) t: one more
// connection of the server. An idle session has no goroutine of its own
// here: its end starts the one that forgets it (httpSession).
func (hh *HTTPHandler) open(t *streamable.Transport) error {
	s := hh.s
	s.start()
	var b [8]byte
	_, _ = rand.Read(b[:])
	c := &conn{id: "h-" + hex.EncodeToString(b[:]), splice: stdio.NewSplicer(), out: &stdio.Outlet{}, principal: "http:" + t.Principal()}
	c.out.Use(httpNotifier{t})
	t.Splice = c.splice.Apply
	hs := &httpSession{hh: hh, c: c, ephemeral: t.Ephemeral(), ready: make(chan struct{})}
	hh.wg.Add(1) // done by hs.end, or here if the session never was
	if err := s.connectOn(c, &namedTransport{Transport: t, id: c.id, closed: hs.closed}); err != nil {
		close(hs.ready)
		hs.once.Do(hh.wg.Done)
		return err
	}
	hs.unwatch = s.watch(c)
	if hh.attach != nil {
		hs.detach = hh.attach()
	}
	close(hs.ready)
	return nil
}

// httpSession is what an HTTP session's end must undo. Its fields but
// once are set before ready is closed, and read after.
type httpSession struct {
	hh        *HTTPHandler
	c         *conn
	ephemeral bool
	unwatch   func()
	detach    func()
	ready     chan struct{}
	// once runs end, or the HTTPHandler's Done for a session that never
	// was.
	once sync.Once
}

// closed is called when the SDK closes the session's connection, which it
// does once the connection is done: its calls answered, its reader
// stopped or stopping.
func (hs *httpSession) closed() {
	hs.once.Do(func() {
		go hs.end() // owned by hh, whose Close waits on wg
	})
}

// end waits for the session's end, which is at hand, and forgets it.
func (hs *httpSession) end() {
	defer hs.hh.wg.Done()
	<-hs.ready
	if hs.c.ss == nil {
		return // it never connected
	}
	err := hs.c.ss.Wait()
	hs.hh.s.ended(hs.c, hs.unwatch)
	if hs.detach != nil {
		hs.detach()
	}
	hs.hh.s.log.Debug("an MCP HTTP session ended", "connection", hs.c.id, "ephemeral", hs.ephemeral, "err", err)
}

// httpNotifier writes an outlet's notifications on an HTTP session.
type httpNotifier struct{ t *streamable.Transport }

func (n httpNotifier) Notify(method string, params any) error {
	return n.t.Notify(context.Background(), method, params)
}

// namedTransport is an HTTP session's transport whose connection the SDK
// knows by the server's own id for it, unique among every connection
// (an ephemeral exchange has no session id of its own), and whose Close
// is told to closed.
type namedTransport struct {
	*streamable.Transport
	id     string
	closed func()
}

func (t *namedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return namedConn{Connection: c, id: t.id, closed: t.closed}, nil
}

type namedConn struct {
	sdk.Connection
	id     string
	closed func()
}

func (c namedConn) SessionID() string { return c.id }

func (c namedConn) Close() error {
	err := c.Connection.Close()
	c.closed()
	return err
}

// withHTTPRequest marks ctx as the handling of req when it came over HTTP:
// what the handler sends (progress, an elicitation) then goes on the
// stream of the POST that carried it.
func withHTTPRequest(ctx context.Context, req sdk.Request) context.Context {
	p := req.GetParams()
	if p == nil {
		return ctx
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return ctx
	}
	if id, ok := streamable.RequestID(p.GetMeta()); ok {
		return streamable.WithRequest(ctx, id)
	}
	return ctx
}
