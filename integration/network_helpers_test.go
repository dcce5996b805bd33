//go:build linux

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// This file holds what the network tests (issue 25, BRIEF.md Part 3 "A
// network by name; nothing outside to reach") need beside the harness and
// the sandbox helpers: the registries' hosts as this machine's tools are
// configured, the guard of the tests that need the enforcement, and
// runCommand with a sandbox of the test's choosing.

// netEnforcementLayer is the layer initialize's capabilities.sandbox.layers
// lists once issue 25's enforcement is there: a network namespace per
// command whose only way out is toolhost's proxy.
const netEnforcementLayer = "proxy"

// netSkipReason is why a test that needs the enforcement is skipped
// without it.
const netSkipReason = "needs issue 25's network namespace enforcement (not merged yet)"

// needNetEnforcement skips the test unless the server's layers (from
// initialize) list the proxy.
func needNetEnforcement(t testing.TB, layers []string) {
	t.Helper()
	if !slices.ContainsFunc(layers, func(l string) bool { return strings.HasPrefix(l, netEnforcementLayer) }) {
		t.Skipf("%s: initialize's capabilities.sandbox.layers %q has no %q", netSkipReason, layers, netEnforcementLayer)
	}
}

// needNetEnforcementOfBinary is needNetEnforcement for tests that speak
// MCP, whose initialize has no layers: it asks the same binary once,
// through toolhost's own initialize.
func needNetEnforcementOfBinary(t testing.TB) {
	t.Helper()
	layers, err := netBinaryLayers()
	if err != nil {
		t.Fatalf("asking the binary for its sandbox layers: %v", err)
	}
	needNetEnforcement(t, layers)
}

// netBinaryLayers runs the binary once, initializes it over NDJSON and
// returns its capabilities.sandbox.layers.
var netBinaryLayers = sync.OnceValues(func() ([]string, error) {
	root, err := os.MkdirTemp("", "toolhost-net-probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	cmd := exec.Command(binary, "--root", root, "--framing", "ndjson", "--log-level", "error")
	cmd.Env = quickExitEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()
	defer in.Close() // the server ends at EOF
	if _, err := in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var m struct {
		Result *protocol.InitializeResult `json:"result"`
		Error  *protocol.Error            `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("%w: %q", err, line)
	}
	if m.Result == nil {
		return nil, fmt.Errorf("initialize answered %s", line)
	}
	return m.Result.Capabilities.Sandbox.Layers, nil
})

// netNeedTool returns the path of a program the test needs. Without it the
// test is skipped; when CI installs the program (ci), CI=true fails it
// instead, as the destination tests do without sshd.
func netNeedTool(t testing.TB, name string, ci bool) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if ci && os.Getenv("CI") == "true" {
		t.Fatalf("this test needs %s, which CI installs, and CI=true: %v", name, err)
	}
	t.Skipf("this test needs %s, which is not on PATH: %v", name, err)
	return ""
}

// netRegistryEntry returns the allow-list entry ("host:port") of the
// first http(s) URL of a tool's configuration, read with argv, as
// --network-allow-registries reads it. It skips the test when the tool is
// missing (failing it under CI=true) or names no host.
func netRegistryEntry(t testing.TB, tool string, argv ...string) string {
	t.Helper()
	p := netNeedTool(t, argv[0], true)
	out, err := exec.Command(p, argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	for _, v := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		u, err := url.Parse(strings.TrimSpace(v))
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		switch {
		case port != "":
		case strings.EqualFold(u.Scheme, "https"):
			port = "443"
		case strings.EqualFold(u.Scheme, "http"):
			port = "80"
		default:
			continue
		}
		return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	}
	t.Skipf("%s (%s) names no http(s) host: %q", tool, strings.Join(argv, " "), out)
	return ""
}

// netGoProxyEntry is the entry of the Go module proxy this machine's go
// uses (go env GOPROXY).
func netGoProxyEntry(t testing.TB) string {
	t.Helper()
	return netRegistryEntry(t, "the Go module proxy", "go", "env", "GOPROXY")
}

// netNpmRegistryEntry is the entry of the npm registry this machine's npm
// uses (npm config get registry).
func netNpmRegistryEntry(t testing.TB) string {
	t.Helper()
	return netRegistryEntry(t, "the npm registry", "npm", "config", "get", "registry")
}

// netRunResult runs runCommand with params and waits up to waitLimit past
// the command's own timeout; it returns the result or the error answer.
func netRunResult(t testing.TB, s *server, params map[string]any) (protocol.ToolResult, *protocol.Error) {
	t.Helper()
	timeout := time.Duration(0)
	if ms, ok := params["timeoutMs"].(int64); ok {
		timeout = time.Duration(ms) * time.Millisecond
	}
	p := s.request("runCommand", params)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit+timeout)
	defer cancel()
	var res protocol.ToolResult
	err := p.Wait(ctx, &res)
	var e *protocol.Error
	switch {
	case errors.As(err, &e):
		return res, e
	case err != nil:
		t.Fatalf("runCommand got no answer, the server is gone or stuck: %v", err)
	}
	return res, nil
}

// netRun runs sh -c script in cwd (relative to the root) with env, under
// sandbox (the request's sandbox member as JSON would have it), and
// returns its result; an error answer fails the test.
func netRun(t testing.TB, s *server, sandbox map[string]any, cwd, script string, env map[string]any, timeout time.Duration) protocol.ToolResult {
	t.Helper()
	res, e := netRunResult(t, s, map[string]any{
		"argv": []string{"sh", "-c", script}, "cwd": cwd, "env": env,
		"sandbox": sandbox, "timeoutMs": timeout.Milliseconds(),
	})
	if e != nil {
		data, _ := json.Marshal(e.Data)
		t.Fatalf("runCommand answered an error: %v (data %s)", e, data)
	}
	return res
}

// netAllow is the sandbox member of a workspace-write command limited to
// the allow-list entries.
func netAllow(entries ...string) map[string]any {
	if entries == nil {
		entries = []string{} // an empty list, not null, which is no list at all
	}
	return map[string]any{"filesystem": "workspace-write", "network": map[string]any{"allow": entries}}
}

// netInvalidParams checks an answer is -32602 naming field, with a message
// that names each of words.
func netInvalidParams(t testing.TB, what string, e *protocol.Error, field string, words ...string) {
	t.Helper()
	if e == nil {
		t.Errorf("%s: answered a result, want -32602 naming %s", what, field)
		return
	}
	if e.Code != protocol.CodeInvalidParams || errData(e).Field != field {
		data, _ := json.Marshal(e.Data)
		t.Errorf("%s: error %d %q (data %s), want %d with data.field %q", what, e.Code, e.Message, data, protocol.CodeInvalidParams, field)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Errorf("%s: the message %q does not name %q", what, e.Message, w)
		}
	}
}

// netMarkerAbsent checks a command that was refused never ran: the file
// its argv would have created does not exist.
func netMarkerAbsent(t testing.TB, what, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: the refused command ran anyway: %s exists (%v)", what, path, err)
	}
}

// netTouch is the argv of a command that shows it ran by creating path.
func netTouch(path string) []string { return []string{"sh", "-c", `: > "$1"`, "sh", path} }

// netListen listens on 127.0.0.1 (or ::1 for "tcp6") on a free port and
// closes the listener at the test's end.
func netListen(t testing.TB, network string) (net.Listener, int) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, l.Addr().(*net.TCPAddr).Port
}

// netRefusal is the text of a refusal by the proxy.
func netRefusal(host string, port int) string {
	return "toolhost: " + net.JoinHostPort(host, strconv.Itoa(port)) + " is not in this command's network allow-list"
}

// netWriteFile writes a file under dir, making its directories.
func netWriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	wsWrite(t, p, content)
	return p
}
