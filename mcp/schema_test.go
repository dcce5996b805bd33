package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/tools"
)

// TestPortableInput rewrites nullable types: a property that may be null
// is optional without null, an env value keeps null as an anyOf branch,
// network's branches lose null, and no type array is left.
func TestPortableInput(t *testing.T) {
	s, err := jsonschema.For[StepInput](schemaOptions)
	if err != nil {
		t.Fatal(err)
	}
	portableInput(s)
	for _, c := range []struct {
		name string
		got  *jsonschema.Schema
		want string
	}{
		{"argv", s.Properties["argv"], `{"type":"array","items":{"type":"string"},"description":"as in run_command"}`},
		{"pty", s.Properties["pty"], `{"type":"boolean","description":"run it in a pseudo-terminal or not (default: as the command)"}`},
		{"env's values", s.Properties["env"].AdditionalProperties, `{"anyOf":[{"type":"string"},{"type":"null"}]}`},
		{"sandbox.network", s.Properties["sandbox"].Properties["network"],
			`{"anyOf":[{"type":"boolean"},{"type":"object","properties":{"allow":{"type":"array","items":{"type":"string"}}},"required":["allow"],"additionalProperties":false}]}`},
	} {
		b, err := json.Marshal(c.got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, string(b)); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestDeniedLine names the refused hosts in one line, the first ten of
// them, and counts the rest.
func TestDeniedLine(t *testing.T) {
	if got := deniedLine(nil); got != "" {
		t.Errorf("deniedLine(nil) = %q", got)
	}
	if got := deniedLine(&protocol.NetworkUse{Allowed: []protocol.NetworkAllowed{{Host: "a", Port: 443}}}); got != "" {
		t.Errorf("deniedLine without denials = %q", got)
	}
	var n protocol.NetworkUse
	for i := range 12 {
		n.Denied = append(n.Denied, protocol.NetworkDenied{Host: fmt.Sprintf("h%d.example", i), Port: 443, Attempts: 1})
	}
	n.Denied[0].Host = "::1"
	got := deniedLine(&n)
	if strings.Contains(got, "\n") || !strings.Contains(got, "[::1]:443, h1.example:443") || !strings.Contains(got, "h9.example:443, and 2 more") ||
		strings.Contains(got, "h10.example") || !strings.Contains(got, "retrying will not help") {
		t.Errorf("deniedLine of 12 hosts = %q", got)
	}
}

// TestConfinementNote names the hosts of the allow-list, says when the
// registries were not read in time, and says "none" of an empty list.
func TestConfinementNote(t *testing.T) {
	registries := func(context.Context) []string { return nil }
	for _, c := range []struct {
		name       string
		sb         tools.SandboxConfig
		registries []string
		read       bool
		want, not  []string
	}{
		{"hosts", tools.SandboxConfig{NetworkAllow: []string{"example.org"}, Registries: registries}, []string{"proxy.golang.org:443"}, true,
			[]string{"hosts, through a proxy", ": example.org, proxy.golang.org:443. Any other host", "retrying will not help"}, []string{"not read yet"}},
		{"not read", tools.SandboxConfig{NetworkAllow: []string{"example.org"}, Registries: registries}, nil, false,
			[]string{": example.org, the package registries this machine's Go, npm and pip use (not read yet when this session began)."}, nil},
		{"none", tools.SandboxConfig{NetworkAllow: []string{}}, nil, true, []string{"ALL_PROXY: none. Any other host"}, nil},
		{"off", tools.SandboxConfig{}, nil, true, []string{"Network: commands have none"}, []string{"proxy"}},
		{"sandbox off", tools.SandboxConfig{Mode: tools.SandboxOff, NetworkAllow: []string{"example.org"}}, nil, true, nil, []string{"example.org"}},
	} {
		got := confinementNote(c.sb, c.registries, c.read)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the note %q does not say %q", c.name, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: the note %q says %q", c.name, got, w)
			}
		}
	}
}
