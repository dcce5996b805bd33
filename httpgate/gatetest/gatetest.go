// Package gatetest provides a tiny OAuth authorization server for tests of
// code behind an httpgate.OAuth: RFC 8414 metadata and a JWKS with an RSA
// and an EC P-256 key, served by httptest, and tokens signed with them,
// good or bad in each of the ways a gate must refuse.
package gatetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A key is a signing key of the issuer, published in its JWKS or not.
type key struct {
	kid string
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

// alg returns the JWS algorithm of k.
func (k *key) alg() string {
	if k.rsa != nil {
		return "RS256"
	}
	return "ES256"
}

// jwk returns k's public half as a JWK.
func (k *key) jwk() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	if k.rsa != nil {
		return map[string]any{
			"kty": "RSA", "kid": k.kid, "use": "sig", "alg": "RS256",
			"n": b64(k.rsa.N.Bytes()),
			"e": b64(big.NewInt(int64(k.rsa.E)).Bytes()),
		}
	}
	pub, err := k.ec.PublicKey.Bytes() // 0x04 || x || y
	if err != nil {
		panic(err)
	}
	return map[string]any{
		"kty": "EC", "kid": k.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
		"x": b64(pub[1:33]), "y": b64(pub[33:]),
	}
}

// Issuer is an OAuth authorization server on an httptest server. Its
// metadata is at /.well-known/oauth-authorization-server and
// /.well-known/openid-configuration, its JWKS at /jwks.
type Issuer struct {
	// URL is the issuer identifier: the server's URL, http on loopback.
	URL    string
	server *httptest.Server
	rsaKey *key // published, kid "rsa-1"
	ecKey  *key // published, kid "ec-1"

	mu        sync.Mutex
	published []*key // the keys in the JWKS; guarded by mu
	fetches   int    // GETs of the JWKS; guarded by mu
	rotations int    // keys added by Rotate; guarded by mu
}

// NewIssuer starts an issuer, closed when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	i := &Issuer{rsaKey: &key{kid: "rsa-1", rsa: rk}, ecKey: &key{kid: "ec-1", ec: ek}}
	i.published = []*key{i.rsaKey, i.ecKey}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                i.URL,
			"jwks_uri":                              i.URL + "/jwks",
			"authorization_endpoint":                i.URL + "/authorize",
			"token_endpoint":                        i.URL + "/token",
			"response_types_supported":              []string{"code"},
			"code_challenge_methods_supported":      []string{"S256"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	}
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", meta)
	mux.HandleFunc("GET /.well-known/openid-configuration", meta)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		i.fetches++
		keys := make([]map[string]any, len(i.published))
		for j, k := range i.published {
			keys[j] = k.jwk()
		}
		i.mu.Unlock()
		writeJSON(w, map[string]any{"keys": keys})
	})
	// The URL is set before the server serves: its handlers read it.
	i.server = httptest.NewUnstartedServer(mux)
	i.URL = "http://" + i.server.Listener.Addr().String()
	i.server.Start()
	t.Cleanup(i.server.Close)
	return i
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Client returns an HTTP client for the issuer's server.
func (i *Issuer) Client() *http.Client { return i.server.Client() }

// JWKSFetches returns how many times the JWKS has been fetched.
func (i *Issuer) JWKSFetches() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fetches
}

// Claims returns valid claims for a token for sub at aud: iss, sub, aud,
// iat now and exp in an hour.
func (i *Issuer) Claims(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": i.URL,
		"sub": sub,
		"aud": aud,
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// A TokenOption changes how Token signs.
type TokenOption func(*tokenOptions)

type tokenOptions struct {
	key      *key
	kid      *string
	alg      string // overrides the header's alg, not the signing
	stranger bool
}

// ES256 signs with the issuer's EC key instead of its RSA key.
func ES256() TokenOption { return func(o *tokenOptions) { o.key = nil } }

// Kid sets the header's kid (instead of the signing key's).
func Kid(kid string) TokenOption { return func(o *tokenOptions) { o.kid = &kid } }

// NoKid leaves kid out of the header.
func NoKid() TokenOption { return Kid("") }

// HeaderAlg writes alg in the header while signing as usual.
func HeaderAlg(alg string) TokenOption { return func(o *tokenOptions) { o.alg = alg } }

// Stranger signs with a fresh key of the same kind that is not in the
// JWKS, under the kid of the published one: a bad signature.
func Stranger() TokenOption { return func(o *tokenOptions) { o.stranger = true } }

// Token returns a compact JWS of claims signed by the issuer's RSA key
// (RS256, kid "rsa-1"), or as opts say.
func (i *Issuer) Token(t testing.TB, claims map[string]any, opts ...TokenOption) string {
	t.Helper()
	o := tokenOptions{key: i.rsaKey}
	for _, opt := range opts {
		opt(&o)
	}
	k := o.key
	if k == nil {
		k = i.ecKey
	}
	if o.stranger {
		fresh, err := newKey(k.kid, k.alg())
		if err != nil {
			t.Fatal(err)
		}
		k = fresh
	}
	hdr := map[string]any{"typ": "JWT", "alg": k.alg()}
	if o.alg != "" {
		hdr["alg"] = o.alg
	}
	kid := k.kid
	if o.kid != nil {
		kid = *o.kid
	}
	if kid != "" {
		hdr["kid"] = kid
	}
	signing := encode(t, hdr) + "." + encode(t, claims)
	sig, err := sign(k, signing)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// newKey makes a key of the kind alg.
func newKey(kid, alg string) (*key, error) {
	if alg == "RS256" {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		return &key{kid: kid, rsa: k}, err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return &key{kid: kid, ec: k}, err
}

func encode(t testing.TB, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(data)
}

// sign signs the JWS signing input with k.
func sign(k *key, signing string) ([]byte, error) {
	digest := sha256.Sum256([]byte(signing))
	if k.rsa != nil {
		return rsa.SignPKCS1v15(nil, k.rsa, crypto.SHA256, digest[:])
	}
	r, s, err := ecdsa.Sign(rand.Reader, k.ec, digest[:])
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return sig, nil
}

// AlgNone returns an unsigned token of claims with alg "none".
func (i *Issuer) AlgNone(t testing.TB, claims map[string]any) string {
	t.Helper()
	return encode(t, map[string]any{"typ": "JWT", "alg": "none"}) + "." + encode(t, claims) + "."
}

// HS256WithPublicKey returns a token of claims with alg HS256 whose HMAC
// key is the issuer's RSA public key as a JWK's n: the key-confusion
// attack on verifiers that let the token choose the algorithm.
func (i *Issuer) HS256WithPublicKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	signing := encode(t, map[string]any{"typ": "JWT", "alg": "HS256", "kid": i.rsaKey.kid}) + "." + encode(t, claims)
	mac := hmac.New(sha256.New, i.rsaKey.rsa.N.Bytes())
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Rotate adds a new RSA key to the JWKS and returns the option that signs
// with it. Tokens signed with the other keys stay valid.
func (i *Issuer) Rotate(t testing.TB) TokenOption {
	t.Helper()
	opt, publish := i.Unpublished(t)
	publish()
	return opt
}

// Unpublished returns the option that signs with a new RSA key whose kid
// is not (yet) in the JWKS, and a func that publishes it.
func (i *Issuer) Unpublished(t testing.TB) (TokenOption, func()) {
	t.Helper()
	i.mu.Lock()
	i.rotations++
	kid := fmt.Sprintf("rsa-rotated-%d", i.rotations)
	i.mu.Unlock()
	k, err := newKey(kid, "RS256")
	if err != nil {
		t.Fatal(err)
	}
	publish := func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.published = append(i.published, k)
	}
	return func(o *tokenOptions) { o.key = k }, publish
}

// Close stops the issuer's server early, as an issuer that goes down.
func (i *Issuer) Close() { i.server.Close() }

// Expired returns a token for sub at aud, signed as Token signs, whose exp
// passed two minutes ago: beyond a gate's 60 s of skew.
func (i *Issuer) Expired(t testing.TB, sub, aud string, opts ...TokenOption) string {
	t.Helper()
	c := i.Claims(sub, aud)
	c["exp"] = time.Now().Add(-2 * time.Minute).Unix()
	return i.Token(t, c, opts...)
}

// WrongAudience returns a valid token for sub, except that its aud is
// https://elsewhere.example/mcp.
func (i *Issuer) WrongAudience(t testing.TB, sub string, opts ...TokenOption) string {
	t.Helper()
	return i.Token(t, i.Claims(sub, "https://elsewhere.example/mcp"), opts...)
}
