package httpgate_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/httpgate"
)

func TestCheckListen(t *testing.T) {
	for _, test := range []struct {
		addr   string
		tls    bool
		noAuth bool
		issuer string
		want   string // "" for no error, else in the error
	}{
		{"127.0.0.1:8080", false, false, "", ""},
		{"[::1]:8080", false, false, "", ""},
		{"localhost:8080", false, false, "", ""},
		{"127.0.0.1:8080", false, true, "", ""},
		{"localhost:0", false, true, "http://127.0.0.1:9000", ""},
		{"localhost:0", false, false, "http://localhost:9000/realm", ""},
		{"0.0.0.0:8443", true, false, "https://issuer.example", ""},
		{"host.example:8443", true, false, "", ""},

		{"0.0.0.0:8080", false, false, "", "not a loopback address: serving it needs --tls-cert and --tls-key"},
		{":8080", false, false, "", "not a loopback address"},
		{"192.168.1.2:8080", false, false, "", "not a loopback address"},
		{"localhost.example:8080", false, false, "", "not a loopback address"},
		{"[::]:8443", true, true, "", "--http-no-auth is allowed only on a loopback address"},
		{"127.0.0.1:8080", false, false, "http://issuer.example", "http:// off loopback"},
		{"127.0.0.1:8080", false, false, "http://10.0.0.1:9000", "http:// off loopback"},
		{"127.0.0.1:8080", false, false, "ftp://127.0.0.1", "scheme must be https"},
		{"127.0.0.1", false, false, "", "want host:port"},
	} {
		err := httpgate.CheckListen(test.addr, test.tls, test.noAuth, test.issuer)
		switch {
		case test.want == "" && err != nil:
			t.Errorf("CheckListen(%q, %v, %v, %q): %v, want nil", test.addr, test.tls, test.noAuth, test.issuer, err)
		case test.want != "" && (err == nil || !strings.Contains(err.Error(), test.want)):
			t.Errorf("CheckListen(%q, %v, %v, %q): %v, want an error saying %q", test.addr, test.tls, test.noAuth, test.issuer, err, test.want)
		}
	}
}

// countingListener counts its open connections and remembers the most.
type countingListener struct {
	net.Listener
	mu        sync.Mutex
	open, max int // guarded by mu
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.open++
	l.max = max(l.max, l.open)
	l.mu.Unlock()
	return &countedConn{Conn: c, l: l}, nil
}

func (l *countingListener) most() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max
}

type countedConn struct {
	net.Conn
	once sync.Once
	l    *countingListener
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return err
}

// TestIdleConnections opens 1,000 connections that send nothing, then
// checks that the server never holds more than the limit open, that it
// closes them once the header timeout passes, and that a real request
// sent behind them is served.
func TestIdleConnections(t *testing.T) {
	const (
		idle  = 1000
		limit = 100
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingListener{Listener: ln}
	g, err := httpgate.New(httpgate.Config{Addr: ln.Addr().String(), Auth: httpgate.NoAuth()}, whoami)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpgate.Server(g, nil)
	srv.ReadHeaderTimeout = 100 * time.Millisecond // ReadHeaderTimeout is 10 s: too long to wait for here
	var wg sync.WaitGroup                          // owns Serve
	wg.Go(func() {
		if err := srv.Serve(httpgate.LimitListener(counting, limit)); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	defer wg.Wait()
	defer srv.Close()

	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}

	// The timeouts turn a server that never serves into a failure, not a hang.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	got := get2(t, client, "http://"+ln.Addr().String()+"/mcp")
	if got != "anonymous -" {
		t.Errorf("real request: body %q, want %q", got, "anonymous -")
	}

	// Every idle connection is closed by the server (the read ends).
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if n, err := c.Read(make([]byte, 512)); err == nil {
			// A 408 response before the close is fine; then the end.
			if _, err = io.ReadAll(c); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("idle connection %d: read %d bytes, then %v", i, n, err)
			}
		}
	}
	if m := counting.most(); m > limit {
		t.Errorf("the server held %d connections open at once, want at most %d", m, limit)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// get2 GETs url with client and returns the body of a 200 response.
func get2(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d (%s)", url, resp.StatusCode, body)
	}
	return string(body)
}
