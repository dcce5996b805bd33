package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// swapFixture: root/d is a directory whose content changes after the
// snapshot; outside is a directory beside the root with the same names.
func swapFixture(t *testing.T) (*fixture, string, Info) {
	fx := newFixture(t, Options{})
	outside := filepath.Join(filepath.Dir(fx.root), "outside")
	writeTree(t, outside, map[string]entry{
		"a.txt":     file("outside a\n", 0o644),
		"sub/b.txt": file("outside b\n", 0o644),
	})
	writeTree(t, fx.root, map[string]entry{
		"d/a.txt":     file("inside a\n", 0o644),
		"d/sub/b.txt": file("inside b\n", 0o644),
		"d/gone.txt":  file("deleted after the snapshot\n", 0o600),
		"d/mode.sh":   file("#!/bin/sh\n", 0o755),
	})
	info := fx.take(TakeOptions{})
	fx.write("d/a.txt", "changed a\n")
	fx.write("d/sub/b.txt", "changed b\n")
	fx.write("d/new.txt", "made after the snapshot\n")
	must(t, os.Remove(filepath.Join(fx.root, "d/gone.txt")))
	must(t, os.Chmod(filepath.Join(fx.root, "d/mode.sh"), 0o600))
	return fx, outside, info
}

func swapOut(t testing.TB, d, outside string) error {
	if err := os.Rename(d, d+".real"); err != nil {
		return err
	}
	return os.Symlink(outside, d)
}

// TestRestoreSwapAfterPlan swaps root/d for a symlink to outside between
// the plan and the first write: every write into d is refused by the root
// handle, and nothing outside changes.
func TestRestoreSwapAfterPlan(t *testing.T) {
	fx, outside, info := swapFixture(t)
	before := listing(t, outside)
	setHook(t, &testHookBeforeApply, func() {
		if err := swapOut(t, filepath.Join(fx.root, "d"), outside); err != nil {
			t.Error(err)
		}
	})
	_, err := fx.store.Restore(fx.ctx, info.ID, fx.root, RestoreOptions{})
	t.Logf("restore after the swap: %v", err)
	if err == nil {
		t.Error("the restore wrote through a swapped directory without an error")
	}
	if diff := cmp.Diff(before, listing(t, outside)); diff != "" {
		t.Fatalf("outside changed: mismatch (-want +got):\n%s", diff)
	}
}

// TestRestoreSwapRace swaps root/d between a directory and a symlink to
// outside while restores run; nothing outside ever changes. The loops are
// bounded by count.
func TestRestoreSwapRace(t *testing.T) {
	fx, outside, info := swapFixture(t)
	// A second snapshot, of the mutated tree: restores alternate between
	// the two, so that each one rewrites files in d.
	info2 := fx.take(TakeOptions{})
	before := listing(t, outside)
	d := filepath.Join(fx.root, "d")
	done := make(chan struct{})
	var wg sync.WaitGroup
	swaps := 0
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 1_000_000 {
			select {
			case <-done:
				return
			default:
			}
			if os.Rename(d, d+".real") != nil {
				continue
			}
			if os.Symlink(outside, d) == nil {
				swaps++
				os.Remove(d)
			}
			// A restore may have made d meanwhile; the rename then replaces
			// it if empty, and fails otherwise (the next round goes on).
			os.Rename(d+".real", d)
		}
	}()
	outcomes := map[string]int{}
	for i := range 200 {
		id := info.ID
		if i%2 == 1 {
			id = info2.ID
		}
		if _, err := fx.store.Restore(fx.ctx, id, fx.root, RestoreOptions{}); err != nil {
			outcomes["error"]++
		} else {
			outcomes["ok"]++
		}
	}
	stop()
	t.Logf("%v, %d swaps", outcomes, swaps)
	if diff := cmp.Diff(before, listing(t, outside)); diff != "" {
		t.Fatalf("outside changed: mismatch (-want +got):\n%s", diff)
	}
}

// editPackIdx rewrites the pack index of the pack holding h, with edit applied
// to h's entry (false: left out), and has the store read it again.
func editPackIdx(t *testing.T, s *Store, h hash32, edit func(*packEntry) bool) {
	t.Helper()
	loc, ok := s.packed(h, -1)
	if !ok {
		t.Fatalf("blob %x is not packed", h)
	}
	entries, err := readPackIndex(s.packIndexPath(loc.pack))
	must(t, err)
	var out []packEntry
	for _, e := range entries {
		if e.h != h || edit(&e) {
			out = append(out, e)
		}
	}
	must(t, os.WriteFile(s.packIndexPath(loc.pack), encodePackIndex(out), 0o600))
	must(t, s.reloadPacks())
}

// flipByte damages a blob in place.
func flipByte(t *testing.T, s *Store, h hash32) {
	b := storedBlobOf(t, s.dir, h)
	data := b.read(t)
	data[len(data)/2] ^= 0xff
	b.write(t, data)
}

func TestRestoreDamagedBlob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, fx *fixture)
		names  string
	}{
		{"flipped byte", func(t *testing.T, fx *fixture) { flipByte(t, fx.store, blobOf("world, deleted later\n")) }, "b.txt"},
		{"missing blob", func(t *testing.T, fx *fixture) {
			// A small blob is packed: its pack's index loses it.
			editPackIdx(t, fx.store, blobOf("world, deleted later\n"), func(*packEntry) bool { return false })
		}, "b.txt"},
		{"truncated blob", func(t *testing.T, fx *fixture) {
			editPackIdx(t, fx.store, blobOf("world, deleted later\n"), func(e *packEntry) bool { e.size = 3; return true })
		}, "b.txt"},
		{"pack gone", func(t *testing.T, fx *fixture) {
			must(t, os.Remove(storedBlobOf(t, fx.dir, blobOf("world, deleted later\n")).path))
		}, "its pack is gone"},
		{"pack cut short", func(t *testing.T, fx *fixture) {
			// Whichever blob of it is read first is found damaged.
			storedBlobOf(t, fx.dir, blobOf("world, deleted later\n")).cut(t, 3)
		}, "snapshot store damaged"},
		{"damaged tree", func(t *testing.T, fx *fixture) {
			// The tree object of directory c: the one blob that decodes to
			// c's entries.
			for _, sb := range storedBlobs(t, fx.dir) {
				b := sb.read(t)
				if kids, err := decodeTree(b, ""); err == nil && len(kids) == 1 && kids[0].name == "d.txt" {
					b[len(b)-1] ^= 0xff
					sb.write(t, b)
					return
				}
			}
			t.Fatal("no tree object for c")
		}, "tree of c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, Options{})
			writeTree(t, fx.root, map[string]entry{
				"a.txt":   file("hello\n", 0o644),
				"b.txt":   file("world, deleted later\n", 0o644),
				"c/d.txt": file("in c\n", 0o644),
			})
			info := fx.take(TakeOptions{})
			fx.write("a.txt", "HELLO, changed\n")
			fx.write("new.txt", "made since\n")
			fx.write("c/d.txt", "changed in c\n")
			must(t, os.Remove(filepath.Join(fx.root, "b.txt")))
			tc.damage(t, fx)
			before := listing(t, fx.root)
			_, err := fx.store.Restore(fx.ctx, info.ID, fx.root, RestoreOptions{})
			wantErr(t, err, ErrDamaged)
			if !strings.Contains(err.Error(), tc.names) {
				t.Errorf("error %q does not name %q", err, tc.names)
			}
			if diff := cmp.Diff(before, listing(t, fx.root)); diff != "" {
				t.Fatalf("root changed by a refused restore: mismatch (-want +got):\n%s", diff)
			}
			if tc.names == "b.txt" {
				// Export and a patch read the blob too.
				wantErr(t, fx.store.Export(fx.ctx, info.ID, discard{}, ExportOptions{}), ErrDamaged)
				_, err = fx.store.Diff(fx.ctx, info.ID, "", "", DiffOptions{Path: "b.txt"})
				wantErr(t, err, ErrDamaged)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestRestorePaths(t *testing.T) {
	fx := newFixture(t, Options{})
	want := map[string]entry{
		"a/x":       file("x\n", 0o644),
		"a/y":       file("y\n", 0o600),
		"b/z":       file("z\n", 0o644),
		"p/q/r.txt": file("r\n", 0o644),
		"top.txt":   file("top\n", 0o644),
	}
	writeTree(t, fx.root, want)
	want = listing(t, fx.root)
	info := fx.take(TakeOptions{})
	fx.write("a/x", "changed\n")
	fx.write("a/new", "new in a\n")
	fx.write("b/z", "changed z\n")
	fx.write("b/extra", "extra in b\n")
	must(t, os.Remove(filepath.Join(fx.root, "top.txt")))
	must(t, os.RemoveAll(filepath.Join(fx.root, "p")))
	fx.write("p", "p is a file now\n")

	res := fx.restore(info.ID, RestoreOptions{Paths: []string{"a"}})
	if res.Written != 1 || res.Removed != 1 {
		t.Errorf("restore of a: %+v, want 1 written, 1 removed", res)
	}
	got := listing(t, fx.root)
	if got["a/x"] != want["a/x"] || got["b/z"].Content != "changed z\n" {
		t.Errorf("restore of a: a/x %+v, b/z %+v", got["a/x"], got["b/z"])
	}
	if _, ok := got["a/new"]; ok {
		t.Error("a/new, made since, is still there")
	}
	if _, ok := got["top.txt"]; ok {
		t.Error("top.txt came back, though not named")
	}

	// A file named by its absolute path, one absent from the snapshot, and
	// one below an ancestor that is now a file.
	fx.restore(info.ID, RestoreOptions{Paths: []string{filepath.Join(fx.root, "top.txt"), "b/extra", "p/q/r.txt"}})
	got = listing(t, fx.root)
	if got["top.txt"] != want["top.txt"] || got["p/q/r.txt"] != want["p/q/r.txt"] {
		t.Errorf("top.txt %+v, p/q/r.txt %+v", got["top.txt"], got["p/q/r.txt"])
	}
	if _, ok := got["b/extra"]; ok {
		t.Error("b/extra, named and absent from the snapshot, is still there")
	}
	if got["b/z"].Content != "changed z\n" {
		t.Error("b/z was restored though not named")
	}
	fx.restore(info.ID, RestoreOptions{Paths: []string{"."}})
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Fatalf("mismatch (-want +got):\n%s", diff)
	}
}

func TestPathsOutsideRoot(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("a.txt", "a\n")
	info := fx.take(TakeOptions{})
	for _, p := range []string{"../x", "a/../../x", "a/../a.txt", "/etc/passwd", filepath.Dir(fx.root), "./.."} {
		_, err := fx.store.Restore(fx.ctx, info.ID, fx.root, RestoreOptions{Paths: []string{"a.txt", p}})
		wantErr(t, err, ErrOutsideRoot)
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %q", err, p)
		}
		_, err = fx.store.Diff(fx.ctx, info.ID, "", fx.root, DiffOptions{Path: p})
		wantErr(t, err, ErrOutsideRoot)
		_, err = fx.store.Take(fx.ctx, fx.root, TakeOptions{Skip: []string{p}})
		wantErr(t, err, ErrOutsideRoot)
	}
}

func TestOtherRoot(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("a.txt", "a\n")
	info := fx.take(TakeOptions{})
	other := t.TempDir()
	_, err := fx.store.Restore(fx.ctx, info.ID, other, RestoreOptions{})
	wantErr(t, err, ErrOtherRoot)
	_, err = fx.store.Diff(fx.ctx, info.ID, "", other, DiffOptions{})
	wantErr(t, err, ErrOtherRoot)
	oinfo, err := fx.store.Take(fx.ctx, other, TakeOptions{})
	must(t, err)
	_, err = fx.store.Diff(fx.ctx, info.ID, oinfo.ID, "", DiffOptions{})
	wantErr(t, err, ErrOtherRoot)
	// The same root through a symlink is the same root.
	alias := filepath.Join(t.TempDir(), "alias")
	must(t, os.Symlink(fx.root, alias))
	if _, err := fx.store.Restore(fx.ctx, info.ID, alias, RestoreOptions{}); err != nil {
		t.Fatalf("restore through an alias of the root: %v", err)
	}
}

// TestSkip: a skipped path (a read root inside the root) is neither taken
// nor restored.
func TestSkip(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{
		"src/a.go":   file("package a\n", 0o644),
		"ro/lib.txt": file("read-only root\n", 0o644),
		"ro2/x":      file("another\n", 0o644),
	})
	info := fx.take(TakeOptions{Skip: []string{"ro"}})
	if info.Files != 2 {
		t.Errorf("files %d, want 2 (ro skipped)", info.Files)
	}
	fx.write("ro/lib.txt", "changed in the read root\n")
	fx.write("ro/new.txt", "new in the read root\n")
	must(t, os.Remove(filepath.Join(fx.root, "ro2/x")))
	fx.write("ro2/y", "y\n")
	ro := listing(t, filepath.Join(fx.root, "ro"))
	ro2 := listing(t, filepath.Join(fx.root, "ro2"))
	fx.restore(info.ID, RestoreOptions{Skip: []string{"ro2"}})
	if diff := cmp.Diff(ro, listing(t, filepath.Join(fx.root, "ro"))); diff != "" {
		t.Errorf("ro was touched: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ro2, listing(t, filepath.Join(fx.root, "ro2"))); diff != "" {
		t.Errorf("ro2 was touched: mismatch (-want +got):\n%s", diff)
	}
}

// TestRestoreCancel: a canceled context stops a restore before it writes.
func TestRestoreCancel(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("a.txt", "a\n")
	info := fx.take(TakeOptions{})
	fx.write("a.txt", "changed\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := fx.store.Restore(ctx, info.ID, fx.root, RestoreOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.root, "a.txt")); string(b) != "changed\n" {
		t.Error("a canceled restore wrote")
	}
}

// TestRestoreUpdatesStatCache: a restore records what it wrote in the stat cache,
// so that the next restore (and Take) does not read those files again.
func TestRestoreUpdatesStatCache(t *testing.T) {
	// No file is racy here, not even those the restore writes (whose mtime
	// follows its start): the test is of the stat cache's bookkeeping.
	setHook(t, &racyWindowFine, -time.Hour)
	setHook(t, &racyWindow, -time.Hour)
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(50, 1000))
	ageTree(t, fx.root)
	info := fx.take(TakeOptions{})
	var mu sync.Mutex
	var read []string
	setHook(t, &testHookRead, func(rel string) { mu.Lock(); read = append(read, rel); mu.Unlock() })
	for round := range 3 {
		for i := range 10 {
			fx.write(fmt.Sprintf("d%02d/f%03d.txt", i%10, i+round*10), "changed\n")
		}
		res := fx.restore(info.ID, RestoreOptions{})
		mu.Lock()
		if res.Written != 10 || len(read) != 0 {
			t.Errorf("round %d: %+v, read %v", round, res, read)
		}
		read = nil
		mu.Unlock()
	}
	fx.take(TakeOptions{})
	if len(read) != 0 {
		t.Errorf("take after the restores read %v", read)
	}
}

// TestRestoreLeavesNothing: the files and directories a restore replaces
// or removes leave the root at once (no temporary name of a restore is
// left in it), go through the store's trash, and are gone from it once
// the store is closed, read-only directories too; a file a process holds
// open keeps the content it had.
func TestRestoreLeavesNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(30, 3000))
	info := fx.take(TakeOptions{})
	want := listing(t, fx.root)
	held, err := os.Open(filepath.Join(fx.root, "d00/f000.txt"))
	must(t, err)
	defer held.Close()
	for i := range 30 {
		fx.write(fmt.Sprintf("d%02d/f%03d.txt", i%10, i), fmt.Sprintf("changed %d\n", i))
	}
	fx.write("d00/f000.txt", "held\n")
	// A directory made since, read-only within: removed whole.
	fx.write("made/ro/x.txt", "made after the snapshot\n")
	must(t, os.Chmod(filepath.Join(fx.root, "made/ro"), 0o555))
	if res := fx.restore(info.ID, RestoreOptions{}); res.Written != 30 || res.Removed != 3 {
		t.Errorf("restore: %+v, want 30 written and 3 removed", res)
	}
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Errorf("root after the restore: mismatch (-want +got):\n%s", diff)
	}
	got := make([]byte, 16)
	n, _ := held.ReadAt(got, 0)
	if string(got[:n]) != "held\n" {
		t.Errorf("a file held open across the restore reads %q, want its content before, %q", got[:n], "held\n")
	}
	must(t, fx.store.Close())
	ents, err := os.ReadDir(filepath.Join(fx.dir, "trash"))
	must(t, err)
	if len(ents) != 0 {
		t.Errorf("the trash holds %d entries after Close, want none", len(ents))
	}
}

// TestRestoreKeepsWhatItDoesNotSee: a directory made since the snapshot
// is removed, except what a snapshot leaves out (a read root, a .git, an
// excluded path) and the directories above it; where the snapshot had a
// file, a directory holding a read root stays, and the file does not
// come back.
func TestRestoreKeepsWhatItDoesNotSee(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("src/a.go", "package a\n")
	fx.write("was-a-file", "file\n")
	info := fx.take(TakeOptions{Skip: []string{"new/ro", "was-a-file/ro"}, Exclude: []string{"*.cache"}})
	must(t, os.Remove(filepath.Join(fx.root, "was-a-file")))
	for _, p := range []string{"new/ro/lib.txt", "new/y", "new/deep/z", "clone/.git/HEAD", "clone/main.go", "gen/sub/x.cache", "gen/sub/x.go", "was-a-file/ro/r", "was-a-file/other"} {
		fx.write(p, p+"\n")
	}
	res := fx.restore(info.ID, RestoreOptions{})
	want := map[string]entry{
		"src":             {Type: "dir", Mode: 0o755},
		"src/a.go":        file("package a\n", 0o644),
		"new":             {Type: "dir", Mode: 0o755},
		"new/ro":          {Type: "dir", Mode: 0o755},
		"new/ro/lib.txt":  file("new/ro/lib.txt\n", 0o644),
		"clone":           {Type: "dir", Mode: 0o755},
		"clone/.git":      {Type: "dir", Mode: 0o755},
		"clone/.git/HEAD": file("clone/.git/HEAD\n", 0o644),
		"gen":             {Type: "dir", Mode: 0o755},
		"gen/sub":         {Type: "dir", Mode: 0o755},
		"gen/sub/x.cache": file("gen/sub/x.cache\n", 0o644),
		"was-a-file":      {Type: "dir", Mode: 0o755},
		"was-a-file/ro":   {Type: "dir", Mode: 0o755},
		"was-a-file/ro/r": file("was-a-file/ro/r\n", 0o644),
	}
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Errorf("root after the restore (%+v): mismatch (-want +got):\n%s", res, diff)
	}
}

// TestTreesCached: a tree object read and checked once is served from
// memory: a restore after it was damaged on disk restores what was checked;
// a Store without it in memory notices the damage, and writes nothing.
func TestTreesCached(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{"a.txt": file("hello\n", 0o644), "c/d.txt": file("in c\n", 0o644)})
	info := fx.take(TakeOptions{})
	fx.write("c/d.txt", "changed in c\n")
	want := map[string]entry{"a.txt": file("hello\n", 0o644), "c": dir(0o755), "c/d.txt": file("in c\n", 0o644)}
	fx.restore(info.ID, RestoreOptions{})
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Fatalf("first restore: mismatch (-want +got):\n%s", diff)
	}
	damaged := false
	for _, sb := range storedBlobs(t, fx.dir) {
		b := sb.read(t)
		if kids, err := decodeTree(b, ""); err == nil && len(kids) == 1 && kids[0].name == "d.txt" {
			b[len(b)-1] ^= 0xff
			sb.write(t, b)
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("no tree object for c")
	}
	fx.write("c/d.txt", "changed again\n")
	fx.restore(info.ID, RestoreOptions{})
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Fatalf("restore with the tree in memory: mismatch (-want +got):\n%s", diff)
	}

	fx.write("c/d.txt", "changed once more\n")
	before := listing(t, fx.root)
	s2, err := Open(fx.dir, Options{})
	must(t, err)
	defer s2.Close()
	_, err = s2.Restore(fx.ctx, info.ID, fx.root, RestoreOptions{})
	wantErr(t, err, ErrDamaged)
	if diff := cmp.Diff(before, listing(t, fx.root)); diff != "" {
		t.Fatalf("root changed by a refused restore: mismatch (-want +got):\n%s", diff)
	}
}
