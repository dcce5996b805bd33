package httpgate

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// hostPort is a normalised Host value: a lower-case name without a trailing
// dot, or an IP literal in its canonical form without brackets; and a port.
// Port 0 in an allow-list entry means any port.
type hostPort struct {
	host string
	port int
}

// normHost normalises the host part of a Host header or an allow-list entry.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// parseHostPort parses "host", "host:port", "[v6]" or "[v6]:port". A missing
// port is returned as 0.
func parseHostPort(s string) (hostPort, error) {
	if s == "" {
		return hostPort{}, fmt.Errorf("empty host")
	}
	host, portStr := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return hostPort{}, fmt.Errorf("host %q: missing ]", s)
		}
		host, portStr = s[1:end], s[end+1:]
		if portStr != "" {
			if portStr[0] != ':' {
				return hostPort{}, fmt.Errorf("host %q: junk after ]", s)
			}
			portStr = portStr[1:]
			if portStr == "" {
				return hostPort{}, fmt.Errorf("host %q: empty port", s)
			}
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return hostPort{}, fmt.Errorf("host %q: not an IPv6 literal", s)
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.IndexByte(s[:i], ':') >= 0 {
			return hostPort{}, fmt.Errorf("host %q: an IPv6 literal needs brackets", s)
		}
		host, portStr = s[:i], s[i+1:]
		if portStr == "" {
			return hostPort{}, fmt.Errorf("host %q: empty port", s)
		}
	}
	if host == "" || strings.ContainsAny(host, "/?#@ \t") {
		return hostPort{}, fmt.Errorf("host %q: not a host name", s)
	}
	port := 0
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 1 || p > 65535 {
			return hostPort{}, fmt.Errorf("host %q: bad port", s)
		}
		port = p
	}
	return hostPort{normHost(host), port}, nil
}

// hostSet is the set of Host values a gate accepts.
type hostSet struct {
	exact   map[hostPort]bool // host and port
	anyPort map[string]bool   // host, any port
}

// defaultPort returns the default port of the scheme the listener serves.
func defaultPort(tls bool) int {
	if tls {
		return 443
	}
	return 80
}

// ownHosts returns the listener's own Host values, as doc.go describes them.
// interfaceAddrs lists this machine's addresses (net.InterfaceAddrs in
// production).
func ownHosts(addr string, interfaceAddrs func() ([]net.Addr, error)) ([]hostPort, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listener address %q: %v", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("listener address %q: need the actual port", addr)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		// A name (the caller did not pass the actual address): that name.
		if host == "" {
			return nil, fmt.Errorf("listener address %q: need the actual host", addr)
		}
		return []hostPort{{normHost(host), port}}, nil
	}
	ip = ip.Unmap().WithZone("")
	var hosts []hostPort
	add := func(a netip.Addr) {
		hosts = append(hosts, hostPort{a.Unmap().WithZone("").String(), port})
	}
	switch {
	case ip.IsLoopback():
		hosts = append(hosts, hostPort{"localhost", port})
		add(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		add(netip.IPv6Loopback())
		add(ip)
	case ip.IsUnspecified():
		hosts = append(hosts, hostPort{"localhost", port})
		addrs, err := interfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("listing this machine's addresses: %v", err)
		}
		for _, a := range addrs {
			var ip net.IP
			switch a := a.(type) {
			case *net.IPNet:
				ip = a.IP
			case *net.IPAddr:
				ip = a.IP
			}
			if na, ok := netip.AddrFromSlice(ip); ok {
				add(na)
			}
		}
	default:
		add(ip)
	}
	return hosts, nil
}

// newHostSet returns the set of the listener's own hosts and the allowed ones.
func newHostSet(own []hostPort, allow []string, tls bool) (hostSet, error) {
	s := hostSet{exact: make(map[hostPort]bool), anyPort: make(map[string]bool)}
	for _, h := range own {
		s.exact[h] = true
		if h.port == defaultPort(tls) {
			s.exact[hostPort{h.host, 0}] = true
		}
	}
	for _, a := range allow {
		h, err := parseHostPort(a)
		if err != nil {
			return hostSet{}, fmt.Errorf("allowed host: %v", err)
		}
		if h.port == 0 {
			s.anyPort[h.host] = true
		} else {
			s.exact[h] = true
			if h.port == defaultPort(tls) {
				s.exact[hostPort{h.host, 0}] = true
			}
		}
	}
	return s, nil
}

// allows reports whether the Host value (as in http.Request.Host) is one of
// the set's. A Host without a port matches an entry only at the scheme's
// default port, or an any-port entry.
func (s hostSet) allows(host string) bool {
	h, err := parseHostPort(host)
	if err != nil {
		return false
	}
	return s.anyPort[h.host] || s.exact[h]
}

// originSet is the set of allowed Origin values, normalised by normOrigin.
type originSet map[string]bool

// normOrigin normalises a serialised origin "scheme://host[:port]": lower
// case, the scheme's default port dropped, IP literals canonical.
func normOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", fmt.Errorf("origin %q: %v", o, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("origin %q: scheme must be http or https", o)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] only", o)
	}
	h, err := parseHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("origin %q: %v", o, err)
	}
	if h.port == defaultPort(scheme == "https") {
		h.port = 0
	}
	host := h.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if h.port != 0 {
		host += ":" + strconv.Itoa(h.port)
	}
	return scheme + "://" + host, nil
}

func newOriginSet(allow []string) (originSet, error) {
	s := make(originSet)
	for _, a := range allow {
		n, err := normOrigin(a)
		if err != nil {
			return nil, fmt.Errorf("allowed origin: %v", err)
		}
		s[n] = true
	}
	return s, nil
}

// allows reports whether origin is in the set. "null" never is.
func (s originSet) allows(origin string) bool {
	n, err := normOrigin(origin)
	return err == nil && s[n]
}
