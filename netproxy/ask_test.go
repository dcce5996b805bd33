package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Tests of Config.Ask: a host and port the allow-list does not name,
// asked about while the proxy holds the client's connection.

// asker is a Config.Ask that records what it is asked and answers with
// answer. entered, if not nil, gets each ask as it starts.
type asker struct {
	answer  func(ctx context.Context, host string, port int) Verdict
	entered chan string

	mu    sync.Mutex
	calls []string // "host:port" of each ask, guarded by mu
}

func (a *asker) ask(ctx context.Context, host string, port int) Verdict {
	hp := net.JoinHostPort(host, fmt.Sprint(port))
	a.mu.Lock()
	a.calls = append(a.calls, hp)
	a.mu.Unlock()
	if a.entered != nil {
		a.entered <- hp
	}
	return a.answer(ctx, host, port)
}

func (a *asker) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// answerWith returns an answer that is always v.
func answerWith(v Verdict) func(context.Context, string, int) Verdict {
	return func(context.Context, string, int) Verdict { return v }
}

// neverAsk is a Config.Ask that fails the test if it is called.
func neverAsk(t *testing.T) func(context.Context, string, int) Verdict {
	return func(_ context.Context, host string, port int) Verdict {
		t.Errorf("asked about %s:%d", host, port)
		return Verdict{Reason: "asked when it should not have been"}
	}
}

// protocols are the ways a client asks the proxy for a host.
var protocols = []string{"connect", "http", "socks5"}

// outcome is what a client saw of a fetch through the proxy: for HTTP
// (CONNECT, plain) the proxy's status and, when it is not 200, its text
// (the body, which must equal the refusal header for a 403); for SOCKS5
// the reply code; and the origin's body when it went through.
type outcome struct {
	status int  // HTTP: the proxy's answer (the CONNECT's, or the request's)
	reply  byte // SOCKS5
	text   string
	body   string
}

// fetchVia sends a GET of http://host:port/ through the proxy at
// proxyAddr with proto ("connect" and "socks5": over the tunnel; "http":
// as an absolute URI), on a connection of its own, and returns what the
// client saw.
func fetchVia(t *testing.T, proto, proxyAddr, host string, port int) outcome {
	t.Helper()
	hp := net.JoinHostPort(host, fmt.Sprint(port))
	var o outcome
	var c net.Conn
	var br *bufio.Reader
	switch proto {
	case "connect":
		var resp *http.Response
		resp, o.text, c, br = rawCONNECT(t, proxyAddr, hp)
		o.status = resp.StatusCode
		if o.status != http.StatusOK {
			checkHeaderIsBody(t, resp, o.text)
			return o
		}
	case "socks5":
		o.reply, c = socksRequest(t, proxyAddr, socksCmdConnect, host, port)
		if o.reply != socksSucceeded {
			return o
		}
		br = bufio.NewReader(c)
	case "http":
		c = dialProxy(t, proxyAddr)
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hp, hp)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET http://%s/ through the proxy: %v", hp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		o.status = resp.StatusCode
		if o.status == http.StatusOK {
			o.body = string(b)
		} else {
			o.text = string(b)
			checkHeaderIsBody(t, resp, o.text)
		}
		return o
	default:
		t.Fatalf("unknown protocol %q", proto)
	}
	// A tunnel: the origin speaks HTTP at its end.
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hp)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET over the %s tunnel to %s: %v", proto, hp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	o.body = string(b)
	return o
}

// fetchAsync is fetchVia for a goroutine other than the test's: where
// fetchVia would stop the test, it returns an outcome that says so (the
// test has failed), so that whoever waits for it is not left waiting.
func fetchAsync(t *testing.T, proto, proxyAddr, host string, port int) (o outcome) {
	o.text = "the fetch failed"
	done := make(chan struct{})
	go func() {
		defer close(done)
		o = fetchVia(t, proto, proxyAddr, host, port)
	}()
	<-done
	return o
}

// checkHeaderIsBody checks that a 403's refusal header holds its body's
// text.
func checkHeaderIsBody(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode == http.StatusForbidden && resp.Header.Get(RefusalHeader)+"\n" != body {
		t.Errorf("%s = %q, body %q: want the same text", RefusalHeader, resp.Header.Get(RefusalHeader), body)
	}
}

// wantThrough checks that o went through to the origin's body.
func wantThrough(t *testing.T, proto string, o outcome, body string) {
	t.Helper()
	if proto == "socks5" && o.reply != socksSucceeded || proto != "socks5" && o.status != http.StatusOK || o.body != body {
		t.Errorf("%s: %+v, want it through with the body %q", proto, o, body)
	}
}

// wantRefused checks that o is a refusal by policy whose text (HTTP) is
// exactly text: a 403, or the SOCKS5 reply 0x02.
func wantRefused(t *testing.T, proto string, o outcome, text string) {
	t.Helper()
	switch {
	case proto == "socks5":
		if o.reply != socksNotAllowed {
			t.Errorf("socks5: reply %#x, want 0x02 (not allowed)", o.reply)
		}
	case o.status != http.StatusForbidden || o.text != text+"\n":
		t.Errorf("%s: %d %q, want 403 %q", proto, o.status, o.text, text)
	}
}

// originServer is an HTTP origin on the loopback answering body.
func originServer(t *testing.T, body string) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
	t.Cleanup(srv.Close)
	return srv, portOf(t, srv.Listener.Addr().String())
}

// TestAskVerdicts asks about a name the allow-list does not name, over
// each protocol, with each kind of answer: Allow goes through to the
// origin, dialing the addresses the name resolved to as an allowed name
// would (a special answer dropped), and counts in Stats.Allowed; a
// refusal is a 403 (or SOCKS5 0x02) with the Verdict's reason appended
// to the usual text, and counts in Stats.Denied. The ask gets the host,
// normalized, and the port.
func TestAskVerdicts(t *testing.T) {
	_, port := originServer(t, "from the origin")
	hp := fmt.Sprintf("asked.test:%d", port)
	for _, tc := range []struct {
		name    string
		verdict Verdict
		text    string // "" goes through
	}{
		{"allowed", Verdict{Allow: true}, ""},
		{"denied", Verdict{Reason: "denied by the user"}, refusal(hp) + ": denied by the user"},
		{"no answer", Verdict{Reason: "no answer"}, refusal(hp) + ": no answer"},
		{"no reason", Verdict{}, refusal(hp) + ": refused"},
	} {
		for _, proto := range protocols {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				d := &redirectDial{target: fmt.Sprintf("127.0.0.1:%d", port)}
				a := &asker{answer: answerWith(tc.verdict)}
				res := resolverFor("asked.test=10.0.0.1,203.0.113.9")
				p, proxyAddr := startProxy(t, Config{Allow: allow(t, "listed.test"), Resolver: res, Dial: d.Dial, Ask: a.ask})

				o := fetchVia(t, proto, proxyAddr, "Asked.TEST.", port)
				if tc.text == "" {
					wantThrough(t, proto, o, "from the origin")
				} else {
					wantRefused(t, proto, o, tc.text)
				}
				if diff := cmp.Diff([]string{hp}, a.asked()); diff != "" {
					t.Errorf("asked (-want +got):\n%s", diff)
				}
				var dialed []string
				if tc.text == "" {
					dialed = []string{fmt.Sprintf("203.0.113.9:%d", port)}
				}
				if diff := cmp.Diff(dialed, d.addrs()); diff != "" {
					t.Errorf("dialed (-want +got):\n%s", diff)
				}
				p.Close()
				st := p.Stats()
				if tc.text == "" {
					if len(st.Allowed) != 1 || st.Allowed[0].Host != "asked.test" || st.Allowed[0].Port != port || st.Allowed[0].Connections != 1 || len(st.Denied) != 0 {
						t.Errorf("Stats = %+v, want asked.test:%d allowed once", st, port)
					}
				} else {
					want := Stats{Allowed: []AllowedStat{}, Denied: []DeniedStat{{Host: "asked.test", Port: port, Attempts: 1}}}
					if diff := cmp.Diff(want, st); diff != "" {
						t.Errorf("Stats (-want +got):\n%s", diff)
					}
				}
			})
		}
	}
}

// TestAskIPLiteral: an IP literal the allow-list does not name, even a
// loopback one, is asked about (the user sees the address) and, allowed,
// dialed as it is.
func TestAskIPLiteral(t *testing.T) {
	_, port := originServer(t, "from the origin")
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			a := &asker{answer: answerWith(Verdict{Allow: true})}
			// The list names the address on another port only.
			_, proxyAddr := startProxy(t, Config{Allow: allow(t, fmt.Sprintf("127.0.0.1:%d", port+1)), Ask: a.ask})
			wantThrough(t, proto, fetchVia(t, proto, proxyAddr, "127.0.0.1", port), "from the origin")
			if diff := cmp.Diff([]string{fmt.Sprintf("127.0.0.1:%d", port)}, a.asked()); diff != "" {
				t.Errorf("asked (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAskNeverAboutSpecialOrListed: what the allow-list refuses for
// another reason than not naming it is refused without asking — a name
// that resolves to special addresses only (ErrSpecialAddress), a listed
// name that does, an address with a zone, a bad port — and so is a name
// that does not resolve, with the refusal it gets without Ask; what the
// list names goes through without asking.
func TestAskNeverAboutSpecialOrListed(t *testing.T) {
	_, port := originServer(t, "listed")
	// 127.0.0.2: the list names 127.0.0.1:port, which would let a name
	// resolving to it through (and so be asked about, unlisted).
	res := resolverFor("loop.test=127.0.0.2", "private.test=10.1.2.3,fd00::1", "listedloop.test=127.0.0.2")
	listed := fmt.Sprintf("127.0.0.1:%d", port)
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, listed, fmt.Sprintf("listedloop.test:%d", port)), Resolver: res, Ask: neverAsk(t)})

	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			wantRefused(t, proto, fetchVia(t, proto, proxyAddr, "loop.test", port),
				refusal(fmt.Sprintf("loop.test:%d", port))+fmt.Sprintf(": loop.test resolved to 127.0.0.2, a loopback address, which only an IP-literal entry (127.0.0.2:%d) allows", port))
			wantThrough(t, proto, fetchVia(t, proto, proxyAddr, "127.0.0.1", port), "listed")
		})
	}

	ctx := context.Background()
	for _, tc := range []struct {
		host    string
		port    int
		special bool // else a refusal without it
	}{
		{"loop.test", port, true},
		{"private.test", 443, true},
		{"listedloop.test", port, true},
		{"fe80::1%lo", port, false},
		{"example.com", 0, false},
		{"example.com", 65536, false},
		{"bad_name!", 443, false},
	} {
		_, err := p.check(ctx, tc.host, tc.port)
		var r *RefusalError
		if !errors.As(err, &r) || errors.Is(err, ErrSpecialAddress) != tc.special || r.Asked != "" {
			t.Errorf("check(%s, %d) = %v, want a refusal (special %v) never asked", tc.host, tc.port, err, tc.special)
		}
	}
	// A name whose special answer an IP-literal entry allows is checked
	// as a listed name would be: unlisted, it is asked about.
	res.answers["literal.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.9.9.9")}
	if d, err := p.check(ctx, "literal.test", port); err != nil || !d.unlisted || len(d.addrs) != 1 || d.addrs[0].String() != listed {
		t.Errorf("check(literal.test) = %+v, %v; want %s, unlisted", d, err, listed)
	}
	for _, proto := range protocols {
		wantRefused(t, proto, fetchVia(t, proto, proxyAddr, "nowhere.test", 80), refusal("nowhere.test:80"))
	}
	p.Close()
	want := []DeniedStat{{"loop.test", port, 3}, {"nowhere.test", 80, 3}}
	if diff := cmp.Diff(want, p.Stats().Denied); diff != "" {
		t.Errorf("Stats.Denied (-want +got):\n%s", diff)
	}
}

// TestAskRefusalError checks the message and the errors a refusal after
// an ask wraps.
func TestAskRefusalError(t *testing.T) {
	err := &RefusalError{Host: "example.com", Port: 443, Asked: "denied by the user"}
	if got, want := err.Error(), "toolhost: example.com:443 is not in this command's network allow-list: denied by the user"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrSpecialAddress) || socksCode(err) != socksNotAllowed {
		t.Errorf("%v: wraps ErrNotAllowed %v, ErrSpecialAddress %v; SOCKS5 code %#x", err, errors.Is(err, ErrNotAllowed), errors.Is(err, ErrSpecialAddress), socksCode(err))
	}
}

// heldAsker is an asker whose every ask waits until release is closed,
// then answers v; entered gets each ask as it starts.
func heldAsker(v Verdict) (a *asker, release chan struct{}) {
	release = make(chan struct{})
	a = &asker{entered: make(chan string, 16), answer: func(ctx context.Context, _ string, _ int) Verdict {
		select {
		case <-release:
			return v
		case <-ctx.Done():
			return Verdict{Reason: "no answer"}
		}
	}}
	return a, release
}

// TestAskHoldsPastIdleTimeout: while an ask waits, the client's connection
// is held past the idle timeout; once the test releases the ask, the
// connection goes through. The test knows the idle timeout has passed
// because another, silent connection, opened once the ask had begun, has
// been closed by it.
func TestAskHoldsPastIdleTimeout(t *testing.T) {
	_, port := originServer(t, "from the origin")
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			a, release := heldAsker(Verdict{Allow: true})
			_, proxyAddr := startProxy(t, Config{Allow: allow(t), Ask: a.ask, IdleTimeout: 20 * time.Millisecond})
			got := make(chan outcome, 1)
			go func() { got <- fetchAsync(t, proto, proxyAddr, "127.0.0.1", port) }()
			<-a.entered

			silent := dialProxy(t, proxyAddr)
			if n, err := io.Copy(io.Discard, silent); n != 0 || err != nil {
				t.Fatalf("silent client: read %d bytes, %v; want EOF", n, err)
			}
			close(release)
			wantThrough(t, proto, <-got, "from the origin")
		})
	}
}

// TestAskEndsAtTotalTimeout: the total timeout still applies while an ask
// waits: it ends the ask's context, and the connection, unanswered.
func TestAskEndsAtTotalTimeout(t *testing.T) {
	ended := make(chan error, 1)
	a := &asker{answer: func(ctx context.Context, _ string, _ int) Verdict {
		<-ctx.Done()
		ended <- ctx.Err()
		return Verdict{Allow: true} // too late: refused all the same
	}}
	p, proxyAddr := startProxy(t, Config{Allow: allow(t), Ask: a.ask, TotalTimeout: 50 * time.Millisecond})
	c := dialProxy(t, proxyAddr)
	fmt.Fprintf(c, "CONNECT 192.0.2.1:443 HTTP/1.1\r\n\r\n")
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the ask's context ended with %v, want its deadline", err)
	}
	if b, _ := io.ReadAll(c); strings.Contains(string(b), " 200 ") {
		t.Errorf("the connection went through after its total timeout: %q", b)
	}
	p.Close()
	if st := p.Stats(); len(st.Allowed) != 0 || len(st.Denied) != 1 {
		t.Errorf("Stats = %+v, want one refusal", st)
	}
}

// TestAskEndsWithClose: Close while asks wait (one per protocol) ends
// their context; each returns, Close returns, and no goroutine of the
// proxy's is left.
func TestAskEndsWithClose(t *testing.T) {
	ended := make(chan error, len(protocols))
	a := &asker{entered: make(chan string, len(protocols)), answer: func(ctx context.Context, _ string, _ int) Verdict {
		<-ctx.Done()
		ended <- ctx.Err()
		return Verdict{Reason: "no answer"}
	}}
	p, proxyAddr := startProxy(t, Config{Allow: allow(t), Ask: a.ask})
	var clients []net.Conn
	for _, proto := range protocols {
		c := dialProxy(t, proxyAddr)
		switch proto {
		case "connect":
			io.WriteString(c, "CONNECT 192.0.2.1:443 HTTP/1.1\r\n\r\n")
		case "http":
			io.WriteString(c, "GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n")
		case "socks5":
			c.Write([]byte{5, 1, 0})
			c.Write(socksRequestBytes(socksCmdConnect, "192.0.2.1", 443))
		}
		clients = append(clients, c)
	}
	for range protocols {
		<-a.entered
	}

	p.Close()
	for range protocols {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("an ask's context ended with %v, want cancelled", err)
		}
	}
	if leaked := proxyGoroutines(); len(leaked) > 0 {
		t.Errorf("after Close, goroutines still run the proxy:\n%s", strings.Join(leaked, "\n\n"))
	}
	for i, c := range clients {
		if b, _ := io.ReadAll(c); strings.Contains(string(b), " 200 ") || protocols[i] == "socks5" && len(b) > 2 && b[3] == socksSucceeded {
			t.Errorf("%s: went through after Close: %q", protocols[i], b)
		}
	}
}

// TestAskConcurrent: connections asking at once, about the same host and
// port and about another, each get their own call, and neither blocks
// the other nor the proxy: all three are pending together, Stats answers
// and a listed host goes through meanwhile; once released, all go
// through.
func TestAskConcurrent(t *testing.T) {
	_, port := originServer(t, "from the origin")
	_, listedPort := originServer(t, "listed")
	a, release := heldAsker(Verdict{Allow: true})
	p, proxyAddr := startProxy(t, Config{Allow: allow(t, fmt.Sprintf("127.0.0.1:%d", listedPort)), Resolver: resolverFor("other.test=192.0.2.7"),
		Dial: func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			if addr.Addr().String() == "192.0.2.7" {
				return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
			}
			return d.DialContext(ctx, network, addr.String())
		},
		Ask: a.ask})

	type fetch struct{ proto, host string }
	fetches := []fetch{{"connect", "127.0.0.1"}, {"socks5", "127.0.0.1"}, {"http", "other.test"}}
	got := make(chan outcome, len(fetches))
	var wg sync.WaitGroup
	for _, f := range fetches {
		wg.Go(func() { got <- fetchAsync(t, f.proto, proxyAddr, f.host, port) })
	}
	var entered []string
	for range fetches {
		entered = append(entered, <-a.entered)
	}
	p.Stats() // takes the proxy's lock: no ask holds it
	wantThrough(t, "http", fetchVia(t, "http", proxyAddr, "127.0.0.1", listedPort), "listed")
	close(release)
	wg.Wait()
	for range fetches {
		if o := <-got; o.body != "from the origin" {
			t.Errorf("a released fetch saw %+v", o)
		}
	}
	hp, other := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("other.test:%d", port)
	if diff := cmp.Diff([]string{hp, hp, other}, a.asked(), cmpopts.SortSlices(func(x, y string) bool { return x < y })); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
}
