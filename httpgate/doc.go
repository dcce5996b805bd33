// Package httpgate holds the checks at the door of toolhost's HTTP
// listener (toolhost mcp --http ADDR), in front of the handler that serves
// MCP's Streamable HTTP at /mcp. It knows nothing of MCP or JSON-RPC: it
// decides, from a request's Host, Origin and Authorization headers, whether
// the request may go on, and as whom.
//
// # Order of the checks
//
// A Gate (see New) checks each request in this order, and the first check
// that fails answers it:
//
//  1. Host: the request's Host must be one of the listener's own hosts
//     (below) or one of Config.AllowHosts (--http-allow-host), or the
//     answer is 403. This defeats DNS rebinding, where a page on attacker.example
//     makes the browser resolve that name to 127.0.0.1 and send
//     "Host: attacker.example:PORT" to this listener.
//  2. Origin: a request without an Origin header (a client that is not a
//     browser) passes; one with an Origin passes only if it is one of
//     Config.AllowOrigins (--http-allow-origin); otherwise 403. "Origin:
//     null", two Origin headers, or one that is not scheme://host[:port]
//     are refused. An Origin equal to the Host is not let through on that
//     ground, unlike net/http's CrossOriginProtection: under DNS rebinding
//     they are equal.
//  3. Public routes: the authenticator's Public handlers, served without
//     authentication. In OAuth mode those are the protected-resource
//     metadata (RFC 9728) at /.well-known/oauth-protected-resource and at
//     that path followed by the resource's path (/mcp).
//  4. Authentication (Config.Auth): NoAuth lets everyone in as
//     "anonymous"; a Token (--http-token-file) accepts one bearer token,
//     as "token"; OAuth (--oauth-issuer, --oauth-audience) accepts JWTs
//     of an issuer, as their sub. A missing or refused token is 401.
//  5. The per-principal cap (Config.MaxConcurrent): a principal with that
//     many requests in flight gets 429 with "Retry-After: 1". A standing
//     server-sent event stream (MCP's GET) is a request in flight, also
//     once its handler has taken the connection (Hijack): until that
//     connection is closed.
//  6. The next handler, with the principal in the request's context
//     (PrincipalOf) and, when a bearer token was presented, the SDK's
//     auth.TokenInfo (auth.TokenInfoFromContext; UserID is the principal,
//     Expiration the token's exp in OAuth mode).
//
// # The listener's own hosts
//
// Config.Addr is the listener's actual address (IP literal and port). A
// Host header matches if its host (compared case-insensitively, a trailing
// dot ignored, IP literals compared as addresses, IPv4-mapped IPv6 as IPv4)
// and its port are, for a listener on
//
//   - a loopback address: "localhost", 127.0.0.1, [::1] or the listener's
//     own address, with the listener's port;
//   - an unspecified address (0.0.0.0 or [::]): "localhost" or any IP
//     address of this machine's interfaces (at New), with the listener's
//     port;
//   - any other address: that address, with the listener's port.
//
// A Host without a port stands for the scheme's default port (80, or 443
// with Config.TLS) and matches only if the listener uses that port. No
// name other than "localhost" is ever the listener's own: a DNS name, or a
// tunnel's, must be given in AllowHosts, as "host" (any port) or
// "host:port" ("[v6]" or "[v6]:port" for IPv6). AllowOrigins entries are
// "scheme://host[:port]", compared after normalising case and default
// ports.
//
// # Statuses
//
//	403 Forbidden           the Host or the Origin is not allowed.
//	401 Unauthorized        no bearer token (WWW-Authenticate: Bearer
//	                        realm="toolhost"), or a refused one (adding
//	                        error="invalid_token" and error_description);
//	                        in OAuth mode the challenge carries
//	                        resource_metadata="<metadata URL>". The body
//	                        says what is wrong in words; neither echoes the
//	                        token.
//	429 Too Many Requests   the principal's cap is reached; Retry-After: 1.
//	503 Unavailable         a token's kid is unknown and the issuer's keys
//	                        cannot be fetched; Retry-After: 10.
//
// Refusals are logged to Config.Log at level Warn, with the reason but
// never a token.
//
// # Bearer token file
//
// LoadOrCreateToken reads the file that --http-token-file names (the
// command line chooses where; this package does not) or makes it: 256
// random bits as 64 hex digits, mode 0600. A client sends its contents,
// in every request, as "Authorization: Bearer <token>". The token is
// compared in constant time, as SHA-256 digests. No OAuth discovery is
// served in this mode.
//
// # OAuth
//
// NewOAuth finds the issuer's metadata (RFC 8414, then OpenID Connect
// discovery), requires its issuer to be the configured one, and fetches
// its JWKS (RSA keys of at least 2048 bits, EC keys on P-256; others are
// skipped). A token is accepted if its header's alg is RS256 or ES256
// (none, HS256 and every other are refused), its signature verifies with
// a key of the issuer of the kind its alg needs (the key with its kid, or
// every key of that kind if it has none), iss is the issuer, aud contains
// the audience (a trailing slash aside), exp is present and not more than
// Leeway (60 s) past, nbf, if present, not more than Leeway ahead, and
// sub is not empty. A token with a kid not in the cached JWKS makes it
// fetched again, at most once per JWKSRefetchInterval (30 s), so that a
// flood of made-up kids cannot hammer the issuer; the JWKS is also fetched
// again when a token arrives and it is older than JWKSMaxAge (1 h).
//
// # Start-up and connections
//
// CheckListen refuses, before listening, a non-loopback address without
// TLS, no authentication off loopback, and an http:// issuer off loopback.
// "localhost" counts as loopback; any other name does not.
//
// Server sets ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes, and no
// WriteTimeout, since an MCP response may be an event stream as long as
// the session. LimitListener bounds the open connections: one more waits
// in the kernel's backlog until one closes, and a connection that sends
// nothing is closed after ReadHeaderTimeout. So 1,000 connections that
// send nothing neither exhaust the process nor keep a client out for
// longer than a few header timeouts.
//
// # Not covered
//
// The gate does not answer CORS preflight requests or set CORS headers
// (except the metadata handler's); a browser client on an allowed Origin
// needs them from the handler behind. It checks no scopes, does not
// introspect or revoke tokens, and does not bind a session to its
// principal (the MCP SDK does, from TokenInfo.UserID). A slow body or a
// client that stops reading a response is bounded only by the cap and by
// LimitListener, not by a timeout. TLS itself is the caller's.
package httpgate
