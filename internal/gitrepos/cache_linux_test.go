//go:build linux

package gitrepos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// settle scans root with c until the cache holds every directory (their
// change times older than its listings by the clock's slack), and returns
// that scan's result.
func settle(t testing.TB, c *Cache, root string) Result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := c.Scan(root, noLimits)
		if err != nil {
			t.Fatal(err)
		}
		if res.Listed == 0 {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache still lists %d of %d directories", res.Listed, res.Dirs)
		}
	}
}

func TestCacheListsOnlyWhatChanged(t *testing.T) {
	spec := map[string]string{"a/b/c/": "", "top/.git/hooks/": "", "sub/.git": "gitdir: ../top/.git\n"}
	for i := range 20 {
		spec[fmt.Sprintf("many/%02d/x/", i)] = ""
	}
	root := tree(t, spec)
	fds := openFDs(t)
	var c Cache
	res := settle(t, &c, root)
	fresh, err := Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fresh, res, ignoreCost); diff != "" {
		t.Fatalf("cached scan mismatch (-want +got):\n%s", diff)
	}
	if fresh.Listed != fresh.Dirs {
		t.Errorf("a scan without a cache listed %d of %d directories", fresh.Listed, fresh.Dirs)
	}

	// A repository made in a/b: a/b and the new directory are listed.
	if err := os.MkdirAll(filepath.Join(root, "a/b/new/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = c.Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 2 || len(res.Repos) != 3 || res.Repos[0].Dir != "a/b/new" {
		t.Errorf("after git init a/b/new: listed %d, repositories %+v; want 2 listed and a/b/new found", res.Listed, res.Repos)
	}
	// Another at once, in the clock tick of that listing of a/b: a/b's
	// listing is too recent to be trusted, so it is listed again.
	if err := os.MkdirAll(filepath.Join(root, "a/b/second/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = c.Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repos) != 4 || res.Repos[1].Dir != "a/b/second" {
		t.Errorf("after git init a/b/second: repositories %+v, want a/b/second's too", res.Repos)
	}
	// The .git file is read at every scan: its directory does not change
	// when it is rewritten in place.
	f, err := os.OpenFile(filepath.Join(root, "sub/.git"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("gitdir: /elsewhere\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res, err = c.Scan(root, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if i := len(res.Repos) - 2; res.Repos[i].Dir != "sub" || !cmp.Equal(res.Repos[i].GitDirs, []string{"/elsewhere"}) {
		t.Errorf("after sub/.git was rewritten: repositories %+v, want sub's to be /elsewhere", res.Repos)
	}
	c.Close()
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open after the scans and Close, %d before", after, fds)
	}
}

func TestCacheScanCutShort(t *testing.T) {
	spec := map[string]string{}
	for i := range 30 {
		spec[fmt.Sprintf("d%02d/x/.git/", i)] = ""
	}
	root := tree(t, spec)
	var c Cache
	defer c.Close()
	for _, opt := range []Options{{MaxDirs: 10}, {MaxRepos: 3}, {Timeout: time.Nanosecond}} {
		res, err := c.Scan(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Truncated == "" {
			t.Fatalf("a scan with %+v was not cut short", opt)
		}
	}
	res := settle(t, &c, root)
	if len(res.Repos) != 30 || res.Truncated != "" {
		t.Errorf("after scans cut short: %d repositories, truncated %q; want 30, not truncated", len(res.Repos), res.Truncated)
	}
	// A cached scan keeps the limits.
	for _, tt := range []struct {
		opt  Options
		want string
	}{{Options{MaxDirs: 10}, LimitDirs}, {Options{MaxRepos: 3}, LimitRepos}} {
		res, err := c.Scan(root, tt.opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Truncated != tt.want {
			t.Errorf("a cached scan with %+v: truncated %q, want %q", tt.opt, res.Truncated, tt.want)
		}
	}
}

func TestCacheOtherRoot(t *testing.T) {
	a := tree(t, map[string]string{"x/.git/": ""})
	b := tree(t, map[string]string{"y/.git/": ""})
	var c Cache
	defer c.Close()
	settle(t, &c, a)
	res, err := c.Scan(b, noLimits)
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != res.Dirs || len(res.Repos) != 1 || res.Repos[0].Dir != "y" {
		t.Errorf("another root: listed %d of %d, repositories %+v; want all listed and y's", res.Listed, res.Dirs, res.Repos)
	}
}

func TestHolds(t *testing.T) {
	const listed = int64(1_700_000_000_123_456_789)
	s := &scanner{dev: 7}
	d := &dnode{ino: 42, ctime: listed - int64(time.Second), listed: listed}
	dir := func(dev, ino uint64, ctime int64) *unix.Stat_t {
		return &unix.Stat_t{Mode: unix.S_IFDIR | 0o755, Dev: dev, Ino: ino, Ctim: unix.NsecToTimespec(ctime)}
	}
	for _, tt := range []struct {
		name string
		d    dnode
		st   *unix.Stat_t
		want bool
	}{
		{"unchanged", *d, dir(7, 42, d.ctime), true},
		{"changed", *d, dir(7, 42, d.ctime+1), false},
		{"another inode", *d, dir(7, 43, d.ctime), false},
		{"another device", *d, dir(8, 42, d.ctime), false},
		{"a symlink", *d, &unix.Stat_t{Mode: unix.S_IFLNK | 0o777, Dev: 7, Ino: 42, Ctim: unix.NsecToTimespec(d.ctime)}, false},
		{"changed in the tick of its listing", dnode{ino: 42, ctime: listed - int64(time.Millisecond), listed: listed}, dir(7, 42, listed-int64(time.Millisecond)), false},
		{"changed just before the slack", dnode{ino: 42, ctime: listed - int64(racySlack) - 1, listed: listed}, dir(7, 42, listed-int64(racySlack)-1), true},
		{"whole seconds", dnode{ino: 42, ctime: 1_600_000_000_000_000_000, listed: listed}, dir(7, 42, 1_600_000_000_000_000_000), false},
	} {
		if got := s.holds(&tt.d, tt.st); got != tt.want {
			t.Errorf("%s: holds = %v, want %v", tt.name, got, tt.want)
		}
	}
}
