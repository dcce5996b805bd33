package workspace

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Each test of this file is one entry of the escape corpus: the path is
// refused with ErrOutside and a reason, and nothing outside the root is read
// or written (assertRefused compares a snapshot of everything outside).

func TestEscapeDotDot(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{
		"..",
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"../root/../outside/secret.txt",
		"sub/../../../../../../etc/passwd",
		"./../outside/new.txt",
		"../outside/newdir/new.txt",
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeAbsoluteOutside(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{
		filepath.Join(fx.outside, "secret.txt"),
		filepath.Join(fx.outside, "new.txt"),
		fx.parent,
		"/",
		"/etc/passwd",
		"//etc/passwd",
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeSiblingPrefix(t *testing.T) {
	fx := newFixture(t)
	for _, s := range []string{"root_evil", "root2", "root.bak", "root-old"} {
		t.Run(s, func(t *testing.T) {
			assertRefused(t, fx, filepath.Join(fx.parent, s, "secret.txt"), ErrOutside)
			assertRefused(t, fx, filepath.Join(fx.parent, s), ErrOutside)
		})
	}
	t.Run("root/../root2", func(t *testing.T) {
		assertRefused(t, fx, fx.root+"/../root2/secret.txt", ErrOutside)
	})
	t.Run("relative ../root2", func(t *testing.T) {
		assertRefused(t, fx, "../root2/secret.txt", ErrOutside)
	})
}

func TestEscapeSymlinkToFileOutside(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, filepath.Join(fx.outside, "secret.txt"), filepath.Join(fx.root, "leak"))
	mustSymlink(t, "../outside/secret.txt", filepath.Join(fx.root, "leakrel"))
	mustSymlink(t, "leak", filepath.Join(fx.root, "chain")) // in-root link to a link that leads out
	for _, p := range []string{"leak", "leakrel", "chain", filepath.Join(fx.root, "leak"), "sub/../leak"} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeSymlinkToDirOutside(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, fx.outside, filepath.Join(fx.root, "out"))
	mustSymlink(t, "../outside", filepath.Join(fx.root, "outrel"))
	for _, p := range []string{
		"out/secret.txt", "out/dir/inner.txt", "out", "out/new.txt", "out/newdir/new.txt",
		"outrel/secret.txt", "outrel/new.txt",
		filepath.Join(fx.root, "out", "secret.txt"),
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeDanglingSymlink(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, filepath.Join(fx.outside, "new.txt"), filepath.Join(fx.root, "dangle"))
	mustSymlink(t, "../outside/new.txt", filepath.Join(fx.root, "danglerel"))
	mustSymlink(t, filepath.Join(fx.outside, "nodir"), filepath.Join(fx.root, "dangledir"))
	for _, p := range []string{"dangle", "danglerel", "dangledir/new.txt", filepath.Join(fx.root, "dangle")} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
	// The links themselves are left as they were.
	for _, l := range []string{"dangle", "danglerel", "dangledir"} {
		if fi, err := os.Lstat(filepath.Join(fx.root, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v", l, err)
		}
	}
}

// TestEscapeLinkDotDot: "link/../secret.txt" is outside/secret.txt for the
// kernel, since link is a directory outside. A lexical clean would make it
// root/secret.txt, which exists, and wrongly succeed.
func TestEscapeLinkDotDot(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, filepath.Join(fx.outside, "dir"), filepath.Join(fx.root, "link"))
	for _, p := range []string{"link/../secret.txt", filepath.Join(fx.root, "link") + "/../secret.txt", "link/.."} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeNULByte(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{"hello.txt\x00", "\x00", "hello.txt\x00../../outside/secret.txt", "file://" + fx.root + "/hello.txt%00"} {
		t.Run(strings.ReplaceAll(p, "\x00", "NUL"), func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeLongPath(t *testing.T) {
	fx := newFixture(t)
	long := strings.Repeat("a/", pathMax/2) + "hello.txt"
	abs := fx.root + "/" + strings.Repeat("./", pathMax/2) + "hello.txt"
	for name, p := range map[string]string{"relative": long, "absolute": abs, "uri": "file://" + abs} {
		t.Run(name, func(t *testing.T) {
			assertRefused(t, fx, p, ErrOutside)
			_, err := fx.w.ReadFile(ReadOptions{Path: p})
			if pe := checkErr(t, "ReadFile", err, ErrOutside); pe != nil && !strings.Contains(pe.Reason, "PATH_MAX") {
				t.Errorf("reason %q does not mention PATH_MAX", pe.Reason)
			}
		})
	}
}

func TestEscapeProcSelf(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{
		"/proc/self/root" + filepath.Join(fx.outside, "secret.txt"),
		"/proc/self/root" + filepath.Join(fx.root, "hello.txt"), // even when it would land inside
		"/proc/self/cwd/secret.txt",
		"/proc/thread-self/root/etc/passwd",
		"/proc/1/root/etc/passwd",
		"/proc/self/fd/0",
		"//proc/self/root/etc/passwd",
		"/./proc/self/root/etc/passwd",
		"file:///proc/self/root/etc/passwd",
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

func TestEscapeTilde(t *testing.T) {
	fx := newFixture(t)
	// A directory literally named "~" inside the root must not make "~" work
	// as a home expansion either.
	mustWrite(t, filepath.Join(fx.root, "~", "x"), "tilde\n")
	for _, p := range []string{"~", "~/x", "~root/.bashrc", "~/../outside/secret.txt"} {
		t.Run(p, func(t *testing.T) {
			assertRefused(t, fx, p, ErrOutside)
			_, err := fx.w.ReadFile(ReadOptions{Path: p})
			if pe := checkErr(t, "ReadFile", err, ErrOutside); pe != nil && !strings.Contains(pe.Reason, "home expansion") {
				t.Errorf("reason %q does not say there is no home expansion", pe.Reason)
			}
		})
	}
}

func TestEscapeFileURI(t *testing.T) {
	fx := newFixture(t)
	u := func(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }
	for _, p := range []string{
		u(filepath.Join(fx.outside, "secret.txt")),
		"file://localhost" + filepath.Join(fx.outside, "secret.txt"),
		"file://" + fx.root + "/%2e%2e/outside/secret.txt",
		"file://" + fx.root + "/..%2Foutside%2Fsecret.txt",
		"file://" + fx.parent + "/root%5Fevil/secret.txt",
		u(filepath.Join(fx.parent, "root2", "secret.txt")),
		"file://evil.example.com" + filepath.Join(fx.root, "hello.txt"),
		"FILE://" + filepath.Join(fx.outside, "secret.txt"),
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

// TestEscapeCaseVariant: parent/Root exists beside parent/root; on a
// case-sensitive filesystem it is another directory, and it is never
// matched as the root whatever the filesystem.
func TestEscapeCaseVariant(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{
		filepath.Join(fx.parent, "Root", "secret.txt"),
		filepath.Join(fx.parent, "ROOT", "hello.txt"),
		"file://" + filepath.Join(fx.parent, "Root", "secret.txt"),
		"../Root/secret.txt",
	} {
		t.Run(p, func(t *testing.T) { assertRefused(t, fx, p, ErrOutside) })
	}
}

// TestEscapeRaceSwap swaps root/d between a real directory and a symlink to
// outside while reads and writes through d run; no read may ever return
// outside content and no write may land outside. Loops are bounded by count.
func TestEscapeRaceSwap(t *testing.T) {
	fx := newFixture(t)
	d := filepath.Join(fx.root, "d")
	mustWrite(t, filepath.Join(d, "secret.txt"), "inside d\n")
	fx.before = fx.snapshot(t)

	const reads = 3000
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	swaps := 0
	// stop runs before the TempDir cleanup even when the test fails early.
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	go func() {
		defer wg.Done()
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := os.Rename(d, d+".real"); err != nil {
				t.Error(err)
				return
			}
			if err := os.Symlink(fx.outside, d); err != nil {
				t.Error(err)
				return
			}
			if err := os.Remove(d); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(d+".real", d); err != nil {
				t.Error(err)
				return
			}
			swaps++
		}
	}()

	seen := map[string]int{}
	for i := range reads {
		p := "d/secret.txt"
		if i%2 == 1 {
			p = filepath.Join(d, "secret.txt")
		}
		res, err := fx.w.ReadFile(ReadOptions{Path: p})
		switch {
		case err == nil:
			if res.Content != "inside d\n" {
				t.Fatalf("read %d returned %q from %s", i, res.Content, res.Path)
			}
			seen["ok"]++
		case errors.Is(err, ErrOutside), errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
			seen["refused"]++
		default:
			t.Fatalf("read %d: unexpected error %v", i, err)
		}
		if i%10 == 0 {
			_, err := fx.w.WriteFile(WriteOptions{Path: "d/new.txt", Content: "PWNED\n"})
			if err != nil && !errors.Is(err, ErrOutside) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
				t.Fatalf("write %d: unexpected error %v", i, err)
			}
		}
	}
	stop()
	t.Logf("%d reads (%v), %d swaps", reads, seen, swaps)
	if _, err := os.Stat(filepath.Join(fx.outside, "new.txt")); err == nil {
		t.Fatal("a write through the swapped directory landed outside")
	}
	os.Remove(filepath.Join(d, "new.txt"))
	fx.checkUntouched(t)
}

// TestEscapeSwapAfterResolve makes the race of TestEscapeRaceSwap
// deterministic: the path is resolved while d is a real directory, d is then
// swapped for a symlink to outside, and the open that ReadFile and WriteFile
// do next (through the root handle, on the resolved name) must be refused.
func TestEscapeSwapAfterResolve(t *testing.T) {
	fx := newFixture(t)
	d := filepath.Join(fx.root, "d")
	mustWrite(t, filepath.Join(d, "secret.txt"), "inside d\n")
	read, err := fx.w.resolve("read", "d/secret.txt", resolveExisting, accessRead)
	if err != nil {
		t.Fatal(err)
	}
	write, err := fx.w.resolve("write", "d/new.txt", resolveCreate, accessWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(d, d+".real"); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, fx.outside, d)

	f, err := read.r.h.OpenFile(read.rel(), openReadFlags, 0)
	if err == nil {
		f.Close()
		t.Fatal("the open after the swap followed the symlink out")
	}
	checkErr(t, "open after swap", osErr("read", "d/secret.txt", err), ErrOutside)

	parent := location{r: write.r, comps: write.comps[:len(write.comps)-1]}
	dir, err := write.r.h.OpenRoot(parent.rel())
	if err == nil {
		dir.Close()
		t.Fatal("the parent open after the swap followed the symlink out")
	}
	checkErr(t, "parent open after swap", osErr("write", "d/new.txt", err), ErrOutside)
	fx.checkUntouched(t)
}
