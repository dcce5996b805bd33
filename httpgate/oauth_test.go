package httpgate_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolhost/toolhost/httpgate"
	"github.com/toolhost/toolhost/httpgate/gatetest"
)

// oauthServer starts a gate in OAuth mode in front of whoami, and returns
// its URL, the resource (its /mcp URL) and the authenticator.
func oauthServer(t *testing.T, iss *gatetest.Issuer) (url, resource string, o *httpgate.OAuth) {
	return oauthServerLog(t, iss, nil)
}

func oauthServerLog(t *testing.T, iss *gatetest.Issuer, log *slog.Logger) (url, resource string, o *httpgate.OAuth) {
	srv, _ := serve(t, httpgate.Config{Log: log}, whoami, func(url string, cfg *httpgate.Config) {
		resource = url + "/mcp"
		o = newOAuth(t, iss, resource)
		cfg.Auth = o
	})
	return srv.URL, resource, o
}

// with returns a copy of claims changed by kv (key, value, ...); a nil
// value deletes the key.
func with(claims map[string]any, kv ...any) map[string]any {
	c := make(map[string]any)
	for k, v := range claims {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

func TestOAuth(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	var log logBuffer
	url, resource, o := oauthServerLog(t, iss, log.logger())
	var tokens []string
	defer func() {
		l := log.String()
		for _, tok := range tokens {
			parts := strings.Split(tok, ".")
			sig := parts[len(parts)-1]
			if strings.Contains(l, tok) || len(sig) >= 16 && strings.Contains(l, sig) {
				t.Errorf("the log shows a token (or its signature)")
			}
		}
	}()
	now := time.Now()
	good := iss.Claims("alice", resource)
	metadata := url + "/.well-known/oauth-protected-resource/mcp"

	for _, test := range []struct {
		name  string
		token func() string
		want  error // nil: accepted as alice
	}{
		{"RS256", func() string { return iss.Token(t, good) }, nil},
		{"ES256", func() string { return iss.Token(t, good, gatetest.ES256()) }, nil},
		{"no kid, RS256", func() string { return iss.Token(t, good, gatetest.NoKid()) }, nil},
		{"no kid, ES256", func() string { return iss.Token(t, good, gatetest.ES256(), gatetest.NoKid()) }, nil},
		{"aud an array", func() string { return iss.Token(t, with(good, "aud", []string{"other", resource})) }, nil},
		{"aud with a trailing slash", func() string { return iss.Token(t, with(good, "aud", resource+"/")) }, nil},
		{"expired within the skew", func() string { return iss.Token(t, with(good, "exp", now.Add(-30*time.Second).Unix())) }, nil},
		{"nbf within the skew", func() string { return iss.Token(t, with(good, "nbf", now.Add(30*time.Second).Unix())) }, nil},
		{"nbf past", func() string { return iss.Token(t, with(good, "nbf", now.Add(-time.Hour).Unix())) }, nil},

		{"expired", func() string { return iss.Token(t, with(good, "exp", now.Add(-2*time.Minute).Unix())) }, httpgate.ErrExpired},
		{"expired, ES256", func() string { return iss.Expired(t, "alice", resource, gatetest.ES256()) }, httpgate.ErrExpired},
		{"nbf beyond the skew", func() string { return iss.Token(t, with(good, "nbf", now.Add(2*time.Minute).Unix())) }, httpgate.ErrExpired},
		{"no exp", func() string { return iss.Token(t, with(good, "exp", nil)) }, httpgate.ErrBadToken},
		{"exp not a number", func() string { return iss.Token(t, with(good, "exp", "tomorrow")) }, httpgate.ErrBadToken},
		{"wrong aud", func() string { return iss.WrongAudience(t, "alice") }, httpgate.ErrAudience},
		{"wrong aud, ES256", func() string { return iss.WrongAudience(t, "alice", gatetest.ES256()) }, httpgate.ErrAudience},
		{"no aud", func() string { return iss.Token(t, with(good, "aud", nil)) }, httpgate.ErrAudience},
		{"wrong iss", func() string { return iss.Token(t, with(good, "iss", "https://evil.example")) }, httpgate.ErrIssuer},
		{"no sub", func() string { return iss.Token(t, with(good, "sub", nil)) }, httpgate.ErrBadToken},
		{"empty sub", func() string { return iss.Token(t, with(good, "sub", "")) }, httpgate.ErrBadToken},
		{"key not in the JWKS, RS256", func() string { return iss.Token(t, good, gatetest.Stranger()) }, httpgate.ErrSignature},
		{"key not in the JWKS, ES256", func() string { return iss.Token(t, good, gatetest.ES256(), gatetest.Stranger()) }, httpgate.ErrSignature},
		{"key not in the JWKS, no kid", func() string { return iss.Token(t, good, gatetest.Stranger(), gatetest.NoKid()) }, httpgate.ErrSignature},
		{"claims changed after signing", func() string {
			parts := strings.Split(iss.Token(t, good), ".")
			other := strings.Split(iss.Token(t, with(good, "sub", "mallory")), ".")
			return parts[0] + "." + other[1] + "." + parts[2]
		}, httpgate.ErrSignature},
		{"alg none", func() string { return iss.AlgNone(t, good) }, httpgate.ErrAlgorithm},
		{"HS256 keyed with the public key", func() string { return iss.HS256WithPublicKey(t, good) }, httpgate.ErrAlgorithm},
		{"RS384", func() string { return iss.Token(t, good, gatetest.HeaderAlg("RS384")) }, httpgate.ErrAlgorithm},
		{"ES256 alg with the RSA key's kid", func() string { return iss.Token(t, good, gatetest.HeaderAlg("ES256")) }, httpgate.ErrAlgorithm},
		{"not a JWT", func() string { return "abc.def" }, httpgate.ErrBadToken},
		{"not base64", func() string { return "a!b.c.d" }, httpgate.ErrBadToken},
	} {
		t.Run(test.name, func(t *testing.T) {
			tok := test.token()
			tokens = append(tokens, tok)
			got := get(t, url+"/mcp", "", "Authorization", "Bearer "+tok)
			var want response
			if test.want == nil {
				want = response{Status: http.StatusOK, Body: "alice alice"}
			} else {
				want = response{
					Status:          http.StatusUnauthorized,
					WWWAuthenticate: fmt.Sprintf(`Bearer realm="toolhost", error="invalid_token", error_description=%q, resource_metadata=%q`, test.want.Error(), metadata),
					Body:            "unauthorized: " + test.want.Error(),
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Body, tok) {
				t.Errorf("the body echoes the token")
			}

			r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			ti, err := o.Authenticate(r)
			if test.want == nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if ti.UserID != "alice" || ti.Expiration.IsZero() {
					t.Errorf("Authenticate = %+v, want UserID alice and an Expiration", ti)
				}
				return
			}
			if !errors.Is(err, test.want) {
				t.Errorf("Authenticate: %v, want an error wrapping %v", err, test.want)
			}
			if err != nil && strings.Contains(err.Error(), tok) {
				t.Errorf("Authenticate's error shows the token")
			}
		})
	}

	t.Run("no token", func(t *testing.T) {
		got := get(t, url+"/mcp", "")
		want := response{
			Status:          http.StatusUnauthorized,
			WWWAuthenticate: fmt.Sprintf(`Bearer realm="toolhost", resource_metadata=%q`, metadata),
			Body:            "unauthorized: no bearer token",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("scopes", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+iss.Token(t, with(good, "scope", "read write")))
		ti, err := o.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"read", "write"}, ti.Scopes); diff != "" {
			t.Errorf("scopes: mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestOAuthKeyRotation(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	url, resource, _ := oauthServer(t, iss)
	if n := iss.JWKSFetches(); n != 1 {
		t.Fatalf("JWKS fetched %d times at start, want 1", n)
	}
	rotated := iss.Rotate(t)
	got := get(t, url+"/mcp", "", "Authorization", "Bearer "+iss.Token(t, iss.Claims("carol", resource), rotated))
	if want := (response{Status: http.StatusOK, Body: "carol carol"}); !cmp.Equal(want, got) {
		t.Errorf("token of the rotated key: mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}
	if n := iss.JWKSFetches(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (once more for the new kid)", n)
	}
	// The old keys still work, without a fetch.
	got = get(t, url+"/mcp", "", "Authorization", "Bearer "+iss.Token(t, iss.Claims("carol", resource)))
	if got.Status != http.StatusOK {
		t.Errorf("token of the first key after the rotation: %+v", got)
	}
	if n := iss.JWKSFetches(); n != 2 {
		t.Errorf("JWKS fetched %d times, want still 2", n)
	}
}

func TestOAuthUnknownKidFlood(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	url, resource, _ := oauthServer(t, iss)
	claims := iss.Claims("mallory", resource)
	for i := range 20 {
		tok := iss.Token(t, claims, gatetest.Kid(fmt.Sprintf("made-up-%d", i)))
		got := get(t, url+"/mcp", "", "Authorization", "Bearer "+tok)
		if got.Status != http.StatusUnauthorized || got.Body != "unauthorized: "+httpgate.ErrSignature.Error() {
			t.Fatalf("made-up kid %d: %+v, want 401 for the signature", i, got)
		}
	}
	// One fetch at start, one for the first made-up kid, none for the rest
	// within JWKSRefetchInterval.
	if n := iss.JWKSFetches(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2", n)
	}
	// A key published after that refetch waits for the interval.
	opt, publish := iss.Unpublished(t)
	publish()
	got := get(t, url+"/mcp", "", "Authorization", "Bearer "+iss.Token(t, claims, opt))
	if got.Status != http.StatusUnauthorized {
		t.Errorf("new kid within the refetch interval: status %d, want 401", got.Status)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	url, resource, o := oauthServer(t, iss)
	if want := url + "/.well-known/oauth-protected-resource/mcp"; o.MetadataURL() != want {
		t.Errorf("MetadataURL() = %q, want %q", o.MetadataURL(), want)
	}
	want := oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{iss.URL},
		BearerMethodsSupported: []string{"header"},
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		var got oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", path, resp.StatusCode)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s: mismatch (-want +got):\n%s", path, diff)
		}
		// The Host check comes first, even here.
		if got := get(t, url+path, "attacker.example"); got.Status != http.StatusForbidden {
			t.Errorf("GET %s with a rebinding Host: status %d, want 403", path, got.Status)
		}
	}
}

func TestNewOAuthRefuses(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	// A server whose metadata names another issuer.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-authorization-server" {
			fmt.Fprintf(w, `{"issuer": %q, "jwks_uri": %q}`, iss.URL, iss.URL+"/jwks")
			return
		}
		http.NotFound(w, r)
	}))
	defer liar.Close()
	// A server with no metadata at all.
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	// A server whose JWKS holds only a short RSA key and an HMAC key.
	short, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	var weak *httptest.Server
	weak = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration": // only the OpenID path
			fmt.Fprintf(w, `{"issuer": %q, "jwks_uri": %q}`, weak.URL, weak.URL+"/jwks")
		case "/jwks":
			fmt.Fprintf(w, `{"keys": [{"kty": "RSA", "kid": "short", "n": %q, "e": "AQAB"}, {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"}]}`,
				base64.RawURLEncoding.EncodeToString(short.N.Bytes()))
		default:
			http.NotFound(w, r)
		}
	}))
	defer weak.Close()

	for _, test := range []struct {
		name string
		cfg  httpgate.OAuthConfig
		want string // in the error
	}{
		{"http issuer off loopback", httpgate.OAuthConfig{Issuer: "http://issuer.example", Audience: "a", Resource: "https://h/mcp"}, "http:// off loopback"},
		{"issuer not a URL", httpgate.OAuthConfig{Issuer: "issuer.example", Audience: "a", Resource: "https://h/mcp"}, "not a URL"},
		{"no audience", httpgate.OAuthConfig{Issuer: iss.URL, Resource: "https://h/mcp"}, "no audience"},
		{"no resource", httpgate.OAuthConfig{Issuer: iss.URL, Audience: "a"}, "resource"},
		{"metadata of another issuer", httpgate.OAuthConfig{Issuer: liar.URL, Audience: "a", Resource: "https://h/mcp"}, "names issuer"},
		{"no metadata", httpgate.OAuthConfig{Issuer: empty.URL, Audience: "a", Resource: "https://h/mcp"}, "no issuer metadata"},
		{"no usable key", httpgate.OAuthConfig{Issuer: weak.URL, Audience: "a", Resource: "https://h/mcp"}, "no RS256 or ES256 key"},
	} {
		t.Run(test.name, func(t *testing.T) {
			o, err := httpgate.NewOAuth(context.Background(), test.cfg)
			if err == nil {
				t.Fatalf("NewOAuth succeeded (%v), want an error", o)
			}
			if !strings.Contains(err.Error(), test.want) {
				t.Errorf("NewOAuth: %v, want an error saying %q", err, test.want)
			}
		})
	}
}

func TestOAuthIssuerDown(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	url, resource, o := oauthServer(t, iss)
	claims := iss.Claims("dave", resource)
	iss.Close()

	// Cached keys still verify.
	got := get(t, url+"/mcp", "", "Authorization", "Bearer "+iss.Token(t, claims))
	if want := (response{Status: http.StatusOK, Body: "dave dave"}); !cmp.Equal(want, got) {
		t.Errorf("known kid with the issuer down: mismatch (-want +got):\n%s", cmp.Diff(want, got))
	}
	// An unknown kid cannot be checked: 503, not 401.
	tok := iss.Token(t, claims, gatetest.Kid("new"))
	got = get(t, url+"/mcp", "", "Authorization", "Bearer "+tok)
	want := response{Status: http.StatusServiceUnavailable, RetryAfter: "10", Body: "service unavailable: " + httpgate.ErrUnavailable.Error()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unknown kid with the issuer down: mismatch (-want +got):\n%s", diff)
	}
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+iss.Token(t, claims, gatetest.Kid("newer")))
	if _, err := o.Authenticate(r); !errors.Is(err, httpgate.ErrSignature) {
		// Within the refetch interval no fetch is tried: the kid is
		// simply unknown.
		t.Errorf("second unknown kid: %v, want an error wrapping %v", err, httpgate.ErrSignature)
	}
}
