package mounts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/objstore"
)

var ctx = context.Background()

func newTestMount(t *testing.T, st objstore.Store, uri string, rw bool, lim Limits) (*Mount, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	return openTestMount(t, st, uri, rw, lim, dir), dir
}

func openTestMount(t *testing.T, st objstore.Store, uri string, rw bool, lim Limits, dir string) *Mount {
	t.Helper()
	kind, _, _, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Spec{Name: "data", Path: "/mnt/data", ReadOnly: !rw, Kind: kind, URI: uri}, st, dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tree returns the files under dir by path, their contents, and its
// directories as "path/".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m, err := readTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readTree is tree, for a goroutine of a test.
func readTree(dir string) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := filepath.ToSlash(p[len(dir)+1:])
		switch {
		case d.IsDir():
			m[rel+"/"] = ""
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = string(b)
		default:
			m[rel] = "<" + d.Type().String() + ">"
		}
		return nil
	})
	return m, err
}

// prepare prepares m for a command; a writable mount's command is taken
// as ended (released) at once, so that the test can write as it would
// have.
func prepare(t *testing.T, m *Mount) string {
	t.Helper()
	v, err := m.Prepare(ctx)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if !m.spec.ReadOnly {
		m.Release(v)
	}
	return v
}

func wantTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", dir, diff)
	}
}

func TestPrepareShowsThePrefixAsAFolder(t *testing.T) {
	st := newMemStore()
	st.set("data/a", "A")
	st.set("data/sub/b", "B")
	st.set("data-old/c", "C")
	st.set("other", "O")
	m, _ := newTestMount(t, st, "s3://bkt/data", false, Limits{})
	v := prepare(t, m)
	wantTree(t, v, map[string]string{"a": "A", "sub/": "", "sub/b": "B"})
	if l, g := st.lists.Load(), st.gets.Load(); l != 1 || g != 2 {
		t.Errorf("first prepare: %d lists, %d gets; want 1, 2", l, g)
	}
	fi, err := os.Stat(filepath.Join(v, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("a read-only view's file has mode %v, want no write bits", fi.Mode())
	}
	if s := m.State(); s.Objects != 2 || s.Bytes != 2 || s.Views != 1 || s.LastSync.IsZero() {
		t.Errorf("state %+v, want 2 objects, 2 bytes, 1 view, a last sync", s)
	}

	// The whole bucket.
	all, _ := newTestMount(t, st, "s3://bkt", false, Limits{})
	wantTree(t, prepare(t, all), map[string]string{
		"data/": "", "data/a": "A", "data/sub/": "", "data/sub/b": "B", "data-old/": "", "data-old/c": "C", "other": "O",
	})
}

func TestPrepareUnchangedBucketListsOnce(t *testing.T) {
	st := newMemStore()
	for i := range 1000 {
		st.set(fmt.Sprintf("d/%03d/f%d", i%37, i), strings.Repeat("x", 4096))
	}
	m, dir := newTestMount(t, st, "gs://bkt/d", false, Limits{})
	v1 := prepare(t, m)
	lists, gets := st.lists.Load(), st.gets.Load()
	v2 := prepare(t, m)
	if v2 != v1 {
		t.Errorf("an unchanged bucket's view %s, want the same %s", v2, v1)
	}
	if l, g := st.lists.Load()-lists, st.gets.Load()-gets; l != 1 || g != 0 {
		t.Errorf("prepare of an unchanged bucket: %d lists, %d gets; want 1, 0", l, g)
	}
	m.Release(v1)
	m.Release(v2)

	// Another process's mount of the same cache fetches nothing either.
	m2 := openTestMount(t, st, "gs://bkt/d", false, Limits{}, dir)
	gets = st.gets.Load()
	v3 := prepare(t, m2)
	if g := st.gets.Load() - gets; g != 0 {
		t.Errorf("prepare after a restart: %d gets, want 0", g)
	}
	if n := len(tree(t, v3)); n != 1000+37 {
		t.Errorf("the view after a restart has %d entries, want %d", n, 1000+37)
	}
}

func TestPrepareNewViewLeavesTheOldOne(t *testing.T) {
	st := newMemStore()
	st.set("p/a", "A1")
	st.set("p/b", "B1")
	m, dir := newTestMount(t, st, "r2://bkt/p/", false, Limits{})
	v1 := prepare(t, m)
	st.set("p/a", "A2") // changed
	st.remove("p/b")    // deleted
	st.set("p/c", "C1") // new
	gets := st.gets.Load()
	v2 := prepare(t, m)
	if v2 == v1 {
		t.Fatalf("a changed bucket showed the same view %s", v1)
	}
	if g := st.gets.Load() - gets; g != 2 {
		t.Errorf("changed bucket: %d gets, want 2 (the changed and the new object)", g)
	}
	wantTree(t, v2, map[string]string{"a": "A2", "c": "C1"})
	// The command that still uses the first view sees the bucket as it
	// was when it started.
	wantTree(t, v1, map[string]string{"a": "A1", "b": "B1"})
	if s := m.State(); s.Views != 2 {
		t.Errorf("%d views in use, want 2", s.Views)
	}
	m.Release(v1)
	if _, err := os.Stat(v1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the released old view: %v, want it removed", err)
	}
	m.Release(v2)
	wantTree(t, v2, map[string]string{"a": "A2", "c": "C1"}) // current: kept for the next command
	// The cache holds the current listing's objects only.
	if n := len(tree(t, filepath.Join(dir, objectsDir))); n != 2 {
		t.Errorf("the cache holds %d objects, want 2", n)
	}
}

func TestPrepareChangedBetweenListAndFetch(t *testing.T) {
	st := newMemStore()
	st.set("k/a", "old")
	once := false
	st.setHooks(func(s *memStore) {
		s.afterList = func() {
			if !once {
				once = true
				st.set("k/a", "new")
			}
		}
	})
	m, _ := newTestMount(t, st, "s3://bkt/k", false, Limits{})
	wantTree(t, prepare(t, m), map[string]string{"a": "new"})
	if l := st.lists.Load(); l != 2 {
		t.Errorf("%d lists, want 2 (the object changed after the first)", l)
	}
}

func TestPrepareRefusesOverLimitsBeforeFetching(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  Limits
	}{
		{"objects", Limits{MaxObjects: 2}},
		{"bytes", Limits{MaxBytes: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			st.set("a", "12")
			st.set("b", "34")
			st.set("c", "56")
			m, _ := newTestMount(t, st, "s3://bkt", false, tc.lim)
			_, err := m.Prepare(ctx)
			var me *Error
			if !errors.Is(err, ErrLimit) || !errors.As(err, &me) || me.Name != "data" || me.Kind != KindS3 {
				t.Fatalf("prepare over the limits: %v, want an *Error wrapping ErrLimit", err)
			}
			if g := st.gets.Load(); g != 0 {
				t.Errorf("%d gets before the refusal, want 0", g)
			}
		})
	}
}

func TestPrepareDropMidFetch(t *testing.T) {
	for _, rw := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw=%v", rw), func(t *testing.T) {
			st := newMemStore()
			st.set("d/a", "A1")
			st.set("d/b", "B1")
			m, dir := newTestMount(t, st, "az://ctr/d", rw, Limits{})
			v1 := prepare(t, m)
			st.set("d/a", "A2")
			st.set("d/b", strings.Repeat("B2", 1000))
			st.setHooks(func(s *memStore) {
				s.drop = func(key string) int64 {
					if key == "d/b" {
						return 100
					}
					return -1
				}
			})
			_, err := m.Prepare(ctx)
			var me *Error
			if !errors.As(err, &me) || !strings.Contains(me.Reason, "connection reset by peer") {
				t.Fatalf("prepare with a dropped fetch: %v, want an *Error with the transport's words", err)
			}
			wantTree(t, v1, map[string]string{"a": "A1", "b": "B1"})
			if ents, _ := os.ReadDir(filepath.Join(dir, stagingDir)); len(ents) != 0 {
				t.Errorf("staging holds %d files after the failure, want none", len(ents))
			}
			st.setHooks(func(s *memStore) { s.drop = nil })
			wantTree(t, prepare(t, m), map[string]string{"a": "A2", "b": strings.Repeat("B2", 1000)})
		})
	}
}

func TestPrepareProviderWords(t *testing.T) {
	st := newMemStore()
	st.setHooks(func(s *memStore) {
		s.fail = func(op, key string) error {
			return &objstore.Error{Op: op, Key: key, Status: 403, Code: "AccessDenied", Message: "Access Denied", Err: objstore.ErrAuth}
		}
	})
	m, _ := newTestMount(t, st, "s3://bkt/x", false, Limits{})
	_, err := m.Prepare(ctx)
	var me *Error
	if !errors.As(err, &me) || !errors.Is(err, objstore.ErrAuth) || !strings.Contains(me.Reason, "AccessDenied: Access Denied") {
		t.Fatalf("prepare refused by the store: %v, want an *Error with the provider's words wrapping ErrAuth", err)
	}
	if s := m.State(); s.Err == "" {
		t.Errorf("state after a failed prepare has no error")
	}
	if _, err := newMemStoreMissing(t); !errors.Is(err, objstore.ErrNoBucket) {
		t.Errorf("a missing bucket: %v, want ErrNoBucket", err)
	}
}

func newMemStoreMissing(t *testing.T) (string, error) {
	m, _ := newTestMount(t, &memStore{noBucket: true}, "s3://nope", false, Limits{})
	return m.Prepare(ctx)
}

func TestBadKeysAreSkipped(t *testing.T) {
	st := newMemStore()
	for _, k := range []string{"d/ok", "d/../up", "d/./dot", "d/a//b", "d/f", "d/f/g", "d/marker/", "d/full/", "d//lead", "d/"} {
		body := "x"
		if strings.HasSuffix(k, "/") && k != "d/full/" {
			body = ""
		}
		st.set(k, body)
	}
	for _, rw := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw=%v", rw), func(t *testing.T) {
			m, _ := newTestMount(t, st, "s3://bkt/d", rw, Limits{})
			wantTree(t, prepare(t, m), map[string]string{"ok": "x", "f/": "", "f/g": "x", "marker/": ""})
			want := []string{"d/../up", "d/./dot", "d//lead", "d/a//b", "d/f", "d/full/"}
			if diff := cmp.Diff(want, m.State().Skipped); diff != "" {
				t.Errorf("skipped mismatch (-want +got):\n%s", diff)
			}
			res, err := m.WriteBack(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Result{}, res); diff != "" {
				t.Errorf("write-back of an untouched mount with bad keys mismatch (-want +got):\n%s", diff)
			}
			if d, p := st.deletes.Load(), st.puts.Load(); d != 0 || p != 0 {
				t.Errorf("%d deletes, %d puts, want none", d, p)
			}
		})
	}
}

func TestWriteBack(t *testing.T) {
	st := newMemStore()
	st.set("w/a", "A1")
	st.set("w/b", "B1")
	st.set("w/sub/c", "C1")
	st.set("w-old/x", "X")
	m, dir := newTestMount(t, st, "s3://bkt/w", true, Limits{})
	work := prepare(t, m)
	must(t, os.WriteFile(filepath.Join(work, "a"), []byte("A-local"), 0o644))
	must(t, os.Remove(filepath.Join(work, "b")))
	must(t, os.MkdirAll(filepath.Join(work, "new/deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(work, "new/deep/n"), []byte("N"), 0o644))
	// Touched, not changed: nothing to upload.
	must(t, os.Chtimes(filepath.Join(work, "sub/c"), time.Time{}, time.Now().Add(time.Hour)))

	res, err := m.WriteBack(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{Uploaded: 2, Deleted: 1}, res); diff != "" {
		t.Errorf("write-back mismatch (-want +got):\n%s", diff)
	}
	want := map[string]string{"w/a": "A-local", "w/sub/c": "C1", "w/new/deep/n": "N", "w-old/x": "X"}
	if diff := cmp.Diff(want, st.contents("w")); diff != "" {
		t.Errorf("bucket mismatch (-want +got):\n%s", diff)
	}

	// The record is the new objects': the next write-back uploads
	// nothing, and the next prepare fetches nothing.
	puts, heads, gets := st.puts.Load(), st.heads.Load(), st.gets.Load()
	res, err = m.WriteBack(ctx)
	if err != nil || !cmp.Equal(Result{}, res) {
		t.Errorf("second write-back: %+v, %v; want nothing done", res, err)
	}
	prepare(t, m)
	if p, h, g := st.puts.Load()-puts, st.heads.Load()-heads, st.gets.Load()-gets; p != 0 || h != 0 || g != 0 {
		t.Errorf("after the write-back: %d puts, %d heads, %d gets; want none", p, h, g)
	}
	if s := m.State(); s.Objects != 3 || s.Bytes != int64(len("A-local")+2+1) {
		t.Errorf("state %+v, want 3 objects of 10 bytes", s)
	}

	// The bucket changes what the mount did not: refreshed; deletes
	// what it did not touch: gone; a restart knows it all.
	st.set("w/sub/c", "C2")
	st.remove("w/new/deep/n")
	m2 := openTestMount(t, st, "s3://bkt/w", true, Limits{}, dir)
	wantTree(t, prepare(t, m2), map[string]string{"a": "A-local", "sub/": "", "sub/c": "C2"})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteBackConflicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ignore bool // a store that ignores conditions: only the Head catches the change
		race   bool // the change comes between the Head and the write: only the condition catches it
	}{
		{name: "HeadMismatch", ignore: true},
		{name: "Precondition412", race: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			st.ignoreConditions.Store(tc.ignore)
			st.set("c/changed", "1")
			st.set("c/deleted", "1")
			st.set("c/gone", "1")
			m, _ := newTestMount(t, st, "s3://bkt/c", true, Limits{Workers: 1})
			work := prepare(t, m)
			must(t, os.WriteFile(filepath.Join(work, "changed"), []byte("local"), 0o644))
			must(t, os.Remove(filepath.Join(work, "deleted")))
			must(t, os.WriteFile(filepath.Join(work, "created"), []byte("local"), 0o644))
			must(t, os.WriteFile(filepath.Join(work, "gone"), []byte("local"), 0o644))
			other := func() {
				st.set("c/changed", "theirs")
				st.set("c/deleted", "theirs")
				st.set("c/created", "theirs")
				st.remove("c/gone")
			}
			if tc.race {
				done := false
				st.setHooks(func(s *memStore) {
					s.beforePut = func(string) {
						if !done {
							done = true
							other()
						}
					}
				})
			} else {
				other()
			}
			res, err := m.WriteBack(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// One worker: the jobs run in key order, and the race comes at
			// the first write (changed), refused by its condition; the
			// rest see the change at their Head.
			want := Result{Conflicts: []string{"changed", "created", "deleted", "gone"}}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("write-back mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"c/changed": "theirs", "c/deleted": "theirs", "c/created": "theirs"}, st.contents("c/")); diff != "" {
				t.Errorf("bucket mismatch (-want +got):\n%s", diff)
			}
			if p := st.puts.Load(); tc.ignore && p != 0 {
				t.Errorf("%d puts to a store that ignores conditions, want none: the Head must catch every change", p)
			} else if tc.race && p != 1 {
				t.Errorf("%d puts, want 1: the write the condition refused", p)
			}
			wantTree(t, work, map[string]string{"changed": "local", "created": "local", "gone": "local"})
			// Conflicts stay until the local copy goes: then the bucket's
			// comes.
			must(t, os.Remove(filepath.Join(work, "changed")))
			st.setHooks(func(s *memStore) { s.beforePut = nil })
			prepare(t, m)
			if b, err := os.ReadFile(filepath.Join(work, "changed")); err != nil || string(b) != "theirs" {
				t.Errorf("after the local copy's removal: %q, %v; want the bucket's", b, err)
			}
		})
	}
}

func TestWriteBackNotUploaded(t *testing.T) {
	st := newMemStore()
	st.set("n/f", "F")
	st.set("n/marker/", "")
	m, _ := newTestMount(t, st, "s3://bkt/n", true, Limits{})
	work := prepare(t, m)
	must(t, os.Symlink("f", filepath.Join(work, "link")))
	must(t, os.Mkdir(filepath.Join(work, "empty"), 0o755))
	must(t, unix.Mkfifo(filepath.Join(work, "fifo"), 0o644))
	res, err := m.WriteBack(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{NotUploaded: []Refusal{
		{Path: "empty/", Reason: "an empty directory: an object store holds no directories"},
		{Path: "fifo", Reason: "a special file (p---------): an object store holds files only"},
		{Path: "link", Reason: "a symlink: an object store holds no links"},
	}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("write-back mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.NotUploaded, m.State().NotUploaded); diff != "" {
		t.Errorf("state's not uploaded mismatch (-want +got):\n%s", diff)
	}
	if p := st.puts.Load(); p != 0 {
		t.Errorf("%d puts, want 0", p)
	}
}

func TestCorruptRecordStartsClean(t *testing.T) {
	for _, rw := range []bool{false, true} {
		t.Run(fmt.Sprintf("rw=%v", rw), func(t *testing.T) {
			st := newMemStore()
			st.set("r/a", "A")
			st.set("r/b", "B")
			m, dir := newTestMount(t, st, "s3://bkt/r", rw, Limits{})
			prepare(t, m)
			must(t, os.WriteFile(filepath.Join(dir, recordName), []byte(`{"format":1,"cache":{"zz":{"key":"x"}}`), 0o600))
			m2 := openTestMount(t, st, "s3://bkt/r", rw, Limits{}, dir)
			gets := st.gets.Load()
			v := prepare(t, m2)
			wantTree(t, v, map[string]string{"a": "A", "b": "B"})
			if g := st.gets.Load() - gets; g != 2 {
				t.Errorf("%d gets after a corrupt record, want 2", g)
			}
			// A writable mount's files of unknown provenance are kept
			// aside, never uploaded.
			res, err := m2.WriteBack(ctx)
			if err != nil || !cmp.Equal(Result{}, res) {
				t.Errorf("write-back after a corrupt record: %+v, %v; want nothing done", res, err)
			}
			if aside, _ := filepath.Glob(filepath.Join(dir, "work-previous-*")); len(aside) != btoi(rw) {
				t.Errorf("kept aside: %v, want %d directories", aside, btoi(rw))
			}
		})
	}
}

func TestAnotherURIKeepsTheOldWorkAside(t *testing.T) {
	st := newMemStore()
	st.set("one/a", "A")
	st.set("two/b", "B")
	m, dir := newTestMount(t, st, "s3://bkt/one", true, Limits{})
	work := prepare(t, m)
	must(t, os.WriteFile(filepath.Join(work, "unsynced"), []byte("U"), 0o644))
	m2 := openTestMount(t, st, "s3://bkt/two", true, Limits{}, dir)
	wantTree(t, prepare(t, m2), map[string]string{"b": "B"})
	res, err := m2.WriteBack(ctx)
	if err != nil || !cmp.Equal(Result{}, res) {
		t.Errorf("write-back of the other bucket: %+v, %v; want nothing done", res, err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "work-previous-*"))
	if len(aside) != 1 {
		t.Fatalf("kept aside: %v, want one directory", aside)
	}
	wantTree(t, aside[0], map[string]string{"a": "A", "unsynced": "U"})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPrepareAdoptsEqualLocalFiles(t *testing.T) {
	st := newMemStore()
	st.set("a/x", "X")
	m, _ := newTestMount(t, st, "s3://bkt/a", true, Limits{})
	work := prepare(t, m)
	// A command creates two files that another writer creates in the
	// bucket too: one the same, one not.
	must(t, os.WriteFile(filepath.Join(work, "same"), []byte("S"), 0o644))
	must(t, os.WriteFile(filepath.Join(work, "differs"), []byte("mine"), 0o644))
	st.set("a/same", "S")
	st.set("a/differs", "theirs")
	wantTree(t, prepare(t, m), map[string]string{"x": "X", "same": "S", "differs": "mine"})
	res, err := m.WriteBack(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Result{Conflicts: []string{"differs"}}, res); diff != "" {
		t.Errorf("write-back mismatch (-want +got):\n%s", diff)
	}
}

// TestViewsStayWhileOthersPublish runs commands' Prepares and Releases
// at once while the bucket changes: a view does not change for as long
// as a command holds it, whatever the others publish.
func TestViewsStayWhileOthersPublish(t *testing.T) {
	st := newMemStore()
	const files = 20
	write := func(gen int) {
		for i := range files {
			st.set(fmt.Sprintf("v/%02d", i), strconv.Itoa(gen))
		}
	}
	write(0)
	m, dir := newTestMount(t, st, "s3://bkt/v", false, Limits{Workers: 3})

	sig := make(chan struct{}, 1)
	var writer sync.WaitGroup
	writer.Go(func() {
		gen := 1
		for range sig {
			write(gen)
			gen++
		}
	})
	var mu sync.Mutex
	seen := map[string]bool{}
	var cmds sync.WaitGroup
	for range 4 {
		cmds.Go(func() {
			for range 15 {
				v, err := m.Prepare(ctx)
				if errors.Is(err, objstore.ErrPrecondition) {
					continue // the bucket changed under three listings in a row
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[v] = true
				mu.Unlock()
				before, err := readTree(v)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case sig <- struct{}{}:
				default:
				}
				runtime.Gosched()
				after, err := readTree(v)
				if err != nil {
					t.Error(err)
					return
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("view %s changed while held (-before +after):\n%s", v, diff)
				}
				m.Release(v)
			}
		})
	}
	cmds.Wait()
	close(sig)
	writer.Wait()
	if len(seen) < 2 {
		t.Errorf("the commands saw %d views, want several", len(seen))
	}
	if s := m.State(); s.Views != 0 {
		t.Errorf("%d views in use after every release, want 0", s.Views)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, viewsDir)); len(ents) != 1 {
		t.Errorf("%d views on disk after every release, want the current one", len(ents))
	}
}

func TestCacheFromAnotherBootIsNotTrusted(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id here: the cache is synced instead")
	}
	st := newMemStore()
	st.set("b/a", "A")
	m, dir := newTestMount(t, st, "s3://bkt/b", false, Limits{})
	prepare(t, m)
	p := filepath.Join(dir, recordName)
	b, err := os.ReadFile(p)
	must(t, err)
	must(t, os.WriteFile(p, []byte(strings.Replace(string(b), bootID(), "another-boot", 1)), 0o600))
	m2 := openTestMount(t, st, "s3://bkt/b", false, Limits{}, dir)
	gets := st.gets.Load()
	wantTree(t, prepare(t, m2), map[string]string{"a": "A"})
	if g := st.gets.Load() - gets; g != 1 {
		t.Errorf("%d gets for a cache of another boot, want 1", g)
	}
}

func TestWorkNotRefreshedWhileInUse(t *testing.T) {
	st := newMemStore()
	st.set("u/a", "A1")
	m, _ := newTestMount(t, st, "s3://bkt/u", true, Limits{})
	w1, err := m.Prepare(ctx)
	must(t, err)
	st.set("u/a", "A2")
	lists := st.lists.Load()
	w2, err := m.Prepare(ctx)
	must(t, err)
	if w2 != w1 || st.lists.Load() != lists {
		t.Errorf("prepare while in use: %s and %d lists, want %s and none", w2, st.lists.Load()-lists, w1)
	}
	wantTree(t, w2, map[string]string{"a": "A1"})
	m.Release(w1)
	m.Release(w2)
	wantTree(t, prepare(t, m), map[string]string{"a": "A2"})
}

func TestCacheFileRemovedByHand(t *testing.T) {
	st := newMemStore()
	st.set("h/a", "A1")
	m, dir := newTestMount(t, st, "s3://bkt/h", false, Limits{})
	prepare(t, m)
	st.set("h/b", "B1")
	ents, err := os.ReadDir(filepath.Join(dir, objectsDir))
	must(t, err)
	for _, e := range ents {
		must(t, os.Remove(filepath.Join(dir, objectsDir, e.Name())))
	}
	if _, err := m.Prepare(ctx); err == nil {
		t.Fatal("prepare with its cache file removed succeeded")
	}
	wantTree(t, prepare(t, m), map[string]string{"a": "A1", "b": "B1"})
}
