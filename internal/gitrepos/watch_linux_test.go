//go:build linux

package gitrepos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cacheMode is a way a Cache learns of changes.
type cacheMode struct {
	name  string
	setup func(t *testing.T, c *Cache)
}

// cacheModes are the modes the tests run a Cache in: by change times
// only, by inotify, and by inotify with 5 watches (most directories are
// revalidated by change time).
var cacheModes = []cacheMode{
	{"stat", func(_ *testing.T, c *Cache) { c.closed = true }},
	{"inotify", func(*testing.T, *Cache) {}},
	{"inotify-capped", func(t *testing.T, _ *Cache) { capWatches(t, 5) }},
}

// capWatches makes the Caches made in t take at most n watches.
func capWatches(t *testing.T, n int) {
	old := watchCap
	watchCap = func() int { return n }
	t.Cleanup(func() { watchCap = old })
}

// loseEvents makes c's next scan act as if the queue overflowed.
func loseEvents(c *Cache) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w != nil {
		c.w.lose = true
	}
}

// watches is how many watches c holds.
func watches(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w == nil {
		return 0
	}
	return len(c.w.byWD)
}

// scanBoth scans root with c and afresh, and fails unless they agree.
func scanBoth(t *testing.T, c *Cache, root, after string) Result {
	t.Helper()
	cached, err := c.Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fresh, cached, ignoreCost); diff != "" {
		t.Fatalf("after %s: cached scan mismatch (-want +got):\n%s", after, diff)
	}
	return cached
}

func TestWatchSecondScanListsNothing(t *testing.T) {
	root := tree(t, map[string]string{"a/b/c/": "", "r/.git/hooks/": "", "s/.git": "gitdir: ../r/.git\n"})
	var c Cache
	defer c.Close()
	first := scanBoth(t, &c, root, "the first scan")
	if first.Listed != first.Dirs {
		t.Errorf("the first scan listed %d of %d directories", first.Listed, first.Dirs)
	}
	// No racy wait: every directory was watched before it was listed.
	res := scanBoth(t, &c, root, "nothing")
	if res.Listed != 0 {
		t.Errorf("a scan of an unchanged tree listed %d of %d directories, want none", res.Listed, res.Dirs)
	}
	if n := watches(&c); n != res.Dirs {
		t.Errorf("%d watches for %d directories", n, res.Dirs)
	}
	// A repository made deep down: its parent and itself are listed.
	if err := os.MkdirAll(filepath.Join(root, "a/b/c/new/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = scanBoth(t, &c, root, "git init a/b/c/new")
	if res.Listed != 2 {
		t.Errorf("after git init a/b/c/new: listed %d, want 2", res.Listed)
	}
}

func TestWatchChanges(t *testing.T) {
	for _, mode := range cacheModes {
		for _, tt := range []struct {
			name   string
			hold   string // a directory held open from before the change
			change func(t *testing.T, root string)
		}{
			{"a directory replaced by a symlink", "", func(t *testing.T, root string) {
				mustDo(t, os.RemoveAll(filepath.Join(root, "a")))
				mustDo(t, os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(root, "a")))
			}},
			{"a .git file rewritten", "", func(t *testing.T, root string) {
				f, err := os.OpenFile(filepath.Join(root, "s/.git"), os.O_WRONLY|os.O_TRUNC, 0)
				mustDo(t, err)
				_, err = f.WriteString("gitdir: /elsewhere\n")
				mustDo(t, err)
				mustDo(t, f.Close())
			}},
			{"a directory deleted and made again", "", func(t *testing.T, root string) {
				mustDo(t, os.RemoveAll(filepath.Join(root, "a/b")))
				mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/other/.git"), 0o755))
			}},
			{"a directory deleted and made again, held open", "a/b/c", func(t *testing.T, root string) {
				// The deleted directory's IN_DELETE_SELF waits for its
				// last reference: the name is checked all the same.
				mustDo(t, os.RemoveAll(filepath.Join(root, "a/b/c")))
				mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/c/d/.git"), 0o755))
			}},
			{"directories swapped", "", func(t *testing.T, root string) {
				mustDo(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "tmp")))
				mustDo(t, os.Rename(filepath.Join(root, "elsewhere"), filepath.Join(root, "a")))
				mustDo(t, os.Rename(filepath.Join(root, "tmp"), filepath.Join(root, "elsewhere")))
			}},
			{"a bare repository made", "", func(t *testing.T, root string) {
				mustDo(t, os.WriteFile(filepath.Join(root, "a/b/HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
				mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/objects"), 0o755))
				mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/refs"), 0o755))
			}},
		} {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				root := tree(t, map[string]string{
					"a/b/c/": "", "a/b/r/.git/": "", "s/.git": "gitdir: ../a/b/r/.git\n",
					"elsewhere/x/.git/": "",
				})
				if tt.hold != "" {
					f, err := os.Open(filepath.Join(root, tt.hold))
					mustDo(t, err)
					defer f.Close()
				}
				fds := openFDs(t)
				var c Cache
				mode.setup(t, &c)
				settle(t, &c, root)
				tt.change(t, root)
				scanBoth(t, &c, root, tt.name)
				scanBoth(t, &c, root, tt.name+", again")
				mustDo(t, c.Close())
				if after := openFDs(t); after != fds {
					t.Errorf("%d descriptors open after Close, %d before", after, fds)
				}
			})
		}
	}
}

func TestWatchLostEvents(t *testing.T) {
	root := tree(t, map[string]string{"a/b/": "", "c/d/.git/": ""})
	var c Cache
	defer c.Close()
	settle(t, &c, root)
	dirs := watches(&c)
	loseEvents(&c)
	mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/new/.git"), 0o755))
	res := scanBoth(t, &c, root, "events lost and git init a/b/new")
	if len(res.Repos) != 2 {
		t.Errorf("after events lost: repositories %+v, want a/b/new's and c/d's", res.Repos)
	}
	// The watches are back: the next scan lists nothing.
	res = settle(t, &c, root)
	if n := watches(&c); n != dirs+1 {
		t.Errorf("%d watches after events were lost, want %d", n, dirs+1)
	}
	if res = scanBoth(t, &c, root, "nothing"); res.Listed != 0 {
		t.Errorf("a scan after the watches were made again listed %d", res.Listed)
	}
}

func TestWatchCap(t *testing.T) {
	capWatches(t, 3)
	root := tree(t, map[string]string{"a/b/c/": "", "d/e/.git/": ""})
	var c Cache
	defer c.Close()
	settle(t, &c, root)
	if n := watches(&c); n != 3 {
		t.Errorf("%d watches, want the cap, 3", n)
	}
	mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/c/new/.git"), 0o755))
	scanBoth(t, &c, root, "git init a/b/c/new")
}

func TestCloseReleases(t *testing.T) {
	root := tree(t, map[string]string{"a/b/": ""})
	fds := openFDs(t)
	var c Cache
	settle(t, &c, root)
	if watches(&c) == 0 {
		t.Fatal("no watches")
	}
	mustDo(t, c.Close())
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open after Close, %d before", after, fds)
	}
	// A closed Cache still scans, by change times.
	mustDo(t, os.MkdirAll(filepath.Join(root, "a/b/new/.git"), 0o755))
	scanBoth(t, &c, root, "Close and git init a/b/new")
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open after a scan of a closed Cache, %d before", after, fds)
	}
}

// mustDo fails the test on err.
func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
