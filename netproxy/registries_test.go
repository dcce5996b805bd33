package netproxy

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ruleText compares rules by their canonical text.
var ruleText = cmp.Transformer("rule", func(r Rule) string { return r.String() })

// rule parses a pattern for a table, panicking on a bad one.
func rule(s string) Rule {
	r, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestParseGOPROXY(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Source
	}{
		{"https://proxy.golang.org,direct", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "https://proxy.golang.org", Rule: rule("proxy.golang.org:443")},
			{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		}},
		{"https://goproxy.corp.example:8443/go|https://Proxy.Golang.org/,off", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "https://goproxy.corp.example:8443/go", Rule: rule("goproxy.corp.example:8443")},
			{Tool: "go", Setting: "GOPROXY", Value: "https://Proxy.Golang.org/", Rule: rule("proxy.golang.org:443")},
			{Tool: "go", Setting: "GOPROXY", Value: "off", Note: "off: no module downloads"},
		}},
		{"http://10.1.2.3:3000, goproxy.io", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "http://10.1.2.3:3000", Rule: rule("10.1.2.3:3000")},
			{Tool: "go", Setting: "GOPROXY", Value: "goproxy.io", Rule: rule("goproxy.io:443")},
		}},
		{"http://[::1]:3000", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "http://[::1]:3000", Rule: rule("[::1]:3000")},
		}},
		{"file:///srv/goproxy,direct", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "file:///srv/goproxy", Note: "a local file URL names no host"},
			{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		}},
		{"", []Source{{Tool: "go", Setting: "GOPROXY", Note: "GOPROXY is empty"}}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseGOPROXY(tc.in), ruleText); diff != "" {
				t.Errorf("parseGOPROXY(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseGOSUMDB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rule string // "" for none
		note string
	}{
		{"sum.golang.org", "sum.golang.org:443", ""},
		{"sum.golang.google.cn", "sum.golang.google.cn:443", ""},
		{"sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8", "sum.golang.org:443", ""},
		{"sum.golang.org+033de0ae+Ac4z https://sum.golang.google.cn", "sum.golang.google.cn:443", ""},
		{"sumdb.corp.example+key https://sumdb.corp.example:9443/db", "sumdb.corp.example:9443", ""},
		{"sumdb.corp.example+key sumdb-mirror.corp.example", "sumdb-mirror.corp.example:443", ""},
		{"off", "", "off: no checksum database"},
		{"", "", "GOSUMDB is empty"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			want := []Source{{Tool: "go", Setting: "GOSUMDB", Value: tc.in, Note: tc.note}}
			if tc.rule != "" {
				want[0].Rule = rule(tc.rule)
			}
			if diff := cmp.Diff(want, parseGOSUMDB(tc.in), ruleText); diff != "" {
				t.Errorf("parseGOSUMDB(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseNpmRegistry(t *testing.T) {
	for _, tc := range []struct {
		out, rule, note string
	}{
		{"https://registry.npmjs.org/\n", "registry.npmjs.org:443", ""},
		{"npm warn something\nhttps://npm.corp.example:4873/\n", "npm.corp.example:4873", ""},
		{"http://verdaccio.local/\n", "verdaccio.local:80", ""},
		{"undefined\n", "", `not an http(s) URL (scheme "")`},
	} {
		t.Run(tc.out, func(t *testing.T) {
			got := parseNpmRegistry(tc.out)
			want := Source{Tool: "npm", Setting: "registry", Value: strings.TrimSpace(lastLine(tc.out)), Note: tc.note}
			if tc.rule != "" {
				want.Rule = rule(tc.rule)
			}
			if diff := cmp.Diff(want, got, ruleText); diff != "" {
				t.Errorf("parseNpmRegistry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePip(t *testing.T) {
	pypi := []Source{
		{Tool: "pip", Setting: "default", Value: "https://pypi.org/simple", Rule: rule("pypi.org:443")},
		{Tool: "pip", Setting: "default", Value: "https://files.pythonhosted.org/packages", Rule: rule("files.pythonhosted.org:443")},
	}
	for _, tc := range []struct {
		name string
		out  string
		env  map[string]string
		want []Source
	}{
		{name: "nothing configured: pip's defaults", out: "", want: pypi},
		{
			name: "this machine's kind of output: no index, local find-links",
			out:  ":env:.cert='/etc/ssl/certs/ca-certificates.crt'\n:env:.find-links='/opt/wheels'\nglobal.cert='/etc/ssl/certs/ca-certificates.crt'\n",
			want: pypi,
		},
		{
			name: "index-url replaces the defaults; extra-index-url adds",
			out:  "global.index-url='https://pypi.corp.example/simple'\ninstall.extra-index-url='https://extra1.example/simple https://extra2.example:8443/simple'\n",
			want: []Source{
				{Tool: "pip", Setting: "global.index-url", Value: "https://pypi.corp.example/simple", Rule: rule("pypi.corp.example:443")},
				{Tool: "pip", Setting: "install.extra-index-url", Value: "https://extra1.example/simple", Rule: rule("extra1.example:443")},
				{Tool: "pip", Setting: "install.extra-index-url", Value: "https://extra2.example:8443/simple", Rule: rule("extra2.example:8443")},
			},
		},
		{
			name: "extra-index-url alone keeps the defaults; newline-separated values; http find-links",
			out:  "global.extra-index-url='https://a.example/simple\\nhttps://b.example/simple'\nglobal.find-links=\"http://wheels.example/\"\n",
			want: append([]Source{
				{Tool: "pip", Setting: "global.extra-index-url", Value: "https://a.example/simple", Rule: rule("a.example:443")},
				{Tool: "pip", Setting: "global.extra-index-url", Value: "https://b.example/simple", Rule: rule("b.example:443")},
				{Tool: "pip", Setting: "global.find-links", Value: "http://wheels.example/", Rule: rule("wheels.example:80")},
			}, pypi...),
		},
		{
			name: "environment variables",
			out:  "",
			env:  map[string]string{"PIP_INDEX_URL": "https://env.example/simple", "PIP_EXTRA_INDEX_URL": "http://e1.example:8080/ https://e2.example/"},
			want: []Source{
				{Tool: "pip", Setting: "PIP_INDEX_URL", Value: "https://env.example/simple", Rule: rule("env.example:443")},
				{Tool: "pip", Setting: "PIP_EXTRA_INDEX_URL", Value: "http://e1.example:8080/", Rule: rule("e1.example:8080")},
				{Tool: "pip", Setting: "PIP_EXTRA_INDEX_URL", Value: "https://e2.example/", Rule: rule("e2.example:443")},
			},
		},
		{
			name: "underscored keys and :env: entries",
			out:  ":env:.index_url='https://envcfg.example/simple'\n",
			want: []Source{{Tool: "pip", Setting: ":env:.index_url", Value: "https://envcfg.example/simple", Rule: rule("envcfg.example:443")}},
		},
		{
			name: "a variable pip listed is not read again",
			out:  ":env:.index-url='https://env.example/simple'\n",
			env:  map[string]string{"PIP_INDEX_URL": "https://env.example/simple"},
			want: []Source{{Tool: "pip", Setting: ":env:.index-url", Value: "https://env.example/simple", Rule: rule("env.example:443")}},
		},
		{name: "no-index: no defaults", out: "global.no-index='true'\n", want: nil},
		{name: "PIP_NO_INDEX", env: map[string]string{"PIP_NO_INDEX": "1"}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parsePip(tc.out, func(k string) string { return tc.env[k] })
			if diff := cmp.Diff(tc.want, got, ruleText); diff != "" {
				t.Errorf("parsePip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRegistriesMissingTools: a tool that is not installed, or fails, is
// skipped and said so; the others still count.
func TestRegistriesMissingTools(t *testing.T) {
	r := runner{
		lookPath: func(name string) (string, error) {
			if name == "go" || name == "pip3" {
				return "/fake/" + name, nil
			}
			return "", exec.ErrNotFound
		},
		run: func(ctx context.Context, path string, env []string, args ...string) ([]byte, error) {
			switch path {
			case "/fake/go":
				return []byte("https://proxy.golang.org,direct\nsum.golang.org\n"), nil
			default:
				return nil, errors.New("exit status 1: pip is broken")
			}
		},
		getenv: func(string) string { return "" },
	}
	rules, found := registries(t.Context(), r)
	wantRules := []Rule{rule("proxy.golang.org:443"), rule("sum.golang.org:443")}
	if diff := cmp.Diff(wantRules, rules, ruleText); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	wantFound := []Source{
		{Tool: "go", Setting: "GOPROXY", Value: "https://proxy.golang.org", Rule: rule("proxy.golang.org:443")},
		{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		{Tool: "go", Setting: "GOSUMDB", Value: "sum.golang.org", Rule: rule("sum.golang.org:443")},
		{Tool: "npm", Note: "npm is not installed (not on PATH)"},
		{Tool: "pip", Note: "pip config list failed: exit status 1: pip is broken"},
	}
	if diff := cmp.Diff(wantFound, found, ruleText); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
}

// TestRegistriesRealGoEnv runs the real tools of this machine and checks
// that the host of `go env GOPROXY`, read here at run time, is found.
func TestRegistriesRealGoEnv(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []Rule
	for _, s := range parseGOPROXY(strings.TrimSpace(string(out))) {
		if s.Rule != (Rule{}) {
			want = append(want, s.Rule)
		}
	}
	if len(want) == 0 {
		t.Skipf("GOPROXY=%s names no host", strings.TrimSpace(string(out)))
	}
	rules, found := Registries(t.Context())
	for _, w := range want {
		if !containsRule(rules, w) {
			t.Errorf("Registries found %v, without %s from GOPROXY", rules, w)
		}
	}
	for _, s := range found {
		t.Logf("%s", s)
	}
}
