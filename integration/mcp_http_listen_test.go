package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPHTTPStartRefusals: a command line the listener must not serve
// is refused before it listens, exit 2, with a message that says why.
func TestMCPHTTPStartRefusals(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	open := filepath.Join(dir, "open-token")
	if err := os.WriteFile(open, []byte(strings.Repeat("a", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"off loopback without TLS", []string{"mcp", "--http", "0.0.0.0:0", "--http-token-file", token}, "tls"},
		{"no auth", []string{"mcp", "--http", "127.0.0.1:0"}, "--http-token-file"},
		{"no auth off loopback", []string{"mcp", "--http", "0.0.0.0:0", "--http-no-auth", "--tls-cert", "c", "--tls-key", "k"}, "loopback"},
		{"two ways to authenticate", []string{"mcp", "--http", "127.0.0.1:0", "--http-no-auth", "--http-token-file", token}, "only one"},
		{"an http issuer off loopback", []string{"mcp", "--http", "127.0.0.1:0", "--oauth-issuer", "http://issuer.example", "--oauth-audience", "a"}, "issuer"},
		{"an issuer without an audience", []string{"mcp", "--http", "127.0.0.1:0", "--oauth-issuer", "https://issuer.example"}, "--oauth-audience"},
		{"a token file others can read", []string{"mcp", "--http", "127.0.0.1:0", "--http-token-file", open}, "600"},
		{"--http without mcp", []string{"--http", "127.0.0.1:0", "--http-no-auth"}, "toolhost mcp --http"},
		{"an HTTP flag without --http", []string{"mcp", "--http-no-auth"}, "--http"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, append(c.args, "--root", dir)...)
			cmd.Env = quickExitEnv()
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2: %s", err, out)
			}
			if !strings.Contains(strings.ToLower(string(out)), strings.ToLower(c.want)) {
				t.Errorf("the refusal %q does not say %q", out, c.want)
			}
		})
	}
	if _, err := os.Stat(token); err == nil {
		t.Errorf("a refused command line made the token file")
	}
}

// TestMCPHTTPTLS serves over TLS with a certificate of the test's: the Go
// SDK's client, trusting it, runs a tool.
func TestMCPHTTPTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	h := startHTTPMCP(t, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(h.endpoint, "https://") {
		t.Fatalf("endpoint %s, want https", h.endpoint)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	c := sdk.NewClient(&sdk.Implementation{Name: "tls", Version: "1"}, nil)
	ctx, cancel := limit()
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token: h.token, base: tr}}, MaxRetries: -1},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting over TLS: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": []string{"echo", "over tls"}}})
	if err != nil || res.IsError || !strings.Contains(text(res), "over tls") {
		t.Fatalf("run_command over TLS: %v %v", err, res)
	}
	// Plain HTTP to the TLS listener is not served.
	u, _ := url.Parse(h.endpoint)
	resp, err := http.Post("http://"+u.Host+"/mcp", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS listener: %s", resp.Status)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir,
// and returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolhost test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestMCPHTTPIdleConnections opens 1,000 connections that send nothing:
// a client that does is still served, and the server goes on.
func TestMCPHTTPIdleConnections(t *testing.T) {
	h := startHTTPMCP(t)
	u, err := url.Parse(h.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		idle = append(idle, c)
	}
	s := h.connect("", nil, "2025-11-25")
	res := s.call("run_command", map[string]any{"argv": []string{"echo", "still served"}})
	if res.IsError || !strings.Contains(text(res), "still served") {
		t.Errorf("run_command beside 1,000 idle connections: %s", text(res))
	}
}

// TestMCPHTTPSessionTimeoutAndCap: without auth on loopback, a session
// idle past --http-session-timeout is closed (its id is then 404), and a
// principal's requests in flight past --http-max-concurrent are 429.
func TestMCPHTTPSessionTimeoutAndCap(t *testing.T) {
	h := startHTTPMCP(t, "--http-no-auth", "--http-session-timeout", "300ms", "--http-max-concurrent", "1", "--log-level", "debug")
	r := h.openRaw("")
	// The session's end is logged: that is the event waited for.
	ctx, cancel := limit()
	defer cancel()
	for !strings.Contains(h.stderr.String(), "an MCP HTTP session ended") {
		select {
		case <-h.logged:
		case <-ctx.Done():
			t.Fatalf("the idle session was not closed: %s", h.stderr.String())
		}
	}
	if resp, body := r.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a request of the timed-out session: %s %s, want 404", resp.Status, body)
	}

	// The cap: a standing GET stream is the one request in flight.
	s := h.openRaw("")
	get, err := http.NewRequest(http.MethodGet, h.endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", s.id)
	get.Header.Set("MCP-Protocol-Version", s.version)
	resp, err := http.DefaultClient.Do(get.WithContext(ctx))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the GET stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	busy, body := s.post(map[string]any{"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
	if busy.StatusCode != http.StatusTooManyRequests || busy.Header.Get("Retry-After") == "" {
		t.Errorf("a second request in flight: %s %s, want 429 with Retry-After", busy.Status, body)
	}
}
