package httpgate_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolhost/toolhost/httpgate"
)

func TestTokenFileCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "dir")
	path := filepath.Join(dir, "http-token")
	tok, err := httpgate.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("token file mode %04o, want 0600", got)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got != 0o700 {
		t.Errorf("token directory mode %04o, want 0700", got)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(data) {
		t.Errorf("token file holds %d bytes, not 64 hex digits and a newline", len(data))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the token file (no temporary file left)", len(entries))
	}
	secret := strings.TrimSpace(string(data))

	// The token is accepted; loading the file again gives the same token.
	again, err := httpgate.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*httpgate.Token{tok, again} {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		if ti, err := a.Authenticate(r); err != nil || ti.UserID != httpgate.TokenPrincipal {
			t.Errorf("Authenticate with the file's token = %v, %v; want principal %q", ti, err, httpgate.TokenPrincipal)
		}
	}

	// Printing the Token never shows the secret.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if s := fmt.Sprintf(verb, tok); strings.Contains(s, secret) || strings.Contains(s, fmt.Sprintf("%x", secret)) {
			t.Errorf("Sprintf(%q, token) shows the token", verb)
		}
	}
}

func TestTokenFileRefused(t *testing.T) {
	good := strings.Repeat("ab", 16) // 32 characters
	for _, test := range []struct {
		name     string
		data     string
		mode     os.FileMode
		wantErrs []string // substrings of the error
	}{
		{"readable by others", good + "\n", 0o644, []string{"0644", "chmod 600"}},
		{"writable by group", good + "\n", 0o620, []string{"0620", "chmod 600"}},
		{"empty", "", 0o600, []string{"0 characters", "at least 32"}},
		{"short", strings.Repeat("a", 31) + "\n", 0o600, []string{"31 characters", "at least 32"}},
		{"white space inside", good + " x\n", 0o600, []string{"white space"}},
	} {
		t.Run(test.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "http-token")
			if err := os.WriteFile(path, []byte(test.data), test.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, test.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			tok, err := httpgate.LoadOrCreateToken(path)
			if err == nil {
				t.Fatalf("LoadOrCreateToken succeeded (%v), want an error", tok)
			}
			for _, want := range test.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if test.data != "" && strings.Contains(err.Error(), strings.TrimSpace(test.data)) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

func TestTokenFileTrimmed(t *testing.T) {
	secret := strings.Repeat("Zz", 20)
	path := filepath.Join(t.TempDir(), "http-token")
	if err := os.WriteFile(path, []byte(secret+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := httpgate.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	if _, err := tok.Authenticate(r); err != nil {
		t.Errorf("Authenticate with the trimmed token: %v", err)
	}
}

func TestTokenAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "http-token")
	tok, err := httpgate.LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(data))
	var log logBuffer
	srv, _ := serve(t, httpgate.Config{Auth: tok, Log: log.logger()}, whoami, nil)

	const noToken = `Bearer realm="toolhost"`
	const invalid = `Bearer realm="toolhost", error="invalid_token", error_description="invalid token"`
	wrong := strings.Repeat("0", 64)
	for _, test := range []struct {
		name   string
		header []string
		host   string
		want   response
		err    error // of Authenticate
	}{
		{"no token", nil, "", response{Status: 401, WWWAuthenticate: noToken, Body: "unauthorized: no bearer token"}, httpgate.ErrNoToken},
		{"other scheme", []string{"Authorization", "Basic " + secret}, "", response{Status: 401, WWWAuthenticate: noToken, Body: "unauthorized: no bearer token"}, httpgate.ErrNoToken},
		{"wrong token", []string{"Authorization", "Bearer " + wrong}, "", response{Status: 401, WWWAuthenticate: invalid, Body: "unauthorized: invalid token"}, httpgate.ErrBadToken},
		{"token with a suffix", []string{"Authorization", "Bearer " + secret + "0"}, "", response{Status: 401, WWWAuthenticate: invalid, Body: "unauthorized: invalid token"}, httpgate.ErrBadToken},
		{"two tokens", []string{"Authorization", "Bearer " + secret + " " + secret}, "", response{Status: 401, WWWAuthenticate: invalid, Body: "unauthorized: invalid token"}, httpgate.ErrBadToken},
		{"right token", []string{"Authorization", "Bearer " + secret}, "", response{Status: 200, Body: "token token"}, nil},
		{"scheme in lower case", []string{"Authorization", "bearer " + secret}, "", response{Status: 200, Body: "token token"}, nil},
		{"right token, rebinding Host", []string{"Authorization", "Bearer " + secret}, "attacker.example", response{
			Status: 403, Body: "forbidden: Host is not this server's; add it with --http-allow-host if it should be"}, nil},
	} {
		t.Run(test.name, func(t *testing.T) {
			got := get(t, srv.URL+"/mcp", test.host, test.header...)
			if diff := cmp.Diff(test.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Body+got.WWWAuthenticate, secret) || strings.Contains(got.Body+got.WWWAuthenticate, wrong) {
				t.Errorf("the response echoes a token")
			}
			if test.host != "" {
				return
			}
			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			for i := 0; i+1 < len(test.header); i += 2 {
				r.Header.Add(test.header[i], test.header[i+1])
			}
			_, err := tok.Authenticate(r)
			if !errors.Is(err, test.err) || (err == nil) != (test.err == nil) {
				t.Errorf("Authenticate: %v, want %v", err, test.err)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("Authenticate's error %q shows the token", err)
			}
		})
	}

	if l := log.String(); strings.Contains(l, secret) || strings.Contains(l, wrong) {
		t.Errorf("the log shows a token:\n%s", l)
	} else if !strings.Contains(l, "refused") {
		t.Errorf("the log does not tell of the refusals:\n%s", l)
	}

	// No OAuth discovery in token mode.
	got := get(t, srv.URL+httpgate.ProtectedResourcePath, "")
	if got.Status != http.StatusUnauthorized {
		t.Errorf("GET %s in token mode: status %d, want 401", httpgate.ProtectedResourcePath, got.Status)
	}
}
