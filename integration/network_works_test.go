//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/protocol"
)

// This file checks, through the binary, what must keep working under a
// network allow-list and the rest of issue 25's enforcement (BRIEF.md
// Part 3): real tools through the proxy (go mod download, npm ci, git over
// HTTPS), builds, git with its hooks protected, unix sockets in the root,
// a dev server reached through the forward, what the ToolResult reports,
// and toolhost mcp's defaults. Every test skips until the enforcement is
// there (needNetEnforcement). Registry hosts are read from the tools'
// own configuration at run time, never written here.

// netGoModule is a small real module (a few KB) the Go module proxy serves.
const netGoModule = "rsc.io/quote@v1.5.2"

// netNpmPackage and netNpmVersion are a small npm package with no
// dependencies.
const netNpmPackage, netNpmVersion = "is-number", "7.0.0"

// netRegistriesServer starts toolhost with the network limited to the
// registries (--sandbox-network allow --network-allow-registries), in the
// test's own environment so that it reads the same go and npm
// configuration as the test, and skips without the enforcement.
func netRegistriesServer(t *testing.T) *server {
	t.Helper()
	s := start(t, options{args: []string{"--sandbox-network", "allow", "--network-allow-registries"}, env: os.Environ()})
	needNetEnforcement(t, s.initialize(nil).Capabilities.Sandbox.Layers)
	return s
}

// netEnforcedServer starts plain toolhost (network on, so that each
// request gives its allow-list) and skips without the enforcement.
func netEnforcedServer(t *testing.T, o options) *server {
	t.Helper()
	s := start(t, o)
	needNetEnforcement(t, s.initialize(nil).Capabilities.Sandbox.Layers)
	return s
}

// netGoEnv is the environment of a go command through the proxy: go's
// directory on PATH, no toolchain download, and the module proxy and
// checksum database the test's go uses, so that the command asks the
// hosts the server read.
func netGoEnv(t *testing.T) map[string]any {
	t.Helper()
	goBin := netNeedTool(t, "go", true)
	env := map[string]any{"GOTOOLCHAIN": "local", "PATH": filepath.Dir(goBin) + ":" + os.Getenv("PATH")}
	for _, v := range []string{"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE"} {
		out, err := exec.Command(goBin, "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env[v] = strings.TrimSpace(string(out))
	}
	return env
}

// netGoDownloadScript prints go's module and build caches, then downloads
// netGoModule with -json.
const netGoDownloadScript = `go env GOMODCACHE GOCACHE && go mod download -json ` + netGoModule

// netCheckGoDownload checks the output of netGoDownloadScript: the caches
// are in the cache directory toolhost gives, and the module's zip landed
// in the module cache with its checksum.
func netCheckGoDownload(t *testing.T, stdout string) {
	t.Helper()
	lines := strings.SplitN(stdout, "\n", 3)
	if len(lines) < 3 {
		t.Fatalf("the download printed %q, want the caches and the module's JSON", stdout)
	}
	modCache, buildCache := lines[0], lines[1]
	if filepath.Base(modCache) != "go-mod" || filepath.Base(buildCache) != "go-build" || filepath.Dir(modCache) != filepath.Dir(buildCache) {
		t.Errorf("GOMODCACHE %q and GOCACHE %q are not in the cache directory toolhost gives (the root's, or the session's)", modCache, buildCache)
	}
	var mod struct{ Path, Version, Zip, Sum, Error string }
	if err := json.Unmarshal([]byte(lines[2]), &mod); err != nil {
		t.Fatalf("go mod download -json printed %q: %v", lines[2], err)
	}
	path, version, _ := strings.Cut(netGoModule, "@")
	if mod.Error != "" || mod.Path != path || mod.Version != version || mod.Sum == "" || !strings.HasPrefix(mod.Zip, modCache+"/") {
		t.Errorf("go mod download %s: %+v; want it downloaded, with its sum, into %s", netGoModule, mod, modCache)
	}
}

// TestNetworkProxyEnvironment runs a command limited to a test server on
// the host's loopback: it sees HTTP_PROXY, HTTPS_PROXY and ALL_PROXY, in
// both cases, pointing at its own loopback, NO_PROXY empty, reaches the
// server with curl through them, and the result says which list applied.
func TestNetworkProxyEnvironment(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s := netEnforcedServer(t, options{})
	const body = "through the proxy"
	_, port := netAllowedServer(t, body)
	entry := fmt.Sprintf("127.0.0.1:%d", port)
	res := netRun(t, s, netAllow(entry), "", `for v in HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy; do eval "echo $v=\"\${$v-unset}\""; done
curl -sS --max-time 20 "http://$ENTRY/"`, map[string]any{"ENTRY": entry}, sbTimeout)
	if !res.Success {
		t.Fatalf("the command failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		u, err := url.Parse(vars[v])
		var addr netip.Addr
		if err == nil {
			addr, err = netip.ParseAddr(u.Hostname())
		}
		if err != nil || !addr.IsLoopback() || u.Port() == "" {
			t.Errorf("%s=%q, want a proxy URL on the command's loopback (%v)", v, vars[v], err)
		}
	}
	for _, v := range []string{"NO_PROXY", "no_proxy"} {
		if vars[v] != "" && vars[v] != "unset" {
			t.Errorf("%s=%q: a host in it would skip the proxy", v, vars[v])
		}
	}
	if !strings.HasSuffix(res.Stdout, body) {
		t.Errorf("curl through the proxy did not get the allowed server's answer: stdout %q", res.Stdout)
	}
	if res.Sandbox == nil {
		t.Fatal("the result has no sandbox member")
	}
	if diff := cmp.Diff([]string{entry}, res.Sandbox.NetworkAllow); diff != "" {
		t.Errorf("sandbox.networkAllow: mismatch (-want +got):\n%s", diff)
	}
}

// TestNetworkGitCommitWithHooksProtected protects .git/hooks and
// .git/config, as toolhost mcp does: a confined command makes the
// repository, a second one (now with both protected) adds and commits,
// and neither protected path changed.
func TestNetworkGitCommitWithHooksProtected(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "git", false)
	s := netEnforcedServer(t, options{args: []string{"--protect", ".git/hooks", "--protect", ".git/config"}})
	sandbox := map[string]any{"filesystem": "workspace-write", "network": false}
	res := netRun(t, s, sandbox, "", `git init -q -b main .`, nil, sbTimeout)
	if !res.Success {
		t.Fatalf("git init failed: exit %s, stderr %q", sbCode(res), res.Stderr)
	}
	git := filepath.Join(s.root, ".git")
	before := sbSnapshot(t, "", filepath.Join(git, "hooks"), filepath.Join(git, "config"))
	res = netRun(t, s, sandbox, "", `echo hello > a.txt && git add a.txt &&
git -c user.name=toolhost -c user.email=toolhost@example.invalid -c commit.gpgsign=false commit -q -m first &&
git log --format=%s`, nil, sbTimeout)
	if !res.Success {
		t.Fatalf("git add and commit with the hooks and config protected failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	if diff := cmp.Diff("first\n", res.Stdout); diff != "" {
		t.Errorf("git log: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, sbSnapshot(t, "", filepath.Join(git, "hooks"), filepath.Join(git, "config"))); diff != "" {
		t.Errorf("the protected paths changed: mismatch (-want +got):\n%s", diff)
	}
	if res.Sandbox == nil || !slices.Contains(res.Sandbox.Protect, filepath.Join(git, "hooks")) || !slices.Contains(res.Sandbox.Protect, filepath.Join(git, "config")) {
		t.Errorf("the result's sandbox does not report .git/hooks and .git/config protected: %+v", res.Sandbox)
	}
}

// TestNetworkGoBuildAndTestUnderAllowList builds and tests a tiny module
// in the root with the network limited to the registries: its own network
// namespace and PID namespace do not get in go's way.
func TestNetworkGoBuildAndTestUnderAllowList(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t) // before the slow preparation
	env := netGoEnv(t)
	s := netRegistriesServer(t)
	dir := filepath.Join(s.root, "tested")
	wsWrite(t, filepath.Join(dir, "go.mod"), "module example.com/tested\n\ngo 1.26\n")
	wsWrite(t, filepath.Join(dir, "add.go"), "package main\n\nfunc Add(a, b int) int { return a + b }\n\nfunc main() { println(Add(2, 3)) }\n")
	wsWrite(t, filepath.Join(dir, "add_test.go"), "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n")
	res := netRun(t, s, nil, "tested", `go build -o tested . && ./tested 2>&1 && go test ./... 2>&1`, env, 3*time.Minute)
	if !res.Success {
		t.Fatalf("go build and go test failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	if !strings.HasPrefix(res.Stdout, "5\n") || !strings.Contains(res.Stdout, "ok  \texample.com/tested") {
		t.Errorf("stdout %q, want the program's 5 and go test's ok", res.Stdout)
	}
}

// TestNetworkGoModDownloadThroughProxy downloads a small real module from
// the Go module proxy this machine's go names, under
// --network-allow-registries: through the proxy, into the session's
// module cache.
func TestNetworkGoModDownloadThroughProxy(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t) // before the slow preparation
	env := netGoEnv(t)
	netGoProxyEntry(t) // skips when go names no proxy host
	s := netRegistriesServer(t)
	res := netRun(t, s, nil, "", netGoDownloadScript, env, 3*time.Minute)
	if !res.Success {
		t.Fatalf("go mod download failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	netCheckGoDownload(t, res.Stdout)
}

// TestNetworkNpmCiThroughProxy installs a one-package lockfile, resolved
// from the registry this machine's npm names, under
// --network-allow-registries: npm reaches the registry through the proxy.
func TestNetworkNpmCiThroughProxy(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t) // before the slow preparation
	npm := netNeedTool(t, "npm", true)
	out, err := exec.Command(npm, "config", "get", "registry").Output()
	if err != nil {
		t.Fatalf("npm config get registry: %v", err)
	}
	registry := strings.TrimSpace(string(out))
	if !strings.HasSuffix(registry, "/") {
		registry += "/"
	}
	netNpmRegistryEntry(t) // skips when npm names no http(s) host
	s := netRegistriesServer(t)
	dir := filepath.Join(s.root, "app")
	wsWrite(t, filepath.Join(dir, "package.json"), fmt.Sprintf(`{"name":"app","version":"1.0.0","dependencies":{%q:%q}}`, netNpmPackage, netNpmVersion))
	wsWrite(t, filepath.Join(dir, "package-lock.json"), fmt.Sprintf(`{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"app","version":"1.0.0","dependencies":{%[1]q:%[2]q}},"node_modules/%[1]s":{"version":%[2]q,"resolved":"%[3]s%[1]s/-/%[1]s-%[2]s.tgz"}}}`,
		netNpmPackage, netNpmVersion, registry))
	env := map[string]any{"PATH": filepath.Dir(npm) + ":" + os.Getenv("PATH"), "npm_config_registry": registry}
	res := netRun(t, s, nil, "app", `npm ci --no-audit --no-fund --loglevel=error 2>&1`, env, 3*time.Minute)
	if !res.Success {
		t.Fatalf("npm ci failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	var pkg struct{ Name, Version string }
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", netNpmPackage, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || pkg.Name != netNpmPackage || pkg.Version != netNpmVersion {
		t.Errorf("node_modules/%s/package.json: %+v (%v), want version %s", netNpmPackage, pkg, err, netNpmVersion)
	}
}

// netGitServer serves a bare repository with one commit ("first") over
// HTTPS, through git http-backend behind a test TLS server on 127.0.0.1,
// and returns its URL and the test CA's PEM.
func netGitServer(t *testing.T) (repoURL string, caPEM []byte) {
	t.Helper()
	git := netNeedTool(t, "git", false)
	out, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git has no http-backend here: %v", err)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	work := filepath.Join(dir, "work")
	run("init", "-q", "-b", "main", work)
	wsWrite(t, filepath.Join(work, "README"), "served over HTTPS\n")
	run("-C", work, "add", "README")
	run("-C", work, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "first")
	run("init", "-q", "--bare", "-b", "main", filepath.Join(dir, "repo.git"))
	run("-C", work, "push", "-q", filepath.Join(dir, "repo.git"), "main")
	srv := httptest.NewTLSServer(&cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestNetworkGitCloneOverHTTPSThroughProxy clones from a test HTTPS git
// server on the host's loopback, listed by its IP literal: git tunnels
// through the proxy with CONNECT and verifies the test CA.
func TestNetworkGitCloneOverHTTPSThroughProxy(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t) // before the slow preparation
	repo, ca := netGitServer(t)
	s := netEnforcedServer(t, options{})
	caFile := netWriteFile(t, s.root, "test-ca.pem", string(ca))
	u, _ := url.Parse(repo)
	res := netRun(t, s, netAllow(u.Host), "", `git -c http.sslCAInfo="$CA" clone -q "$REPO" cloned && git -C cloned log --format=%s && cat cloned/README`,
		map[string]any{"CA": caFile, "REPO": repo}, 2*time.Minute)
	if !res.Success {
		t.Fatalf("git clone over HTTPS through the proxy failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	if diff := cmp.Diff("first\nserved over HTTPS\n", res.Stdout); diff != "" {
		t.Errorf("the clone: mismatch (-want +got):\n%s", diff)
	}
}

// TestNetworkUnixSocketInsideRoot runs a unix socket server and its client
// in the root, under an allow-list: they talk. A kernel whose Landlock
// cannot tell a socket inside the root from one outside (below ABI 9)
// may refuse every pathname unix socket, as PROTOCOL.md says; the test
// then says so.
func TestNetworkUnixSocketInsideRoot(t *testing.T) {
	t.Parallel()
	py := sbPython(t)
	s := netEnforcedServer(t, options{})
	res := netRun(t, s, netAllow(), "", `"$PY" -c 'import os, socket, threading
path = os.path.join(os.getcwd(), "inside.sock")
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(1)
def serve():
    c, _ = srv.accept()
    c.sendall(b"pong " + c.recv(16))
    c.close()
threading.Thread(target=serve).start()
cl = socket.socket(socket.AF_UNIX)
cl.settimeout(10)
cl.connect(path)
cl.sendall(b"ping")
print(cl.recv(32).decode())'`, map[string]any{"PY": py}, sbTimeout)
	if res.Success && res.Stdout == "pong ping\n" {
		return
	}
	abi, _ := sbKernelABI()
	refused := strings.Contains(res.Stderr, "PermissionError") || strings.Contains(res.Stderr, "Operation not permitted")
	if abi < 9 && refused {
		layers := "none reported"
		if res.Sandbox != nil {
			layers = res.Sandbox.EnforcedBy
		}
		t.Skipf("this kernel's Landlock ABI %d cannot scope pathname unix sockets, and toolhost's other layer (enforcedBy %q) refuses them all under an allow-list, as documented: %q",
			abi, layers, res.Stderr)
	}
	t.Errorf("a unix socket server and client in the root: exit %s, stdout %q, stderr %q; want %q", sbCode(res), res.Stdout, res.Stderr, "pong ping\n")
}

// TestNetworkDevServerForwarded starts a dev server (python3 -m
// http.server) in a command with a network namespace of its own (an empty
// allow-list): portOpened names a port on the host's loopback, the test
// fetches a file through it, and once the command is cancelled portClosed
// names the same port, which no longer answers.
func TestNetworkDevServerForwarded(t *testing.T) {
	t.Parallel()
	py := sbPython(t)
	s := netEnforcedServer(t, options{})
	const page = "served from inside the namespace\n"
	wsWrite(t, filepath.Join(s.root, "site", "hello.txt"), page)
	h := s.longRun(map[string]any{
		"argv": []string{py, "-m", "http.server", "0", "--bind", "127.0.0.1"}, "cwd": "site",
		"sandbox": netAllow(), "streamOutput": true,
	})
	// The first of portOpened and the command's end.
	m, _ := s.waitFor(0, "portOpened or the toolResult of "+h.HandleID, func(m msg) bool {
		return (m.Method == "portOpened" || m.Method == "toolResult") && m.ID == nil && forHandle(h.HandleID)(m.Params)
	})
	if m.Method == "toolResult" {
		var res protocol.ToolResult
		json.Unmarshal(m.Params, &res)
		t.Fatalf("the dev server ended before it listened: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	var opened protocol.PortOpenedParams
	if err := json.Unmarshal(m.Params, &opened); err != nil {
		t.Fatal(err)
	}
	addr, err := netip.ParseAddr(opened.Address)
	if err != nil || !addr.IsLoopback() {
		t.Errorf("portOpened names %q, want the host side of the forward on the host's loopback (%v)", opened.Address, err)
	}
	hostSide := net.JoinHostPort(opened.Address, fmt.Sprint(opened.Port))
	client := &http.Client{Timeout: waitLimit, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get("http://" + hostSide + "/hello.txt")
	if err != nil {
		t.Fatalf("fetching through the forward %s: %v", hostSide, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != page {
		t.Errorf("through the forward %s: %s %q (%v), want 200 %q", hostSide, resp.Status, body, err, page)
	}

	s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
	var closed protocol.PortClosedParams
	s.waitFor(0, "portClosed of "+h.HandleID, func(m msg) bool {
		return m.Method == "portClosed" && json.Unmarshal(m.Params, &closed) == nil && closed.HandleID == h.HandleID
	})
	if diff := cmp.Diff(protocol.PortClosedParams{HandleID: h.HandleID, Port: opened.Port, Address: opened.Address}, closed); diff != "" {
		t.Errorf("portClosed does not name the forward portOpened named: mismatch (-want +got):\n%s", diff)
	}
	s.toolResultOf(h.HandleID)
	if c, err := net.DialTimeout("tcp", hostSide, waitLimit); err == nil {
		c.Close()
		t.Errorf("the forward %s still accepts connections after portClosed and the toolResult", hostSide)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing the closed forward %s: %v, want connection refused", hostSide, err)
	}
}

// TestNetworkResultReportsUse runs a command that fetches twice from an
// allowed server and is refused two hosts: the ToolResult's network member
// lists the allowed host with its two connections and the bytes each way,
// and each refused host with its attempt.
func TestNetworkResultReportsUse(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s := netEnforcedServer(t, options{})
	body := strings.Repeat("x", 10_000)
	_, allowed := netAllowedServer(t, body)
	_, denied := netListen(t, "tcp")
	res := netRun(t, s, netAllow(fmt.Sprintf("127.0.0.1:%d", allowed)), "", `curl -sS -o /dev/null "http://127.0.0.1:$ALLOWED/a"; curl -sS -o /dev/null "http://127.0.0.1:$ALLOWED/b"
curl -sS -o /dev/null "http://127.0.0.1:$DENIED/"; curl -sS -o /dev/null http://denied.invalid/; true`,
		map[string]any{"ALLOWED": fmt.Sprint(allowed), "DENIED": fmt.Sprint(denied)}, sbTimeout)
	if res.Network == nil {
		t.Fatalf("the result of a command under an allow-list has no network member: %+v", res)
	}
	want := protocol.NetworkUse{
		Allowed: []protocol.NetworkAllowed{{Host: "127.0.0.1", Port: allowed, Connections: 2}},
		Denied:  []protocol.NetworkDenied{{Host: "127.0.0.1", Port: denied, Attempts: 1}, {Host: "denied.invalid", Port: 80, Attempts: 1}},
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(protocol.NetworkAllowed{}, "BytesOut", "BytesIn"),
		cmpopts.SortSlices(func(a, b protocol.NetworkDenied) bool { return a.Host+fmt.Sprint(a.Port) < b.Host+fmt.Sprint(b.Port) }),
	}
	if diff := cmp.Diff(want, *res.Network, opts); diff != "" {
		t.Errorf("the result's network: mismatch (-want +got):\n%s", diff)
	}
	for _, a := range res.Network.Allowed {
		if a.BytesOut <= 0 || a.BytesIn < int64(2*len(body)) {
			t.Errorf("%s:%d: bytesOut %d, bytesIn %d; want some out and at least the two bodies (%d bytes) in", a.Host, a.Port, a.BytesOut, a.BytesIn, 2*len(body))
		}
	}
}

// TestMCPDefaultRefusesHostOutsideRegistries runs curl in a default
// toolhost mcp session, to a host no registry configuration names, over
// HTTPS and plain HTTP: the output carries the proxy's refusal, which an
// agent reads as a policy, not a network fault.
func TestMCPDefaultRefusesHostOutsideRegistries(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	s := startMCP(t, mcpOptions{})
	var res protocol.ToolResult
	out := s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", `curl -sS -v --max-time 20 https://example.com/ 2>&1; curl -sS -i --max-time 20 http://example.com/`}}, &res)
	all := text(out) + res.Stdout + res.Stderr
	for _, refusal := range []string{netRefusal("example.com", 443), netRefusal("example.com", 80)} {
		if !strings.Contains(all, refusal) {
			t.Errorf("the output does not carry the refusal %q: %q", refusal, res.Stdout)
		}
	}
	if res.Network == nil {
		t.Fatal("the result has no network member")
	}
	want := []protocol.NetworkDenied{{Host: "example.com", Port: 80, Attempts: 1}, {Host: "example.com", Port: 443, Attempts: 1}}
	if diff := cmp.Diff(want, res.Network.Denied, cmpopts.SortSlices(func(a, b protocol.NetworkDenied) bool { return a.Port < b.Port })); diff != "" {
		t.Errorf("the result's network.denied: mismatch (-want +got):\n%s", diff)
	}
}

// TestMCPDefaultGoModDownload downloads a small real module in a default
// toolhost mcp session: the registries are in its allow-list.
func TestMCPDefaultGoModDownload(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t)
	env := netGoEnv(t)
	netGoProxyEntry(t)
	s := startMCP(t, mcpOptions{})
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", netGoDownloadScript}, "env": env, "timeoutMs": (3 * time.Minute).Milliseconds()}, &res)
	if !res.Success {
		t.Fatalf("go mod download failed: exit %s, stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	netCheckGoDownload(t, res.Stdout)
}

// TestMCPResultReportsDefaults runs a command in a default toolhost mcp
// session whose root is a repository and whose $HOME has an ~/.ssh: the
// result's sandbox (structuredContent) says the allow-list applied holds
// the Go module proxy (as go env GOPROXY names it), .git/hooks and
// .git/config are protected and ~/.ssh is denied.
func TestMCPResultReportsDefaults(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t)
	goproxy := netGoProxyEntry(t)
	home := t.TempDir()
	wsWrite(t, filepath.Join(home, ".ssh", "id_ed25519"), "key\n")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wsWrite(t, filepath.Join(root, ".git", "config"), "[core]\n")
	wsWrite(t, filepath.Join(root, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", root}, env: append(quickExitEnv(), "HOME="+home)})
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"true"}}, &res)
	if res.Sandbox == nil {
		t.Fatal("the result has no sandbox member")
	}
	for _, c := range []struct {
		what string
		list []string
		want string
	}{
		{"networkAllow", res.Sandbox.NetworkAllow, goproxy},
		{"protect", res.Sandbox.Protect, filepath.Join(root, ".git", "hooks")},
		{"protect", res.Sandbox.Protect, filepath.Join(root, ".git", "config")},
		{"denyRead", res.Sandbox.DenyRead, filepath.Join(home, ".ssh")},
	} {
		if !slices.Contains(c.list, c.want) {
			t.Errorf("sandbox.%s %q lacks %q", c.what, c.list, c.want)
		}
	}
}
