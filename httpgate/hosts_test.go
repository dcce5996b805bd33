package httpgate

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOwnHosts(t *testing.T) {
	ifaces := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
			&net.IPNet{IP: net.ParseIP("192.0.2.7").To4(), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("::1"), Mask: net.CIDRMask(128, 128)},
			&net.IPNet{IP: net.ParseIP("2001:db8::7"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}
	for _, test := range []struct {
		addr string
		want []hostPort
	}{
		{"127.0.0.1:8080", []hostPort{{"localhost", 8080}, {"127.0.0.1", 8080}, {"::1", 8080}, {"127.0.0.1", 8080}}},
		{"[::1]:8080", []hostPort{{"localhost", 8080}, {"127.0.0.1", 8080}, {"::1", 8080}, {"::1", 8080}}},
		{"0.0.0.0:443", []hostPort{{"localhost", 443}, {"127.0.0.1", 443}, {"192.0.2.7", 443}, {"::1", 443}, {"2001:db8::7", 443}}},
		{"[::]:443", []hostPort{{"localhost", 443}, {"127.0.0.1", 443}, {"192.0.2.7", 443}, {"::1", 443}, {"2001:db8::7", 443}}},
		{"192.0.2.7:8443", []hostPort{{"192.0.2.7", 8443}}},
		{"Host.Example:8443", []hostPort{{"host.example", 8443}}},
	} {
		got, err := ownHosts(test.addr, ifaces)
		if err != nil {
			t.Errorf("ownHosts(%q): %v", test.addr, err)
			continue
		}
		if diff := cmp.Diff(test.want, got, cmp.AllowUnexported(hostPort{})); diff != "" {
			t.Errorf("ownHosts(%q): mismatch (-want +got):\n%s", test.addr, diff)
		}
	}
}

func TestHostSet(t *testing.T) {
	ifaces := func() ([]net.Addr, error) {
		return []net.Addr{&net.IPAddr{IP: net.ParseIP("192.0.2.7")}}, nil
	}
	own, err := ownHosts("0.0.0.0:443", ifaces)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newHostSet(own, []string{"mcp.example.com:8443", "tunnel.example"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"192.0.2.7:443":          true,
		"192.0.2.7":              true, // https's default port omitted
		"[::ffff:192.0.2.7]:443": true,
		"localhost":              true,
		"192.0.2.8:443":          false,
		"192.0.2.7:80":           false,
		"mcp.example.com:8443":   true,
		"MCP.example.com.:8443":  true,
		"mcp.example.com":        false,
		"mcp.example.com:443":    false,
		"tunnel.example":         true,
		"tunnel.example:1":       true,
		"evil.tunnel.example":    false,
		"":                       false,
		"192.0.2.7:443:1":        false,
		"[192.0.2.7]:443":        true,
		"user@192.0.2.7:443":     false,
	} {
		if got := s.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestNormOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://App.Example":       "https://app.example",
		"https://app.example:443":   "https://app.example",
		"http://app.example:80":     "http://app.example",
		"http://app.example:443":    "http://app.example:443",
		"https://app.example/":      "https://app.example",
		"http://[::1]:8080":         "http://[::1]:8080",
		"http://[0:0::1]:80":        "http://[::1]",
		"null":                      "",
		"file://":                   "",
		"https://app.example/path":  "",
		"https://u@app.example":     "",
		"https://app.example?x":     "",
		"https://app.example?":      "",
		"https://app.example:99999": "",
	} {
		got, err := normOrigin(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("normOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
