package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixture is a workspace root beside directories it must never reach.
//
//	parent/
//	  root/        hello.txt, sub/inner.txt, secret.txt ("inside")
//	  outside/     secret.txt, dir/inner.txt
//	  root_evil/ root2/ root.bak/ root-old/ Root/   each secret.txt
type fixture struct {
	parent, root, outside string
	w                     *Workspace
	before                map[string]string
}

// siblingNames are directories beside root that share its prefix, or differ
// only in case.
var siblingNames = []string{"root_evil", "root2", "root.bak", "root-old", "Root"}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{parent: parent, root: filepath.Join(parent, "root"), outside: filepath.Join(parent, "outside")}
	mustWrite(t, filepath.Join(fx.root, "hello.txt"), "hello\n")
	mustWrite(t, filepath.Join(fx.root, "sub", "inner.txt"), "inner\n")
	mustWrite(t, filepath.Join(fx.root, "secret.txt"), "inside\n")
	mustWrite(t, filepath.Join(fx.outside, "secret.txt"), "SECRET outside\n")
	mustWrite(t, filepath.Join(fx.outside, "dir", "inner.txt"), "SECRET outside dir\n")
	for _, s := range siblingNames {
		mustWrite(t, filepath.Join(parent, s, "secret.txt"), "SECRET "+s+"\n")
	}
	fx.w = mustOpen(t, Config{Root: fx.root})
	fx.before = fx.snapshot(t)
	return fx
}

func mustOpen(t testing.TB, cfg Config) *Workspace {
	t.Helper()
	w, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// snapshot records every entry under parent except the root itself: kind,
// mode, content or link target.
func (fx *fixture) snapshot(t testing.TB) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(fx.parent, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == fx.root {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(fx.parent, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			snap[rel] = "link " + target
		case d.IsDir():
			snap[rel] = "dir " + info.Mode().String()
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			snap[rel] = info.Mode().String() + " " + info.ModTime().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// checkUntouched fails if anything outside the root changed.
func (fx *fixture) checkUntouched(t testing.TB) {
	t.Helper()
	if diff := cmp.Diff(fx.before, fx.snapshot(t)); diff != "" {
		t.Errorf("outside the root changed: mismatch (-want +got):\n%s", diff)
	}
}

// checkErr fails unless err wraps want and is a *PathError with a reason.
func checkErr(t testing.TB, what string, err, want error) *PathError {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, want)
		return nil
	}
	var pe *PathError
	if !errors.As(err, &pe) {
		t.Errorf("%s: error %T %v is not a *PathError", what, err, err)
		return nil
	}
	if pe.Reason == "" {
		t.Errorf("%s: %v has no reason", what, err)
	}
	return pe
}

// assertRefused checks that read, write (with and without createDirs) and
// Dir of path all fail with want, and that nothing outside the root changed.
func assertRefused(t *testing.T, fx *fixture, path string, want error) {
	t.Helper()
	res, err := fx.w.ReadFile(ReadOptions{Path: path})
	if err == nil {
		t.Errorf("ReadFile(%q) = %q from %s, want an error", path, res.Content, res.Path)
	}
	checkErr(t, "ReadFile("+path+")", err, want)
	for _, mk := range []bool{false, true} {
		wr, err := fx.w.WriteFile(WriteOptions{Path: path, Content: "PWNED\n", CreateDirs: mk})
		if err == nil {
			t.Errorf("WriteFile(%q, createDirs=%v) wrote %s, want an error", path, mk, wr.Path)
		}
		checkErr(t, "WriteFile("+path+")", err, want)
	}
	dir, err := fx.w.Dir(path)
	if err == nil {
		t.Errorf("Dir(%q) = %s, want an error", path, dir)
	}
	checkErr(t, "Dir("+path+")", err, want)
	fx.checkUntouched(t)
	// The root's own files keep their content too: a refused write must not
	// have been redirected inside.
	for name, want := range map[string]string{"hello.txt": "hello\n", "secret.txt": "inside\n"} {
		if b, _ := os.ReadFile(filepath.Join(fx.root, name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
}
