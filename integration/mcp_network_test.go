//go:build linux

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/protocol"
)

// Issue 34: a host refused by the network allow-list reads as a fault to
// the agent (curl: "(56) CONNECT tunnel failed, response 403"), and the
// server's instructions did not name the hosts allowed.

// refusalMarker begins the line of an MCP result that names the hosts the
// allow-list refused.
const refusalMarker = "refused by the network policy"

// TestMCPResultNamesRefusedHosts runs curl under toolhost mcp to two hosts
// outside the allow-list (plain HTTP, and HTTPS through CONNECT): the
// result's text has one line naming both, saying it is policy and that
// retrying will not help; a command that reaches only an allowed host has
// no such line.
func TestMCPResultNamesRefusedHosts(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	_, port := netAllowedServer(t, "allowed\n")
	allowed := fmt.Sprintf("127.0.0.1:%d", port)
	s := startMCP(t, mcpOptions{extra: []string{"--network-allow", allowed, "--network-allow-registries=false"}})

	var res protocol.ToolResult
	out := s.ok("run_command", map[string]any{"argv": []string{"sh", "-c",
		`curl -sS --max-time 20 http://denied.invalid/; curl -sS --max-time 20 https://refused.invalid:8443/; exit 7`}}, &res)
	if res.Network == nil {
		t.Fatalf("the result has no network member: %s", text(out))
	}
	want := []protocol.NetworkDenied{{Host: "denied.invalid", Port: 80, Attempts: 1}, {Host: "refused.invalid", Port: 8443, Attempts: 1}}
	if diff := cmp.Diff(want, res.Network.Denied, cmpopts.SortSlices(func(a, b protocol.NetworkDenied) bool { return a.Host < b.Host })); diff != "" {
		t.Errorf("the result's network.denied: mismatch (-want +got):\n%s", diff)
	}
	var lines []string
	for _, line := range strings.Split(firstText(t, out), "\n") {
		if strings.Contains(line, refusalMarker) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d lines of the result's text say %q, want 1:\n%s", len(lines), refusalMarker, text(out))
	}
	for _, part := range []string{"denied.invalid:80", "refused.invalid:8443", "retrying will not help"} {
		if !strings.Contains(lines[0], part) {
			t.Errorf("the refusal's line %q does not say %q", lines[0], part)
		}
	}
	if strings.Contains(lines[0], allowed) {
		t.Errorf("the refusal's line %q names the allowed host %s", lines[0], allowed)
	}

	out = s.ok("run_command", map[string]any{"argv": []string{"curl", "-sS", "--max-time", "20", "http://" + allowed + "/"}}, &res)
	if !res.Success {
		t.Fatalf("curl to the allowed %s: exit %s, stderr %q", allowed, sbCode(res), res.Stderr)
	}
	if strings.Contains(text(out), refusalMarker) {
		t.Errorf("a command that reached only an allowed host says %q:\n%s", refusalMarker, text(out))
	}
}

// TestMCPInstructionsNameAllowedHosts checks that initialize's
// instructions name every host of the network allow-list: those of
// --network-allow and the Go module proxy that --network-allow-registries
// found. npm and pip are left off the server's PATH, so that the
// registries are read at once and the list is this machine's go's.
func TestMCPInstructionsNameAllowedHosts(t *testing.T) {
	t.Parallel()
	goproxy := netGoProxyEntry(t)
	goBin := netNeedTool(t, "go", true)
	env := slices.DeleteFunc(quickExitEnv(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	env = append(env, "PATH="+filepath.Dir(goBin))
	for _, c := range []struct {
		name, version string
	}{{"initialize", versionTasks2025}, {"server/discover", versionTasks2026}} {
		t.Run(c.name, func(t *testing.T) {
			s := startMCP(t, mcpOptions{env: env, version: c.version, args: []string{"mcp", "--root", t.TempDir(),
				"--network-allow", "example.org", "--network-allow", "10.1.2.3:8080"}})
			got := s.cs.InitializeResult().Instructions
			for _, host := range []string{"example.org", "10.1.2.3:8080", goproxy} {
				if !strings.Contains(got, host) {
					t.Errorf("the instructions do not name %s:\n%s", host, got)
				}
			}
			for _, part := range []string{"not read yet", "package registries", "**/"} {
				if strings.Contains(got, part) {
					t.Errorf("the instructions say %q, whose registries were read and whose rules are told in words:\n%s", part, got)
				}
			}
			// The policy is told as the file tools' too, the repositories'
			// rules in words.
			for _, part := range []string{"Unreadable to commands and to read_file", "Read-only to commands and to write_file", "the .git/hooks of every repository in the workspace"} {
				if !strings.Contains(got, part) {
					t.Errorf("the instructions do not say %q:\n%s", part, got)
				}
			}
		})
	}
}
