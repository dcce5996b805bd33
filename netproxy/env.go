package netproxy

import "net/netip"

// Env returns the environment that points a command at the proxy
// listening on addr: HTTP_PROXY and HTTPS_PROXY as http://addr, ALL_PROXY
// as socks5h://addr (the "h": the proxy resolves names), the same in lower
// case, and NO_PROXY and no_proxy empty, so that no host bypasses it.
//
// Tools honour these differently. curl, git, pip, npm and Go programs use
// them; Go's net/http (ProxyFromEnvironment) never proxies requests to
// localhost or a loopback address, whatever NO_PROXY says: inside the
// command's network namespace such a request reaches the namespace's own
// loopback, that is the command's own servers, which is what it means. A
// program that ignores the variables has no route out at all.
func Env(addr netip.AddrPort) []string {
	h := "http://" + addr.String()
	s := "socks5h://" + addr.String()
	return []string{
		"HTTP_PROXY=" + h, "http_proxy=" + h,
		"HTTPS_PROXY=" + h, "https_proxy=" + h,
		"ALL_PROXY=" + s, "all_proxy=" + s,
		"NO_PROXY=", "no_proxy=",
	}
}
