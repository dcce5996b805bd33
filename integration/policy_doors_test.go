package integration

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// This file checks that every door of the server asks the one policy its
// commands get (BRIEF Part 4, issue 34): readFile and read_file refuse a
// denyRead path, writeFile, write_file and a progress file a protect path,
// by every route to the same file, with -32001 naming the policy and the
// entry. Each row runs twice: against a server with the policy, where it
// must be refused, and against one without it, where the same request must
// reach the file. The second run is the row's mutation check: it shows
// that the policy's check, and nothing else, is what refuses the row, so
// that removing the check fails it.

// doorsKey is the fake private key the denied directory holds.
const doorsKey = "-----BEGIN FAKE PRIVATE KEY-----\nnot a real key\n"

// doorsRoot makes a root that is also $HOME, as a default `toolhost mcp`
// with no --root has it: a ~/.ssh with a key, a repository with a hook
// and a config, a nested repository, and other routes to them (symlinks,
// a hard link) made beforehand.
func doorsRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wsWrite(t, filepath.Join(root, ".ssh", "id_rsa"), doorsKey)
	wsWrite(t, filepath.Join(root, ".git", "config"), "[core]\n")
	wsWrite(t, filepath.Join(root, ".git", "hooks", "pre-commit"), "#!/bin/sh\nexit 0\n")
	wsWrite(t, filepath.Join(root, "sub", ".git", "config"), "[core]\n")
	wsWrite(t, filepath.Join(root, "sub", ".git", "hooks", "pre-commit"), "#!/bin/sh\nexit 0\n")
	wsWrite(t, filepath.Join(root, "notes.txt"), "notes\n")
	if err := os.Chmod(filepath.Join(root, ".git", "hooks", "pre-commit"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"keylink": ".ssh/id_rsa",
		"abslink": filepath.Join(root, ".ssh", "id_rsa"),
		"sshdir":  ".ssh",
		"hooks":   ".git/hooks",
		"gitdir":  filepath.Join(root, "sub", ".git"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	// A bare repository, whose git directory is not named .git.
	wsWrite(t, filepath.Join(root, "bare.git", "HEAD"), "ref: refs/heads/main\n")
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(root, "bare.git", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A hard link made earlier, as an unconfined command or the user could.
	if err := os.Link(filepath.Join(root, ".ssh", "id_rsa"), filepath.Join(root, "hardlink")); err != nil {
		t.Fatal(err)
	}
	return root
}

// doorsReadPaths are the routes to the key.
func doorsReadPaths(root string) map[string]string {
	return map[string]string{
		"plain":          ".ssh/id_rsa",
		"absolute":       filepath.Join(root, ".ssh", "id_rsa"),
		"file URI":       "file://" + filepath.Join(root, ".ssh", "id_rsa"),
		"dot-dot":        "sub/../.ssh/id_rsa",
		"symlink":        "keylink",
		"absolute link":  "abslink",
		"directory link": "sshdir/id_rsa",
		"hard link":      "hardlink",
	}
}

// doorsWritePaths are the routes to a protected file, and the file each
// writes.
func doorsWritePaths(root string) map[string]string {
	return map[string]string{
		"hook":                ".git/hooks/pre-commit",
		"config":              ".git/config",
		"new hook":            ".git/hooks/post-checkout",
		"absolute":            filepath.Join(root, ".git", "hooks", "pre-commit"),
		"dot-dot":             "sub/../.git/config",
		"symlink":             "hooks/pre-commit",
		"nested repository":   "sub/.git/hooks/pre-commit",
		"nested config":       "sub/.git/config",
		"link to nested":      "gitdir/hooks/pre-commit",
		"repository made now": "later/.git/hooks/pre-commit",
		"submodule":           ".git/modules/lib/hooks/pre-commit",
		"bare repository":     "bare.git/hooks/pre-receive",
		"case variant":        ".GIT/HOOKS/pre-commit",
		"denied directory":    ".ssh/authorized_keys",
	}
}

// TestPolicyEveryDoorJSONRPC: readFile and writeFile over JSON-RPC, with
// --deny-read ~/.ssh and the agents' protect entries **/.git/hooks and
// **/.git/config.
func TestPolicyEveryDoorJSONRPC(t *testing.T) {
	t.Parallel()
	for _, withPolicy := range []bool{true, false} {
		name := "policy"
		if !withPolicy {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := doorsRoot(t)
			var args []string
			if withPolicy {
				args = []string{"--deny-read", "~/.ssh", "--protect", "**/.git/hooks", "--protect", "**/.git/config"}
			}
			s := start(t, options{root: root, args: args, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "TMPDIR=" + os.TempDir()}})
			s.initialize(nil)
			for form, p := range doorsReadPaths(root) {
				r, err := wsRead(s, p, nil)
				if !withPolicy {
					if err != nil || r.Content != doorsKey {
						t.Errorf("readFile %s (%s) without a policy = %q, %v; want the key, or the row checks nothing", p, form, r.Content, err)
					}
					continue
				}
				d := wsRefused(t, "readFile "+form, err, protocol.CodePathOutsideWorkspace, p)
				checkPolicyData(t, "readFile "+form, d, doorsKey, "denyRead", filepath.Join(root, ".ssh"))
			}
			for form, p := range doorsWritePaths(root) {
				_, err := wsWriteFile(s, p, "#!/bin/sh\ntouch pwned\n", map[string]any{"createDirs": true})
				if !withPolicy {
					if err != nil {
						t.Errorf("writeFile %s (%s) without a policy: %v; want it written, or the row checks nothing", p, form, err)
					}
					continue
				}
				d := wsRefused(t, "writeFile "+form, err, protocol.CodePathOutsideWorkspace, p)
				want, entry := "protect", ""
				if form == "denied directory" {
					want, entry = "denyRead", filepath.Join(root, ".ssh")
				}
				checkPolicyData(t, "writeFile "+form, d, "", want, entry)
			}
			if withPolicy {
				// Nothing was written by any refused row.
				if b, err := os.ReadFile(filepath.Join(root, ".git", "hooks", "pre-commit")); err != nil || string(b) != "#!/bin/sh\nexit 0\n" {
					t.Errorf("the hook is now %q, %v", b, err)
				}
				for _, p := range []string{".git/hooks/post-checkout", "later/.git", ".git/modules", ".ssh/authorized_keys"} {
					if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s exists after a refused write (%v)", p, err)
					}
				}
				// A path beside them is served.
				if r, err := wsRead(s, "notes.txt", nil); err != nil || r.Content != "notes\n" {
					t.Errorf("readFile notes.txt = %q, %v", r.Content, err)
				}
				if _, err := wsWriteFile(s, ".git/info/exclude", "x\n", map[string]any{"createDirs": true}); err != nil {
					t.Errorf("writeFile .git/info/exclude, which is not protected: %v", err)
				}
			}
		})
	}
}

// checkPolicyData checks an error's data names the policy and, when entry
// is not "", the entry, and carries no secret.
func checkPolicyData(t *testing.T, what string, d protocol.ErrorData, secret, policy, entry string) {
	t.Helper()
	if d.Policy != policy {
		t.Errorf("%s: data.policy = %q, want %q (reason %q)", what, d.Policy, policy, d.Reason)
	}
	if entry != "" && d.Entry != entry {
		t.Errorf("%s: data.entry = %q, want %q", what, d.Entry, entry)
	}
	if !strings.Contains(d.Reason, "policy") {
		t.Errorf("%s: the reason %q does not say it is policy", what, d.Reason)
	}
	if secret != "" && strings.Contains(d.Reason, strings.TrimSpace(secret)) {
		t.Errorf("%s: the reason carries the secret", what)
	}
}

// TestPolicyEveryDoorMCP: read_file and write_file of a default `toolhost
// mcp` whose root is $HOME, the agents' defaults in force, over stdio and
// over HTTP (`toolhost mcp --http`); the same rows against plain
// `toolhost` (which takes MCP too, with no defaults) reach the files.
func TestPolicyEveryDoorMCP(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"policy", "control", "http"} {
		withPolicy := name != "control"
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := doorsRoot(t)
			env := append(quickExitEnv(), "HOME="+root)
			var s *mcpSession
			switch name {
			case "http":
				// A later --root wins: the HTTP server's root is $HOME.
				h := startHTTPMCPEnv(t, env, "--root", root)
				s = h.connect("", nil, "2025-11-25")
			case "policy":
				s = startMCP(t, mcpOptions{args: []string{"mcp", "--root", root}, env: env})
			default:
				s = startMCP(t, mcpOptions{args: []string{"--root", root}, env: env})
			}
			s.root = root
			for form, p := range doorsReadPaths(root) {
				res := s.call("read_file", map[string]any{"path": p})
				if !withPolicy {
					if res.IsError || !strings.Contains(text(res), "FAKE PRIVATE KEY") {
						t.Errorf("read_file %s (%s) without a policy: %s; want the key, or the row checks nothing", p, form, text(res))
					}
					continue
				}
				if !res.IsError {
					t.Errorf("read_file %s (%s) read the key: %s", p, form, text(res))
					continue
				}
				e := s.toolErr("read_file", map[string]any{"path": p})
				if e.Error.Code != protocol.CodePathOutsideWorkspace {
					t.Errorf("read_file %s (%s): code %d, want -32001", p, form, e.Error.Code)
				}
				checkPolicyData(t, "read_file "+form, e.Error.Data, doorsKey, "denyRead", filepath.Join(root, ".ssh"))
				if txt := text(res); !strings.Contains(txt, "policy, not a missing file") {
					t.Errorf("read_file %s (%s): the text %q does not say it is policy, not a missing file", p, form, txt)
				}
			}
			for form, p := range doorsWritePaths(root) {
				res := s.call("write_file", map[string]any{"path": p, "content": "#!/bin/sh\ntouch pwned\n", "createDirs": true})
				if !withPolicy {
					if res.IsError {
						t.Errorf("write_file %s (%s) without a policy: %s; want it written, or the row checks nothing", p, form, text(res))
					}
					continue
				}
				if !res.IsError {
					t.Errorf("write_file %s (%s) wrote: %s", p, form, text(res))
					continue
				}
				var e toolError
				decodeStructured(t, res, &e)
				want := "protect"
				if form == "denied directory" {
					want = "denyRead"
				}
				checkPolicyData(t, "write_file "+form, e.Error.Data, "", want, "")
			}
		})
	}
}

// TestPolicyProgressFile: a progress file on a protected path is refused
// before anything starts, with the same error.
func TestPolicyProgressFile(t *testing.T) {
	t.Parallel()
	root := doorsRoot(t)
	s := start(t, options{root: root, args: []string{"--protect", "**/.git/hooks", "--protect", "**/.git/config"}})
	s.initialize(nil)
	for p, entry := range map[string]string{
		".git/hooks/post-commit":     filepath.Join(root, ".git", "hooks"),
		"hooks/post-commit":          filepath.Join(root, ".git", "hooks"),
		"sub/.git/hooks/post-commit": "**/.git/hooks",
		"bare.git/config":            "**/.git/config",
	} {
		err := s.call("longRunning", map[string]any{"argv": []string{"touch", "ran"}, "progressFile": p}, nil)
		d := wsRefused(t, "progressFile "+p, err, protocol.CodePathOutsideWorkspace, p)
		checkPolicyData(t, "progressFile "+p, d, "", "protect", entry)
	}
	if _, err := os.Lstat(filepath.Join(root, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although its progress file was refused (%v)", err)
	}
}

// TestPolicySnapshots: a denyRead path in the root is never stored in a
// snapshot, never shown by diff (a patch asked for it is refused) and never
// exported; a restore neither writes nor removes it, and refuses a
// protected path it is asked for.
func TestPolicySnapshots(t *testing.T) {
	t.Parallel()
	root := doorsRoot(t)
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	s := start(t, options{root: root, args: []string{"--state-dir", state, "--deny-read", filepath.Join(root, ".ssh"), "--protect", "locked.txt"},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}})
	s.initialize(nil)
	wsWrite(t, filepath.Join(root, "locked.txt"), "v1\n")
	var info protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{}, &info)

	// diff: the key changes, and shows nowhere.
	wsWrite(t, filepath.Join(root, ".ssh", "id_rsa"), doorsKey+"changed\n")
	wsWrite(t, filepath.Join(root, "locked.txt"), "v2\n")
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": info.SnapshotID}, &d)
	for _, c := range d.Changes {
		if strings.HasPrefix(c.Path, ".ssh") {
			t.Errorf("diff shows the denied %s", c.Path)
		}
	}
	err := s.call("diff", map[string]any{"from": info.SnapshotID, "path": ".ssh/id_rsa"}, &d)
	dd := wsRefused(t, "diff path .ssh/id_rsa", err, protocol.CodePathOutsideWorkspace, ".ssh/id_rsa")
	checkPolicyData(t, "diff", dd, doorsKey, "denyRead", filepath.Join(root, ".ssh"))

	// export: no entry under .ssh, and no entry holds the key (the hard
	// link, a file of the root, is the same file, and is left out too),
	// while the rest of the root is there.
	var ex protocol.ExportSnapshotResult
	s.mustCall("exportSnapshot", map[string]any{"snapshotId": info.SnapshotID}, &ex)
	entries := tarEntries(t, ex.Path)
	for name, content := range entries {
		if strings.HasPrefix(name, ".ssh") || strings.Contains(content, "FAKE PRIVATE KEY") {
			t.Errorf("the export holds %s (%q)", name, content)
		}
	}
	if entries["notes.txt"] != "notes\n" {
		t.Errorf("the export's notes.txt = %q, want the file", entries["notes.txt"])
	}

	// restore: the denied key is neither written nor removed, the
	// protected file is left as it is, and asking for it is refused.
	err = s.call("restore", map[string]any{"snapshotId": info.SnapshotID, "paths": []string{"locked.txt"}}, nil)
	rd := wsRefused(t, "restore locked.txt", err, protocol.CodePathOutsideWorkspace, "locked.txt")
	checkPolicyData(t, "restore", rd, "", "protect", filepath.Join(root, "locked.txt"))
	var rr protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": info.SnapshotID}, &rr)
	for name, want := range map[string]string{".ssh/id_rsa": doorsKey + "changed\n", "locked.txt": "v2\n"} {
		if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != want {
			t.Errorf("after restore %s = %q, %v; want %q, as it was", name, b, err, want)
		}
	}
}

// tarEntries returns the entries of a tar file and their contents.
func tarEntries(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

// TestPolicyRenamedParent: the denied directory renamed after the session
// began is still denied, by its identity, under its new name.
func TestPolicyRenamedParent(t *testing.T) {
	t.Parallel()
	root := doorsRoot(t)
	s := start(t, options{root: root, args: []string{"--deny-read", filepath.Join(root, ".ssh")}})
	s.initialize(nil)
	if err := os.Rename(filepath.Join(root, ".ssh"), filepath.Join(root, "keys")); err != nil {
		t.Fatal(err)
	}
	_, err := wsRead(s, "keys/id_rsa", nil)
	d := wsRefused(t, "readFile keys/id_rsa", err, protocol.CodePathOutsideWorkspace, "keys/id_rsa")
	if diff := cmp.Diff("denyRead", d.Policy); diff != "" {
		t.Errorf("data.policy: mismatch (-want +got):\n%s", diff)
	}
}

// TestPolicyDeniedRoot: a denyRead entry that holds the whole root leaves
// no file of it to read, and no snapshot to take.
func TestPolicyDeniedRoot(t *testing.T) {
	t.Parallel()
	root := doorsRoot(t)
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	s := start(t, options{root: root, args: []string{"--state-dir", state, "--deny-read", filepath.Dir(root)}})
	s.initialize(nil)
	_, err := wsRead(s, "notes.txt", nil)
	d := wsRefused(t, "readFile notes.txt", err, protocol.CodePathOutsideWorkspace, "notes.txt")
	checkPolicyData(t, "readFile notes.txt", d, "", "denyRead", filepath.Dir(root))
	err = s.call("snapshot", map[string]any{}, nil)
	if err == nil || err.Code != protocol.CodePathOutsideWorkspace || errData(err).Policy != "denyRead" {
		t.Errorf("snapshot of a denied root: %v, want -32001 naming denyRead", err)
	}
}
