package httpgate_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/toolhost/toolhost/httpgate"
	"github.com/toolhost/toolhost/httpgate/gatetest"
)

// whoami is the handler behind the gate in tests: it answers with the
// principal and the SDK's TokenInfo.UserID it finds in the context.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	uid := "-"
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		uid = ti.UserID
	}
	fmt.Fprintf(w, "%s %s", httpgate.PrincipalOf(r.Context()), uid)
})

// serve starts a loopback server whose gate is made from cfg (with
// cfg.Addr set to the listener's) in front of next. build, if not nil,
// completes cfg once the server's URL is known.
func serve(t *testing.T, cfg httpgate.Config, next http.Handler, build func(url string, cfg *httpgate.Config)) (*httptest.Server, *httpgate.Gate) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg.Addr = srv.Listener.Addr().String()
	if build != nil {
		build("http://"+cfg.Addr, &cfg)
	}
	g, err := httpgate.New(cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, g
}

// response is what a test looks at in an HTTP response.
type response struct {
	Status          int
	WWWAuthenticate string
	RetryAfter      string
	Body            string
}

// get sends a GET to url with the Host and headers given ("" host: the
// URL's), and returns the response.
func get(t *testing.T, url, host string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{
		Status:          resp.StatusCode,
		WWWAuthenticate: resp.Header.Get("WWW-Authenticate"),
		RetryAfter:      resp.Header.Get("Retry-After"),
		Body:            strings.TrimSpace(string(body)),
	}
}

func port(t *testing.T, srv *httptest.Server) string {
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHostAndOrigin(t *testing.T) {
	cfg := httpgate.Config{
		Auth:         httpgate.NoAuth(),
		AllowHosts:   []string{"Tunnel.Example", "named.example:443", "[fd00::1]"},
		AllowOrigins: []string{"https://APP.example:443", "http://localhost:5173"},
	}
	srv, _ := serve(t, cfg, whoami, nil)
	p := port(t, srv)
	const ok, forbidden = http.StatusOK, http.StatusForbidden
	for _, test := range []struct {
		name   string
		host   string
		origin string // "" for none
		want   int
	}{
		{"own IP", "127.0.0.1:" + p, "", ok},
		{"localhost", "localhost:" + p, "", ok},
		{"localhost in capitals with a dot", "LOCALHOST.:" + p, "", ok},
		{"IPv6 loopback", "[::1]:" + p, "", ok},
		{"rebinding name", "attacker.example:" + p, "", forbidden},
		{"rebinding name without port", "attacker.example", "", forbidden},
		{"own name on another port", "localhost:1", "", forbidden},
		{"own name without the port", "localhost", "", forbidden},
		{"loopback of another kind", "127.0.0.2:" + p, "", forbidden},
		{"junk", "local host:" + p, "", forbidden},
		{"allowed name, any port", "tunnel.example:8443", "", ok},
		{"allowed name, no port", "tunnel.example", "", ok},
		{"allowed name and port", "named.example:443", "", ok},
		{"allowed name, default port omitted", "named.example", "", forbidden}, // the listener is http: 80 is default
		{"allowed name, other port", "named.example:444", "", forbidden},
		{"allowed IPv6, any port", "[fd00::1]:99", "", ok},
		{"allowed origin", "127.0.0.1:" + p, "https://app.example", ok},
		{"allowed origin, port spelled", "127.0.0.1:" + p, "https://app.example:443", ok},
		{"allowed origin with port", "127.0.0.1:" + p, "http://localhost:5173", ok},
		{"foreign origin", "127.0.0.1:" + p, "https://attacker.example", forbidden},
		{"origin equal to host", "127.0.0.1:" + p, "http://127.0.0.1:" + p, forbidden},
		{"rebinding origin equal to host", "attacker.example:" + p, "http://attacker.example:" + p, forbidden},
		{"allowed origin, other scheme", "127.0.0.1:" + p, "http://app.example", forbidden},
		{"allowed origin, other port", "127.0.0.1:" + p, "http://localhost:5174", forbidden},
		{"null origin", "127.0.0.1:" + p, "null", forbidden},
		{"origin with a path", "127.0.0.1:" + p, "https://app.example/x", forbidden},
	} {
		t.Run(test.name, func(t *testing.T) {
			var h []string
			if test.origin != "" {
				h = []string{"Origin", test.origin}
			}
			got := get(t, srv.URL+"/mcp", test.host, h...)
			if got.Status != test.want {
				t.Fatalf("Host %q Origin %q: status %d (%s), want %d", test.host, test.origin, got.Status, got.Body, test.want)
			}
			if test.want == ok && got.Body != "anonymous -" {
				t.Errorf("body %q, want %q", got.Body, "anonymous -")
			}
		})
	}

	t.Run("two origins", func(t *testing.T) {
		got := get(t, srv.URL, "", "Origin", "https://app.example", "Origin", "https://attacker.example")
		if got.Status != forbidden {
			t.Errorf("status %d, want %d", got.Status, forbidden)
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []httpgate.Config{
		{Addr: "127.0.0.1:8080"}, // no Auth
		{Addr: "127.0.0.1", Auth: httpgate.NoAuth()},
		{Addr: "127.0.0.1:0", Auth: httpgate.NoAuth()},
		{Addr: "127.0.0.1:8080", Auth: httpgate.NoAuth(), AllowHosts: []string{"a.example:x"}},
		{Addr: "127.0.0.1:8080", Auth: httpgate.NoAuth(), AllowHosts: []string{"::1"}},
		{Addr: "127.0.0.1:8080", Auth: httpgate.NoAuth(), AllowOrigins: []string{"app.example"}},
		{Addr: "127.0.0.1:8080", Auth: httpgate.NoAuth(), AllowOrigins: []string{"https://app.example/path"}},
	} {
		if _, err := httpgate.New(cfg, whoami); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestConcurrencyCap(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	entered := make(chan string)
	release := make(chan struct{})
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- httpgate.PrincipalOf(r.Context())
			<-release
		}
		whoami(w, r)
	})
	var resource string
	srv, _ := serve(t, httpgate.Config{MaxConcurrent: 2}, held, func(url string, cfg *httpgate.Config) {
		resource = url + "/mcp"
		cfg.Auth = newOAuth(t, iss, resource)
	})
	alice := "Bearer " + iss.Token(t, iss.Claims("alice", resource))
	bob := "Bearer " + iss.Token(t, iss.Claims("bob", resource))

	var wg sync.WaitGroup // owns the held requests
	defer wg.Wait()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	for range 2 {
		wg.Go(func() {
			if got := get(t, srv.URL+"/hold", "", "Authorization", alice); got.Status != http.StatusOK {
				t.Errorf("held request: status %d (%s)", got.Status, got.Body)
			}
		})
	}
	for range 2 {
		if p := <-entered; p != "alice" {
			t.Fatalf("held request of %q, want alice", p)
		}
	}

	got := get(t, srv.URL+"/mcp", "", "Authorization", alice)
	want := response{Status: http.StatusTooManyRequests, RetryAfter: "1", Body: "too many concurrent requests: at most 2 per principal"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alice's third request: mismatch (-want +got):\n%s", diff)
	}
	got = get(t, srv.URL+"/mcp", "", "Authorization", bob)
	if want := (response{Status: http.StatusOK, Body: "bob bob"}); !cmp.Equal(want, got) {
		t.Errorf("bob's request: mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}

	close(release)
	released = true
	wg.Wait()
	got = get(t, srv.URL+"/mcp", "", "Authorization", alice)
	if want := (response{Status: http.StatusOK, Body: "alice alice"}); !cmp.Equal(want, got) {
		t.Errorf("alice's request after the held ones ended: mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// TestCapHeldByHijack: a handler that takes its connection (Hijack, as a
// parked event stream does) takes its request's slot with it: the
// principal's cap counts it until that connection is closed.
func TestCapHeldByHijack(t *testing.T) {
	taken := make(chan net.Conn, 1)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/park" {
			whoami(w, r)
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack through the gate: %v", err)
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nparked")
		taken <- c
	})
	srv, _ := serve(t, httpgate.Config{Auth: httpgate.NoAuth(), MaxConcurrent: 1}, next, nil)
	if got := get(t, srv.URL+"/park", ""); got.Status != http.StatusOK || got.Body != "parked" {
		t.Fatalf("the parked request: %+v", got)
	}
	c := <-taken
	got := get(t, srv.URL+"/mcp", "")
	want := response{Status: http.StatusTooManyRequests, RetryAfter: "1", Body: "too many concurrent requests: at most 1 per principal"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a request beside the taken connection: mismatch (-want +got):\n%s", diff)
	}
	c.Close()
	got = get(t, srv.URL+"/mcp", "")
	if want := (response{Status: http.StatusOK, Body: "anonymous -"}); !cmp.Equal(want, got) {
		t.Errorf("a request once it was closed: mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// newOAuth returns an OAuth authenticator for iss with audience and
// resource both resource.
func newOAuth(t *testing.T, iss *gatetest.Issuer, resource string) *httpgate.OAuth {
	t.Helper()
	o, err := httpgate.NewOAuth(context.Background(), httpgate.OAuthConfig{
		Issuer:     iss.URL,
		Audience:   resource,
		Resource:   resource,
		HTTPClient: iss.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// logBuffer is a slog destination that tests read after the requests.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder // guarded by mu
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
