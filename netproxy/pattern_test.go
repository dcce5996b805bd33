package netproxy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePatternGood(t *testing.T) {
	type parsed struct {
		Canonical, Host, Addr string
		Wildcard              bool
		Port                  int
	}
	for _, tc := range []struct {
		in   string
		want parsed
	}{
		{"example.com", parsed{Canonical: "example.com", Host: "example.com"}},
		{"Example.COM.", parsed{Canonical: "example.com", Host: "example.com"}},
		{"example.com:8080", parsed{Canonical: "example.com:8080", Host: "example.com", Port: 8080}},
		{"*.example.com", parsed{Canonical: "*.example.com", Host: "example.com", Wildcard: true}},
		{"*.Example.com.:443", parsed{Canonical: "*.example.com:443", Host: "example.com", Wildcard: true, Port: 443}},
		{"localhost", parsed{Canonical: "localhost", Host: "localhost"}},
		{"my_host-1.internal", parsed{Canonical: "my_host-1.internal", Host: "my_host-1.internal"}},
		{"xn--bcher-kva.example", parsed{Canonical: "xn--bcher-kva.example", Host: "xn--bcher-kva.example"}},
		{"1.2.3.4", parsed{Canonical: "1.2.3.4", Addr: "1.2.3.4"}},
		{"1.2.3.4:8080", parsed{Canonical: "1.2.3.4:8080", Addr: "1.2.3.4", Port: 8080}},
		{"127.0.0.1:65535", parsed{Canonical: "127.0.0.1:65535", Addr: "127.0.0.1", Port: 65535}},
		{"::1", parsed{Canonical: "::1", Addr: "::1"}},
		{"[::1]:8080", parsed{Canonical: "[::1]:8080", Addr: "::1", Port: 8080}},
		{"[2001:db8::1]", parsed{Canonical: "2001:db8::1", Addr: "2001:db8::1"}},
		{"2001:DB8::1", parsed{Canonical: "2001:db8::1", Addr: "2001:db8::1"}},
		// Without brackets, a trailing :n is part of an IPv6 address.
		{"2001:db8::1:8080", parsed{Canonical: "2001:db8::1:8080", Addr: "2001:db8::1:8080"}},
		{"::ffff:10.0.0.1", parsed{Canonical: "10.0.0.1", Addr: "10.0.0.1"}},
		{"[::ffff:10.0.0.1]:80", parsed{Canonical: "10.0.0.1:80", Addr: "10.0.0.1", Port: 80}},
		{"0.0.0.0:1", parsed{Canonical: "0.0.0.0:1", Addr: "0.0.0.0", Port: 1}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParsePattern(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := parsed{Canonical: r.String(), Host: r.Host(), Wildcard: r.Wildcard(), Port: r.Port()}
			if r.Addr().IsValid() {
				got.Addr = r.Addr().String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParsePattern(%q) (-want +got):\n%s", tc.in, diff)
			}
			// The canonical form parses to the same rule.
			if again, err := ParsePattern(r.String()); err != nil || again != r {
				t.Errorf("ParsePattern(%q) = %v, %v; want %v", r.String(), again, err, r)
			}
		})
	}
}

func TestParsePatternBad(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{"*", `"*" alone`},
		{"*.", `"*." needs a domain`},
		{"*.:443", `"*." needs a domain`},
		{"a*b.com", `"*" may only be a whole first label`},
		{"*.*.com", `"*" may only be a whole first label`},
		{"foo.*.com", `"*" may only be a whole first label`},
		{"*example.com", `"*" may only be a whole first label`},
		{"example.com:0", "out of range"},
		{"example.com:65536", "out of range"},
		{"example.com:99999999999999999999", "out of range"},
		{"example.com:", "port after : is empty"},
		{"example.com:http", "not a number"},
		{"example.com:+80", "not a number"},
		{"[::1]:0", "out of range"},
		{"1.2.3.4:70000", "out of range"},
		{"https://example.com", "URL"},
		{"http://example.com:8080/", "URL"},
		{"example.com/path", "path"},
		{"user@example.com", "user information"},
		{"exa mple.com", "space"},
		{" example.com", "space"},
		{"example.com\t", "space"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{".", "empty"},
		{"exa$mple.com", "not allowed in a host name"},
		{"example.com?x", "not allowed in a host name"},
		{"1.2.3.4.5", "neither an IP address nor a host name"},
		{"256.1.1.1", "neither an IP address nor a host name"},
		{"01.2.3.4", "neither an IP address nor a host name"},
		{"[1.2.3.4]:80", "IPv6"},
		{"[example.com]", "IPv6"},
		{"[::1", "closing ]"},
		{"[::1]x", "only :port"},
		{"fe80::1%eth0", "zone"},
		{"[fe80::1%eth0]:80", "zone"},
		{"a:b:80", "brackets"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{strings.Repeat("a.", 127) + "com", "longer than 253"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParsePattern(tc.in)
			if err == nil {
				t.Fatalf("ParsePattern(%q) = %v, want an error", tc.in, r)
			}
			if !errors.Is(err, ErrPattern) {
				t.Errorf("error %v does not wrap ErrPattern", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"`+strings.ReplaceAll(tc.in, "\t", `\t`)+`"`) {
				t.Errorf("error %q does not name the entry", msg)
			}
			if !strings.Contains(msg, tc.why) {
				t.Errorf("error %q does not say %q", msg, tc.why)
			}
		})
	}
}

func TestParseAllowListJoinsErrors(t *testing.T) {
	_, err := ParseAllowList("ok.example", "*", "https://x")
	if err == nil || !strings.Contains(err.Error(), `"*"`) || !strings.Contains(err.Error(), `"https://x"`) {
		t.Fatalf("error %v should name both bad entries", err)
	}
}

func TestAllows(t *testing.T) {
	l := allow(t,
		"example.com", "api.example.com:8443", "*.cdn.example", "*.wild.example:9000",
		"127.0.0.1:8080", "::1", "[2001:db8::5]:22", "10.0.0.1",
	)
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"example.com", 443, true},
		{"example.com", 80, true},
		{"example.com", 8443, false},
		{"EXAMPLE.com.", 443, true},
		{"www.example.com", 443, false},
		{"api.example.com", 8443, true},
		{"api.example.com", 443, false},
		{"a.cdn.example", 443, true},
		{"A.B.CDN.example.", 80, true},
		{"cdn.example", 443, false}, // *.domain is subdomains only
		{"xcdn.example", 443, false},
		{"a.cdn.example", 8080, false},
		{"a.wild.example", 9000, true},
		{"a.wild.example", 443, false},
		{"127.0.0.1", 8080, true},
		{"127.0.0.1", 8081, false},
		{"127.0.0.2", 8080, false},
		{"localhost", 8080, false}, // a name is not its address
		{"::1", 443, true},
		{"[::1]", 80, true},
		{"::1", 8080, false},
		{"::ffff:127.0.0.1", 8080, true}, // IPv4-mapped is the IPv4 address
		{"2001:db8::5", 22, true},
		{"2001:db8::5", 443, false},
		{"10.0.0.1", 443, true},
		{"example.com", 0, false},
		{"example.com", 70000, false},
		{"", 443, false},
		{"bad host", 443, false},
	} {
		if got := l.Allows(tc.host, tc.port); got != tc.want {
			t.Errorf("Allows(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	var zero AllowList
	if zero.Allows("example.com", 443) {
		t.Error("the zero AllowList allows example.com:443")
	}
}

func TestNarrow(t *testing.T) {
	server := allow(t, "example.com", "api.example.com:8443", "*.corp.example", "*.npm.example:443", "127.0.0.1:8080", "::1")
	for _, tc := range []struct {
		asked []string
		want  []string // the narrowed list's patterns, or nil for an error
		bad   string   // the entry the error names
	}{
		{asked: []string{"example.com"}, want: []string{"example.com"}},
		{asked: []string{"example.com:443"}, want: []string{"example.com:443"}},
		{asked: []string{"EXAMPLE.COM.:80", "api.example.com:8443"}, want: []string{"example.com:80", "api.example.com:8443"}},
		{asked: []string{"a.corp.example", "*.b.corp.example", "*.corp.example:80"}, want: []string{"a.corp.example", "*.b.corp.example", "*.corp.example:80"}},
		{asked: []string{"reg.npm.example:443"}, want: []string{"reg.npm.example:443"}},
		{asked: []string{"127.0.0.1:8080", "[::1]:443"}, want: []string{"127.0.0.1:8080", "[::1]:443"}},
		{asked: []string{}, want: []string{}},
		// Widening: another host, port, a parent, a wildcard over a name, a
		// name for a literal.
		{asked: []string{"example.com:8080"}, bad: "example.com:8080"},
		{asked: []string{"example.org"}, bad: "example.org"},
		{asked: []string{"www.example.com"}, bad: "www.example.com"},
		{asked: []string{"*.example.com"}, bad: "*.example.com"},
		{asked: []string{"corp.example"}, bad: "corp.example"},
		{asked: []string{"a.corp.example:8443"}, bad: "a.corp.example:8443"},
		{asked: []string{"reg.npm.example"}, bad: "reg.npm.example"}, // 80 is not covered
		{asked: []string{"*.npm.example"}, bad: "*.npm.example"},
		{asked: []string{"api.example.com"}, bad: "api.example.com"},
		{asked: []string{"127.0.0.1:8081"}, bad: "127.0.0.1:8081"},
		{asked: []string{"127.0.0.1"}, bad: "127.0.0.1"},
		{asked: []string{"localhost:8080"}, bad: "localhost:8080"},
		{asked: []string{"example.com", "evil.example"}, bad: "evil.example"},
	} {
		t.Run(strings.Join(tc.asked, ","), func(t *testing.T) {
			got, err := server.Narrow(allow(t, tc.asked...).Rules())
			if tc.want == nil {
				if !errors.Is(err, ErrWiden) {
					t.Fatalf("Narrow = %v, %v; want ErrWiden", got, err)
				}
				if !strings.Contains(err.Error(), `"`+tc.bad+`"`) {
					t.Errorf("error %q does not name %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Patterns()); diff != "" {
				t.Errorf("Narrow (-want +got):\n%s", diff)
			}
		})
	}
	// A default-ports entry is covered by two entries, one per port.
	split := allow(t, "example.com:80", "example.com:443")
	if _, err := split.Narrow(allow(t, "example.com").Rules()); err != nil {
		t.Errorf("example.com:80 and :443 together should cover example.com: %v", err)
	}
}

func TestAllowListReport(t *testing.T) {
	l := allow(t, "b.example", "*.A.example:8443", "[::1]:80", "b.example.")
	if diff := cmp.Diff([]string{"b.example", "*.a.example:8443", "[::1]:80"}, l.Patterns()); diff != "" {
		t.Errorf("Patterns (-want +got):\n%s", diff)
	}
	if got, want := l.String(), "b.example, *.a.example:8443, [::1]:80"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (AllowList{}).String(); got != "(nothing)" {
		t.Errorf("empty String = %q", got)
	}
}

func TestRuleJSON(t *testing.T) {
	var rules []Rule
	if err := json.Unmarshal([]byte(`["*.Example.com:443","[::1]:8080"]`), &rules); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `["*.example.com:443","[::1]:8080"]`; got != want {
		t.Errorf("round trip = %s, want %s", got, want)
	}
	if err := json.Unmarshal([]byte(`["a*b.com"]`), &rules); !errors.Is(err, ErrPattern) {
		t.Errorf("unmarshal of a bad entry: %v", err)
	}
}
