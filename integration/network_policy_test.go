//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// This file checks the policy side of issue 25 through the binary: what a
// request may ask of the network allow-list, protect and denyRead, what
// the server's flags give, and what initialize says of it. None of it
// needs a command to reach the network.

// netBadPatterns are malformed allow-list entries: each must be refused
// naming it, wherever it is given.
var netBadPatterns = []string{
	"*.",                  // a wildcard without a domain
	"a*b.com",             // a wildcard inside a label
	"*",                   // every host
	"example.com:65536",   // a port out of range
	"example.com:0",       // no port
	"https://example.com", // a URL
	"example.com/path",    // a path
	"user@example.com",    // user information
}

// TestNetworkAllowMalformedEntryRefused sends each malformed entry as the
// second of a request's sandbox.network.allow, on runCommand and on a
// recipe step: -32602 naming the entry's index and the entry, and the
// command never runs.
func TestNetworkAllowMalformedEntryRefused(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	for i, bad := range netBadPatterns {
		allow := map[string]any{"allow": []string{"example.com", bad}}
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		_, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": allow}})
		netInvalidParams(t, "runCommand with "+bad, e, "sandbox.network.allow[1]", fmt.Sprintf("%q", bad))
		netMarkerAbsent(t, "runCommand with "+bad, marker)

		stepMarker := marker + "-step"
		e = s.call("longRunning", map[string]any{"steps": []map[string]any{
			{"name": "first", "argv": netTouch(stepMarker)},
			{"name": "second", "argv": []string{"true"}, "sandbox": map[string]any{"network": allow}},
		}}, nil)
		netInvalidParams(t, "a recipe step with "+bad, e, "steps[1].sandbox.network.allow[1]", fmt.Sprintf("%q", bad))
		netMarkerAbsent(t, "a recipe step with "+bad, stepMarker)
	}
}

// TestNetworkAllowMalformedEntryRefusedAtInitialize gives a malformed entry
// in initializationOptions.sandbox: initialize fails with -32602 naming
// it, and the session can still initialize with a good list.
func TestNetworkAllowMalformedEntryRefusedAtInitialize(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	ctx, cancel := limit()
	defer cancel()
	_, err := s.c.Initialize(ctx, &protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{
		Sandbox: &protocol.Sandbox{Network: &protocol.Network{Allow: []string{"a*b.com"}}},
	}})
	netInvalidParams(t, "initialize", s.rpcError(err), "initializationOptions.sandbox.network.allow[0]", `"a*b.com"`)
	ir := s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{
		Sandbox: &protocol.Sandbox{Network: &protocol.Network{Allow: []string{"example.com"}}},
	}})
	if diff := cmp.Diff(&protocol.Network{Allow: []string{"example.com"}}, ir.Capabilities.Sandbox.Default.Network); diff != "" {
		t.Errorf("the default network after a good initialize: mismatch (-want +got):\n%s", diff)
	}
}

// TestNetworkAllowMalformedFlagExits gives each malformed entry as
// --network-allow, to toolhost and to toolhost mcp: the binary exits 2
// before serving, saying which flag and which entry, and why.
func TestNetworkAllowMalformedFlagExits(t *testing.T) {
	t.Parallel()
	for _, sub := range [][]string{nil, {"mcp"}} {
		for _, bad := range netBadPatterns {
			args := append(slices.Clone(sub), "--root", t.TempDir(), "--sandbox-network", "allow", "--network-allow", "example.com", "--network-allow", bad)
			cmd := exec.Command(binary, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("%q: err %v, want exit code 2", args, err)
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			for _, w := range []string{"network-allow", fmt.Sprintf("%q", bad), "malformed"} {
				if !strings.Contains(first, w) {
					t.Errorf("%q: the first line of stderr %q does not say %s", args, first, w)
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("%q: wrote %q on stdout, which belongs to the protocol", args, stdout.String())
			}
		}
	}
}

// TestNetworkAllowFlagNeedsAllowMode gives --network-allow with the
// network on or off: the binary exits 2 saying it needs --sandbox-network
// allow, rather than ignoring the list.
func TestNetworkAllowFlagNeedsAllowMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"on", "off"} {
		cmd := exec.Command(binary, "--root", t.TempDir(), "--sandbox-network", mode, "--network-allow", "example.com")
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stderr = strings.NewReader(""), &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("--sandbox-network %s --network-allow: err %v, want exit code 2", mode, err)
		}
		if !strings.Contains(stderr.String(), "--sandbox-network allow") {
			t.Errorf("--sandbox-network %s --network-allow: stderr %q does not say --sandbox-network allow is needed", mode, stderr.String())
		}
	}
}

// TestNetworkRequestCannotWidenAllowList asks, of a server limited to
// example.com, for more: the whole network, another host, the domain's
// subdomains, another port, an IP literal. Each is -32602 naming the first
// entry that is too wide, by its index, and the command never runs.
func TestNetworkRequestCannotWidenAllowList(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--sandbox-network", "allow", "--network-allow", "example.com"}})
	ir := s.initialize(nil)
	if diff := cmp.Diff(&protocol.Network{Allow: []string{"example.com"}}, ir.Capabilities.Sandbox.Default.Network); diff != "" {
		t.Fatalf("the server's default network: mismatch (-want +got):\n%s", diff)
	}
	cases := []struct {
		name    string
		network any
		field   string
		names   string // what the message must name
	}{
		{"the whole network", true, "sandbox.network", "example.com"},
		{"another host", map[string]any{"allow": []string{"example.org"}}, "sandbox.network.allow[0]", `"example.org"`},
		{"the subdomains", map[string]any{"allow": []string{"example.com", "*.example.com"}}, "sandbox.network.allow[1]", `"*.example.com"`},
		{"another port", map[string]any{"allow": []string{"example.com:8080"}}, "sandbox.network.allow[0]", `"example.com:8080"`},
		{"an IP literal", map[string]any{"allow": []string{"192.0.2.1"}}, "sandbox.network.allow[0]", `"192.0.2.1"`},
	}
	for i, c := range cases {
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		_, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": c.network}})
		netInvalidParams(t, "runCommand asking for "+c.name, e, c.field, c.names)
		netMarkerAbsent(t, "runCommand asking for "+c.name, marker)

		longMarker := marker + "-long"
		e = s.call("longRunning", map[string]any{"argv": netTouch(longMarker), "sandbox": map[string]any{"network": c.network}}, nil)
		netInvalidParams(t, "longRunning asking for "+c.name, e, c.field, c.names)
		netMarkerAbsent(t, "longRunning asking for "+c.name, longMarker)
	}
}

// TestNetworkRequestNarrowsAllowList asks, of a server limited to
// example.com and *.example.org, for less: one port of example.com, in
// another case with a trailing dot, and one subdomain. The command runs.
func TestNetworkRequestNarrowsAllowList(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--sandbox-network", "allow", "--network-allow", "example.com", "--network-allow", "*.example.org"}})
	s.initialize(nil)
	for i, allow := range [][]string{{"example.com:443"}, {"EXAMPLE.com."}, {"api.example.org:80", "deep.api.example.org"}, {}} {
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		res, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": map[string]any{"allow": allow}}})
		if e != nil {
			t.Errorf("narrowing to %q: %v", allow, e)
			continue
		}
		if !res.Success {
			t.Errorf("narrowing to %q: the command failed: exit %s, stderr %q", allow, sbCode(res), res.Stderr)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("narrowing to %q: the command did not run: %v", allow, err)
		}
	}
}

// TestNetworkOffRefusesAllowList asks, of a server with the network off,
// for an allow-list and for the whole network: -32602 naming
// sandbox.network, and the command never runs.
func TestNetworkOffRefusesAllowList(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--sandbox-network", "off"}})
	ir := s.initialize(nil)
	if diff := cmp.Diff(protocol.NetworkOff(), ir.Capabilities.Sandbox.Default.Network); diff != "" {
		t.Fatalf("the server's default network: mismatch (-want +got):\n%s", diff)
	}
	for i, network := range []any{map[string]any{"allow": []string{"example.com"}}, true} {
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		_, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": network}})
		netInvalidParams(t, fmt.Sprintf("network %v under --sandbox-network off", network), e, "sandbox.network", "off")
		netMarkerAbsent(t, fmt.Sprintf("network %v under --sandbox-network off", network), marker)
	}
}

// TestNetworkMalformedValueRefused gives sandbox.network values that are
// neither a boolean nor {allow: [...]}: -32602 naming sandbox.network.
func TestNetworkMalformedValueRefused(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	for i, network := range []any{"allow", map[string]any{}, map[string]any{"allow": "example.com"}, map[string]any{"allow": []string{"example.com"}, "deny": []string{}}} {
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		_, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": network}})
		if e == nil || e.Code != protocol.CodeInvalidParams || !strings.HasPrefix(errData(e).Field, "sandbox") {
			t.Errorf("network %v: answered %v (field %q), want -32602 naming sandbox.network", network, e, errData(e).Field)
		}
		netMarkerAbsent(t, fmt.Sprintf("network %v", network), marker)
	}
}

// TestInitializeReportsNetworkDefault checks capabilities.sandbox.default
// for the server's network flags: plain toolhost is on with nothing
// protected or denied, off is off, and an allow-list is given back in its
// canonical form.
func TestInitializeReportsNetworkDefault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want protocol.Sandbox
	}{
		{"plain toolhost", nil, protocol.Sandbox{Filesystem: protocol.SandboxWorkspaceWrite, Network: protocol.NetworkOn()}},
		{"--sandbox-network off", []string{"--sandbox-network", "off"}, protocol.Sandbox{Filesystem: protocol.SandboxWorkspaceWrite, Network: protocol.NetworkOff()}},
		{"--sandbox-network allow", []string{"--sandbox-network", "allow", "--network-allow", "Example.COM.", "--network-allow", "*.example.org:8443", "--network-allow", "[::1]:8080"},
			protocol.Sandbox{Filesystem: protocol.SandboxWorkspaceWrite, Network: &protocol.Network{Allow: []string{"example.com", "*.example.org:8443", "[::1]:8080"}}}},
		{"--sandbox-network allow, nothing listed", []string{"--sandbox-network", "allow"},
			protocol.Sandbox{Filesystem: protocol.SandboxWorkspaceWrite, Network: &protocol.Network{Allow: []string{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, options{args: c.args})
			got := s.initialize(nil).Capabilities.Sandbox.Default
			sortAllow := cmp.Transformer("sortAllow", func(n protocol.Network) protocol.Network {
				n.Allow = slices.Sorted(slices.Values(n.Allow))
				return n
			})
			if diff := cmp.Diff(c.want, got, sortAllow); diff != "" {
				t.Errorf("capabilities.sandbox.default: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInitializeReportsRegistries starts toolhost with
// --network-allow-registries: the default allow-list holds the hosts this
// machine's go and npm are configured to fetch from, as their own
// configuration says.
func TestInitializeReportsRegistries(t *testing.T) {
	t.Parallel()
	want := []string{netGoProxyEntry(t), netNpmRegistryEntry(t)}
	s := start(t, options{args: []string{"--sandbox-network", "allow", "--network-allow-registries"}, env: os.Environ()})
	n := s.initialize(nil).Capabilities.Sandbox.Default.Network
	if n == nil || n.Allow == nil {
		t.Fatalf("capabilities.sandbox.default.network = %+v, want an allow-list", n)
	}
	for _, w := range want {
		if !slices.Contains(n.Allow, w) {
			t.Errorf("the default allow-list %q lacks %q", n.Allow, w)
		}
	}
}

// TestSandboxProtectAndDenyReadAddToServer gives --protect and --deny-read
// on the command line and more in initializationOptions.sandbox: the
// default is both lists together, absolute, sorted and without the
// duplicates, "~" being the server's $HOME.
func TestSandboxProtectAndDenyReadAddToServer(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir()}
	s := start(t, options{env: env, args: []string{"--protect", ".git/hooks", "--deny-read", "~/.toolhost-secret"}})
	ir := s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Sandbox: &protocol.Sandbox{
		Protect:  []string{"secrets/keys", ".git/hooks", filepath.Join(s.root, ".git", "config")},
		DenyRead: []string{"/nonexistent-toolhost/secret", "~/.toolhost-secret"},
	}}})
	got := ir.Capabilities.Sandbox.Default
	want := protocol.Sandbox{
		Filesystem: protocol.SandboxWorkspaceWrite,
		Network:    protocol.NetworkOn(),
		Protect:    []string{filepath.Join(s.root, ".git", "config"), filepath.Join(s.root, ".git", "hooks"), filepath.Join(s.root, "secrets", "keys")},
		DenyRead:   []string{"/nonexistent-toolhost/secret", filepath.Join(home, ".toolhost-secret")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities.sandbox.default: mismatch (-want +got):\n%s", diff)
	}

	plain := start(t, options{env: env, args: []string{"--protect", ".git/hooks", "--deny-read", "~/.toolhost-secret"}})
	got = plain.initialize(nil).Capabilities.Sandbox.Default
	want.Protect = []string{filepath.Join(plain.root, ".git", "hooks")}
	want.DenyRead = []string{filepath.Join(home, ".toolhost-secret")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities.sandbox.default without initializationOptions: mismatch (-want +got):\n%s", diff)
	}
}

// TestSandboxProtectOutsideRootRefused asks to protect paths outside the
// root, or to deny a relative path, in a request and in initialize: -32602
// naming the entry, and the command never runs.
func TestSandboxProtectOutsideRootRefused(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	outside := t.TempDir()
	cases := []struct {
		sandbox map[string]any
		field   string
		names   string
	}{
		{map[string]any{"protect": []string{"src", "../outside"}}, "sandbox.protect[1]", `"../outside"`},
		{map[string]any{"protect": []string{outside}}, "sandbox.protect[0]", fmt.Sprintf("%q", outside)},
		{map[string]any{"protect": []string{"."}}, "sandbox.protect[0]", `"."`},
		{map[string]any{"protect": []string{""}}, "sandbox.protect[0]", `""`},
		{map[string]any{"denyRead": []string{"~/.ssh", "relative/secret"}}, "sandbox.denyRead[1]", `"relative/secret"`},
	}
	ctx, cancel := limit()
	defer cancel()
	_, err := s.c.Initialize(ctx, &protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Sandbox: &protocol.Sandbox{Protect: []string{outside}}}})
	netInvalidParams(t, "initialize protecting "+outside, s.rpcError(err), "initializationOptions.sandbox.protect[0]", fmt.Sprintf("%q", outside))
	s.initialize(nil)
	for i, c := range cases {
		marker := filepath.Join(s.root, fmt.Sprintf("ran-%d", i))
		_, e := netRunResult(t, s, map[string]any{"argv": netTouch(marker), "sandbox": c.sandbox})
		netInvalidParams(t, fmt.Sprintf("sandbox %v", c.sandbox), e, c.field, c.names)
		netMarkerAbsent(t, fmt.Sprintf("sandbox %v", c.sandbox), marker)
	}
}

// TestSandboxProtectFlagOutsideRootRefused starts toolhost with --protect
// outside its root: the session cannot start confined commands on a
// protection it cannot give, so initialize fails naming --protect.
func TestSandboxProtectFlagOutsideRootRefused(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	s := start(t, options{args: []string{"--protect", outside}})
	ctx, cancel := limit()
	defer cancel()
	_, err := s.c.Initialize(ctx, nil)
	e := s.rpcError(err)
	if e == nil || !strings.Contains(e.Message, "--protect") || !strings.Contains(e.Message, outside) {
		t.Errorf("initialize with --protect %s: answered %v, want an error naming --protect and the path", outside, e)
	}
}

// TestMCPDefaultNetworkIsRegistries checks toolhost mcp's default network
// through an MCP session: an allow-list holding the Go module proxy (as go
// env GOPROXY names it), so a command may narrow to that host, while the
// whole network or a host outside it is refused with -32602.
func TestMCPDefaultNetworkIsRegistries(t *testing.T) {
	t.Parallel()
	goproxy := netGoProxyEntry(t)
	s := startMCP(t, mcpOptions{})
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"true"}, "sandbox": map[string]any{"network": map[string]any{"allow": []string{goproxy}}}}, &res)
	if !res.Success {
		t.Errorf("run_command narrowed to %s: exit %s, stderr %q", goproxy, sbCode(res), res.Stderr)
	}
	for _, c := range []struct {
		network any
		field   string
	}{
		{true, "sandbox.network"},
		{map[string]any{"allow": []string{"example.com"}}, "sandbox.network.allow[0]"},
	} {
		marker := filepath.Join(s.root, "ran")
		e := s.toolErr("run_command", map[string]any{"argv": netTouch(marker), "sandbox": map[string]any{"network": c.network}})
		if e.Error.Code != protocol.CodeInvalidParams || e.Error.Data.Field != c.field {
			t.Errorf("run_command with network %v: error %d %q (field %q), want -32602 naming %s", c.network, e.Error.Code, e.Error.Message, e.Error.Data.Field, c.field)
		}
		netMarkerAbsent(t, fmt.Sprintf("run_command with network %v", c.network), marker)
	}
}

// TestMCPSandboxNetworkOnGivesBackTheNetwork starts toolhost mcp with
// --sandbox-network on: a command may ask for the whole network again.
func TestMCPSandboxNetworkOnGivesBackTheNetwork(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", root, "--sandbox-network", "on"}})
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"true"}, "sandbox": map[string]any{"network": true}}, &res)
	if !res.Success {
		t.Errorf("run_command with network true: exit %s, stderr %q", sbCode(res), res.Stderr)
	}
}
