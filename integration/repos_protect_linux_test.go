//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// reposArgs are the agents' protect defaults, given as flags to the
// JSON-RPC server.
var reposArgs = []string{"--protect", "**/.git/hooks", "--protect", "**/.git/config"}

// reposServer starts a server with reposArgs in root, or skips the test
// where protected paths cannot be bound (no mount namespace).
func reposServer(t *testing.T, root string) *server {
	t.Helper()
	s := start(t, options{root: root, args: reposArgs})
	init := s.initialize(nil)
	if !slices.Contains(init.Capabilities.Sandbox.Layers, "mntns") {
		t.Skipf("no mount namespace to bind protected paths in (layers %q)", init.Capabilities.Sandbox.Layers)
	}
	if diff := cmp.Diff([]string{"**/.git/config", "**/.git/hooks"}, init.Capabilities.Sandbox.Default.Protect); diff != "" {
		t.Errorf("capabilities.sandbox.default.protect mismatch (-want +got):\n%s", diff)
	}
	return s
}

// reposRoot makes a new root, real path, with the files of spec (path →
// content; a path ending in "/" is a directory).
func reposRoot(t *testing.T, spec map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range spec {
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wsWrite(t, filepath.Join(root, p), content)
	}
	return root
}

// TestReposNestedAreProtected: the hooks and config of every repository
// in the root when the command starts are read-only to it, not only the
// root's own: a nested repository, a deep one, and a submodule whose .git
// file points into the root's .git/modules. Writing a hook or the config
// fails with "Read-only file system", and so does chmod; nothing changed,
// the result lists each as protected, and names no violation.
func TestReposNestedAreProtected(t *testing.T) {
	t.Parallel()
	root := reposRoot(t, map[string]string{
		".git/config":                           "[core]\n",
		".git/hooks/pre-commit.sample":          "#!/bin/sh\n",
		".git/modules/mod/config":               "[core]\n",
		".git/modules/mod/hooks/":               "",
		"sub/.git/config":                       "[core]\n",
		"sub/.git/hooks/pre-commit.sample":      "#!/bin/sh\n",
		"a/b/deep/.git/config":                  "[core]\n",
		"a/b/deep/.git/hooks/post-checkout":     "#!/bin/sh\n",
		"mod/.git":                              "gitdir: ../.git/modules/mod\n",
		"mod/file.txt":                          "x\n",
		"sub/src/main.go":                       "package main\n",
		"a/b/deep/.git/hooks/pre-push.sample":   "#!/bin/sh\n",
		"plain/not-a-repo/file.txt":             "x\n",
		"a/b/deep/.git/hooks/commit-msg.sample": "#!/bin/sh\n",
	})
	s := reposServer(t, root)
	protected := []string{
		"sub/.git/hooks", "sub/.git/config",
		"a/b/deep/.git/hooks", "a/b/deep/.git/config",
		".git/modules/mod/hooks", ".git/modules/mod/config",
	}
	var paths []string
	for _, p := range protected {
		paths = append(paths, filepath.Join(root, p))
	}
	before := sbSnapshot(t, "", paths...)
	script := `
for h in sub/.git/hooks a/b/deep/.git/hooks .git/modules/mod/hooks; do
	printf '#!/bin/sh\necho pwned\n' > "$h/pre-commit" && echo "wrote $h/pre-commit"
done
for c in sub/.git/config a/b/deep/.git/config .git/modules/mod/config; do
	printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' >> "$c" && echo "wrote $c"
	chmod 755 "$c" && echo "chmodded $c"
done
chmod 755 sub/.git/hooks/pre-commit.sample && echo "chmodded a sample"
chmod 755 a/b/deep/.git/hooks/post-checkout 2>&1 | grep -c 'Read-only file system'
mv sub/.git sub/git-aside && echo "moved sub/.git aside"
true`
	res := sbRun(t, s, protocol.SandboxWorkspaceWrite, "", script, nil, sbTimeout)
	if diff := cmp.Diff("1\n", res.Stdout); diff != "" {
		t.Errorf("a protected write, chmod or move succeeded: stdout mismatch (-want +got):\n%s\nstderr: %s", diff, res.Stderr)
	}
	if n := strings.Count(res.Stderr, "Read-only file system"); n < 7 {
		t.Errorf("%d of the refusals say Read-only file system, want at least 7; stderr:\n%s", n, res.Stderr)
	}
	if diff := cmp.Diff(before, sbSnapshot(t, "", paths...)); diff != "" {
		t.Errorf("the protected paths changed: mismatch (-want +got):\n%s", diff)
	}
	if res.Sandbox == nil {
		t.Fatal("the result has no sandbox member")
	}
	for _, p := range append(paths, filepath.Join(root, ".git/hooks"), filepath.Join(root, ".git/config")) {
		if !slices.Contains(res.Sandbox.Protect, p) {
			t.Errorf("sandbox.protect %q lacks %s", res.Sandbox.Protect, p)
		}
	}
	if len(res.ProtectViolations) > 0 {
		t.Errorf("protectViolations %q, want none", res.ProtectViolations)
	}
	for _, ne := range res.Sandbox.NotEnforced {
		if strings.Contains(ne, "repositor") {
			t.Errorf("notEnforced says the scan fell short: %q", ne)
		}
	}
}

// TestReposNewRepositoryNamedInResult: a repository the command makes
// cannot be protected (nothing is there to bind when it starts), so the
// result's protectViolations names the hook and the config it wrote, and
// not git's *.sample hooks; the next command finds the repository and
// may no longer change either.
func TestReposNewRepositoryNamedInResult(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "git", false)
	root := reposRoot(t, map[string]string{"README": "x\n"})
	s := reposServer(t, root)
	res := sbRun(t, s, protocol.SandboxWorkspaceWrite, "", `git init -q sub &&
printf '#!/bin/sh\necho pwned\n' > sub/.git/hooks/pre-commit &&
chmod 755 sub/.git/hooks/pre-commit`, nil, sbTimeout)
	if !res.Success {
		t.Fatalf("git init and the hook failed: exit %s, stderr %q", sbCode(res), res.Stderr)
	}
	if diff := cmp.Diff([]string{"sub/.git/config", "sub/.git/hooks/pre-commit"}, res.ProtectViolations); diff != "" {
		t.Errorf("protectViolations mismatch (-want +got):\n%s", diff)
	}

	hook := filepath.Join(root, "sub/.git/hooks/pre-commit")
	before := sbSnapshot(t, "", hook, filepath.Join(root, "sub/.git/config"))
	res = sbRun(t, s, protocol.SandboxWorkspaceWrite, "", `printf 'echo again\n' >> sub/.git/hooks/pre-commit; chmod 700 sub/.git/hooks/pre-commit; git -C sub config user.name x; true`, nil, sbTimeout)
	if n := strings.Count(res.Stderr, "Read-only file system"); n < 2 {
		t.Errorf("the second command was not refused as read-only (%d refusals); stderr:\n%s", n, res.Stderr)
	}
	if diff := cmp.Diff(before, sbSnapshot(t, "", hook, filepath.Join(root, "sub/.git/config"))); diff != "" {
		t.Errorf("the second command changed the new repository's hook or config: mismatch (-want +got):\n%s", diff)
	}
	if len(res.ProtectViolations) > 0 {
		t.Errorf("the second command's protectViolations %q, want none", res.ProtectViolations)
	}
}

// TestReposScanLimitReported: a root with more git directories than the
// scan takes (256) is not fully protected, and the result says so in
// sandbox.notEnforced rather than claiming the rest.
func TestReposScanLimitReported(t *testing.T) {
	t.Parallel()
	spec := map[string]string{}
	for i := range 300 {
		spec[fmt.Sprintf("r%03d/.git/", i)] = ""
	}
	root := reposRoot(t, spec)
	s := reposServer(t, root)
	res := sbRun(t, s, protocol.SandboxWorkspaceWrite, "", "true", nil, sbTimeout)
	if res.Sandbox == nil {
		t.Fatal("the result has no sandbox member")
	}
	want := "the scan for repositories in the root stopped at its limit of 256 git directories: repositories past it are not protected"
	if !slices.ContainsFunc(res.Sandbox.NotEnforced, func(s string) bool { return strings.HasPrefix(s, want) }) {
		t.Errorf("sandbox.notEnforced %q does not say %q", res.Sandbox.NotEnforced, want)
	}
}

// TestReposMCPDefaults: under toolhost mcp the agents' defaults protect a
// nested repository's hooks, and the result text of a command that makes
// a repository and plants a hook names it for the model.
func TestReposMCPDefaults(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t)
	netNeedTool(t, "git", false)
	root := reposRoot(t, map[string]string{"sub/.git/hooks/pre-commit.sample": "#!/bin/sh\n", "sub/.git/config": "[core]\n"})
	s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", root}})
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", `printf x > sub/.git/hooks/pre-commit; git init -q new && printf x > new/.git/hooks/post-checkout`}}, &res)
	if !strings.Contains(res.Stderr, "sub/.git/hooks/pre-commit: Read-only file system") {
		t.Errorf("the nested repository's hook was not refused; stderr %q", res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "sub/.git/hooks/pre-commit")); err == nil {
		t.Error("the nested repository's hook was written")
	}
	if diff := cmp.Diff([]string{"new/.git/config", "new/.git/hooks/post-checkout"}, res.ProtectViolations); diff != "" {
		t.Errorf("protectViolations mismatch (-want +got):\n%s", diff)
	}
	out := s.call("run_command", map[string]any{"argv": []string{"sh", "-c", `git init -q third && printf x > third/.git/hooks/pre-push`}})
	if txt := text(out); !strings.Contains(txt, "third/.git/hooks/pre-push") || !strings.Contains(txt, "tell the user") {
		t.Errorf("the result text does not name the planted hook:\n%s", txt)
	}
}

// TestReposRecipe: a recipe's steps share the scan made before its first
// step: a repository there at the start is protected in every step, one
// made by a step is not protected in the next, and the handle's
// toolResult names what was written in it; a read-only step writes nothing.
func TestReposRecipe(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "git", false)
	root := reposRoot(t, map[string]string{"old/.git/hooks/": "", "old/.git/config": "[core]\n"})
	s := reposServer(t, root)
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	h := s.longRun(map[string]any{"sandbox": map[string]any{"network": false}, "steps": []map[string]any{
		{"name": "init", "argv": sh("git init -q made")},
		{"name": "plant", "argv": sh("printf x > made/.git/hooks/pre-commit; printf x > old/.git/hooks/pre-commit; true")},
		{"name": "look", "argv": sh("printf x > made/.git/hooks/post-commit; true"), "sandbox": map[string]any{"filesystem": "read-only"}},
	}})
	res := s.toolResultOf(h.HandleID)
	if res.Status != protocol.StatusCompleted || len(res.Steps) != 3 {
		t.Fatalf("the recipe ended %s with %d steps; stderr %q", res.Status, len(res.Steps), res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "old/.git/hooks/pre-commit")); err == nil {
		t.Error("a step wrote the hook of a repository there at the start")
	}
	if diff := cmp.Diff([]string{"made/.git/config", "made/.git/hooks/pre-commit"}, res.ProtectViolations); diff != "" {
		t.Errorf("protectViolations mismatch (-want +got):\n%s", diff)
	}
}
