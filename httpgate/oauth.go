package httpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// JWKSRefetchInterval is the shortest time between two fetches of the
// issuer's JWKS made for requests (for a kid that is unknown, or a cache
// older than JWKSMaxAge), so that a flood of made-up kids cannot hammer the
// issuer. The first such fetch after start is not delayed.
const JWKSRefetchInterval = 30 * time.Second

// JWKSMaxAge is the age after which the cached JWKS is fetched again when
// a token arrives, so that keys the issuer withdrew stop being accepted.
const JWKSMaxAge = time.Hour

// ProtectedResourcePath is the path of the protected-resource metadata
// (RFC 9728 §3). The gate also serves it with the resource's path appended.
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// fetchTimeout bounds a fetch of the JWKS made for a request.
const fetchTimeout = 10 * time.Second

// maxDocument bounds the size of a metadata or JWKS document.
const maxDocument = 1 << 20

// OAuthConfig configures NewOAuth.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier (RFC 8414): an
	// https URL, or an http one whose host is loopback.
	Issuer string
	// Audience must be one of a token's aud values.
	Audience string
	// Resource is the URL clients use for the MCP endpoint, such as
	// https://host:port/mcp: the resource of the protected-resource
	// metadata.
	Resource string
	// Scopes are the scopes_supported of the metadata; may be empty.
	Scopes []string
	// HTTPClient fetches the issuer's metadata and keys; nil means a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// Log receives a line for each fetch of the keys and each key skipped.
	Log *slog.Logger
}

// OAuth is an Authenticator that accepts JWT access tokens signed by an
// issuer's keys. It serves the protected-resource metadata.
type OAuth struct {
	cfg         OAuthConfig
	client      *http.Client
	log         *slog.Logger
	jwksURI     string
	metadataURL string
	public      map[string]http.Handler
	now         func() time.Time

	fetchMu sync.Mutex // held while fetching the JWKS after the first time; taken before mu

	mu          sync.Mutex
	keys        []jwk     // guarded by mu
	fetched     time.Time // when keys were fetched; guarded by mu
	lastRefetch time.Time // when an unknown kid last caused a fetch; guarded by mu
}

// NewOAuth discovers the issuer's metadata (RFC 8414
// /.well-known/oauth-authorization-server, then OpenID Connect
// /.well-known/openid-configuration), checks that it names the configured
// issuer, and fetches the keys at its jwks_uri. It fails if any of that
// fails, or no key is usable.
func NewOAuth(ctx context.Context, cfg OAuthConfig) (*OAuth, error) {
	if err := checkIssuerURL(cfg.Issuer); err != nil {
		return nil, err
	}
	if cfg.Audience == "" {
		return nil, errors.New("oauth: no audience")
	}
	res, err := url.Parse(cfg.Resource)
	if err != nil || (res.Scheme != "https" && res.Scheme != "http") || res.Host == "" || res.RawQuery != "" || res.Fragment != "" {
		return nil, fmt.Errorf("oauth: resource %q is not an http(s) URL", cfg.Resource)
	}
	o := &OAuth{cfg: cfg, client: cfg.HTTPClient, log: cfg.Log, now: time.Now}
	if o.client == nil {
		o.client = &http.Client{Timeout: fetchTimeout}
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}

	// The metadata, at the root and with the resource's path inserted.
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               cfg.Resource,
		AuthorizationServers:   []string{cfg.Issuer},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        cfg.Scopes,
	})
	o.public = map[string]http.Handler{ProtectedResourcePath: meta}
	metaPath := ProtectedResourcePath
	if p := strings.TrimSuffix(res.Path, "/"); p != "" {
		metaPath += p
		o.public[metaPath] = meta
	}
	o.metadataURL = (&url.URL{Scheme: res.Scheme, Host: res.Host, Path: metaPath}).String()

	if o.jwksURI, err = o.discover(ctx); err != nil {
		return nil, err
	}
	keys, err := o.fetchKeys(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("oauth: the issuer's JWKS at %s has no RS256 or ES256 key", o.jwksURI)
	}
	o.keys, o.fetched = keys, o.now()
	return o, nil
}

// checkIssuerURL refuses an issuer that is not https, unless its host is
// loopback.
func checkIssuerURL(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("oauth: issuer %q is not a URL of the form https://host[/path]", issuer)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("oauth: issuer %q uses http:// off loopback; use https://", issuer)
		}
	default:
		return fmt.Errorf("oauth: issuer %q: scheme must be https", issuer)
	}
	return nil
}

// metadataURLs returns the URLs of the issuer's metadata to try, in order.
func metadataURLs(issuer string) []string {
	u, _ := url.Parse(issuer) // checked by checkIssuerURL
	p := strings.Trim(u.Path, "/")
	at := func(path string) string {
		v := *u
		v.Path, v.RawPath = path, ""
		return v.String()
	}
	if p == "" {
		return []string{
			at("/.well-known/oauth-authorization-server"),
			at("/.well-known/openid-configuration"),
		}
	}
	return []string{
		at("/.well-known/oauth-authorization-server/" + p),
		at("/.well-known/openid-configuration/" + p),
		at("/" + p + "/.well-known/openid-configuration"),
	}
}

// discover returns the issuer's jwks_uri.
func (o *OAuth) discover(ctx context.Context) (string, error) {
	var tried []string
	for _, mu := range metadataURLs(o.cfg.Issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		status, err := o.getJSON(ctx, mu, &meta)
		if err != nil {
			return "", fmt.Errorf("oauth: issuer metadata: %v", err)
		}
		if status >= 400 && status < 500 {
			tried = append(tried, fmt.Sprintf("%s (%d)", mu, status))
			continue
		}
		if meta.Issuer != o.cfg.Issuer {
			return "", fmt.Errorf("oauth: the metadata at %s names issuer %q, not %q", mu, meta.Issuer, o.cfg.Issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("oauth: the metadata at %s has no jwks_uri", mu)
		}
		ju, err := url.Parse(meta.JWKSURI)
		if err != nil || !(ju.Scheme == "https" || ju.Scheme == "http" && isLoopbackHost(ju.Hostname())) || ju.Host == "" {
			return "", fmt.Errorf("oauth: the metadata's jwks_uri %q is not an https URL", meta.JWKSURI)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("oauth: no issuer metadata found at %s", strings.Join(tried, ", "))
}

// getJSON fetches url into v. A 4xx status is returned without error and
// without decoding; any other status but 200 is an error.
func (o *OAuth) getJSON(ctx context.Context, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return resp.StatusCode, nil
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return 0, fmt.Errorf("GET %s: %v", url, err)
	}
	if len(data) > maxDocument {
		return 0, fmt.Errorf("GET %s: longer than %d bytes", url, maxDocument)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return 0, fmt.Errorf("GET %s: %v", url, err)
	}
	return resp.StatusCode, nil
}

// fetchKeys fetches and parses the JWKS, skipping (and logging) keys it
// cannot use.
func (o *OAuth) fetchKeys(ctx context.Context) ([]jwk, error) {
	var set struct {
		Keys []rawJWK `json:"keys"`
	}
	status, err := o.getJSON(ctx, o.jwksURI, &set)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", o.jwksURI, status)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: fetching the issuer's keys: %v", err)
	}
	var keys []jwk
	for _, r := range set.Keys {
		k, err := parseJWK(r)
		if err != nil {
			o.log.Warn("httpgate: skipping an issuer key", "err", err)
			continue
		}
		keys = append(keys, k)
	}
	o.log.Info("httpgate: fetched the issuer's keys", "jwks_uri", o.jwksURI, "keys", len(keys))
	return keys, nil
}

// candidates returns the cached keys that may have signed p: those with
// its kid, or all if it has none. known reports whether the kid is among
// the keys at all; stale, whether the cache is older than JWKSMaxAge.
func (o *OAuth) candidates(p *parsedJWT) (keys []jwk, known, stale bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range o.keys {
		if p.header.Kid != "" && k.kid != p.header.Kid {
			continue
		}
		known = true
		if k.fits(p.header.Alg) {
			keys = append(keys, k)
		}
	}
	return keys, known || p.header.Kid == "", o.now().Sub(o.fetched) > JWKSMaxAge
}

// refetch fetches the keys again if unknownKid is not among them or the
// cache is older than JWKSMaxAge, provided the last such fetch is at least
// JWKSRefetchInterval ago. A failed fetch keeps the old keys.
//
// A refetch for an unknown kid waits for a fetch under way to end; one for
// a stale cache alone does not wait, and the request uses the cached keys.
func (o *OAuth) refetch(ctx context.Context, unknownKid string) error {
	if unknownKid != "" {
		o.fetchMu.Lock()
	} else if !o.fetchMu.TryLock() {
		return nil
	}
	defer o.fetchMu.Unlock()
	o.mu.Lock()
	now := o.now()
	stale := now.Sub(o.fetched) > JWKSMaxAge
	known := false
	for _, k := range o.keys {
		known = known || (unknownKid != "" && k.kid == unknownKid)
	}
	// Another request may have fetched while this one waited for fetchMu.
	due := (stale || unknownKid != "" && !known) &&
		(o.lastRefetch.IsZero() || now.Sub(o.lastRefetch) >= JWKSRefetchInterval)
	if due {
		o.lastRefetch = now
	}
	o.mu.Unlock()
	if !due {
		return nil
	}
	keys, err := o.fetchKeys(ctx)
	if err != nil {
		o.log.Warn("httpgate: refetching the issuer's keys", "err", err)
		return err
	}
	o.mu.Lock()
	o.keys, o.fetched = keys, o.now()
	o.mu.Unlock()
	return nil
}

// Authenticate accepts a request whose bearer token is a JWT signed with
// RS256 or ES256 by one of the issuer's keys, whose iss is the issuer, aud
// contains the audience, exp (required) has not passed and nbf (if any)
// has come, both give or take Leeway, and sub is not empty. The principal
// is sub.
func (o *OAuth) Authenticate(r *http.Request) (*auth.TokenInfo, error) {
	tok, err := bearerToken(r)
	if err != nil {
		return nil, err
	}
	p, err := parseJWT(tok)
	if err != nil {
		return nil, err
	}
	keys, known, stale := o.candidates(p)
	if !known || stale {
		kid := ""
		if !known {
			kid = p.header.Kid
		}
		// The fetch, once started, is not the client's to cancel: it would
		// spend the refetch interval for nothing.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), fetchTimeout)
		err := o.refetch(ctx, kid)
		cancel()
		if err != nil && !known {
			return nil, fmt.Errorf("%w: kid %q is unknown and the keys cannot be fetched: %v", ErrUnavailable, p.header.Kid, err)
		}
		keys, known, _ = o.candidates(p)
		if !known {
			return nil, fmt.Errorf("%w: no issuer key has kid %q", ErrSignature, p.header.Kid)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no issuer key for alg %s with kid %q", ErrAlgorithm, p.header.Alg, p.header.Kid)
	}
	verified := false
	for _, k := range keys {
		if p.verifyWith(k) {
			verified = true
			break
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: kid %q, alg %s", ErrSignature, p.header.Kid, p.header.Alg)
	}
	c, err := checkClaims(p.payload, o.cfg.Issuer, o.cfg.Audience, o.now())
	if err != nil {
		return nil, err
	}
	return &auth.TokenInfo{
		UserID:     c.Sub,
		Expiration: numericDate(*c.Exp),
		Scopes:     strings.Fields(c.Scope),
	}, nil
}

// Challenge returns the resource_metadata parameter (RFC 9728 §5.1).
func (o *OAuth) Challenge() []string {
	return []string{fmt.Sprintf("resource_metadata=%q", o.metadataURL)}
}

// Public returns the protected-resource metadata handlers.
func (o *OAuth) Public() map[string]http.Handler { return o.public }

// MetadataURL returns the URL of the protected-resource metadata, as the
// WWW-Authenticate challenge names it.
func (o *OAuth) MetadataURL() string { return o.metadataURL }
