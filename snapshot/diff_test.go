package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiffKinds(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{
		"keep.txt":  file("kept\n", 0o644),
		"mod.txt":   file("before\n", 0o644),
		"same.txt":  file("same size 1\n", 0o644),
		"del.txt":   file("deleted\n", 0o644),
		"chmod.sh":  file("#!/bin/sh\n", 0o644),
		"t1":        file("file, then dir\n", 0o644),
		"t2/y":      file("dir, then link\n", 0o644),
		"d":         dir(0o755),
		"d/in.txt":  file("in d\n", 0o644),
		"link":      link("keep.txt"),
		"gone/a/b":  file("deep delete\n", 0o644),
		"unchanged": dir(0o755),
	})
	ageTree(t, fx.root)
	a := fx.take(TakeOptions{})
	fx.write("mod.txt", "after, longer\n")
	fx.write("same.txt", "same size 2\n")
	fx.write("add.txt", "added\n")
	must(t, os.Remove(filepath.Join(fx.root, "del.txt")))
	must(t, os.Chmod(filepath.Join(fx.root, "chmod.sh"), 0o755))
	must(t, os.Remove(filepath.Join(fx.root, "t1")))
	fx.write("t1/x", "x\n")
	must(t, os.RemoveAll(filepath.Join(fx.root, "t2")))
	must(t, os.Symlink("keep.txt", filepath.Join(fx.root, "t2")))
	must(t, os.Chmod(filepath.Join(fx.root, "d"), 0o700))
	must(t, os.Remove(filepath.Join(fx.root, "link")))
	must(t, os.Symlink("mod.txt", filepath.Join(fx.root, "link")))
	must(t, os.RemoveAll(filepath.Join(fx.root, "gone")))
	want := []Change{
		{"add.txt", "added", 6},
		{"chmod.sh", "mode", 10},
		{"d", "mode", 0},
		{"del.txt", "deleted", 8},
		{"gone", "deleted", 0},
		{"gone/a", "deleted", 0},
		{"gone/a/b", "deleted", 12},
		{"link", "modified", 7},
		{"mod.txt", "modified", 14},
		{"same.txt", "modified", 12},
		{"t1", "type", 0},
		{"t1/x", "added", 2},
		{"t2", "type", 8},
		{"t2/y", "deleted", 15},
	}
	var mu sync.Mutex
	var read []string
	setHook(t, &testHookRead, func(rel string) { mu.Lock(); read = append(read, rel); mu.Unlock() })
	got, err := fx.store.Diff(fx.ctx, a.ID, "", fx.root, DiffOptions{})
	must(t, err)
	if diff := cmp.Diff(Diff{Changes: want}, got); diff != "" {
		t.Errorf("snapshot to now: mismatch (-want +got):\n%s", diff)
	}
	// Only same.txt and chmod.sh (its ctime changed) needed reading: the
	// other changes show in their sizes or are new, and the stat cache vouches
	// for the unchanged files.
	mu.Lock()
	if diff := cmp.Diff([]string{"chmod.sh", "same.txt"}, sorted(read)); diff != "" {
		t.Errorf("files read: mismatch (-want +got):\n%s", diff)
	}
	mu.Unlock()
	setHook(t, &testHookRead, nil)
	b := fx.take(TakeOptions{})
	got, err = fx.store.Diff(fx.ctx, a.ID, b.ID, "", DiffOptions{})
	must(t, err)
	if diff := cmp.Diff(Diff{Changes: want}, got); diff != "" {
		t.Errorf("snapshot to snapshot: mismatch (-want +got):\n%s", diff)
	}
	// Backwards: added and deleted swap.
	got, err = fx.store.Diff(fx.ctx, b.ID, a.ID, "", DiffOptions{Path: "gone"})
	must(t, err)
	if diff := cmp.Diff(Diff{Changes: []Change{{"gone", "added", 0}, {"gone/a", "added", 0}, {"gone/a/b", "added", 12}}}, got); diff != "" {
		t.Errorf("backwards, under gone: mismatch (-want +got):\n%s", diff)
	}
}

func TestDiffMax(t *testing.T) {
	fx := newFixture(t, Options{})
	a := fx.take(TakeOptions{})
	for i := range 30 {
		fx.write(fmt.Sprintf("f%02d", i), "x")
	}
	got, err := fx.store.Diff(fx.ctx, a.ID, "", "", DiffOptions{Max: 10})
	must(t, err)
	if len(got.Changes) != 10 || !got.Truncated || got.Changes[0].Path != "f00" || got.Changes[9].Path != "f09" {
		t.Errorf("max 10: %+v", got)
	}
	got, err = fx.store.Diff(fx.ctx, a.ID, "", "", DiffOptions{Max: -1})
	must(t, err)
	if len(got.Changes) != 30 || got.Truncated {
		t.Errorf("no max: %d changes, truncated %v", len(got.Changes), got.Truncated)
	}
	got, err = fx.store.Diff(fx.ctx, a.ID, "", "", DiffOptions{Exclude: []string{"f1*"}})
	must(t, err)
	if len(got.Changes) != 20 {
		t.Errorf("exclude f1*: %d changes", len(got.Changes))
	}
}

func TestDiffPatch(t *testing.T) {
	fx := newFixture(t, Options{})
	lines := func(from, to int, edit map[int]string) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			if s, ok := edit[i]; ok {
				b.WriteString(s)
				continue
			}
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	writeTree(t, fx.root, map[string]entry{
		"src/a.txt": file(lines(1, 20, nil), 0o644),
		"src/b.bin": file("\x00binary\n", 0o644),
		"src/c.txt": file("c\n", 0o644),
		"other.txt": file("other\n", 0o644),
		"noeol.txt": file("one\ntwo", 0o644),
		"chmod.txt": file("mode only\n", 0o644),
	})
	a := fx.take(TakeOptions{})
	fx.write("src/a.txt", lines(1, 20, map[int]string{3: "line three\n", 17: "", 18: "line 18\nline 18.5\n"}))
	fx.write("src/b.bin", "\x00binary, changed\n")
	fx.write("src/new.txt", "new\nfile\n")
	fx.write("other.txt", "other, changed\n")
	fx.write("noeol.txt", "one\ntwo\n")
	must(t, os.Chmod(filepath.Join(fx.root, "chmod.txt"), 0o600))

	for _, tc := range []struct {
		path    string
		changes []Change
		patch   string
	}{
		{"src/a.txt", []Change{{"src/a.txt", "modified", 157}}, `--- a/src/a.txt
+++ b/src/a.txt
@@ -1,6 +1,6 @@
 line 1
 line 2
-line 3
+line three
 line 4
 line 5
 line 6
@@ -14,7 +14,7 @@
 line 14
 line 15
 line 16
-line 17
 line 18
+line 18.5
 line 19
 line 20
`},
		{"src/b.bin", []Change{{"src/b.bin", "modified", 17}}, ""},
		{"src/new.txt", []Change{{"src/new.txt", "added", 9}}, "--- /dev/null\n+++ b/src/new.txt\n@@ -0,0 +1,2 @@\n+new\n+file\n"},
		{"noeol.txt", []Change{{"noeol.txt", "modified", 8}}, "--- a/noeol.txt\n+++ b/noeol.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n"},
		{"chmod.txt", []Change{{"chmod.txt", "mode", 10}}, ""},
		{"src", []Change{{"src/a.txt", "modified", 157}, {"src/b.bin", "modified", 17}, {"src/new.txt", "added", 9}}, ""},
		{"src/", []Change{{"src/a.txt", "modified", 157}, {"src/b.bin", "modified", 17}, {"src/new.txt", "added", 9}}, ""},
		{filepath.Join(fx.root, "other.txt"), []Change{{"other.txt", "modified", 15}}, "--- a/other.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-other\n+other, changed\n"},
		{"missing", []Change{}, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := fx.store.Diff(fx.ctx, a.ID, "", fx.root, DiffOptions{Path: tc.path})
			must(t, err)
			if diff := cmp.Diff(Diff{Changes: tc.changes, Patch: tc.patch}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Between snapshots too, and backwards.
	b := fx.take(TakeOptions{})
	got, err := fx.store.Diff(fx.ctx, b.ID, a.ID, "", DiffOptions{Path: "src/new.txt"})
	must(t, err)
	if want := "--- a/src/new.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-new\n-file\n"; got.Patch != want {
		t.Errorf("patch of a deleted file:\n%s\nwant:\n%s", got.Patch, want)
	}
}
