// Package netproxy is the allow-list proxy of a confined command: the only
// way out of a command's network namespace when its network is limited to
// named hosts: a network by name, with nothing outside to reach.
//
// # What it does
//
// ParsePattern reads the entries of a network allow-list — host, *.domain,
// either with :port, or an IP literal with an optional port — and an
// AllowList answers whether a host and port are in it. A request narrows
// the server's list with Narrow, which refuses any entry the server's does
// not cover (ErrWiden). "*.example.com" matches the subdomains of
// example.com at any depth, never example.com itself: list both to allow
// both. An entry without a port allows 80 and 443.
//
// A Proxy serves one command. It listens on a listener it is handed (the
// sandbox makes it on the namespace's loopback) and tells three protocols
// apart by the first byte: 0x05 is SOCKS5 (no authentication, CONNECT
// only; IPv4, IPv6 and domain addresses), anything else HTTP: CONNECT
// tunnels, and absolute-URI requests (GET http://host/path), forwarded in
// origin form without hop-by-hop and Proxy-* headers, each request on a
// kept-alive connection checked on its own. Between TCP connections the
// bytes of tunnels and of bodies with a Content-Length are spliced
// (splice(2): they never enter the process); other bodies are copied
// through buffers. Env gives the command the variables that point its
// tools at the proxy.
//
// Names are resolved by the proxy, with the system resolver, and the proxy
// dials exactly the addresses it checked — never the name again, so DNS
// cannot answer differently the second time. An allowed name that
// resolves to a loopback, link-local, private or unspecified address
// (127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10, 10.0.0.0/8, 172.16.0.0/12,
// 192.168.0.0/16, fc00::/7, 0.0.0.0, ::, and their IPv4-mapped forms) is
// refused unless an entry is that IP literal with the port: "localhost:8080"
// alone is refused, "127.0.0.1:8080" lets 127.0.0.1:8080 through. When a
// name has both kinds of answers, only the others are dialed. No other
// range is refused for being special.
//
// A refusal by policy gets HTTP 403, or the SOCKS5 reply 0x02 ("connection
// not allowed by ruleset"), with the text "toolhost: HOST:PORT is not in
// this command's network allow-list" in the body and in the
// X-Toolhost-Refused header, and is logged at Warn with the handle id. A
// network fault on the way to an allowed host gets 502 (504 for a
// timeout), or SOCKS5 0x03, 0x04 or 0x05, with a text that says it is not
// a refusal, in X-Toolhost-Network-Error: an agent can tell one from the
// other. Errors wrap ErrNotAllowed, ErrSpecialAddress, ErrUpstream,
// ErrOverLimit and ErrPattern for errors.Is.
//
// With Config.Ask set, a host and port the allow-list does not name are
// asked about instead of refused, while the proxy holds the client's
// connection (CONNECT, plain HTTP and SOCKS5 alike): a name is first
// resolved and checked as a listed one would be, so that one resolving
// to special addresses only, or not at all, is refused without asking; an
// IP literal is asked about as it is. Allowed, the connection is dialed exactly as a
// listed one; refused, it gets the refusal above with the answer's
// reason appended ("…: denied by the user"). Ask is the proxy's only
// way to the user: netproxy knows nothing of who answers.
//
// Each proxy counts what it let through and what it refused (Stats), caps
// the client connections served at once (Config.MaxConns), and ends
// connections idle or open too long (Config.IdleTimeout, TotalTimeout).
// Close ends every connection and waits for every goroutine it started.
//
// Registries finds the hosts the machine's Go, npm and pip are configured
// to fetch from, for --network-allow-registries.
//
// # What it does not cover
//
// Only TCP through the proxy. There is no UDP (SOCKS5 UDP ASSOCIATE and
// BIND are refused with 0x07) and no DNS for the command: names are
// resolved by the proxy, so a command that resolves names itself gets no
// answer. A command that ignores the proxy variables simply has no route
// out: the namespace has none. The proxy sees host names and addresses,
// not what a TLS tunnel carries: an allowed host that relays (a CDN
// fronting other sites by SNI, an open proxy) carries whatever it relays.
// Plain HTTP's Upgrade (WebSocket over http://) is not relayed; a
// WebSocket over CONNECT is. With Config.Ask set, a name is resolved
// before it is asked about, refused or not: a command can then make the
// proxy look up any name, and so send what the name spells to the DNS
// servers of its domain, though nothing connects to it. Without Ask,
// only listed names are resolved.
//
// # Who imports it
//
// The sandbox wiring (tools, sandbox) makes one Proxy per command with a
// network allow-list, serves it on the listener made inside the command's
// namespace, puts Env into the command's environment, and reports Stats
// in the ToolResult's network member, which the protocol package mirrors
// with the same JSON names. main and tools call Registries. netproxy
// imports only the standard library.
package netproxy
