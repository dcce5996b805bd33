//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// tcRun runs argv with runCommand confined to filesystem, with env, and
// returns its result; an error answer fails t.
func tcRun(t *testing.T, s *server, filesystem protocol.SandboxFilesystem, env map[string]any, argv ...string) protocol.ToolResult {
	t.Helper()
	var res protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": argv, "env": env, "sandbox": map[string]any{"filesystem": filesystem}, "timeoutMs": 120000}, &res)
	return res
}

// tcMountNS skips t where the server's commands get no mount namespace,
// which a private /tmp needs.
func tcMountNS(t *testing.T, ir protocol.InitializeResult) {
	t.Helper()
	for _, l := range ir.Capabilities.Sandbox.Layers {
		if l == "mntns" {
			return
		}
	}
	t.Skipf("the server's commands get no mount namespace here (layers %v): no private /tmp", ir.Capabilities.Sandbox.Layers)
}

// TestPrivateTmp checks, through the binary, that a confined command
// writes a /tmp of its own: two commands running at once each write
// /tmp/x and read back their own, a file the test put in the host's /tmp
// is out of their sight, and a read-only command writes its /tmp too.
func TestPrivateTmp(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	tcMountNS(t, s.initialize(nil))
	host, err := os.CreateTemp("/tmp", "toolhost-hosttmp-")
	if err != nil {
		t.Fatal(err)
	}
	host.Close()
	t.Cleanup(func() { os.Remove(host.Name()) })

	// Each writes /tmp/x, says so in the root, waits until the other has
	// said so (bounded), then reads /tmp/x back.
	const script = `echo "$0" > /tmp/x && touch "$0.written" && i=0
while [ ! -e "$1.written" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
[ -e "$1.written" ] || { echo "the other never wrote"; exit 1; }
cat /tmp/x; if [ -e "$2" ]; then echo "sees the host's /tmp"; fi; echo "TMPDIR=$TMPDIR"`
	pending := []*client.Pending{
		s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", script, "a", "b", host.Name()}, "timeoutMs": 60000}),
		s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", script, "b", "a", host.Name()}, "timeoutMs": 60000}),
	}
	for i, p := range pending {
		var res protocol.ToolResult
		if err := s.answer(p, &res); err != nil {
			t.Fatalf("runCommand: %v", err)
		}
		name := []string{"a", "b"}[i]
		if diff := cmp.Diff(name+"\nTMPDIR=/tmp\n", res.Stdout); diff != "" || !res.Success {
			t.Errorf("command %s (status %s, stderr %q): mismatch (-want +got):\n%s", name, res.Status, res.Stderr, diff)
		}
		if res.Sandbox == nil || !strings.Contains(res.Sandbox.EnforcedBy, "mntns") {
			t.Errorf("command %s's report %+v, want mntns, which makes its /tmp", name, res.Sandbox)
		}
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		// Another program may have made it; the commands' contents are theirs.
		if b, _ := os.ReadFile("/tmp/x"); string(b) == "a\n" || string(b) == "b\n" {
			t.Errorf("the host's /tmp/x holds %q, a command's", b)
		}
	}

	res := tcRun(t, s, protocol.SandboxReadOnly, nil, "sh", "-c", `echo ro > /tmp/y && cat /tmp/y; echo x > "$0/f" 2>/dev/null && echo "wrote the root"; true`, s.root)
	if diff := cmp.Diff("ro\n", res.Stdout); diff != "" {
		t.Errorf("read-only (stderr %q): mismatch (-want +got):\n%s", res.Stderr, diff)
	}
}

// tcModule writes a Go module with no dependencies into dir: a library
// that imports nothing, so that a cold build compiles it alone.
func tcModule(t *testing.T, dir string) {
	t.Helper()
	for name, body := range map[string]string{
		"go.mod":  "module example.com/warm\n\ngo 1.22\n",
		"warm.go": "package warm\n\n// F is all there is.\nfunc F() int { return 1 }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tcEnv is the harness's minimal environment of the server, with a state
// directory of the test's own and more.
func tcEnv(state string, more ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "XDG_STATE_HOME=" + state}, more...)
}

// TestRootCacheWarm checks that a second session on the same root finds
// the Go build cache the first filled: the same GOCACHE, in the state
// directory, outside the root, and a go build -x that compiles nothing.
func TestRootCacheWarm(t *testing.T) {
	t.Parallel()
	state, root := t.TempDir(), t.TempDir()
	tcModule(t, root)
	var gocache []string
	for i := range 2 {
		s := start(t, options{root: root, env: tcEnv(state)})
		s.initialize(nil)
		res := tcRun(t, s, protocol.SandboxWorkspaceWrite, nil, "sh", "-c", `go env GOCACHE && go build -x . 2>&1`)
		if !res.Success {
			t.Fatalf("session %d: go build failed: status %s; stdout %q, stderr %q", i+1, res.Status, res.Stdout, res.Stderr)
		}
		first, rest, _ := strings.Cut(res.Stdout, "\n")
		gocache = append(gocache, first)
		compiles := strings.Contains(rest, "/compile ")
		if i == 1 && compiles {
			t.Errorf("session 2's go build compiled, where session 1's cache should have been warm:\n%s", rest)
		}
		if i == 0 && !compiles {
			t.Errorf("session 1's go build compiled nothing (the cache was warm before any session?):\n%s", rest)
		}
		s.shutdown()
	}
	if gocache[0] != gocache[1] {
		t.Errorf("GOCACHE %q, then %q; want the same across sessions", gocache[0], gocache[1])
	}
	realState, _ := filepath.EvalSymlinks(state)
	if !strings.HasPrefix(gocache[0], filepath.Join(realState, "toolhost", "caches")+"/") {
		t.Errorf("GOCACHE %q, want it in the state directory's caches, %s", gocache[0], filepath.Join(realState, "toolhost", "caches"))
	}
	dir := filepath.Dir(gocache[0])
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the root's cache directory %s: %v, %v; want mode 0700", dir, fi, err)
	}
}

// TestRootCacheExplicit checks that the cache variables of the server's
// environment reach a command as they are, and that such a directory is
// writable only with --writable.
func TestRootCacheExplicit(t *testing.T) {
	t.Parallel()
	mine := t.TempDir()
	for _, tc := range []struct {
		name     string
		args     []string
		writable string
	}{
		{"without --writable", nil, "refused"},
		{"with --writable", []string{"--writable", mine}, "written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, options{args: tc.args, env: tcEnv(t.TempDir(), "GOMODCACHE="+mine, "PIP_CACHE_DIR="+mine+"/pip")})
			s.initialize(nil)
			res := tcRun(t, s, protocol.SandboxWorkspaceWrite, nil, "sh", "-c", `echo "$GOMODCACHE $PIP_CACHE_DIR"; if touch "$GOMODCACHE/x" 2>/dev/null; then echo written; else echo refused; fi`)
			want := mine + " " + mine + "/pip\n" + tc.writable + "\n"
			if diff := cmp.Diff(want, res.Stdout); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
