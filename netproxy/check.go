package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// ErrNotAllowed is the error, wrapped, of every refusal by policy: the host
// and port are not in the command's allow-list, or a name resolved to an
// address only an IP-literal entry may allow (then ErrSpecialAddress is
// wrapped too).
var ErrNotAllowed = errors.New("not in this command's network allow-list")

// ErrSpecialAddress is the error, wrapped beside ErrNotAllowed, of an
// allowed name whose every address is loopback, link-local, private or
// unspecified, none of them listed as an IP literal.
var ErrSpecialAddress = errors.New("resolved to a loopback, link-local, private or unspecified address")

// ErrUpstream is the error, wrapped, of a network fault on the way to an
// allowed host: the name did not resolve, or the connection failed. It is
// never a refusal by policy.
var ErrUpstream = errors.New("network error")

// ErrOverLimit is the error, wrapped, of a client connection beyond
// Config.MaxConns.
var ErrOverLimit = errors.New("too many connections")

// ErrClosed is what Serve returns once Close has been called.
var ErrClosed = errors.New("netproxy: proxy closed")

// specialKind names the kind of a special address — "loopback",
// "link-local", "private", "unspecified" — or returns "" for any other.
// IPv4-mapped IPv6 addresses are their IPv4 address. These are the only
// ranges refused for being special: 127.0.0.0/8, ::1, 169.254.0.0/16,
// fe80::/10, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7, 0.0.0.0
// and ::.
func specialKind(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	}
	return ""
}

// RefusalError is a connection refused by policy. Its message is the text
// the client gets: "toolhost: HOST:PORT is not in this command's network
// allow-list", followed for a special address by what the name resolved
// to, and for a refused ask by the answer's reason. It wraps
// ErrNotAllowed, and ErrSpecialAddress when that is why.
type RefusalError struct {
	Host string // as asked, normalized
	Port int
	// Resolved and Kind are set for a special-address refusal: the first
	// address the name resolved to, and its kind ("loopback", …).
	Resolved netip.Addr
	Kind     string
	// Asked is set when Config.Ask was asked and refused: the Verdict's
	// Reason ("denied by the user", "no answer", …).
	Asked string
}

// Error returns the message the client gets.
func (e *RefusalError) Error() string {
	hp := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	msg := "toolhost: " + hp + " is " + ErrNotAllowed.Error()
	if e.Kind != "" {
		lit := netip.AddrPortFrom(e.Resolved, uint16(e.Port)).String()
		msg += fmt.Sprintf(": %s resolved to %s, a %s address, which only an IP-literal entry (%s) allows", e.Host, e.Resolved, e.Kind, lit)
	}
	if e.Asked != "" {
		msg += ": " + e.Asked
	}
	return msg
}

// Unwrap returns ErrNotAllowed, and ErrSpecialAddress for a special-address
// refusal.
func (e *RefusalError) Unwrap() []error {
	if e.Kind != "" {
		return []error{ErrNotAllowed, ErrSpecialAddress}
	}
	return []error{ErrNotAllowed}
}

// reason returns the short reason for logs.
func (e *RefusalError) reason() string {
	switch {
	case e.Kind != "":
		return fmt.Sprintf("resolved to %s, a %s address", e.Resolved, e.Kind)
	case e.Asked != "":
		return "not in the allow-list; asked: " + e.Asked
	}
	return "not in the allow-list"
}

// UpstreamError is a network fault on the way to an allowed host. It wraps
// ErrUpstream and the underlying error.
type UpstreamError struct {
	Host string
	Port int
	Op   string // "resolve" or "connect"
	Err  error
}

// Error returns the message the client gets, which says it is not a
// refusal by policy.
func (e *UpstreamError) Error() string {
	hp := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
	return fmt.Sprintf("toolhost: network error (not a policy refusal): could not %s %s: %v", e.Op, hp, e.Err)
}

// Unwrap returns ErrUpstream and the underlying error.
func (e *UpstreamError) Unwrap() []error { return []error{ErrUpstream, e.Err} }

// decision is the outcome of checking a request: the addresses that may be
// dialed, in order, each checked.
type decision struct {
	host  requestHost
	port  int
	addrs []netip.AddrPort
	// unlisted says the allow-list does not name host and port: addrs are
	// what an entry for them would allow, and may be dialed only once
	// Config.Ask has allowed them (session.ask clears it). dial refuses
	// a decision that has it.
	unlisted bool
}

// check decides a request for host (as the client wrote it) and port
// against the allow-list: a *RefusalError, an *UpstreamError when the name
// does not resolve, or the addresses to dial. An IP literal is allowed
// only by the same IP-literal entry. A name must be allowed by a name
// entry, and is then resolved; an answer that is a special address is
// dropped unless an IP-literal entry allows it, and with no answer left
// the request is refused.
//
// With Config.Ask set, a host and port the list does not name are not
// refused here: they are checked as if an entry named them (a name is
// resolved and its special answers dropped, so that one that resolves to
// special addresses only is refused without asking), and the decision
// comes back unlisted, for session.decide to ask about. A malformed host
// or port, an address with a zone, or a name that does not resolve is
// refused without asking, as it would be without Ask.
func (p *Proxy) check(ctx context.Context, host string, port int) (decision, error) {
	h, err := parseRequestHost(host)
	if err != nil || port < 1 || port > 65535 {
		return decision{}, &RefusalError{Host: host, Port: port}
	}
	d := decision{host: h, port: port}
	allow, asking := p.cfg.Allow, p.cfg.Ask != nil
	if h.addr.IsValid() {
		if h.addr.Zone() != "" {
			return d, &RefusalError{Host: h.String(), Port: port}
		}
		if !allow.allowsAddr(h.addr, port) {
			if !asking {
				return d, &RefusalError{Host: h.String(), Port: port}
			}
			d.unlisted = true
		}
		d.addrs = []netip.AddrPort{netip.AddrPortFrom(h.addr, uint16(port))}
		return d, nil
	}
	if !allow.allowsName(h.name, port) {
		if !asking {
			return d, &RefusalError{Host: h.name, Port: port}
		}
		d.unlisted = true
	}
	answers, err := p.resolver.LookupNetIP(ctx, "ip", h.name)
	if err == nil && len(answers) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		if d.unlisted {
			// Refused for not being listed, as without Ask: there is
			// nothing to ask about, and it is no fault on the way to an
			// allowed host.
			return d, &RefusalError{Host: h.name, Port: port}
		}
		return d, &UpstreamError{Host: h.name, Port: port, Op: "resolve", Err: err}
	}
	var first netip.Addr
	var firstKind string
	for _, a := range answers {
		a = a.Unmap()
		if k := specialKind(a); k != "" && !allow.allowsAddr(a, port) {
			if firstKind == "" {
				first, firstKind = a, k
			}
			continue
		}
		d.addrs = append(d.addrs, netip.AddrPortFrom(a, uint16(port)))
	}
	if len(d.addrs) == 0 {
		return d, &RefusalError{Host: h.name, Port: port, Resolved: first, Kind: firstKind}
	}
	return d, nil
}

// dial connects to the first of d's addresses that answers: exactly the
// addresses checked, never a name. The error is an *UpstreamError, or a
// *RefusalError for a decision still unlisted (never asked, or not
// allowed), which no caller should pass.
func (p *Proxy) dial(ctx context.Context, d decision) (net.Conn, netip.AddrPort, error) {
	if d.unlisted {
		return nil, netip.AddrPort{}, &RefusalError{Host: d.host.String(), Port: d.port}
	}
	var errs []error
	for _, a := range d.addrs {
		c, err := p.cfg.Dial(ctx, "tcp", a)
		if err == nil {
			return c, a, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, &UpstreamError{Host: d.host.String(), Port: d.port, Op: "connect to", Err: errors.Join(errs...)}
}

// overLimitError is the error of a client connection beyond MaxConns.
func (p *Proxy) overLimitError() error {
	return fmt.Errorf("toolhost: %w: the command has %d proxy connections open, its limit", ErrOverLimit, p.cfg.MaxConns)
}

// socksCode returns the SOCKS5 reply code for err: 0x02 for a refusal,
// 0x01 over the limit, and for a fault 0x05 (connection refused), 0x03
// (network unreachable) or 0x04 (host unreachable: no address, a timeout,
// anything else).
func socksCode(err error) byte {
	switch {
	case errors.Is(err, ErrNotAllowed):
		return socksNotAllowed
	case errors.Is(err, ErrOverLimit):
		return socksGeneralFailure
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	default:
		return socksHostUnreachable
	}
}
