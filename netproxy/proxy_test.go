package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// httpClient returns a client that goes through the proxy for every URL,
// loopback included (Proxy is set explicitly, not from the environment).
func httpClient(proxyAddr string, tlsConf *tls.Config) *http.Client {
	u := &url.URL{Scheme: "http", Host: proxyAddr}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsConf, DisableKeepAlives: true}}
}

// get fetches u through the client and returns the status and body.
func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestCONNECTAllowedTLS(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret over TLS")
	}))
	t.Cleanup(origin.Close)
	hp := origin.Listener.Addr().String()
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, hp)})

	c := httpClient(proxyAddr, origin.Client().Transport.(*http.Transport).TLSClientConfig)
	code, body, _ := get(t, c, origin.URL+"/x")
	if code != 200 || body != "secret over TLS" {
		t.Fatalf("GET through CONNECT = %d %q", code, body)
	}
	p.Close()
	st := p.Stats()
	if len(st.Allowed) != 1 || st.Allowed[0].Host != "127.0.0.1" || st.Allowed[0].Port != portOf(t, hp) || st.Allowed[0].Connections != 1 || st.Allowed[0].BytesIn == 0 || st.Allowed[0].BytesOut == 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestCONNECTDenied(t *testing.T) {
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the origin was reached") }))
	t.Cleanup(origin.Close)
	hp := origin.Listener.Addr().String()
	logs := new(logStore)
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, "example.com"), Log: logs.logger(), ID: "h-42"})

	resp, body, _, _ := rawCONNECT(t, proxyAddr, hp)
	checkRefused(t, resp, body, refusal(hp))
	if got, want := resp.Header.Get(RefusalHeader), refusal(hp); got != want {
		t.Errorf("header = %q, want exactly %q", got, want)
	}

	// A real client sees the refusal too.
	c := httpClient(proxyAddr, origin.Client().Transport.(*http.Transport).TLSClientConfig)
	if _, err := c.Get(origin.URL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("GET through a denied CONNECT: %v, want Forbidden", err)
	}

	p.Close()
	want := Stats{Allowed: []AllowedStat{}, Denied: []DeniedStat{{Host: "127.0.0.1", Port: portOf(t, hp), Attempts: 2}}}
	if diff := cmp.Diff(want, p.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	warns := logs.warnings()
	if len(warns) != 2 {
		t.Fatalf("%d Warn lines, want 2: %v", len(warns), warns)
	}
	for _, w := range warns {
		if w["id"] != "h-42" || w["host"] != "127.0.0.1" || w["port"] != fmt.Sprint(portOf(t, hp)) || w["reason"] == "" {
			t.Errorf("refusal log line %v lacks id, host, port or reason", w)
		}
	}
}

func TestCONNECTAllowedHostOtherPort(t *testing.T) {
	allowed := startTCP(t, "tcp", "127.0.0.1:0", hello)
	other := startTCP(t, "tcp", "127.0.0.1:0", func(c net.Conn) { t.Error("the other port was reached") })
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, allowed.Addr().String())})

	resp, body, _, _ := rawCONNECT(t, proxyAddr, other.Addr().String())
	checkRefused(t, resp, body, refusal(other.Addr().String()))

	resp, _, c, br := rawCONNECT(t, proxyAddr, allowed.Addr().String())
	if resp.StatusCode != 200 || resp.Status != "200 Connection established" {
		t.Fatalf("CONNECT to the allowed port: %s", resp.Status)
	}
	if got, _ := io.ReadAll(br); string(got) != "hello from the origin\n" {
		t.Errorf("tunnel read %q", got)
	}
	c.Close()
}

func TestCONNECTForwardsBytesSentAhead(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", echo)
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, origin.Addr().String())})
	c := dialProxy(t, proxyAddr)
	// The request and the first bytes of the tunnel in one write, as a
	// client that does not wait for the 200 sends them.
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\nearly bytes", origin.Addr())
	c.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if got, _ := io.ReadAll(br); string(got) != "early bytes" {
		t.Errorf("echoed %q, want the bytes sent ahead", got)
	}
}

func TestPlainHTTPAllowed(t *testing.T) {
	type seen struct {
		URI, Host, Body string
		Header          http.Header
	}
	got := make(chan seen, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.RequestURI, r.Host, string(b), r.Header}
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		io.WriteString(w, "plain hello")
	}))
	t.Cleanup(origin.Close)
	hp := origin.Listener.Addr().String()
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, hp)})

	req, _ := http.NewRequest(http.MethodPost, origin.URL+"/path?q=1", strings.NewReader("a body"))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "remove me")
	req.Header.Set("X-Kept", "keep me")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	resp, err := httpClient(proxyAddr, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "plain hello" {
		t.Fatalf("POST = %d %q", resp.StatusCode, b)
	}
	if resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("Proxy-Authenticate") != "" {
		t.Errorf("hop-by-hop response headers came through: %v", resp.Header)
	}
	s := <-got
	if s.URI != "/path?q=1" {
		t.Errorf("the origin got %q, want the origin form /path?q=1", s.URI)
	}
	if s.Host != hp || s.Body != "a body" || s.Header.Get("X-Kept") != "keep me" {
		t.Errorf("the origin saw %+v", s)
	}
	for _, h := range []string{"X-Hop", "Proxy-Authorization", "Proxy-Connection"} {
		if v := s.Header.Get(h); v != "" {
			t.Errorf("the origin got %s: %s", h, v)
		}
	}
	// The proxy's own: the client asked to close (DisableKeepAlives).
	if v := s.Header.Get("Connection"); v != "close" {
		t.Errorf("the origin got Connection: %s, want close", v)
	}
}

func TestPlainHTTPDenied(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the origin was reached") }))
	t.Cleanup(origin.Close)
	hp := origin.Listener.Addr().String()
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, "example.com")})
	code, body, h := get(t, httpClient(proxyAddr, nil), origin.URL+"/")
	if code != 403 || body != refusal(hp)+"\n" || h.Get(RefusalHeader) != refusal(hp) {
		t.Errorf("GET = %d %q %s=%q", code, body, RefusalHeader, h.Get(RefusalHeader))
	}
}

// TestKeepAliveEachRequestChecked sends three requests on one client
// connection: allowed, denied, allowed. The denied one is refused though
// it follows an allowed one, and the connection carries on.
func TestKeepAliveEachRequestChecked(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok "+r.URL.Path) }))
	t.Cleanup(ok.Close)
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the denied origin was reached") }))
	t.Cleanup(denied.Close)
	okHP, deniedHP := ok.Listener.Addr().String(), denied.Listener.Addr().String()
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, okHP)})

	c := dialProxy(t, proxyAddr)
	br := bufio.NewReader(c)
	for i, tc := range []struct {
		hp   string
		code int
		body string
	}{
		{okHP, 200, "ok /1"},
		{deniedHP, 403, refusal(deniedHP) + "\n"},
		{okHP, 200, "ok /3"},
		{deniedHP, 403, refusal(deniedHP) + "\n"},
	} {
		fmt.Fprintf(c, "GET http://%s/%d HTTP/1.1\r\nHost: %s\r\n\r\n", tc.hp, i+1, tc.hp)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.code || string(b) != tc.body || resp.Close {
			t.Errorf("request %d to %s = %d %q (close %v), want %d %q on a kept connection", i+1, tc.hp, resp.StatusCode, b, resp.Close, tc.code, tc.body)
		}
	}
	c.Close()
	p.Close()
	st := p.Stats()
	if len(st.Denied) != 1 || st.Denied[0].Attempts != 2 || len(st.Allowed) != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestPlainHTTPHostHeaderIsTheURIs: the Host header is rewritten to the
// checked URI's host, so that an allowed address cannot front another site.
func TestPlainHTTPHostHeaderIsTheURIs(t *testing.T) {
	host := make(chan string, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host <- r.Host }))
	t.Cleanup(origin.Close)
	hp := origin.Listener.Addr().String()
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, hp)})
	c := dialProxy(t, proxyAddr)
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n", hp)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	if got := <-host; got != hp {
		t.Errorf("the origin saw Host %q, want %q", got, hp)
	}
}

func TestPlainHTTPBadRequests(t *testing.T) {
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, "example.com")})
	for _, tc := range []struct {
		name, req string
		code      int
	}{
		{"origin form", "GET /path HTTP/1.1\r\nHost: example.com\r\n\r\n", 400},
		{"https absolute URI", "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 400},
		{"garbage", "\x16\x03\x01 not HTTP\r\n\r\n", 400},
		{"huge header", "GET http://example.com/ HTTP/1.1\r\nX: " + strings.Repeat("x", maxHeaderBytes+8192) + "\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialProxy(t, proxyAddr)
			go io.WriteString(c, tc.req) // the proxy may answer before reading it all
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != tc.code {
				t.Fatalf("%v %v, want %d", resp, err, tc.code)
			}
		})
	}
}

// TestNamesResolvedByProxy: a name resolving to loopback is refused
// unless the IP literal is listed too, in CONNECT, plain HTTP and SOCKS5.
func TestNamesResolvedByProxy(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "via name") }))
	t.Cleanup(origin.Close)
	port := portOf(t, origin.Listener.Addr().String())
	name := fmt.Sprintf("origin.test:%d", port)
	res := resolverFor("origin.test=127.0.0.1")
	want := refusal(name) + fmt.Sprintf(": origin.test resolved to 127.0.0.1, a loopback address, which only an IP-literal entry (127.0.0.1:%d) allows", port)

	t.Run("name alone is refused", func(t *testing.T) {
		p, proxyAddr := startProxy(t, Config{Allow: allow(t, name), Resolver: res})
		resp, body, _, _ := rawCONNECT(t, proxyAddr, name)
		checkRefused(t, resp, body, want)
		code, body, _ := get(t, httpClient(proxyAddr, nil), "http://"+name+"/")
		if code != 403 || !strings.HasPrefix(body, want) {
			t.Errorf("plain GET = %d %q", code, body)
		}
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "origin.test", port); code != socksNotAllowed {
			t.Errorf("SOCKS5 reply %#x, want 0x02", code)
		}
		p.Close()
		if st := p.Stats(); len(st.Denied) != 1 || st.Denied[0] != (DeniedStat{"origin.test", port, 3}) {
			t.Errorf("Stats = %+v", st)
		}
	})
	t.Run("name with the literal is allowed", func(t *testing.T) {
		_, proxyAddr := startProxy(t, Config{Allow: allow(t, name, fmt.Sprintf("127.0.0.1:%d", port)), Resolver: res})
		resp, _, c, _ := rawCONNECT(t, proxyAddr, name)
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT = %s", resp.Status)
		}
		c.Close()
		if code, body, _ := get(t, httpClient(proxyAddr, nil), "http://"+name+"/"); code != 200 || body != "via name" {
			t.Errorf("plain GET = %d %q", code, body)
		}
		code, sc := socksRequest(t, proxyAddr, socksCmdConnect, "origin.test", port)
		if code != socksSucceeded {
			t.Fatalf("SOCKS5 reply %#x", code)
		}
		fmt.Fprintf(sc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
		resp, err := http.ReadResponse(bufio.NewReader(sc), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET over SOCKS5: %v %v", resp, err)
		}
	})
	t.Run("localhost is refused", func(t *testing.T) {
		// The system resolver: localhost is loopback wherever this runs.
		_, proxyAddr := startProxy(t, Config{Allow: allow(t, fmt.Sprintf("localhost:%d", port))})
		resp, body, _, _ := rawCONNECT(t, proxyAddr, fmt.Sprintf("localhost:%d", port))
		checkRefused(t, resp, body, refusal(fmt.Sprintf("localhost:%d", port))+": localhost resolved to ")
		if !strings.Contains(body, "a loopback address") {
			t.Errorf("body %q does not say loopback", body)
		}
	})
}

// TestSpecialAddresses resolves a name to each special range, and to
// ranges that are not special, dialing through redirectDial.
func TestSpecialAddresses(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", hello)
	for _, tc := range []struct {
		addr, kind string // kind "" is allowed
	}{
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.254", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		// Not special: refused by nothing but the allow-list.
		{"172.32.0.1", ""},
		{"172.15.255.255", ""},
		{"100.64.0.1", ""},
		{"192.0.2.1", ""},
		{"8.8.8.8", ""},
		{"2001:db8::1", ""},
		{"fec0::1", ""},
		{"224.0.0.1", ""},
		{"0.1.2.3", ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			d := &redirectDial{target: origin.Addr().String()}
			_, proxyAddr := startProxy(t, Config{Allow: allow(t, "x.test:443"), Resolver: resolverFor("x.test=" + tc.addr), Dial: d.Dial})
			resp, body, c, br := rawCONNECT(t, proxyAddr, "x.test:443")
			if tc.kind != "" {
				a := netip.MustParseAddr(tc.addr).Unmap()
				checkRefused(t, resp, body, refusal("x.test:443")+fmt.Sprintf(": x.test resolved to %s, a %s address", a, tc.kind))
				if len(d.addrs()) != 0 {
					t.Errorf("dialed %v", d.addrs())
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT = %s %s", resp.Status, body)
			}
			if got, _ := io.ReadAll(br); string(got) != "hello from the origin\n" {
				t.Errorf("tunnel read %q", got)
			}
			c.Close()
			want := netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 443).String()
			if diff := cmp.Diff([]string{want}, d.addrs()); diff != "" {
				t.Errorf("dialed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDialsExactlyTheCheckedAddresses: of a name's answers, the special
// ones are dropped, the others dialed as they are, and the name is looked
// up once.
func TestDialsExactlyTheCheckedAddresses(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", hello)
	d := &redirectDial{target: origin.Addr().String()}
	res := resolverFor("mixed.test=10.0.0.1,203.0.113.9,::1")
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, "mixed.test:8443"), Resolver: res, Dial: d.Dial})
	resp, _, c, _ := rawCONNECT(t, proxyAddr, "mixed.test:8443")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	c.Close()
	if diff := cmp.Diff([]string{"203.0.113.9:8443"}, d.addrs()); diff != "" {
		t.Errorf("dialed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mixed.test"}, res.lookups()); diff != "" {
		t.Errorf("lookups (-want +got):\n%s", diff)
	}
}

func TestNameMatching(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", hello)
	res := resolverFor("a.wild.test=203.0.113.1", "b.a.wild.test=203.0.113.2", "wild.test=203.0.113.3",
		"case.test=203.0.113.4", "dflt.test=203.0.113.5")
	d := &redirectDial{target: origin.Addr().String()}
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, "*.wild.test:9000", "Case.Test.:9000", "dflt.test"), Resolver: res, Dial: d.Dial})
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"a.wild.test:9000", true},
		{"B.A.Wild.Test.:9000", true},
		{"wild.test:9000", false}, // *.domain is subdomains only
		{"a.wild.test:443", false},
		{"CASE.test:9000", true},
		{"case.test.:9000", true},
		{"case.test:9001", false},
		{"dflt.test:443", true}, // no port: 80 and 443
		{"dflt.test:80", true},
		{"dflt.test:8443", false},
		{"dflt.test", true}, // CONNECT without a port: 443
	} {
		resp, body, c, _ := rawCONNECT(t, proxyAddr, tc.target)
		c.Close()
		if got := resp.StatusCode == 200; got != tc.ok {
			t.Errorf("CONNECT %s = %s %q, want allowed=%v", tc.target, resp.Status, body, tc.ok)
		}
	}
	// Plain HTTP without a port is port 80.
	if code, _, _ := get(t, httpClient(proxyAddr, nil), "http://dflt.test/"); code == 403 {
		t.Errorf("GET http://dflt.test/ was refused")
	}
	p.Close()
	var hosts []string
	for _, a := range p.Stats().Allowed {
		hosts = append(hosts, fmt.Sprintf("%s:%d", a.Host, a.Port))
	}
	want := []string{"a.wild.test:9000", "b.a.wild.test:9000", "case.test:9000", "dflt.test:80", "dflt.test:443"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("allowed hosts, normalized and sorted (-want +got):\n%s", diff)
	}
}

func TestUpstreamErrors(t *testing.T) {
	// A port nobody listens on: take one, then close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	port := portOf(t, closed)
	_, proxyAddr := startProxy(t, Config{
		Allow:    allow(t, closed, fmt.Sprintf("nowhere.test:%d", port)),
		Resolver: resolverFor(),
	})

	resp, body, _, _ := rawCONNECT(t, proxyAddr, closed)
	if resp.StatusCode != 502 || resp.Header.Get(RefusalHeader) != "" || !strings.Contains(resp.Header.Get(NetworkErrorHeader), "not a policy refusal") || !strings.Contains(body, "connection refused") {
		t.Errorf("CONNECT to a closed port = %s %q %v", resp.Status, body, resp.Header)
	}
	code, body, _ := get(t, httpClient(proxyAddr, nil), "http://"+closed+"/")
	if code != 502 || !strings.Contains(body, "not a policy refusal") {
		t.Errorf("GET of a closed port = %d %q", code, body)
	}
	if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.1", port); code != socksConnRefused {
		t.Errorf("SOCKS5 to a closed port: reply %#x, want 0x05", code)
	}
	resp, body, _, _ = rawCONNECT(t, proxyAddr, fmt.Sprintf("nowhere.test:%d", port))
	if resp.StatusCode != 502 || !strings.Contains(body, "could not resolve") {
		t.Errorf("CONNECT to an unresolvable name = %s %q", resp.Status, body)
	}
	if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "nowhere.test", port); code != socksHostUnreachable {
		t.Errorf("SOCKS5 to an unresolvable name: reply %#x, want 0x04", code)
	}
}

func TestSOCKS5(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", echo)
	port := portOf(t, origin.Addr().String())
	var origin6 net.Listener
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
		l.Close()
		origin6 = startTCP(t, "tcp", "[::1]:0", echo)
	}
	patterns := []string{origin.Addr().String(), fmt.Sprintf("name.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port)}
	if origin6 != nil {
		patterns = append(patterns, origin6.Addr().String())
	}
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, patterns...), Resolver: resolverFor("name.test=127.0.0.1")})

	roundTrip := func(t *testing.T, c net.Conn) {
		t.Helper()
		io.WriteString(c, "ping")
		c.(*net.TCPConn).CloseWrite()
		if got, _ := io.ReadAll(c); string(got) != "ping" {
			t.Errorf("echo through SOCKS5 = %q", got)
		}
	}
	t.Run("IPv4 allowed", func(t *testing.T) {
		code, c := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.1", port)
		if code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		roundTrip(t, c)
	})
	t.Run("IPv4 denied", func(t *testing.T) {
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.1", port+1); code != socksNotAllowed {
			t.Errorf("reply %#x, want 0x02", code)
		}
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.2", port); code != socksNotAllowed {
			t.Errorf("reply %#x, want 0x02", code)
		}
	})
	t.Run("domain", func(t *testing.T) {
		code, c := socksRequest(t, proxyAddr, socksCmdConnect, "NAME.test.", port)
		if code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		roundTrip(t, c)
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "other.test", port); code != socksNotAllowed {
			t.Errorf("unlisted domain: reply %#x, want 0x02", code)
		}
	})
	t.Run("IPv6 literal", func(t *testing.T) {
		if origin6 == nil {
			t.Skip("no IPv6 loopback here: cannot listen on [::1]")
		}
		code, c := socksRequest(t, proxyAddr, socksCmdConnect, "::1", portOf(t, origin6.Addr().String()))
		if code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		roundTrip(t, c)
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "::1", port); code != socksNotAllowed {
			t.Errorf("unlisted IPv6 port: reply %#x, want 0x02", code)
		}
		if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "2001:db8::1", 443); code != socksNotAllowed {
			t.Errorf("unlisted IPv6 literal: reply %#x, want 0x02", code)
		}
	})
	t.Run("bad request version", func(t *testing.T) {
		c := dialProxy(t, proxyAddr)
		req := socksRequestBytes(socksCmdConnect, "127.0.0.1", port)
		req[0] = 4
		if code := socksExchange(t, c, []byte{5, 1, 0}, req); code != socksGeneralFailure {
			t.Errorf("reply %#x, want 0x01", code)
		}
	})
	t.Run("SOCKS4", func(t *testing.T) {
		c := dialProxy(t, proxyAddr)
		c.Write([]byte{4, 1, byte(port >> 8), byte(port), 127, 0, 0, 1, 0})
		var r [8]byte
		if _, err := io.ReadFull(c, r[:]); err != nil || r[1] != 0x5b {
			t.Errorf("SOCKS4 answer %v %v, want request rejected (0x5b)", r, err)
		}
	})
	t.Run("no acceptable method", func(t *testing.T) {
		c := dialProxy(t, proxyAddr)
		if code := socksExchange(t, c, []byte{5, 1, 2}, nil); code != socksNoAcceptable {
			t.Errorf("method %#x, want 0xff", code)
		}
	})
	for _, cmd := range []struct {
		name string
		cmd  byte
	}{{"BIND", 2}, {"UDP ASSOCIATE", 3}, {"unknown command", 9}} {
		t.Run(cmd.name, func(t *testing.T) {
			if code, _ := socksRequest(t, proxyAddr, cmd.cmd, "127.0.0.1", port); code != socksCmdNotSupported {
				t.Errorf("reply %#x, want 0x07", code)
			}
		})
	}
	t.Run("unknown address type", func(t *testing.T) {
		c := dialProxy(t, proxyAddr)
		if code := socksExchange(t, c, []byte{5, 1, 0}, []byte{5, 1, 0, 9, 0, 0}); code != socksAtypNotSupported {
			t.Errorf("reply %#x, want 0x08", code)
		}
	})
}

// TestMaxConns holds one connection open with a limit of one: the next
// HTTP and SOCKS5 clients are refused and counted; once the first ends,
// a new one is served.
func TestMaxConns(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", echo)
	connDone := make(chan struct{}, 16)
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, origin.Addr().String()), MaxConns: 1},
		func(p *Proxy) { p.testHookConnDone = func() { connDone <- struct{}{} } })

	resp, _, held, _ := rawCONNECT(t, proxyAddr, origin.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("first CONNECT = %s", resp.Status)
	}
	resp, body, _, _ := rawCONNECT(t, proxyAddr, origin.Addr().String())
	if resp.StatusCode != 503 || !strings.Contains(resp.Header.Get(RefusalHeader), "too many connections") || !strings.Contains(body, "limit") {
		t.Errorf("second CONNECT = %s %q", resp.Status, body)
	}
	if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.1", portOf(t, origin.Addr().String())); code != socksGeneralFailure {
		t.Errorf("SOCKS5 beyond the limit: reply %#x, want 0x01", code)
	}
	<-connDone
	<-connDone

	held.Close() // the tunnel ends: the client side closed, the echo follows
	<-connDone
	resp, _, c, _ := rawCONNECT(t, proxyAddr, origin.Addr().String())
	if resp.StatusCode != 200 {
		t.Errorf("CONNECT after the first ended = %s", resp.Status)
	}
	c.Close()
	if got := p.Stats().OverLimit; got != 2 {
		t.Errorf("OverLimit = %d, want 2", got)
	}
}

// TestIdleTimeout: an origin that never answers; the proxy ends the
// tunnel, and the plain request gets 504. The test waits for the close.
func TestIdleTimeout(t *testing.T) {
	silent := startTCP(t, "tcp", "127.0.0.1:0", func(c net.Conn) { io.Copy(io.Discard, c) })
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, silent.Addr().String()), IdleTimeout: 50 * time.Millisecond})

	resp, _, c, br := rawCONNECT(t, proxyAddr, silent.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	io.WriteString(c, "anyone there?")
	if n, err := io.Copy(io.Discard, br); n != 0 || err != nil {
		t.Errorf("idle tunnel: read %d bytes, %v; want EOF", n, err)
	}

	c = dialProxy(t, proxyAddr)
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n", silent.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 504 || resp.Header.Get(NetworkErrorHeader) == "" {
		t.Errorf("plain GET of a silent origin = %v %v, want 504", resp, err)
	}

	// A client that never sends its request is closed too.
	c = dialProxy(t, proxyAddr)
	if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
		t.Errorf("silent client: read %d bytes, %v; want EOF", n, err)
	}

	// A dial that never completes ends with the session: 504, and SOCKS5
	// host unreachable.
	hang := func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_, proxyAddr = startProxy(t, Config{Allow: allow(t, "192.0.2.1:9"), IdleTimeout: 50 * time.Millisecond, Dial: hang})
	resp, body, _, _ := rawCONNECT(t, proxyAddr, "192.0.2.1:9")
	if resp.StatusCode != 504 || resp.Header.Get(NetworkErrorHeader) == "" {
		t.Errorf("CONNECT with a hung dial = %s %q, want 504", resp.Status, body)
	}
	if code, _ := socksRequest(t, proxyAddr, socksCmdConnect, "192.0.2.1", 9); code != socksHostUnreachable {
		t.Errorf("SOCKS5 with a hung dial: reply %#x, want 0x04", code)
	}
}

// TestTotalTimeout: a tunnel that keeps talking is still ended.
func TestTotalTimeout(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", echo)
	_, proxyAddr := startProxy(t, Config{Allow: allow(t, origin.Addr().String()), TotalTimeout: 100 * time.Millisecond})
	resp, _, c, br := rawCONNECT(t, proxyAddr, origin.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	buf := make([]byte, 4)
	for {
		if _, err := io.WriteString(c, "ping"); err != nil {
			break
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			break
		}
	}
}

// TestStats moves known byte counts each way over a raw TCP origin, which
// sees the client's end only through the proxy's half-close.
func TestStats(t *testing.T) {
	const up, down = 1000, 5000
	origin := startTCP(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c) // until the client's half-close arrives
		if n != up {
			t.Errorf("origin read %d bytes, want %d", n, up)
		}
		c.Write(make([]byte, down))
	})
	port := portOf(t, origin.Addr().String())
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, origin.Addr().String())})

	for range 2 {
		resp, _, c, br := rawCONNECT(t, proxyAddr, origin.Addr().String())
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT = %s", resp.Status)
		}
		c.Write(make([]byte, up))
		c.(*net.TCPConn).CloseWrite()
		if n, _ := io.Copy(io.Discard, br); n != down {
			t.Errorf("client read %d bytes, want %d", n, down)
		}
	}
	code, c := socksRequest(t, proxyAddr, socksCmdConnect, "127.0.0.1", port)
	if code != socksSucceeded {
		t.Fatalf("SOCKS5 reply %#x", code)
	}
	c.Write(make([]byte, up))
	c.(*net.TCPConn).CloseWrite()
	if n, _ := io.Copy(io.Discard, c); n != down {
		t.Errorf("SOCKS5 client read %d bytes, want %d", n, down)
	}
	rawCONNECT(t, proxyAddr, "127.0.0.1:1")
	rawCONNECT(t, proxyAddr, "example.com:443")
	rawCONNECT(t, proxyAddr, "Example.COM.:443")

	p.Close()
	want := Stats{
		Allowed: []AllowedStat{{Host: "127.0.0.1", Port: port, Connections: 3, BytesOut: 3 * up, BytesIn: 3 * down}},
		Denied:  []DeniedStat{{Host: "127.0.0.1", Port: 1, Attempts: 1}, {Host: "example.com", Port: 443, Attempts: 2}},
	}
	got := p.Stats()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(got)
	wantJSON := fmt.Sprintf(`{"allowed":[{"host":"127.0.0.1","port":%d,"connections":3,"bytesOut":3000,"bytesIn":15000}],"denied":[{"host":"127.0.0.1","port":1,"attempts":1},{"host":"example.com","port":443,"attempts":2}]}`, port)
	if string(b) != wantJSON {
		t.Errorf("JSON = %s\nwant   %s", b, wantJSON)
	}
}

// TestCloseWaitsForEverything leaves the proxy busy in every way — an open
// tunnel, a kept-alive HTTP connection, half a SOCKS5 handshake, half an
// HTTP header, a dial in progress — and checks that once Close returns no
// goroutine runs the proxy's code.
func TestCloseWaitsForEverything(t *testing.T) {
	origin := startTCP(t, "tcp", "127.0.0.1:0", echo)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(plain.Close)
	dialing := make(chan struct{})
	hang := func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
		if addr.Port() == 9 {
			close(dialing)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr.String())
	}
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, origin.Addr().String(), plain.Listener.Addr().String(), "192.0.2.1:9"), Dial: hang})

	resp, _, _, _ := rawCONNECT(t, proxyAddr, origin.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	c := dialProxy(t, proxyAddr)
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n", plain.Listener.Addr())
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	dialProxy(t, proxyAddr).Write([]byte{5, 1})
	io.WriteString(dialProxy(t, proxyAddr), "GET http://")
	hung := dialProxy(t, proxyAddr)
	io.WriteString(hung, "CONNECT 192.0.2.1:9 HTTP/1.1\r\n\r\n")
	<-dialing

	p.Close()
	if leaked := proxyGoroutines(); len(leaked) > 0 {
		t.Errorf("after Close, goroutines still run the proxy:\n%s", strings.Join(leaked, "\n\n"))
	}
	// The dial in progress was cancelled: that client hears it.
	if resp, err := http.ReadResponse(bufio.NewReader(hung), nil); err == nil && resp.StatusCode == 200 {
		t.Errorf("the hung CONNECT succeeded")
	}
}

// proxyGoroutines returns the stacks of the goroutines, other than the
// caller's, that run the package's code. A goroutine whose only frames in
// the package are the wrappers that call wg.Done (Serve, and the closures
// of accepted and goTracked) is on its way out: its Done has let Close
// return, and it runs nothing of the proxy's any more.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	wrappers := []string{"netproxy.(*Proxy).Serve(", "netproxy.(*Proxy).accepted.func1(", "netproxy.(*Proxy).goTracked.func1("}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller
			continue
		}
		lines := strings.Split(g, "\n")
		for k := 1; k+1 < len(lines); k++ {
			fn, file := lines[k], strings.TrimSpace(lines[k+1])
			if strings.HasPrefix(fn, "created by ") || !strings.HasPrefix(file, "/") || !strings.Contains(file, "/netproxy/") || strings.Contains(file, "_test.go:") {
				continue
			}
			if !slices.ContainsFunc(wrappers, func(w string) bool { return strings.Contains(fn, w) }) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func TestEnv(t *testing.T) {
	want := []string{
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128", "all_proxy=socks5h://127.0.0.1:3128",
		"NO_PROXY=", "no_proxy=",
	}
	if diff := cmp.Diff(want, Env(netip.MustParseAddrPort("127.0.0.1:3128"))); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	if got := Env(netip.MustParseAddrPort("[::1]:1080"))[4]; got != "ALL_PROXY=socks5h://[::1]:1080" {
		t.Errorf("IPv6: %s", got)
	}
}

func TestServeAfterClose(t *testing.T) {
	p := New(Config{})
	p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("Serve after Close left the listener open")
	}
}
