package netproxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// startProxy serves a proxy for cfg on a loopback listener and closes it
// when the test ends, checking that Serve then returns ErrClosed. setup,
// if given, runs before Serve.
func startProxy(t testing.TB, cfg Config, setup ...func(*Proxy)) (*Proxy, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	for _, f := range setup {
		f(p)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return p, l.Addr().String()
}

// allow parses patterns into an AllowList, failing the test on an error.
func allow(t testing.TB, patterns ...string) AllowList {
	t.Helper()
	l, err := ParseAllowList(patterns...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// portOf returns the port of a listener's address "host:port".
func portOf(t testing.TB, addr string) int {
	t.Helper()
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(ps)
	return p
}

// fakeResolver answers names from a map (keys are lower case, without
// the trailing dot, as the proxy asks), and counts the lookups.
type fakeResolver struct {
	answers map[string][]netip.Addr
	mu      sync.Mutex
	asked   []string // guarded by mu
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// resolverFor returns a fakeResolver of name=addr,addr… pairs.
func resolverFor(pairs ...string) *fakeResolver {
	r := &fakeResolver{answers: map[string][]netip.Addr{}}
	for _, p := range pairs {
		name, addrs, _ := strings.Cut(p, "=")
		for a := range strings.SplitSeq(addrs, ",") {
			r.answers[name] = append(r.answers[name], netip.MustParseAddr(a))
		}
	}
	return r
}

// redirectDial is a Config.Dial that records each address asked and
// connects to target instead: names can then resolve to public addresses
// while the bytes still reach a loopback origin.
type redirectDial struct {
	target string
	mu     sync.Mutex
	dialed []netip.AddrPort // guarded by mu
}

func (d *redirectDial) Dial(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.target)
}

func (d *redirectDial) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, a := range d.dialed {
		out = append(out, a.String())
	}
	return out
}

// dialProxy connects to the proxy and closes the connection at the end.
func dialProxy(t testing.TB, proxyAddr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawCONNECT sends CONNECT target and returns the response (its body
// read into body) and the connection with its reader.
func rawCONNECT(t testing.TB, proxyAddr, target string) (resp *http.Response, body string, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c = dialProxy(t, proxyAddr)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br = bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return resp, body, c, br
}

// refusal returns the exact refusal text for host:port.
func refusal(hostport string) string {
	return "toolhost: " + hostport + " is not in this command's network allow-list"
}

// checkRefused checks a 403 with the refusal text in the body and header,
// beginning with want (the special-address refusal goes on after it).
func checkRefused(t testing.TB, resp *http.Response, body, want string) {
	t.Helper()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d (%s), want 403", resp.StatusCode, body)
	}
	if got := resp.Header.Get(RefusalHeader); !strings.HasPrefix(got, want) {
		t.Errorf("%s = %q, want it to begin %q", RefusalHeader, got, want)
	}
	if !strings.HasPrefix(body, want) {
		t.Errorf("body = %q, want it to begin %q", body, want)
	}
	if resp.Header.Get(NetworkErrorHeader) != "" {
		t.Errorf("a refusal carries %s", NetworkErrorHeader)
	}
}

// SOCKS5 client, as small as the tests need.

// socksRequest greets the proxy with "no authentication", sends a request
// and returns the reply code (0xff when the greeting is refused) and the
// connection, ready to carry the tunnel. atyp 0 picks IPv4 or IPv6 from
// host, else a domain.
func socksRequest(t testing.TB, proxyAddr string, cmd byte, host string, port int) (byte, net.Conn) {
	t.Helper()
	c := dialProxy(t, proxyAddr)
	req := socksRequestBytes(cmd, host, port)
	return socksExchange(t, c, []byte{5, 1, 0}, req), c
}

// socksRequestBytes encodes a SOCKS5 request.
func socksRequestBytes(cmd byte, host string, port int) []byte {
	b := []byte{5, cmd, 0}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			b = append(b, socksAtypIPv4)
		} else {
			b = append(b, socksAtypIPv6)
		}
		b = append(b, a.AsSlice()...)
	} else {
		b = append(b, socksAtypDomain, byte(len(host)))
		b = append(b, host...)
	}
	return binary.BigEndian.AppendUint16(b, uint16(port))
}

// socksExchange sends greeting, reads the method; if accepted, sends req
// and reads the reply, returning its code.
func socksExchange(t testing.TB, c net.Conn, greeting, req []byte) byte {
	t.Helper()
	if _, err := c.Write(greeting); err != nil {
		t.Fatal(err)
	}
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil {
		t.Fatalf("greeting: %v", err)
	}
	if m[1] != 0 {
		return m[1]
	}
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	n := 4
	switch h[3] {
	case socksAtypIPv4:
		n = 4
	case socksAtypIPv6:
		n = 16
	default:
		t.Fatalf("reply address type %d", h[3])
	}
	rest := make([]byte, n+2)
	if _, err := io.ReadFull(c, rest); err != nil {
		t.Fatalf("reply address: %v", err)
	}
	return h[1]
}

// origin servers

// startTCP serves each accepted connection with handle on its own
// goroutine; everything ends with the test.
func startTCP(t testing.TB, network, addr string, handle func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l
}

// echo copies what it reads back until EOF.
func echo(c net.Conn) { io.Copy(c, c) }

// hello writes a greeting and closes.
func hello(c net.Conn) { io.WriteString(c, "hello from the origin\n") }

// logStore holds the Warn lines logged through its handlers, each as a
// map of its attributes with "msg".
type logStore struct {
	mu    sync.Mutex
	warns []map[string]string // guarded by mu
}

// logger returns a logger that records into the store.
func (st *logStore) logger() *slog.Logger { return slog.New(&captureHandler{store: st}) }

func (st *logStore) warnings() []map[string]string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]map[string]string(nil), st.warns...)
}

// captureHandler is a slog.Handler writing Warn records into a logStore.
type captureHandler struct {
	store *logStore
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) WithGroup(string) slog.Handler            { return h }
func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{h.store, append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn {
		return nil
	}
	m := map[string]string{"msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.store.mu.Lock()
	h.store.warns = append(h.store.warns, m)
	h.store.mu.Unlock()
	return nil
}
