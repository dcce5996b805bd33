package persist

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRootCache checks that a root's cache is the same directory across
// calls, 0700, one per root, and that a sweep removes the cache of a root
// that is gone and idle, read-only module directories included, and keeps
// the others.
func TestRootCache(t *testing.T) {
	d := Dirs{State: filepath.Join(t.TempDir(), "state")}
	gone, kept := filepath.Join(t.TempDir(), "gone"), t.TempDir()
	a, err := d.RootCache(gone)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.RootCache(gone)
	if err != nil || again != a {
		t.Fatalf("RootCache again: %q, %v; want %q", again, err, a)
	}
	b, err := d.RootCache(kept)
	if err != nil || b == a {
		t.Fatalf("RootCache of another root: %q, %v; want a directory of its own", b, err)
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the cache: %v, %v; want mode 0700", fi, err)
	}
	ro := filepath.Join(a, "go-mod", "m@v1")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ro, "f"), nil, 0o444)
	os.Chmod(ro, 0o555)
	old := time.Now().Add(-2 * cacheIdle)
	for _, dir := range []string{a, b} {
		if err := os.Chtimes(dir+".root", old, old); err != nil {
			t.Fatal(err)
		}
	}
	removeIdleCaches(filepath.Dir(a), time.Now().Add(-cacheIdle))
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("the cache of a root that is gone: %v; want it removed", err)
	}
	if _, err := os.Stat(a + ".root"); !os.IsNotExist(err) {
		t.Errorf("its marker: %v; want it removed", err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Errorf("the cache of a root that exists: %v; want it kept", err)
	}
}

// TestSweepRootCachesDaily checks that a sweep stamps the caches'
// directory and that another within sweepEvery leaves an idle cache alone,
// while one after it removes it.
func TestSweepRootCachesDaily(t *testing.T) {
	parent := t.TempDir()
	now := time.Now()
	sweepRootCaches(parent, now)
	idle := filepath.Join(parent, "0123")
	if err := os.Mkdir(idle, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idle+".root", []byte(filepath.Join(parent, "gone")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := now.Add(-2 * cacheIdle)
	if err := os.Chtimes(idle+".root", old, old); err != nil {
		t.Fatal(err)
	}
	sweepRootCaches(parent, now.Add(sweepEvery/2))
	if _, err := os.Stat(idle); err != nil {
		t.Fatalf("a sweep within a day of the last: %v; want the idle cache left for the next", err)
	}
	sweepRootCaches(parent, now.Add(sweepEvery+time.Minute))
	if _, err := os.Stat(idle); !os.IsNotExist(err) {
		t.Fatalf("a sweep a day after the last: %v; want the idle cache removed", err)
	}
}
