package netproxy

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Resolver resolves names; *net.Resolver is one. network is "ip".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Proxy. The zero Config is a proxy that allows
// nothing.
type Config struct {
	// Allow is what the command may reach.
	Allow AllowList
	// Resolver resolves the names clients ask for; nil is
	// net.DefaultResolver, the system's.
	Resolver Resolver
	// Dial connects to a checked address; nil is a net.Dialer's
	// DialContext. network is "tcp".
	Dial func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	// IdleTimeout ends a client connection that has moved no byte, in
	// either direction, for this long (waiting for a request, a response,
	// or in a tunnel); 0 is none. Tunnels and bodies of a known length
	// move in chunks of up to 1 MiB, spliced between TCP connections: the
	// proxy sees a chunk's activity when it ends, and every IdleTimeout/4
	// while its source trickles, so a trickle is not idle; a receiver that
	// has not taken what was read for it (up to 1 MiB) within IdleTimeout
	// is.
	IdleTimeout time.Duration
	// TotalTimeout ends a client connection this long after it was
	// accepted, whatever it is doing; 0 is none.
	TotalTimeout time.Duration
	// MaxConns caps the client connections served at once; one beyond it
	// is answered 503 (HTTP) or 0x01 (SOCKS5), closed, and counted in
	// Stats.OverLimit. 0 is no cap.
	MaxConns int
	// Log gets a Warn line for every refusal, with the id, host, port and
	// reason, and Debug lines for the rest; nil discards them.
	Log *slog.Logger
	// ID is the handle id of the command the proxy serves, on every log
	// line as "id".
	ID string
	// Ask, when set, is asked about a host and port the allow-list does
	// not name, while the proxy holds the client's connection; its
	// Verdict decides, and the connection goes on (dialed exactly as an
	// allowed one) or is refused with the Reason. It is never asked about
	// what the allow-list refuses for another reason: a name that
	// resolves to a loopback, link-local, private or unspecified address
	// (ErrSpecialAddress) is refused without asking, and so is one that
	// does not resolve (as it would be without Ask). An IP literal that
	// the list does not name is asked about (the user sees the address).
	// Ask is called with the proxy's context (ended by Close, when the
	// command ends) and must return when it ends. nil: refused as before.
	//
	// Ask is called on the goroutine of the connection that asks, with no
	// lock of the proxy's held: connections asking at once, even about
	// the same host and port, each make their own call (merging them is
	// the asker's business). While it runs, no timeout of the proxy's
	// ends the client's connection but TotalTimeout, which also ends the
	// context; the idle timeout starts again when it returns. An Allow
	// returned once that context has ended is refused all the same.
	Ask func(ctx context.Context, host string, port int) Verdict
}

// Verdict is the answer to an ask: Allow, or a refusal whose Reason
// ("denied by the user", "no answer", …) the refused client is told.
type Verdict struct {
	Allow  bool
	Reason string
}

// maxHeaderBytes bounds an HTTP request's or a SOCKS5 handshake's header,
// as net/http's server does by default.
const maxHeaderBytes = 1 << 20

// refusalGrace bounds how long a connection beyond MaxConns may take to
// send the request it is refused; the shorter IdleTimeout wins.
const refusalGrace = 5 * time.Second

// Proxy is an allow-list proxy for one command: HTTP CONNECT, absolute-URI
// HTTP and SOCKS5 on the same listeners, told apart by the first byte.
// Make one with New; its methods are safe for concurrent use.
type Proxy struct {
	cfg      Config // defaults filled in; never changes
	resolver Resolver
	log      *slog.Logger // cfg.Log with "id"

	// ctx is cancelled by Close; it bounds every lookup and dial.
	ctx    context.Context
	cancel context.CancelFunc

	// wg counts every goroutine the proxy runs, and Serve itself: a
	// connection's handler (owned by the Serve that accepted it) and a
	// tunnel's two directions (owned by the handler, which waits for them
	// while it watches the timeouts). Close waits for it. wg.Add is called
	// only with mu held and closed false, so that no Add races Close's
	// Wait.
	wg sync.WaitGroup

	mu sync.Mutex // guards the fields below
	// closed is set once by Close; nothing is tracked or started after.
	closed    bool
	listeners map[net.Listener]struct{}
	// conns holds every open client and upstream connection, so that
	// Close can end them; each is removed by whoever closes it.
	conns map[net.Conn]struct{}
	// active counts client connections being served, against MaxConns;
	// refusing counts those being refused beyond it.
	active, refusing int
	allowed          map[hostPort]*allowedCounts
	denied           map[hostPort]int
	overLimit        int

	// testHookConnDone, if set, is called after each client connection's
	// handler has released its slot (tests only; set before Serve).
	testHookConnDone func()
}

// hostPort keys the statistics.
type hostPort struct {
	host string
	port int
}

// allowedCounts are one allowed host's counters. The bytes are added by
// whichever goroutine moves them (atomics, read by Stats at any time);
// connections is changed and read with Proxy.mu held.
type allowedCounts struct {
	connections       int64 // guarded by Proxy.mu
	bytesOut, bytesIn atomic.Int64
}

// New returns a proxy for cfg; it serves nothing until Serve.
func New(cfg Config) *Proxy {
	p := &Proxy{
		cfg:       cfg,
		resolver:  cfg.Resolver,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
		allowed:   make(map[hostPort]*allowedCounts),
		denied:    make(map[hostPort]int),
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.cfg.Dial == nil {
		var d net.Dialer
		p.cfg.Dial = func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, network, addr.String())
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p.log = log.With("id", cfg.ID)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// Serve accepts connections on l and serves each until Close, which closes
// l; it then returns ErrClosed. Any other accept error that is not
// temporary is returned, with l closed. Serve may be called for several
// listeners at once.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	return p.serve(l)
}

// serve is Serve's accept loop; it closes and forgets l when it returns.
func (p *Proxy) serve(l net.Listener) error {
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporaryAccept(err) {
				// Out of file descriptors or an aborted handshake: wait a
				// little, as net/http's server does, and accept again.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-p.ctx.Done():
					t.Stop()
				}
				continue
			}
			return err
		}
		backoff = 0
		p.accepted(c)
	}
}

// accepted starts serving c, or refusing it beyond MaxConns.
func (p *Proxy) accepted(c net.Conn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		return
	}
	over := p.cfg.MaxConns > 0 && p.active >= p.cfg.MaxConns
	if over {
		p.overLimit++
		// Refusing costs a goroutine each: beyond as many again, close
		// without a word.
		if p.refusing >= max(p.cfg.MaxConns, 16) {
			p.mu.Unlock()
			c.Close()
			p.log.Warn("netproxy: connection refused", "reason", "too many connections; closed unanswered", "limit", p.cfg.MaxConns)
			return
		}
		p.refusing++
	} else {
		p.active++
	}
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if over {
			p.refuseOverLimit(c)
		} else {
			p.serveConn(c)
		}
		p.untrack(c)
		p.mu.Lock()
		if over {
			p.refusing--
		} else {
			p.active--
		}
		hook := p.testHookConnDone
		p.mu.Unlock()
		if hook != nil {
			hook()
		}
	}()
}

// isClosed reports whether Close has been called.
func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track records an upstream connection so that Close ends it; after Close
// it closes c and returns ErrClosed.
func (p *Proxy) track(c net.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return ErrClosed
	}
	p.conns[c] = struct{}{}
	return nil
}

// untrack closes c and forgets it.
func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// goTracked runs f on a goroutine counted in wg, unless the proxy is
// closed; it reports whether f was started. The caller owns the goroutine
// and waits for it.
func (p *Proxy) goTracked(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// Close stops the proxy: it closes every listener and every client and
// upstream connection, and returns once every goroutine the proxy started
// has ended and every Serve has returned. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		for l := range p.listeners {
			l.Close()
		}
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// serveConn serves one client connection until it ends.
func (p *Proxy) serveConn(c net.Conn) {
	s := p.newSession(c)
	first, err := s.br.Peek(1)
	if err != nil {
		return
	}
	switch first[0] {
	case socks5Version:
		p.serveSOCKS(s)
	case socks4Version:
		// A SOCKS4 client: "request rejected", and no more.
		s.client.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0})
	default:
		p.serveHTTP(s)
	}
}

// refuseOverLimit answers a connection beyond MaxConns once it has said
// what it wants: 503, or the SOCKS5 reply 0x01.
func (p *Proxy) refuseOverLimit(c net.Conn) {
	grace := refusalGrace
	if p.cfg.IdleTimeout > 0 {
		grace = min(grace, p.cfg.IdleTimeout)
	}
	c.SetDeadline(time.Now().Add(grace))
	br := bufio.NewReader(io.LimitReader(c, maxHeaderBytes))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	switch first[0] {
	case socks5Version:
		p.refuseSOCKSOverLimit(c, br)
	case socks4Version:
		c.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0})
	default:
		p.refuseHTTPOverLimit(c, br)
	}
}

// logRefusal logs a refusal by policy, and counts it.
func (p *Proxy) logRefusal(proto string, err error) {
	var r *RefusalError
	if !errors.As(err, &r) {
		return
	}
	p.mu.Lock()
	p.denied[hostPort{r.Host, r.Port}]++
	p.mu.Unlock()
	p.log.Warn("netproxy: connection refused", "protocol", proto, "host", r.Host, "port", r.Port, "reason", r.reason())
}

// countAllowed counts a new upstream connection to the host the client
// asked for, and returns its counters.
func (p *Proxy) countAllowed(d decision) *allowedCounts {
	k := hostPort{d.host.String(), d.port}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.allowed[k]
	if a == nil {
		a = new(allowedCounts)
		p.allowed[k] = a
	}
	a.connections++
	return a
}

// connect decides host and port (session.decide: the allow-list, then
// any ask), dials, tracks and counts the connection. The error is a
// *RefusalError (logged and counted), an *UpstreamError, or ErrClosed.
func (s *session) connect(proto, host string, port int) (net.Conn, *allowedCounts, error) {
	p := s.p
	d, err := s.decide(host, port)
	if err == nil {
		// The decision may have waited on an ask: the dial's time is
		// measured from now.
		ctx, cancel := s.opContext()
		var up net.Conn
		var at netip.AddrPort
		up, at, err = p.dial(ctx, d)
		cancel()
		if err == nil {
			if err := p.track(up); err != nil {
				return nil, nil, err
			}
			p.log.Debug("netproxy: connected", "protocol", proto, "host", d.host.String(), "port", port, "addr", at.String())
			return up, p.countAllowed(d), nil
		}
	}
	if errors.Is(err, ErrNotAllowed) {
		p.logRefusal(proto, err)
	} else if p.isClosed() {
		return nil, nil, ErrClosed
	} else {
		p.log.Info("netproxy: upstream error", "protocol", proto, "host", host, "port", port, "error", err.Error())
	}
	return nil, nil, err
}

// Stats are a proxy's counts: the hosts it let through and those it
// refused, as the ToolResult's network member reports them.
type Stats struct {
	// Allowed lists each host and port connected to, sorted by host then
	// port.
	Allowed []AllowedStat `json:"allowed"`
	// Denied lists each host and port refused by policy, sorted likewise.
	Denied []DeniedStat `json:"denied"`
	// OverLimit counts the client connections refused beyond MaxConns.
	OverLimit int `json:"overLimit,omitempty"`
}

// AllowedStat is one allowed host and port, as the client named it (an
// address or a lower-case name without a trailing dot).
type AllowedStat struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Connections counts the connections the proxy opened to it: one per
	// tunnel, one per plain-HTTP upstream connection (requests that reuse
	// one on a kept-alive connection are not counted again).
	Connections int64 `json:"connections"`
	// BytesOut counts bytes sent to it, and BytesIn bytes received from
	// it, as they moved on the upstream connection (HTTP headers included).
	BytesOut int64 `json:"bytesOut"`
	BytesIn  int64 `json:"bytesIn"`
}

// DeniedStat is one refused host and port, with the number of attempts.
type DeniedStat struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Attempts int64  `json:"attempts"`
}

// Stats returns the counts so far; after Close returns they are final.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Allowed: []AllowedStat{}, Denied: []DeniedStat{}, OverLimit: p.overLimit}
	for k, a := range p.allowed {
		s.Allowed = append(s.Allowed, AllowedStat{Host: k.host, Port: k.port, Connections: a.connections, BytesOut: a.bytesOut.Load(), BytesIn: a.bytesIn.Load()})
	}
	for k, n := range p.denied {
		s.Denied = append(s.Denied, DeniedStat{Host: k.host, Port: k.port, Attempts: int64(n)})
	}
	slices.SortFunc(s.Allowed, func(a, b AllowedStat) int { return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port)) })
	slices.SortFunc(s.Denied, func(a, b DeniedStat) int { return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port)) })
	return s
}
