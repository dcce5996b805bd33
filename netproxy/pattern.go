package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ErrPattern is the error, wrapped, of a malformed allow-list entry; the
// message names the entry and says why.
var ErrPattern = errors.New("malformed network allow-list entry")

// ErrWiden is the error, wrapped, of an asked entry that no server entry
// covers: narrowing by it would widen the server's list.
var ErrWiden = errors.New("network allow-list entry would widen the server's list")

// defaultPorts are the ports an entry without one allows.
var defaultPorts = []int{80, 443}

// Rule is one parsed allow-list entry: a host name, every subdomain of a
// domain, or an IP address, on one port or on the default ports 80 and 443.
// The zero Rule matches nothing; make one with ParsePattern.
type Rule struct {
	// host is the lower-case name without a trailing dot: the host itself,
	// or, when wildcard is set, the domain whose strict subdomains match.
	// It is empty when addr is valid.
	host     string
	wildcard bool
	// addr is the address of an IP-literal entry, IPv4-mapped IPv6
	// addresses unmapped, never with a zone.
	addr netip.Addr
	// port is the entry's port, or 0 for the default ports 80 and 443.
	port int
}

// Host returns the rule's host name or wildcard domain (without the "*."),
// or "" for an IP literal.
func (r Rule) Host() string { return r.host }

// Wildcard reports whether the rule is "*.domain": every subdomain of
// Host, not Host itself.
func (r Rule) Wildcard() bool { return r.wildcard }

// Addr returns the address of an IP-literal rule; it is invalid for a name.
func (r Rule) Addr() netip.Addr { return r.addr }

// Port returns the rule's port, or 0 when it allows the default ports 80
// and 443.
func (r Rule) Port() int { return r.port }

// String returns the rule in the canonical form ParsePattern accepts:
// lower case, no trailing dot, IPv6 in brackets when a port follows.
func (r Rule) String() string {
	var h string
	switch {
	case r.addr.IsValid():
		h = r.addr.String()
		if r.addr.Is6() && r.port != 0 {
			h = "[" + h + "]"
		}
	case r.wildcard:
		h = "*." + r.host
	default:
		h = r.host
	}
	if r.port != 0 {
		h += ":" + strconv.Itoa(r.port)
	}
	return h
}

// MarshalText returns String, so that a Rule is a JSON string.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses text with ParsePattern.
func (r *Rule) UnmarshalText(text []byte) error {
	p, err := ParsePattern(string(text))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// ports returns the ports the rule allows.
func (r Rule) ports() []int {
	if r.port == 0 {
		return defaultPorts
	}
	return []int{r.port}
}

// allowsPort reports whether the rule allows port.
func (r Rule) allowsPort(port int) bool {
	if r.port == 0 {
		return port == 80 || port == 443
	}
	return port == r.port
}

// matchesName reports whether the rule's host part matches the normalized
// name (never for an IP-literal rule).
func (r Rule) matchesName(name string) bool {
	switch {
	case r.addr.IsValid():
		return false
	case r.wildcard:
		return len(name) > len(r.host)+1 && strings.HasSuffix(name, r.host) && name[len(name)-len(r.host)-1] == '.'
	default:
		return name == r.host
	}
}

// ParsePattern parses one allow-list entry:
//
//   - host, or host:port: that name, case-insensitively, with or without a
//     trailing dot;
//   - *.domain, or *.domain:port: every subdomain of domain, at any depth,
//     but not domain itself (list it too to allow it);
//   - an IP literal, with an optional port: 1.2.3.4, 1.2.3.4:8080, ::1,
//     [::1]:8080, [2001:db8::1]. An IPv6 address with a port needs the
//     brackets: 2001:db8::1:8080 is an address. IPv4-mapped IPv6 addresses
//     are the IPv4 address.
//
// An entry without a port allows 80 and 443. Anything else — empty, "*",
// "*.", "a*b.com", a port of 0 or above 65535, a URL with a scheme, a
// path, user information, spaces, a zone — is an error wrapping
// ErrPattern that names the entry and says why.
func ParsePattern(s string) (Rule, error) {
	bad := func(why string, args ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w %q: %s", ErrPattern, s, fmt.Sprintf(why, args...))
	}
	switch {
	case s == "":
		return bad("it is empty")
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return bad("it contains a space")
	case strings.Contains(s, "://"):
		return bad("it is a URL; give the host alone, as in example.com or example.com:8080")
	case strings.Contains(s, "/"):
		return bad("it contains a path; give the host alone, as in example.com")
	case strings.Contains(s, "@"):
		return bad("it contains user information (@); give the host alone")
	}
	// An IP literal without a port: 1.2.3.4, ::1, 2001:db8::1.
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return bad("an IP address with a zone is not allowed")
		}
		return Rule{addr: a.Unmap()}, nil
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("a bracketed IPv6 address has no closing ]")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return bad("only :port may follow the bracketed address")
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return bad("%v", err)
			}
			port = p
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return bad("brackets hold an IPv6 address, and %q is not one", host)
		}
		if a.Zone() != "" {
			return bad("an IP address with a zone is not allowed")
		}
		return Rule{addr: a.Unmap(), port: port}, nil
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host = s[:i]
		p, err := parsePort(s[i+1:])
		if err != nil {
			return bad("%v", err)
		}
		port = p
		if strings.Contains(host, ":") {
			return bad("an IPv6 address with a port goes in brackets, as in [2001:db8::1]:8080")
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("an IP address with a zone is not allowed")
		}
		return Rule{addr: a.Unmap(), port: port}, nil
	}
	r := Rule{port: port}
	switch {
	case host == "*":
		return bad(`"*" alone would allow every host; name a domain, as in *.example.com`)
	case strings.HasPrefix(host, "*."):
		r.wildcard = true
		host = host[2:]
		if host == "" || host == "." {
			return bad(`"*." needs a domain after it, as in *.example.com`)
		}
	}
	name, err := normalizeName(host)
	if err != nil {
		return bad("%v", err)
	}
	r.host = name
	return r, nil
}

// parsePort parses a port of 1 to 65535, decimal digits only.
func parsePort(s string) (int, error) {
	if s == "" {
		return 0, errors.New("the port after : is empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("the port %q is not a number", s)
		}
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("the port %s is out of range (1 to 65535)", s)
	}
	return p, nil
}

// normalizeName returns a host name in lower case without its trailing
// dot, or an error saying why it is not a host name: empty labels, a
// character other than letters, digits, '-' and '_', a '*' anywhere, a
// label over 63 bytes, a name over 253, or an all-digit last label (which
// would read as a malformed IP address).
func normalizeName(s string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if name == "" {
		return "", errors.New("the host name is empty")
	}
	if len(name) > 253 {
		return "", errors.New("the host name is longer than 253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return "", errors.New("the host name has an empty label (..)")
		}
		if len(l) > 63 {
			return "", fmt.Errorf("the label %q is longer than 63 bytes", l)
		}
		for _, c := range l {
			switch {
			case c == '*':
				return "", errors.New(`"*" may only be a whole first label, as in *.example.com`)
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return "", fmt.Errorf("%q is not allowed in a host name", c)
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("%q is neither an IP address nor a host name", s)
	}
	return name, nil
}

// AllowList is a set of rules: what a command may connect to. The zero
// AllowList allows nothing. An AllowList is immutable, and safe to share.
type AllowList struct {
	rules []Rule // in the order given, duplicates dropped
}

// NewAllowList returns the list of rules, in order, without duplicates.
func NewAllowList(rules ...Rule) AllowList {
	var out []Rule
	for _, r := range rules {
		if r != (Rule{}) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return AllowList{rules: out}
}

// ParseAllowList parses each pattern with ParsePattern; the error joins
// every malformed entry's.
func ParseAllowList(patterns ...string) (AllowList, error) {
	var rules []Rule
	var errs []error
	for _, p := range patterns {
		r, err := ParsePattern(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	if len(errs) > 0 {
		return AllowList{}, errors.Join(errs...)
	}
	return NewAllowList(rules...), nil
}

// Rules returns a copy of the list's rules.
func (l AllowList) Rules() []Rule { return slices.Clone(l.rules) }

// Patterns returns the rules in canonical form, in order.
func (l AllowList) Patterns() []string {
	out := make([]string, len(l.rules))
	for i, r := range l.rules {
		out[i] = r.String()
	}
	return out
}

// String returns the patterns joined by ", ", or "(nothing)" for an empty
// list.
func (l AllowList) String() string {
	if len(l.rules) == 0 {
		return "(nothing)"
	}
	return strings.Join(l.Patterns(), ", ")
}

// Allows reports whether a connection to host on port is in the list.
// host is a name (any case, with or without a trailing dot) or an IP
// literal (IPv6 with or without brackets). A name is matched against the
// name entries only and an address against the IP-literal entries only:
// whether a name's addresses may be dialed is the proxy's further check.
func (l AllowList) Allows(host string, port int) bool {
	if port < 1 || port > 65535 {
		return false
	}
	h, err := parseRequestHost(host)
	if err != nil {
		return false
	}
	if h.addr.IsValid() {
		return l.allowsAddr(h.addr, port)
	}
	return l.allowsName(h.name, port)
}

// allowsName reports whether the normalized name on port is in the list.
func (l AllowList) allowsName(name string, port int) bool {
	for _, r := range l.rules {
		if r.matchesName(name) && r.allowsPort(port) {
			return true
		}
	}
	return false
}

// allowsAddr reports whether an IP-literal entry names a (unmapped) on port.
func (l AllowList) allowsAddr(a netip.Addr, port int) bool {
	a = a.Unmap()
	for _, r := range l.rules {
		if r.addr.IsValid() && r.addr == a && r.allowsPort(port) {
			return true
		}
	}
	return false
}

// Narrow returns the list asked, after checking that every asked entry is
// covered by an entry of l, so that a request narrows the server's list
// and never widens it. A name is covered by the same name or by a "*."
// entry of one of its parent domains; "*.d" by "*.d" or "*." of a parent
// of d (never by the name d); an IP literal only by the same literal. Each
// port an asked entry allows (80 and 443 without one) must be allowed by a
// covering entry: example.com:443 covers example.com:443 but not
// example.com. An uncovered entry is an error wrapping ErrWiden that names
// it. Narrowing by nothing gives the empty list, which allows nothing.
func (l AllowList) Narrow(asked []Rule) (AllowList, error) {
	var errs []error
	for _, a := range asked {
		if a == (Rule{}) {
			errs = append(errs, fmt.Errorf("%w: an empty entry", ErrPattern))
			continue
		}
		for _, port := range a.ports() {
			if !l.covers(a, port) {
				errs = append(errs, fmt.Errorf("%w: %q (port %d) is not within the server's list %s", ErrWiden, a.String(), port, l))
				break
			}
		}
	}
	if len(errs) > 0 {
		return AllowList{}, errors.Join(errs...)
	}
	return NewAllowList(asked...), nil
}

// covers reports whether some entry of l covers asked's host part on port.
func (l AllowList) covers(asked Rule, port int) bool {
	for _, r := range l.rules {
		if !r.allowsPort(port) {
			continue
		}
		switch {
		case asked.addr.IsValid():
			if r.addr.IsValid() && r.addr == asked.addr {
				return true
			}
		case asked.wildcard:
			if r.wildcard && (r.host == asked.host || r.matchesName(asked.host)) {
				return true
			}
		default:
			if r.matchesName(asked.host) {
				return true
			}
		}
	}
	return false
}

// requestHost is the host of a connection request: a normalized name, or
// an address.
type requestHost struct {
	name string     // lower case, no trailing dot; empty when addr is valid
	addr netip.Addr // unmapped; zone kept, so that it matches no entry
}

// String returns the host for messages and statistics.
func (h requestHost) String() string {
	if h.addr.IsValid() {
		return h.addr.String()
	}
	return h.name
}

// parseRequestHost parses the host a client asked for: an IP literal (IPv6
// with or without brackets) or a host name, normalized as patterns are.
func parseRequestHost(host string) (requestHost, error) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return requestHost{addr: a.Unmap()}, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return requestHost{}, err
	}
	return requestHost{name: name}, nil
}
