package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// policyFixture is a root holding a denied directory with a key and a
// repository, with the policy the agents' defaults give.
func policyFixture(t *testing.T) (root string, w *Workspace) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, ".ssh", "id_rsa"), "KEY\n")
	mustWrite(t, filepath.Join(root, ".git", "config"), "[core]\n")
	mustWrite(t, filepath.Join(root, "ok.txt"), "ok\n")
	w = mustOpen(t, Config{Root: root})
	if err := w.SetPolicy(Policy{
		DenyRead: []string{filepath.Join(root, ".ssh")},
		Protect:  []string{filepath.Join(root, ".git", "hooks"), filepath.Join(root, ".git", "config")},
		Repos:    []string{"hooks", "config"},
	}); err != nil {
		t.Fatal(err)
	}
	return root, w
}

// wantPolicy checks err is a policy refusal of kind.
func wantPolicy(t *testing.T, what string, err error, kind string) {
	t.Helper()
	var pe *PathError
	if !errors.Is(err, ErrPolicy) || !errors.As(err, &pe) {
		t.Errorf("%s: %v, want a policy refusal", what, err)
		return
	}
	if pe.Policy != kind || pe.Entry == "" {
		t.Errorf("%s: policy %q entry %q, want %q and the entry", what, pe.Policy, pe.Entry, kind)
	}
}

// TestPolicyRenamedDeniedDirectory: a denied directory renamed after the
// policy was set is found by its identity under its new name.
func TestPolicyRenamedDeniedDirectory(t *testing.T) {
	root, w := policyFixture(t)
	if err := os.Rename(filepath.Join(root, ".ssh"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	_, err := w.ReadFile(ReadOptions{Path: "moved/id_rsa"})
	wantPolicy(t, "read moved/id_rsa", err, PolicyDenyRead)
}

// TestPolicyBindMountedDirectory: a second name the kernel gives the
// denied directory (a bind mount, as a case variant on a case-insensitive
// filesystem is) is refused by identity.
func TestPolicyBindMountedDirectory(t *testing.T) {
	root, w := policyFixture(t)
	alias := filepath.Join(root, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := bindMount(filepath.Join(root, ".ssh"), alias); err != nil {
		t.Skipf("no bind mount here (%v): a case variant or a bind mount cannot be made without CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { unmount(alias) })
	_, err := w.ReadFile(ReadOptions{Path: "alias/id_rsa"})
	wantPolicy(t, "read alias/id_rsa", err, PolicyDenyRead)
}

// TestPolicyHardLinkOfDeniedFile: a hard link in the root of a denied
// file is refused, as the file; a file with several links that is not
// one is read.
func TestPolicyHardLinkOfDeniedFile(t *testing.T) {
	root, w := policyFixture(t)
	if err := os.Link(filepath.Join(root, ".ssh", "id_rsa"), filepath.Join(root, "copy")); err != nil {
		t.Fatal(err)
	}
	_, err := w.ReadFile(ReadOptions{Path: "copy"})
	wantPolicy(t, "read copy", err, PolicyDenyRead)
	if err := os.Link(filepath.Join(root, "ok.txt"), filepath.Join(root, "ok2")); err != nil {
		t.Fatal(err)
	}
	if r, err := w.ReadFile(ReadOptions{Path: "ok2"}); err != nil || r.Content != "ok\n" {
		t.Errorf("read ok2 = %+v, %v", r, err)
	}
	// A link made after the set was made is found: the denied directory
	// changed, so the set is made again.
	mustWrite(t, filepath.Join(root, ".ssh", "id_ed25519"), "KEY2\n")
	if err := os.Link(filepath.Join(root, ".ssh", "id_ed25519"), filepath.Join(root, "copy2")); err != nil {
		t.Fatal(err)
	}
	_, err = w.ReadFile(ReadOptions{Path: "copy2"})
	wantPolicy(t, "read copy2", err, PolicyDenyRead)
}

// TestPolicyRepositories: the repository rules protect their paths in
// every git directory: nested, made later, a submodule's, a worktree's, a
// bare repository's, in any case; what lies beside them is written.
func TestPolicyRepositories(t *testing.T) {
	root, w := policyFixture(t)
	for _, d := range []string{"bare.git/objects", "bare.git/refs", "wt-gitdir"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(root, "bare.git", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(root, "wt-gitdir", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(root, "wt-gitdir", "commondir"), "../.git\n")
	for _, p := range []string{
		".git/hooks/pre-commit", ".git/config", "a/b/.git/hooks/x", "new/.git/config",
		".git/modules/lib/hooks/pre-commit", ".git/modules/a/b/config", ".git/worktrees/wt/hooks/x", ".GIT/Hooks/x",
		"bare.git/hooks/pre-receive", "bare.git/config", "wt-gitdir/hooks/x",
	} {
		_, err := w.WriteFile(WriteOptions{Path: p, Content: "x", CreateDirs: true})
		wantPolicy(t, "write "+p, err, PolicyProtect)
		if _, err := w.OpenReplacer(p); !errors.Is(err, ErrPolicy) {
			t.Errorf("OpenReplacer %s: %v, want a policy refusal", p, err)
		}
	}
	for _, p := range []string{".git/info/exclude", "hooks/x", "config", "a/.github/hooks/x", "bare.git/description", "notbare/hooks/x"} {
		if _, err := w.WriteFile(WriteOptions{Path: p, Content: "x", CreateDirs: true}); err != nil {
			t.Errorf("write %s: %v", p, err)
		}
	}
	// Reads of protected paths are served.
	if r, err := w.ReadFile(ReadOptions{Path: ".git/config"}); err != nil || r.Content != "[core]\n" {
		t.Errorf("read .git/config = %+v, %v", r, err)
	}
}

// TestPolicyInsideAndCheck: Inside lists the entries in the root, relative
// to it; Check answers for paths that need not exist.
func TestPolicyInsideAndCheck(t *testing.T) {
	root, w := policyFixture(t)
	if diff := cmp.Diff([]string{".ssh"}, w.Inside(PolicyDenyRead)); diff != "" {
		t.Errorf("Inside(denyRead): mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{".git/hooks", ".git/config"}, w.Inside(PolicyProtect)); diff != "" {
		t.Errorf("Inside(protect): mismatch (-want +got):\n%s", diff)
	}
	wantPolicy(t, "Check .ssh/missing", w.Check("diff", ".ssh/missing", false), PolicyDenyRead)
	wantPolicy(t, "Check .git/hooks/x write", w.Check("restore", ".git/hooks/x", true), PolicyProtect)
	if err := w.Check("diff", ".git/hooks/x", false); err != nil {
		t.Errorf("Check .git/hooks/x read: %v", err)
	}
	if err := w.Check("diff", "../outside", false); err != nil {
		t.Errorf("Check ../outside: %v, want nil (not the policy's to answer)", err)
	}
	// An entry holding the root makes the whole root ".".
	if err := w.SetPolicy(Policy{DenyRead: []string{filepath.Dir(root)}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"."}, w.Inside(PolicyDenyRead)); diff != "" {
		t.Errorf("Inside(denyRead) of an entry above the root: mismatch (-want +got):\n%s", diff)
	}
	_, err := w.ReadFile(ReadOptions{Path: "ok.txt"})
	wantPolicy(t, "read ok.txt under a denied parent", err, PolicyDenyRead)
	if err := w.SetPolicy(Policy{DenyRead: []string{"relative"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetPolicy of a relative entry: %v, want ErrInvalid", err)
	}
}

// TestPolicyReadsDuringWrites: with a policy, a reader of a file that
// writes keep renaming new contents over gets the old or the new content,
// never an error: the file opened is checked again, not refused.
func TestPolicyReadsDuringWrites(t *testing.T) {
	_, w := policyFixture(t)
	if _, err := w.WriteFile(WriteOptions{Path: "f.txt", Content: "a"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	writer := make(chan error, 1)
	go func() { // owned by the test: it waits on writer
		defer close(writer)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, err := w.WriteFile(WriteOptions{Path: "f.txt", Content: string(rune('a' + i%2))}); err != nil {
				writer <- err
				return
			}
		}
	}()
	for range 2000 {
		r, err := w.ReadFile(ReadOptions{Path: "f.txt"})
		if err != nil {
			t.Errorf("read during writes: %v", err)
			break
		}
		if r.Content != "a" && r.Content != "b" {
			t.Errorf("read %q, want a or b", r.Content)
			break
		}
	}
	close(done)
	if err := <-writer; err != nil {
		t.Errorf("write: %v", err)
	}
}
