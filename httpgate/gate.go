package httpgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// DefaultMaxConcurrent is the per-principal cap on concurrent requests when
// [Config].MaxConcurrent is zero.
const DefaultMaxConcurrent = 32

// Leeway is the clock skew allowed around a token's exp and nbf.
const Leeway = 60 * time.Second

// Config configures a gate made by [New].
type Config struct {
	// Addr is the listener's actual address, as net.Listener.Addr().String()
	// reports it (an IP literal and the port the listener got).
	Addr string
	// TLS says whether the listener serves https, which sets the default
	// port a Host or Origin may omit.
	TLS bool
	// AllowHosts are further Host values accepted: "host" (any port) or
	// "host:port"; IPv6 literals in brackets.
	AllowHosts []string
	// AllowOrigins are the Origin values accepted: "scheme://host[:port]".
	AllowOrigins []string
	// Auth authenticates requests. Required: use NoAuth for none.
	Auth Authenticator
	// MaxConcurrent caps a principal's concurrent requests; 0 means
	// DefaultMaxConcurrent, a negative value means no cap.
	MaxConcurrent int
	// Log receives a line for every refused request (never a token). Nil
	// means no logging.
	Log *slog.Logger
}

// An Authenticator decides who sent a request.
type Authenticator interface {
	// Authenticate returns the request's token information, whose UserID is
	// the principal (non-empty), or an error wrapping one of this
	// package's sentinel errors (ErrNoToken, ErrBadToken, ...). The error
	// must not contain the token.
	Authenticate(r *http.Request) (*auth.TokenInfo, error)
	// Challenge returns the auth-params added to every WWW-Authenticate
	// challenge, such as `resource_metadata="https://..."`; it may be empty.
	Challenge() []string
	// Public returns the handlers served without authentication (after the
	// Host and Origin checks), by exact URL path; it may be nil.
	Public() map[string]http.Handler
}

// Gate is an http.Handler that checks every request at the door before
// passing it on: see the package documentation for the order.
type Gate struct {
	hosts   hostSet
	origins originSet
	auth    Authenticator
	public  map[string]http.Handler
	max     int
	log     *slog.Logger
	next    http.Handler // next with the SDK's TokenInfo in the context
	plain   http.Handler // next, for requests without a bearer token

	mu     sync.Mutex
	active map[string]int // principal → requests in flight; guarded by mu
}

// New returns a gate in front of next. It fails if cfg's address, hosts or
// origins cannot be parsed or cfg.Auth is nil.
func New(cfg Config, next http.Handler) (*Gate, error) {
	return newGate(cfg, next, net.InterfaceAddrs)
}

func newGate(cfg Config, next http.Handler, interfaceAddrs func() ([]net.Addr, error)) (*Gate, error) {
	if cfg.Auth == nil {
		return nil, errors.New("httpgate: no authenticator (use NoAuth for none)")
	}
	own, err := ownHosts(cfg.Addr, interfaceAddrs)
	if err != nil {
		return nil, fmt.Errorf("httpgate: %v", err)
	}
	hosts, err := newHostSet(own, cfg.AllowHosts, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("httpgate: %v", err)
	}
	origins, err := newOriginSet(cfg.AllowOrigins)
	if err != nil {
		return nil, fmt.Errorf("httpgate: %v", err)
	}
	limit := cfg.MaxConcurrent
	if limit == 0 {
		limit = DefaultMaxConcurrent
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The SDK keeps its TokenInfo under an unexported key, set only by its
	// own middleware: hand it the TokenInfo this gate already checked.
	withInfo := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		ti, _ := ctx.Value(tokenInfoKey{}).(*auth.TokenInfo)
		if ti == nil {
			return nil, auth.ErrInvalidToken
		}
		return ti, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: Leeway})(next)
	return &Gate{
		hosts:   hosts,
		origins: origins,
		auth:    cfg.Auth,
		public:  cfg.Auth.Public(),
		max:     limit,
		log:     log,
		next:    withInfo,
		plain:   next,
		active:  make(map[string]int),
	}, nil
}

type principalKey struct{}
type tokenInfoKey struct{}

// PrincipalOf returns the principal the gate put in ctx, or "" if none.
func PrincipalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// ServeHTTP checks r's Host and Origin (403), serves the authenticator's
// public routes, authenticates r (401, or 503 if the token cannot be checked
// now), counts it against its principal's cap (429), and passes it on with
// the principal in its context.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.hosts.allows(r.Host) {
		g.log.Warn("httpgate: refused a request for a foreign Host (DNS rebinding?)", "host", r.Host, "remote", r.RemoteAddr)
		deny(w, http.StatusForbidden, "forbidden: Host is not this server's; add it with --http-allow-host if it should be")
		return
	}
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 || !g.origins.allows(origins[0]) {
			g.log.Warn("httpgate: refused a request from a foreign Origin", "origin", origins, "remote", r.RemoteAddr)
			deny(w, http.StatusForbidden, "forbidden: Origin is not allowed; add it with --http-allow-origin if it should be")
			return
		}
	}
	if h, ok := g.public[r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	ti, err := g.auth.Authenticate(r)
	if err == nil && (ti == nil || ti.UserID == "") {
		err = fmt.Errorf("%w: no principal", ErrBadToken)
	}
	if err != nil {
		g.refuse(w, r, err)
		return
	}
	principal := ti.UserID
	if !g.acquire(principal) {
		g.log.Warn("httpgate: too many concurrent requests", "principal", principal, "max", g.max, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		deny(w, http.StatusTooManyRequests, fmt.Sprintf("too many concurrent requests: at most %d per principal", g.max))
		return
	}
	sw := &slotWriter{ResponseWriter: w, release: func() { g.release(principal) }}
	defer func() {
		if !sw.taken {
			g.release(principal)
		}
	}()
	w = sw
	ctx := context.WithValue(r.Context(), principalKey{}, principal)
	ctx = context.WithValue(ctx, tokenInfoKey{}, ti)
	r = r.WithContext(ctx)
	if tok, _ := bearer(r); tok != "" {
		g.next.ServeHTTP(w, r)
	} else {
		g.plain.ServeHTTP(w, r)
	}
}

// refuse answers a request whose authentication failed.
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, err error) {
	why := describe(err)
	g.log.Warn("httpgate: refused a request", "err", err, "remote", r.RemoteAddr)
	if why == ErrUnavailable {
		w.Header().Set("Retry-After", "10")
		deny(w, http.StatusServiceUnavailable, "service unavailable: "+why.Error())
		return
	}
	params := []string{`realm="toolhost"`}
	if why != ErrNoToken {
		params = append(params, `error="invalid_token"`, fmt.Sprintf("error_description=%q", why.Error()))
	}
	params = append(params, g.auth.Challenge()...)
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	deny(w, http.StatusUnauthorized, "unauthorized: "+why.Error())
}

// deny writes a plain-text refusal.
func deny(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

func (g *Gate) acquire(principal string) bool {
	if g.max < 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[principal] >= g.max {
		return false
	}
	g.active[principal]++
	return true
}

func (g *Gate) release(principal string) {
	if g.max < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[principal]--; g.active[principal] == 0 {
		delete(g.active, principal)
	}
}

// bearer returns the request's bearer token (RFC 6750 §2.1: the scheme is
// case-insensitive; exactly one token). ok is false if there is no
// Authorization header or it is not a bearer one; a malformed bearer header
// yields ok true and an empty token.
func bearer(r *http.Request) (token string, ok bool) {
	hs := r.Header.Values("Authorization")
	if len(hs) == 0 {
		return "", false
	}
	fields := strings.Fields(hs[0])
	if len(fields) == 0 || !strings.EqualFold(fields[0], "bearer") {
		return "", false
	}
	if len(hs) != 1 || len(fields) != 2 {
		return "", true
	}
	return fields[1], true
}

// bearerToken returns the request's bearer token, or an error wrapping
// ErrNoToken or ErrBadToken.
func bearerToken(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", fmt.Errorf("%w: want an Authorization: Bearer header", ErrNoToken)
	}
	if tok == "" {
		return "", fmt.Errorf("%w: malformed Authorization header", ErrBadToken)
	}
	return tok, nil
}
