package httpgate

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits of the server made by Server.
const (
	// ReadHeaderTimeout bounds the time a client may take to send a
	// request's headers, so that a connection that sends nothing is closed.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout bounds the time a kept-alive connection waits for its
	// next request.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds the size of a request's headers.
	MaxHeaderBytes = 64 << 10
	// DefaultMaxConns is a sensible cap for LimitListener: high enough
	// that a thousand connections which send nothing (each held at most
	// ReadHeaderTimeout, costing a goroutine and a read buffer, some
	// 12 KiB) leave room for the clients that do, low enough that the
	// process keeps its descriptors and memory.
	DefaultMaxConns = 4096
)

// isLoopbackHost reports whether host (without port or brackets) is
// "localhost" or a loopback IP literal. Any other name is not loopback,
// whatever it resolves to.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// CheckListen returns an error saying what is wrong with the way the
// server is to listen at addr ("host:port"; an empty host means every
// interface): a non-loopback address without TLS, no authentication
// (noAuth) off loopback, or an OAuth issuer (if not "") that is http://
// with a host that is not loopback.
func CheckListen(addr string, tls, noAuth bool, issuer string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want host:port (%v)", addr, err)
	}
	loopback := isLoopbackHost(host)
	if !loopback && !tls {
		return fmt.Errorf("--http %q is not a loopback address: serving it needs --tls-cert and --tls-key (or listen on 127.0.0.1)", addr)
	}
	if noAuth && !loopback {
		return fmt.Errorf("--http-no-auth is allowed only on a loopback address, not %q", addr)
	}
	if issuer != "" {
		if err := checkIssuerURL(issuer); err != nil {
			return fmt.Errorf("--oauth-issuer: %v", err)
		}
	}
	return nil
}

// Server returns an http.Server serving h with limits for hostile clients:
// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes above, and the server's
// own errors logged to log at level Warn.
//
// It sets no ReadTimeout or WriteTimeout: an MCP response may be a
// server-sent event stream that lasts as long as the session, and a request
// body may be streamed slowly; those are bounded by the gate's
// per-principal cap instead. Serve it on a LimitListener to bound the
// number of connections.
func Server(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// LimitListener returns a listener that keeps at most n of l's connections
// open at once: Accept waits for one to close before accepting another.
// Connections beyond n wait in the kernel's backlog and are served once
// earlier ones close (the Server's timeouts close idle ones).
func LimitListener(l net.Listener, n int) net.Listener {
	if n <= 0 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{} // one token per open connection
	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and wakes a waiting Accept.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
