package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rootsFixture adds a read root beside the workspace (configured through a
// symlink), and an artifacts dir nested in the workspace root.
type rootsFixture struct {
	*fixture
	shared, sharedLink, art string
}

func newRootsFixture(t testing.TB) *rootsFixture {
	t.Helper()
	fx := newFixture(t)
	rf := &rootsFixture{
		fixture:    fx,
		shared:     filepath.Join(fx.parent, "shared"),
		sharedLink: filepath.Join(fx.parent, "shared-link"),
		art:        filepath.Join(fx.root, ".toolhost", "artifacts"),
	}
	mustWrite(t, filepath.Join(rf.shared, "lib.txt"), "library\n")
	mustSymlink(t, rf.shared, rf.sharedLink)
	mustWrite(t, filepath.Join(rf.art, "out.log"), "output\n")
	mustSymlink(t, rf.shared, filepath.Join(fx.root, "shared"))              // absolute link into the read root
	mustSymlink(t, ".toolhost/artifacts", filepath.Join(fx.root, "artlink")) // relative link into the artifacts dir
	fx.w.Close()
	fx.w = mustOpen(t, Config{Root: fx.root, ReadRoots: []string{rf.sharedLink, fx.root}, ArtifactsDir: rf.art})
	fx.before = fx.snapshot(t)
	return rf
}

func TestReadRootsAndArtifacts(t *testing.T) {
	rf := newRootsFixture(t)
	w := rf.w
	got := [3]any{w.Root(), w.ReadRoots(), w.ArtifactsDir()}
	want := [3]any{rf.root, []string{rf.shared}, rf.art} // the duplicate of the root is dropped
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roots mismatch (-want +got):\n%s", diff)
	}

	lib := filepath.Join(rf.shared, "lib.txt")
	out := filepath.Join(rf.art, "out.log")
	for _, tc := range []struct{ path, want string }{
		{lib, lib},
		{filepath.Join(rf.sharedLink, "lib.txt"), lib}, // the spelling the root was configured with
		{"file://" + lib, lib},
		{"../shared/lib.txt", lib}, // ".." out of the root into a sibling read root
		{"shared/lib.txt", lib},    // a symlink from the workspace into the read root
		{".toolhost/artifacts/out.log", out},
		{"artlink/out.log", out},
		{out, out},
		{rf.art + "/../../hello.txt", filepath.Join(rf.root, "hello.txt")},
	} {
		t.Run("read "+tc.path, func(t *testing.T) {
			res, err := w.ReadFile(ReadOptions{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != tc.want {
				t.Errorf("path %s, want %s", res.Path, tc.want)
			}
		})
	}

	for _, p := range []string{
		lib,
		filepath.Join(rf.shared, "new.txt"),
		filepath.Join(rf.shared, "newdir", "new.txt"),
		filepath.Join(rf.sharedLink, "lib.txt"),
		"../shared/new.txt",
		"shared/lib.txt",
		"shared/new.txt",
		".toolhost/artifacts/out.log",
		".toolhost/artifacts/new.log",
		".toolhost/artifacts",
		"artlink/out.log",
		"artlink/new/deeper.log",
		out,
	} {
		t.Run("write "+p, func(t *testing.T) {
			for _, mk := range []bool{false, true} {
				_, err := w.WriteFile(WriteOptions{Path: p, Content: "PWNED\n", CreateDirs: mk})
				checkErr(t, "WriteFile", err, ErrReadOnly)
			}
		})
	}
	rf.checkUntouched(t)
	if got := readString(t, out); got != "output\n" {
		t.Errorf("artifact changed: %q", got)
	}
	if entries, _ := os.ReadDir(rf.art); len(entries) != 1 {
		t.Errorf("artifacts dir holds %d entries, want 1", len(entries))
	}

	// Leaving the artifacts dir with ".." lands in the writable root.
	if _, err := w.WriteFile(WriteOptions{Path: ".toolhost/artifacts/../notes.txt", Content: "ok\n"}); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(rf.root, ".toolhost", "notes.txt")); got != "ok\n" {
		t.Errorf("content %q", got)
	}
}

func TestDir(t *testing.T) {
	rf := newRootsFixture(t)
	w := rf.w
	for _, tc := range []struct{ path, want string }{
		{"", rf.root},
		{".", rf.root},
		{"sub", filepath.Join(rf.root, "sub")},
		{rf.root + "/sub/", filepath.Join(rf.root, "sub")},
		{rf.sharedLink, rf.shared},
		{"shared", rf.shared},
		{"artlink", rf.art},
	} {
		got, err := w.Dir(tc.path)
		if err != nil {
			t.Errorf("Dir(%q): %v", tc.path, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Dir(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
	for p, want := range map[string]error{
		"hello.txt": ErrNotRegular,
		"missing":   ErrNotFound,
		"..":        ErrOutside,
	} {
		_, err := w.Dir(p)
		checkErr(t, "Dir("+p+")", err, want)
	}
}

func TestOpen(t *testing.T) {
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(parent, "root")
	mustWrite(t, filepath.Join(root, "f.txt"), "f\n")
	link := filepath.Join(parent, "rootlink")
	mustSymlink(t, root, link)

	for name, tc := range map[string]struct {
		cfg  Config
		want error
	}{
		"missing root":         {Config{Root: filepath.Join(parent, "nope")}, ErrNotFound},
		"root is a file":       {Config{Root: filepath.Join(root, "f.txt")}, ErrNotRegular},
		"empty root":           {Config{}, ErrInvalid},
		"missing read root":    {Config{Root: root, ReadRoots: []string{filepath.Join(parent, "nope")}}, ErrNotFound},
		"artifacts is root":    {Config{Root: root, ArtifactsDir: link}, ErrInvalid},
		"artifacts is missing": {Config{Root: root, ArtifactsDir: filepath.Join(parent, "nope")}, ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := Open(tc.cfg)
			if err == nil {
				w.Close()
			}
			checkErr(t, "Open", err, tc.want)
		})
	}

	// A root given through a symlink (and as a file URI) resolves once; both
	// spellings reach it.
	w := mustOpen(t, Config{Root: "file://" + link})
	if w.Root() != root {
		t.Errorf("Root() = %s, want %s", w.Root(), root)
	}
	for _, p := range []string{filepath.Join(link, "f.txt"), filepath.Join(root, "f.txt"), "f.txt"} {
		res, err := w.ReadFile(ReadOptions{Path: p})
		if err != nil {
			t.Errorf("ReadFile(%q): %v", p, err)
			continue
		}
		if res.Path != filepath.Join(root, "f.txt") {
			t.Errorf("ReadFile(%q).Path = %s", p, res.Path)
		}
	}
	// "<link>2" is not inside "<link>".
	_, err = w.ReadFile(ReadOptions{Path: link + "2/f.txt"})
	checkErr(t, "ReadFile", err, ErrOutside)
}
