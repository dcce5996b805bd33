package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolve feeds paths to ReadFile, Dir and WriteFile over a workspace full
// of traps (links out, dangling links, a sibling read root, a nested artifacts
// dir). Whatever is accepted must resolve, by filepath.EvalSymlinks, to a real
// path inside a root — inside the workspace root and outside the read-only
// roots for writes — and nothing outside may change. Inputs may use the
// tokens {root}, {parent}, {outside}, {shared} and {art}, expanded to this
// run's directories, so crashers saved under testdata/fuzz replay anywhere.
func FuzzResolve(f *testing.F) {
	rf := newRootsFixture(f)
	mustSymlink(f, rf.outside, filepath.Join(rf.root, "out"))
	mustSymlink(f, "../outside/secret.txt", filepath.Join(rf.root, "leak"))
	mustSymlink(f, filepath.Join(rf.outside, "new.txt"), filepath.Join(rf.root, "dangle"))
	mustSymlink(f, filepath.Join(rf.outside, "dir"), filepath.Join(rf.root, "link"))
	mustSymlink(f, "hello.txt", filepath.Join(rf.root, "alias"))
	mustSymlink(f, "sub", filepath.Join(rf.root, "insub"))
	mustSymlink(f, "../..", filepath.Join(rf.root, "sub", "up2"))
	mustSymlink(f, "loop", filepath.Join(rf.root, "loop"))
	mustWrite(f, filepath.Join(rf.shared, "deep", "x.txt"), "shared deep\n")
	mustSymlink(f, "../../root/out", filepath.Join(rf.shared, "deep", "back")) // read root -> workspace -> outside
	rf.before = rf.snapshot(f)

	expand := strings.NewReplacer("{root}", rf.root, "{parent}", rf.parent, "{outside}", rf.outside,
		"{shared}", rf.shared, "{art}", rf.art)
	for _, s := range []string{
		"hello.txt", "sub/inner.txt", "./sub/../hello.txt", "{root}/hello.txt", "file://{root}/hello.txt",
		"..", "../outside/secret.txt", "sub/../../outside/secret.txt", "{outside}/secret.txt", "/etc/passwd",
		"{parent}/root_evil/secret.txt", "{parent}/root2/secret.txt", "{parent}/root.bak/secret.txt",
		"{parent}/root-old/secret.txt", "{root}/../root2/secret.txt", "{parent}/Root/secret.txt",
		"out/secret.txt", "leak", "dangle", "link/../secret.txt", "hello.txt\x00", strings.Repeat("a/", 2100),
		"/proc/self/root{outside}/secret.txt", "/proc/self/cwd/secret.txt", "~", "~/x",
		"file://{outside}/secret.txt", "file://{root}/%2e%2e/outside/secret.txt", "file://host{root}/hello.txt",
		"alias", "insub/../hello.txt", "sub/up2/outside/secret.txt", "loop", "{shared}/lib.txt",
		"../shared/deep/back/secret.txt", "shared/deep/x.txt", "artlink/out.log", "{art}/../../hello.txt",
		"{parent}/shared-link/lib.txt", "{root}/.toolhost/artifacts/out.log", "new.txt", "sub/new.txt",
	} {
		f.Add(s)
	}

	readOnly := []string{rf.shared, rf.art}
	inside := func(p string, roots ...string) bool {
		for _, r := range roots {
			if p == r || strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	// checkReal verifies that an accepted path is real and inside roots.
	checkReal := func(t *testing.T, what, p string, roots ...string) {
		t.Helper()
		ev, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatalf("%s accepted, but EvalSymlinks(%s): %v", what, p, err)
		}
		if ev != p {
			t.Fatalf("%s returned %s, whose real path is %s", what, p, ev)
		}
		if !inside(ev, roots...) {
			t.Fatalf("%s resolved to %s, outside %v", what, ev, roots)
		}
	}
	checkErrKind := func(t *testing.T, what string, err error) {
		t.Helper()
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: error %v is not a *PathError", what, err)
		}
		for _, s := range []error{ErrOutside, ErrNotFound, ErrReadOnly, ErrTooLarge, ErrConflict, ErrNotRegular, ErrInvalid} {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("%s: unexpected error %v", what, err)
	}
	secret, err := os.ReadFile(filepath.Join(rf.outside, "secret.txt"))
	if err != nil {
		f.Fatal(err)
	}

	watched := []string{rf.outside, rf.shared, filepath.Join(rf.shared, "deep"), filepath.Join(rf.parent, "root2"), rf.art, rf.parent}
	counts := map[string]int{}
	for _, d := range watched {
		entries, err := os.ReadDir(d)
		if err != nil {
			f.Fatal(err)
		}
		counts[d] = len(entries)
	}

	f.Fuzz(func(t *testing.T, in string) {
		p := expand.Replace(in)
		all := append([]string{rf.root}, readOnly...)
		what := "ReadFile(" + p + ")"
		if res, err := rf.w.ReadFile(ReadOptions{Path: p, Limit: 2, MaxBytes: 4096}); err != nil {
			checkErrKind(t, what, err)
		} else {
			checkReal(t, what, res.Path, all...)
			if strings.Contains(res.Content, "SECRET") {
				t.Fatalf("%s returned %q", what, res.Content)
			}
		}
		what = "Dir(" + p + ")"
		if d, err := rf.w.Dir(p); err != nil {
			checkErrKind(t, what, err)
		} else {
			checkReal(t, what, d, all...)
		}
		what = "WriteFile(" + p + ")"
		if res, err := rf.w.WriteFile(WriteOptions{Path: p, Content: "fuzz\n"}); err != nil {
			checkErrKind(t, what, err)
		} else {
			checkReal(t, what, res.Path, rf.root)
			if inside(res.Path, readOnly...) {
				t.Fatalf("%s wrote into a read-only root: %s", what, res.Path)
			}
		}
		if b, err := os.ReadFile(filepath.Join(rf.outside, "secret.txt")); err != nil || string(b) != string(secret) {
			t.Fatalf("outside secret changed after %q: %q, %v", p, b, err)
		}
		for _, d := range watched {
			if entries, err := os.ReadDir(d); err != nil || len(entries) != counts[d] {
				t.Fatalf("%s has %d entries after %q, want %d (%v)", d, len(entries), p, counts[d], err)
			}
		}
	})
}
