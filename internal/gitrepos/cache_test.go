package gitrepos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// noLimits is a scan that reaches no limit in the tests' trees.
var noLimits = Options{Timeout: time.Minute}

// ignoreCost leaves out of a comparison of results what differs between
// a fresh scan and a cached one.
var ignoreCost = cmpopts.IgnoreFields(Result{}, "Duration", "Listed")

// mutator changes a tree at random, as commands would: it keeps the list
// of the tree's directories (relative, "." the root).
type mutator struct {
	t    *testing.T
	rng  *rand.Rand
	root string
	dirs []string
	n    int // names made so far
}

// name is a new name.
func (m *mutator) name() string {
	m.n++
	return fmt.Sprintf("d%d", m.n)
}

// pick is an existing directory, the root included when root is true.
func (m *mutator) pick(root bool) string {
	if !root && len(m.dirs) == 1 {
		return ""
	}
	for {
		d := m.dirs[m.rng.IntN(len(m.dirs))]
		if root || d != "." {
			return d
		}
	}
}

// abs is rel's path.
func (m *mutator) abs(rel string) string { return filepath.Join(m.root, rel) }

// forget drops rel and what is below it from the list.
func (m *mutator) forget(rel string) {
	m.dirs = slices.DeleteFunc(m.dirs, func(d string) bool { return d == rel || strings.HasPrefix(d, rel+"/") })
}

// rescan lists the tree's directories again (after a rename).
func (m *mutator) rescan() {
	m.dirs = []string{"."}
	err := filepath.WalkDir(m.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() && p != m.root {
			rel, _ := filepath.Rel(m.root, p)
			m.dirs = append(m.dirs, rel)
		}
		return nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
}

// mkdir makes a new directory, with up to two more below it.
func (m *mutator) mkdir() string {
	rel := filepath.Join(m.pick(true), m.name())
	for range m.rng.IntN(3) {
		rel = filepath.Join(rel, m.name())
	}
	m.must(os.MkdirAll(m.abs(rel), 0o755))
	m.rescan()
	return rel
}

// must fails the test on err.
func (m *mutator) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

// write writes a file, replacing what was there.
func (m *mutator) write(p, content string) {
	os.RemoveAll(p)
	m.must(os.WriteFile(p, []byte(content), 0o644))
}

// mutate makes one change, and says which.
func (m *mutator) mutate() string {
	switch m.rng.IntN(14) {
	case 0, 1:
		return "mkdir " + m.mkdir()
	case 2:
		d := m.pick(false)
		if d == "" {
			return "nothing"
		}
		m.must(os.RemoveAll(m.abs(d)))
		m.forget(d)
		return "remove " + d
	case 3:
		// Rename a directory elsewhere (not below itself).
		d := m.pick(false)
		if d == "" {
			return "nothing"
		}
		to := m.pick(true)
		if to == d || strings.HasPrefix(to, d+"/") {
			return "nothing"
		}
		dst := filepath.Join(to, m.name())
		m.must(os.Rename(m.abs(d), m.abs(dst)))
		m.rescan()
		return "rename " + d + " " + dst
	case 4:
		// Swap two directories: each path holds another directory.
		a, b := m.pick(false), m.pick(false)
		if a == "" || a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/") {
			return "nothing"
		}
		tmp := filepath.Join(m.root, m.name())
		m.must(os.Rename(m.abs(a), tmp))
		m.must(os.Rename(m.abs(b), m.abs(a)))
		m.must(os.Rename(tmp, m.abs(b)))
		m.rescan()
		return "swap " + a + " " + b
	case 5:
		d := m.pick(true)
		os.RemoveAll(m.abs(filepath.Join(d, ".git")))
		m.must(os.MkdirAll(m.abs(filepath.Join(d, ".git/hooks")), 0o755))
		return "git dir in " + d
	case 6:
		// A .git file naming a git directory, with a commondir or not.
		d := m.pick(true)
		g := m.abs(filepath.Join(m.pick(true), m.name()+".gitdir"))
		m.must(os.MkdirAll(g, 0o755))
		if m.rng.IntN(2) == 0 {
			m.write(filepath.Join(g, "commondir"), "../common\n")
		}
		m.write(m.abs(filepath.Join(d, ".git")), "gitdir: "+g+"\n")
		m.rescan()
		return "git file in " + d
	case 7:
		// Rewrite a .git file in place: its directory does not change.
		for _, d := range m.dirs {
			p := m.abs(filepath.Join(d, ".git"))
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
				m.must(err)
				_, err = fmt.Fprintf(f, "gitdir: ../%s\n", m.name())
				m.must(err)
				m.must(f.Close())
				return "rewrite " + p
			}
		}
		return "nothing"
	case 8:
		// A bare repository, or one whose HEAD is taken away.
		d := m.pick(false)
		if d == "" {
			return "nothing"
		}
		if _, err := os.Lstat(m.abs(filepath.Join(d, "HEAD"))); err == nil {
			m.must(os.RemoveAll(m.abs(filepath.Join(d, "HEAD"))))
			m.rescan()
			return "unbare " + d
		}
		m.write(m.abs(filepath.Join(d, "HEAD")), "ref: refs/heads/main\n")
		for _, sub := range []string{"objects", "refs", "refs/heads"} {
			// An earlier step may have left a symlink (dangling or not) or
			// a file there, which MkdirAll will not make a directory of.
			if fi, err := os.Lstat(m.abs(filepath.Join(d, sub))); err == nil && !fi.IsDir() {
				m.must(os.Remove(m.abs(filepath.Join(d, sub))))
			}
		}
		m.must(os.MkdirAll(m.abs(filepath.Join(d, "objects")), 0o755))
		m.must(os.MkdirAll(m.abs(filepath.Join(d, "refs/heads")), 0o755))
		m.rescan()
		return "bare " + d
	case 9:
		// A directory replaced by a symlink to a directory with a repository.
		d := m.pick(false)
		if d == "" {
			return "nothing"
		}
		target := m.abs(m.mkdir())
		m.must(os.MkdirAll(filepath.Join(target, "in/.git"), 0o755))
		m.must(os.RemoveAll(m.abs(d)))
		m.must(os.Symlink(target, m.abs(d)))
		m.rescan()
		return "symlink " + d
	case 10:
		d := m.pick(true)
		os.RemoveAll(m.abs(filepath.Join(d, ".git")))
		m.must(os.Symlink(m.abs(m.pick(true)), m.abs(filepath.Join(d, ".git"))))
		m.rescan()
		return "git symlink in " + d
	case 11:
		// An entry added, and the directory's modification time set back:
		// its change time still moves.
		d := m.pick(true)
		fi, err := os.Stat(m.abs(d))
		m.must(err)
		rel := filepath.Join(d, m.name(), ".git")
		m.must(os.MkdirAll(m.abs(rel), 0o755))
		m.must(os.Chtimes(m.abs(d), fi.ModTime(), fi.ModTime()))
		m.rescan()
		return "hidden git dir " + rel
	case 12:
		// A file added or removed: the directory changes, its
		// subdirectories do not.
		d := m.pick(true)
		p := m.abs(filepath.Join(d, "file"))
		if _, err := os.Lstat(p); err == nil {
			m.must(os.Remove(p))
			return "rm file in " + d
		}
		m.write(p, "x")
		return "file in " + d
	default:
		d := m.pick(true)
		p := m.abs(filepath.Join(d, ".git"))
		if _, err := os.Lstat(p); err == nil {
			m.must(os.RemoveAll(p))
			return "ungit " + d
		}
		return "nothing"
	}
}

// TestCacheFindsWhatAFreshScanFinds mutates random trees and compares,
// after each change, a scan with a cache that has seen every earlier state
// with a fresh scan; changes are made as soon as a scan returns, within
// the clock tick of its listings. It runs with each of cacheModes (on
// Linux: change times only, inotify, and inotify with so few watches that
// most directories have none), and now and then the cache loses its
// events, as when the queue overflows.
func TestCacheFindsWhatAFreshScanFinds(t *testing.T) {
	for _, mode := range cacheModes {
		for seed := range uint64(testSeeds) { // see testSeeds
			t.Run(fmt.Sprint(mode.name, "/", seed), func(t *testing.T) {
				testCacheFindsWhatAFreshScanFinds(t, mode, seed)
			})
		}
	}
}

// testSeeds is how many random sequences the mutation test plays in each
// mode; raised by hand to look further (go test -run FreshScan with a
// larger value).
var testSeeds = 3

func testCacheFindsWhatAFreshScanFinds(t *testing.T, mode cacheMode, seed uint64) {
	fds := openFDs(t)
	m := &mutator{t: t, rng: rand.New(rand.NewPCG(seed, 34)), root: tree(t, nil), dirs: []string{"."}}
	for range 60 {
		m.mutate()
	}
	var c Cache
	mode.setup(t, &c)
	lose := rand.New(rand.NewPCG(seed, 35)) // apart, so m's changes are as they were
	var taken, rounds int
	var log []string
	// Until the cache has been trusted for many directories (its
	// listings older than the clock's slack): at least 150 rounds.
	for rounds < 150 || runtime.GOOS == "linux" && taken < 1000 {
		rounds++
		if rounds > 20_000 {
			t.Fatalf("the cache took %d directories in %d rounds", taken, rounds)
		}
		if lose.IntN(25) == 0 {
			loseEvents(&c)
		}
		if m.rng.IntN(10) == 0 {
			// A scan cut short: what it did not see stays unknown.
			opt := Options{MaxDirs: 1 + m.rng.IntN(len(m.dirs)), MaxRepos: 1 + m.rng.IntN(5)}
			if m.rng.IntN(2) == 0 {
				opt = Options{Timeout: time.Nanosecond}
			}
			if _, err := c.Scan(m.root, opt); err != nil {
				t.Fatal(err)
			}
		}
		var fresh, cached Result
		var err error
		if rounds%2 == 0 {
			if cached, err = c.Scan(m.root, noLimits); err == nil {
				fresh, err = Scan(m.root, noLimits)
			}
		} else {
			if fresh, err = Scan(m.root, noLimits); err == nil {
				cached, err = c.Scan(m.root, noLimits)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fresh, cached, ignoreCost); diff != "" {
			t.Fatalf("after %q: cached scan mismatch (-want +got):\n%s", log, diff)
		}
		taken += cached.Dirs - cached.Listed
		log = log[:0]
		for range 1 + m.rng.IntN(3) {
			log = append(log, m.mutate())
		}
	}
	t.Logf("%d rounds, %d directories now, %d taken from the cache", rounds, len(m.dirs), taken)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open after the scans and Close, %d before", after, fds)
	}
}
