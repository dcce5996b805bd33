package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// countReads counts the files of roots opened for reading.
func countReads(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	setHook(t, &testHookRead, func(string) { n.Add(1) })
	return &n
}

func manyFiles(n, size int) map[string]entry {
	ents := map[string]entry{}
	for i := range n {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		copy(b, fmt.Sprintf("file %d\n", i))
		ents[fmt.Sprintf("d%02d/f%03d.txt", i%10, i)] = file(string(b), 0o644)
	}
	return ents
}

// TestUnchangedRetakeReadsNothing: the stat cache vouches for every unchanged
// file; a changed one is read, and only it.
func TestUnchangedRetakeReadsNothing(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(50, 1000))
	ageTree(t, fx.root)
	reads := countReads(t)
	first := fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 50 {
		t.Errorf("first take read %d files, want 50", got)
	}
	second := fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 0 {
		t.Errorf("unchanged re-take read %d files, want 0", got)
	}
	if second.NewBytes != 0 || second.Files != 50 || second.Bytes != first.Bytes {
		t.Errorf("unchanged re-take: %+v (first %+v)", second, first)
	}
	fx.write("d03/f003.txt", "changed\n")
	fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 1 {
		t.Errorf("take after a one-file change read %d files, want 1", got)
	}
}

// TestRacyFilesReadAgain: files written within the racy window of a Take
// are read again by the next one, whatever their stat says.
func TestRacyFilesReadAgain(t *testing.T) {
	// Windows wide enough for a loaded machine, short of ageTree's hour.
	setHook(t, &racyWindow, 10*time.Minute)
	setHook(t, &racyWindowFine, 10*time.Minute)
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(10, 100))
	reads := countReads(t)
	fx.take(TakeOptions{})
	fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 20 {
		t.Errorf("two takes of a fresh tree read %d files, want 20 (all racy)", got)
	}
	ageTree(t, fx.root)
	fx.take(TakeOptions{}) // mtimes changed: read again, now not racy
	fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 10 {
		t.Errorf("takes of an aged tree read %d files, want 10", got)
	}
}

// TestGrowthOneFile: the store grows by about the changed file: its blob
// and the tree objects of the directories above it.
func TestGrowthOneFile(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(200, 4096))
	ageTree(t, fx.root)
	fx.take(TakeOptions{})
	before := storeUsage(t, fx.dir)
	changed := strings.Repeat("new content\n", 400) // 4800 bytes
	fx.write("d05/f005.txt", changed)
	info := fx.take(TakeOptions{})
	growth := storeUsage(t, fx.dir) - before
	if growth != info.NewBytes {
		t.Errorf("blobs grew by %d, NewBytes says %d", growth, info.NewBytes)
	}
	if growth < int64(len(changed)) || growth > int64(len(changed))+2048 {
		t.Errorf("store grew by %d after a %d-byte file changed", growth, len(changed))
	}
	t.Logf("a %d-byte change grew the store by %d bytes", len(changed), growth)
}

// storeUsage adds up the bytes of a store's blobs, loose and packed.
func storeUsage(t *testing.T, dir string) int64 {
	var n int64
	for _, b := range storedBlobs(t, dir) {
		n += b.size
	}
	return n
}

// hasBlob reports whether the store's files hold blob h.
func hasBlob(t *testing.T, dir string, h hash32) bool {
	for _, b := range storedBlobs(t, dir) {
		if b.h == h {
			return true
		}
	}
	return false
}

func readState(t *testing.T, dir string) storeState {
	var st storeState
	b, err := os.ReadFile(filepath.Join(dir, "store.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &st))
	return st
}

// TestDropCollects: Drop removes what only the dropped snapshot used, and
// what interrupted Takes left; the recorded size follows.
func TestDropCollects(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("keep.txt", "kept by both\n")
	fx.write("b.txt", "first version\n")
	a := fx.take(TakeOptions{})
	fx.write("b.txt", "second version\n")
	b := fx.take(TakeOptions{})
	// Leftovers: a temporary blob and a blob no manifest names.
	must(t, os.WriteFile(filepath.Join(fx.dir, "tmp", "blob-123"), []byte("half"), 0o600))
	orphan := blobOf("orphan\n")
	must(t, os.MkdirAll(filepath.Dir(fx.store.blobPath(orphan)), 0o700))
	must(t, os.WriteFile(fx.store.blobPath(orphan), []byte("orphan\n"), 0o600))
	// And of packs: a temporary one, one renamed but without its index (a
	// crash between the two), an index whose pack is gone.
	packs := filepath.Join(fx.dir, "packs")
	must(t, os.WriteFile(filepath.Join(packs, ".tmp-123.pack"), []byte(packMagic+"half"), 0o600))
	must(t, os.WriteFile(filepath.Join(packs, "0badc0de.pack"), []byte(packMagic+"orphan\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(packs, "0dead.idx"), encodePackIndex([]packEntry{{h: orphan, off: int64(len(packMagic)), size: 7}}), 0o600))

	must(t, fx.store.Drop(a.ID))
	for content, want := range map[string]bool{"first version\n": false, "second version\n": true, "kept by both\n": true, "orphan\n": false} {
		if got := hasBlob(t, fx.dir, blobOf(content)); got != want {
			t.Errorf("blob of %q there: %v, want %v", content, got, want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(fx.dir, "tmp")); len(ents) != 0 {
		t.Errorf("tmp/ not emptied: %v", ents)
	}
	for _, name := range []string{".tmp-123.pack", "0badc0de.pack", "0dead.idx"} {
		if _, err := os.Stat(filepath.Join(packs, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("packs/%s left by the collection: %v", name, err)
		}
	}
	if st := readState(t, fx.dir); st.Bytes != storeUsage(t, fx.dir) || st.Generation != 1 {
		t.Errorf("store.json %+v, blobs hold %d bytes", st, storeUsage(t, fx.dir))
	}
	if _, err := fx.store.Get(a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("dropped snapshot: %v", err)
	}
	must(t, fx.store.Drop(b.ID))
	if left := storedBlobs(t, fx.dir); len(left) != 0 {
		t.Errorf("blobs left with no snapshot: %v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(fx.dir, "packs")); len(ents) != 0 {
		t.Errorf("packs/ not emptied: %v", ents)
	}
	if st := readState(t, fx.dir); st.Bytes != 0 {
		t.Errorf("store.json %+v after dropping everything", st)
	}
	wantErr(t, fx.store.Drop(b.ID), ErrNotFound)
}

// TestTakeAfterCollection: the stat cache still vouches for files whose blobs a
// Drop collected; the next Take sees the generation changed and reads them
// again, so that its snapshot restores.
func TestTakeAfterCollection(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(20, 100))
	ageTree(t, fx.root)
	want := listing(t, fx.root)
	a := fx.take(TakeOptions{})
	must(t, fx.store.Drop(a.ID))
	reads := countReads(t)
	b := fx.take(TakeOptions{})
	if got := reads.Load(); got != 20 {
		t.Errorf("take after the collection read %d files, want 20", got)
	}
	must(t, os.RemoveAll(filepath.Join(fx.root, "d01")))
	fx.restore(b.ID, RestoreOptions{})
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Fatalf("mismatch (-want +got):\n%s", diff)
	}
}

// TestConcurrentTakesSerialized: a second Take of the root waits for the
// first (the in-process lock), and a Take waits for another holder of the
// root's flock (another process).
func TestConcurrentTakesSerialized(t *testing.T) {
	setHook(t, &racyWindowFine, 10*time.Minute) // both takes read every file
	fx := newFixture(t, Options{Workers: 1})
	writeTree(t, fx.root, manyFiles(5, 100))
	var mu sync.Mutex
	var events []string
	logf := func(f string, a ...any) {
		mu.Lock()
		events = append(events, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	inFirst := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	setHook(t, &testHookRead, func(rel string) {
		once.Do(func() { close(inFirst); <-release })
		logf("read %s", rel)
	})
	waiting := make(chan string, 4)
	setHook(t, &testHookLockWait, func(what string) { waiting <- what })

	type result struct {
		info Info
		err  error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		i, err := fx.store.Take(fx.ctx, fx.root, TakeOptions{Label: "first"})
		logf("first done")
		first <- result{i, err}
	}()
	<-inFirst // the first holds the root's lock, reading
	go func() {
		i, err := fx.store.Take(fx.ctx, fx.root, TakeOptions{Label: "second"})
		logf("second done")
		second <- result{i, err}
	}()
	if w := <-waiting; w != "root" {
		t.Fatalf("the second take waited for %q, want the root's lock", w)
	}
	logf("second waiting")
	close(release)
	r1, r2 := <-first, <-second
	must(t, r1.err)
	must(t, r2.err)
	// The second waited for the root's lock while the first was stopped in
	// its first read, holding it; then each read the five files (the
	// second too: just written, they are racy).
	mu.Lock()
	got := strings.Join(events, "\n")
	mu.Unlock()
	if !strings.HasPrefix(got, "second waiting\n") || strings.Count(got, "read ") != 10 {
		t.Errorf("events:\n%s", got)
	}
	if r1.info.ID == r2.info.ID {
		t.Error("two takes, one ID")
	}

	// Another process: its flock on the root's lock file holds a Take back.
	setHook(t, &testHookRead, nil)
	fx.settle() // the second's stat cache is made, under the root's lock
	f, err := os.OpenFile(filepath.Join(fx.dir, "roots", rootKey(fx.root), "lock"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	must(t, fsutil.Lock(f, true, true))
	third := make(chan result, 1)
	go func() {
		i, err := fx.store.Take(fx.ctx, fx.root, TakeOptions{})
		third <- result{i, err}
	}()
	if w := <-waiting; w != "flock" {
		t.Fatalf("the take waited for %q, want the flock", w)
	}
	select {
	case r := <-third:
		t.Fatalf("the take finished while another held the flock: %+v", r)
	default:
	}
	f.Close() // releases the flock
	must(t, (<-third).err)

	// A canceled context ends the wait.
	f2, err := os.OpenFile(filepath.Join(fx.dir, "roots", rootKey(fx.root), "lock"), os.O_RDWR, 0)
	must(t, err)
	defer f2.Close()
	must(t, fsutil.Lock(f2, true, true))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	_, err = fx.store.Take(ctx, fx.root, TakeOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("take canceled while waiting: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	fx := newFixture(t, Options{MaxBytes: 20_000})
	ents := map[string]entry{"small/a.txt": file("small\n", 0o644)}
	for i := range 3 {
		ents[fmt.Sprintf("big/sub/f%d", i)] = file(strings.Repeat(fmt.Sprint(i), 6000), 0o644)
		ents[fmt.Sprintf("mid/f%d", i)] = file(strings.Repeat(fmt.Sprint(i+5), 2000), 0o644)
	}
	writeTree(t, fx.root, ents)
	fx.write("root.txt", "x")
	// A first snapshot that fits, to show the store is left as it was.
	must(t, os.Rename(filepath.Join(fx.root, "big"), filepath.Join(filepath.Dir(fx.root), "big-aside")))
	ok := fx.take(TakeOptions{})
	must(t, os.Rename(filepath.Join(filepath.Dir(fx.root), "big-aside"), filepath.Join(fx.root, "big")))
	before := storeFiles(t, fx.dir)

	_, err := fx.store.Take(fx.ctx, fx.root, TakeOptions{})
	wantErr(t, err, ErrTooLarge)
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("error %T, want *TooLargeError", err)
	}
	want := []DirSize{{"big", 18000}, {"big/sub", 18000}, {"mid", 6000}, {"small", 6}, {".", 1}}
	if diff := cmp.Diff(want, tl.Largest); diff != "" {
		t.Errorf("largest: mismatch (-want +got):\n%s", diff)
	}
	t.Log(err)
	if diff := cmp.Diff(before, storeFiles(t, fx.dir)); diff != "" {
		t.Errorf("store changed by a refused take: mismatch (-want +got):\n%s", diff)
	}
	if list, _ := fx.store.List(""); len(list) != 1 || list[0].ID != ok.ID {
		t.Errorf("list %+v", list)
	}
	// Content already stored does not count again.
	must(t, os.RemoveAll(filepath.Join(fx.root, "big")))
	for i := range 20 {
		fx.write(fmt.Sprintf("copies/c%d", i), strings.Repeat("5", 2000))
	}
	fx.take(TakeOptions{})
}

// failingWriter fails with ENOSPC once n bytes went through.
type failingWriter struct {
	w    io.Writer
	left *atomic.Int64
}

func (f failingWriter) Write(p []byte) (int, error) {
	if f.left.Add(-int64(len(p))) < 0 {
		return 0, syscall.ENOSPC
	}
	return f.w.Write(p)
}

// TestFullDisk fails every write of the store after n bytes, for growing n:
// each Take either fails with ENOSPC and leaves the store as it was, or
// succeeds whole.
func TestFullDisk(t *testing.T) {
	fx := newFixture(t, Options{Workers: 1})
	writeTree(t, fx.root, manyFiles(6, 3000))
	fx.write("big.bin", strings.Repeat("big\n", bufSize/2))
	want := listing(t, fx.root)
	var left atomic.Int64
	setHook(t, &wrapWriter, func(w io.Writer) io.Writer { return failingWriter{w, &left} })
	failures := 0
	for n := int64(0); ; n += 2500 {
		before := storeFiles(t, fx.dir)
		left.Store(n)
		info, err := fx.store.Take(fx.ctx, fx.root, TakeOptions{})
		if err != nil {
			wantErr(t, err, syscall.ENOSPC)
			failures++
			if diff := cmp.Diff(before, storeFiles(t, fx.dir)); diff != "" {
				t.Fatalf("after %d bytes: store changed by a failed take: mismatch (-want +got):\n%s", n, diff)
			}
			continue
		}
		left.Store(1 << 40)
		must(t, os.RemoveAll(filepath.Join(fx.root, "d01")))
		fx.restore(info.ID, RestoreOptions{})
		if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
			t.Fatalf("mismatch (-want +got):\n%s", diff)
		}
		break
	}
	t.Logf("%d takes failed for a full disk before one fitted", failures)
	if failures < 5 {
		t.Errorf("only %d failures", failures)
	}
}

// TestFullDiskTmpfs puts the store on a tiny tmpfs: a real ENOSPC.
func TestFullDiskTmpfs(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root and a mount namespace that allows it): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	s, err := Open(filepath.Join(mnt, "store"), Options{})
	must(t, err)
	// Closed before the unmount: what it does after its answers (the root's
	// lock held while its stat cache is made) would keep the mount busy.
	t.Cleanup(func() { s.Close() })
	root := t.TempDir()
	writeTree(t, root, manyFiles(40, 10_000))
	before := storeFiles(t, filepath.Join(mnt, "store"))
	_, err = s.Take(context.Background(), root, TakeOptions{})
	wantErr(t, err, syscall.ENOSPC)
	t.Log(err)
	if diff := cmp.Diff(before, storeFiles(t, filepath.Join(mnt, "store"))); diff != "" {
		t.Fatalf("store changed by a failed take: mismatch (-want +got):\n%s", diff)
	}
	must(t, os.RemoveAll(filepath.Join(root, "d01")))
	info, err := s.Take(context.Background(), root, TakeOptions{})
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		// Still too big for 256k: make it smaller.
		for i := 2; i < 10; i++ {
			os.RemoveAll(filepath.Join(root, fmt.Sprintf("d%02d", i)))
		}
		info, err = s.Take(context.Background(), root, TakeOptions{})
	}
	must(t, err)
	if list, _ := s.List(""); len(list) != 1 || list[0].ID != info.ID {
		t.Errorf("list %+v", list)
	}
}

// TestClone: the copy path when the filesystem has no reflinks (asked once,
// then not again), and the clone path when it does, both faked.
func TestClone(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", bufSize/8) // 2 buffers
	for _, tc := range []struct {
		name  string
		clone func(dst, src *os.File) error
		calls int64 // by the take
	}{
		{"unsupported", func(dst, src *os.File) error { return syscall.EOPNOTSUPP }, 1},
		{"reflink", func(dst, src *os.File) error {
			_, err := io.Copy(dst, io.NewSectionReader(src, 0, 1<<40))
			return err
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			setHook(t, &cloneFile, func(dst, src *os.File) error {
				calls.Add(1)
				return tc.clone(dst, src)
			})
			fx := newFixture(t, Options{Workers: 1})
			writeTree(t, fx.root, map[string]entry{
				"big1": file(big, 0o644), "big2": file(big+"2", 0o600), "big3": file(big+"3", 0o755),
				"small": file("small\n", 0o644),
			})
			want := listing(t, fx.root)
			info := fx.take(TakeOptions{})
			if got := calls.Swap(0); got != tc.calls {
				t.Errorf("take: %d clone calls, want %d", got, tc.calls)
			}
			for _, n := range []string{"big1", "big2", "big3"} {
				must(t, os.Remove(filepath.Join(fx.root, n)))
			}
			fx.restore(info.ID, RestoreOptions{})
			if got := calls.Load(); got != tc.calls {
				t.Errorf("restore: %d clone calls, want %d", got, tc.calls)
			}
			if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
				t.Fatalf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExcludes: .git and the patterns are left out of the snapshot, and a
// restore neither removes nor rewrites them.
func TestExcludes(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{
		".git/HEAD":             file("ref\n", 0o644),
		"sub/.git":              file("gitdir: elsewhere\n", 0o644),
		"node_modules/x/y.js":   file("js\n", 0o644),
		"build/out.o":           file("obj\n", 0o644),
		"src/build/keep.go":     file("not the top build\n", 0o644),
		"src/a.go":              file("package a\n", 0o644),
		"src/gen/b.go":          file("generated\n", 0o644),
		"src/x/gen/c.go":        file("generated deeper\n", 0o644),
		"debug.log":             file("log\n", 0o644),
		"keep.log":              file("kept log\n", 0o644),
		"docs/a.md":             file("doc\n", 0o644),
		"docs/tmp/scratch.md":   file("scratch\n", 0o644),
		"with space/cache.tmp~": file("~\n", 0o644),
	})
	info := fx.take(TakeOptions{Exclude: []string{
		"node_modules/", "*.log", "!keep.log", "/build", "src/**/gen", "docs/tmp/", "*~", "# a comment", "",
	}})
	var tarList []string
	var buf bytes.Buffer
	must(t, fx.store.Export(fx.ctx, info.ID, &buf, ExportOptions{}))
	for name := range readTar(t, &buf) {
		tarList = append(tarList, name)
	}
	want := []string{"docs", "docs/a.md", "keep.log", "src", "src/a.go", "src/build", "src/build/keep.go", "src/x", "sub", "with space"}
	if diff := cmp.Diff(want, sorted(tarList)); diff != "" {
		t.Errorf("exported: mismatch (-want +got):\n%s", diff)
	}
	// Change what was left out: the restore leaves it as it is.
	fx.write("node_modules/x/y.js", "changed js\n")
	fx.write("node_modules/new.js", "new js\n")
	fx.write("new.log", "new log\n")
	fx.write(".git/HEAD", "moved\n")
	fx.write("src/a.go", "changed\n")
	must(t, os.Remove(filepath.Join(fx.root, "build/out.o")))
	before := listing(t, fx.root)
	fx.restore(info.ID, RestoreOptions{})
	after := listing(t, fx.root)
	before["src/a.go"] = file("package a\n", 0o644)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// Restore-time patterns add to the snapshot's.
	fx.write("src/a.go", "changed again\n")
	fx.restore(info.ID, RestoreOptions{Exclude: []string{"*.go"}})
	if b, _ := os.ReadFile(filepath.Join(fx.root, "src/a.go")); string(b) != "changed again\n" {
		t.Errorf("an excluded file was restored: %q", b)
	}
}

// TestSpecialFiles: a fifo is neither taken nor removed.
func TestSpecialFiles(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("a.txt", "a\n")
	must(t, syscall.Mkfifo(filepath.Join(fx.root, "fifo"), 0o644))
	info := fx.take(TakeOptions{})
	if info.Files != 1 {
		t.Errorf("files %d", info.Files)
	}
	fx.write("a.txt", "changed\n")
	fx.restore(info.ID, RestoreOptions{})
	if fi, err := os.Lstat(filepath.Join(fx.root, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v %v", fi, err)
	}
}

func TestBadArguments(t *testing.T) {
	fx := newFixture(t, Options{})
	fx.write("a.txt", "a\n")
	info := fx.take(TakeOptions{Label: "one"})
	for _, id := range []string{"", "nope", "../store.json", "20260101-000000-000000000000", "a/b"} {
		_, err := fx.store.Get(id)
		wantErr(t, err, ErrNotFound)
		_, err = fx.store.Restore(fx.ctx, id, fx.root, RestoreOptions{})
		wantErr(t, err, ErrNotFound)
		_, err = fx.store.Diff(fx.ctx, id, "", fx.root, DiffOptions{})
		wantErr(t, err, ErrNotFound)
		if id != "" { // to "" is the root now
			_, err = fx.store.Diff(fx.ctx, info.ID, id, fx.root, DiffOptions{})
			wantErr(t, err, ErrNotFound)
		}
		wantErr(t, fx.store.Export(fx.ctx, id, discard{}, ExportOptions{}), ErrNotFound)
		wantErr(t, fx.store.Drop(id), ErrNotFound)
	}
	for _, root := range []string{"", "relative/root", filepath.Join(fx.root, "a.txt"), filepath.Join(fx.root, "missing")} {
		_, err := fx.store.Take(fx.ctx, root, TakeOptions{})
		wantErr(t, err, ErrInvalid)
	}
	// A store inside the root it would snapshot, or a root inside the store.
	inner, err := Open(filepath.Join(fx.root, ".state"), Options{})
	must(t, err)
	_, err = inner.Take(fx.ctx, fx.root, TakeOptions{})
	wantErr(t, err, ErrInvalid)
	_, err = fx.store.Take(fx.ctx, filepath.Join(fx.dir, "blobs"), TakeOptions{})
	wantErr(t, err, ErrInvalid)
	must(t, fx.store.Close())
	_, err = fx.store.List("")
	wantErr(t, err, ErrClosed)
}

func TestListGet(t *testing.T) {
	fx := newFixture(t, Options{})
	other := t.TempDir()
	fx.write("a.txt", "a\n")
	one := fx.take(TakeOptions{Label: "one"})
	two := fx.take(TakeOptions{Label: "two"})
	o, err := fx.store.Take(fx.ctx, other, TakeOptions{Label: "other"})
	must(t, err)
	list, err := fx.store.List(fx.root)
	must(t, err)
	if diff := cmp.Diff([]Info{one, two}, list); diff != "" {
		t.Errorf("list of the root: mismatch (-want +got):\n%s", diff)
	}
	all, err := fx.store.List("")
	must(t, err)
	if len(all) != 3 {
		t.Errorf("list of all: %d", len(all))
	}
	got, err := fx.store.Get(o.ID)
	must(t, err)
	if diff := cmp.Diff(o, got); diff != "" {
		t.Errorf("get: mismatch (-want +got):\n%s", diff)
	}
	if one.Label != "one" || one.Root != fx.root || one.Files != 1 || one.Bytes != 2 || one.NewBytes == 0 || one.CreatedAt.IsZero() {
		t.Errorf("info %+v", one)
	}
}

// TestFormatsVersioned: every file the store writes says its format's
// version, and one of another version is refused.
func TestFormatsVersioned(t *testing.T) {
	setHook(t, &statCacheDelay, 0)
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{"a/b.txt": file("b\n", 0o644)})
	info := fx.take(TakeOptions{})
	fx.store.flusher.Wait() // the stat cache is written
	m, err := os.ReadFile(fx.store.manifestPath(info.ID))
	must(t, err)
	if !bytes.Contains(m, []byte(`"version": 1`)) {
		t.Errorf("manifest without a version:\n%s", m)
	}
	if st := readState(t, fx.dir); st.Version != 2 {
		t.Errorf("store.json %+v", st)
	}
	idx, err := os.ReadFile(filepath.Join(fx.dir, "roots", rootKey(fx.root), "index"))
	must(t, err)
	if !bytes.HasPrefix(idx, []byte("toolhost-snapshot-index 1\n")) {
		t.Errorf("the stat cache starts %q", idx[:30])
	}
	trees := 0
	for _, sb := range storedBlobs(t, fx.dir) {
		if bytes.HasPrefix(sb.read(t), []byte("toolhost-snapshot-tree 1\n")) {
			trees++
		}
	}
	if trees != 2 {
		t.Errorf("%d tree objects, want 2", trees)
	}

	must(t, os.WriteFile(fx.store.manifestPath(info.ID), bytes.Replace(m, []byte(`"version": 1`), []byte(`"version": 2`), 1), 0o600))
	_, err = fx.store.Get(info.ID)
	wantErr(t, err, ErrDamaged)
	if !strings.Contains(err.Error(), "version 2") {
		t.Errorf("error %q does not say the version", err)
	}
	must(t, os.WriteFile(filepath.Join(fx.dir, "store.json"), []byte(`{"version":3}`), 0o600))
	if _, err := Open(fx.dir, Options{}); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("open of a store of version 3: %v", err)
	}
}

// TestStatCacheWrittenLater: the stat cache a Take makes is used from memory at
// once, and written to its file within indexDelay or when the Store closes,
// where a new Store of the directory finds it; unless another process
// wrote the file meanwhile: then its stat cache wins.
func TestStatCacheWrittenLater(t *testing.T) {
	setHook(t, &statCacheDelay, time.Hour)
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(20, 100))
	ageTree(t, fx.root)
	path := filepath.Join(fx.dir, "roots", rootKey(fx.root), "index")
	reads := countReads(t)
	fx.take(TakeOptions{})
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stat cache file is there before its delay or Close: %v", err)
	}
	reads.Swap(0)
	fx.take(TakeOptions{})
	if got := reads.Swap(0); got != 0 {
		t.Errorf("a re-take read %d files, want 0 (the stat cache in memory)", got)
	}
	must(t, fx.store.Close())
	if idx, err := readStatCache(path); err != nil || len(idx.entries) != 20 {
		t.Fatalf("the stat cache file after Close: %v, %v", idx, err)
	}

	s2, err := Open(fx.dir, Options{})
	must(t, err)
	defer s2.Close()
	if _, err := s2.Take(fx.ctx, fx.root, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := reads.Swap(0); got != 0 {
		t.Errorf("a new Store's take read %d files, want 0 (the stat cache written)", got)
	}
	// Another process writes the file while s2's newer stat cache waits in
	// memory: s2 does not write over it.
	fx.write("d00/f000.txt", "changed\n")
	if _, err := s2.Take(fx.ctx, fx.root, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	s2.bg.Wait()
	must(t, writeStatCache(path, &statCache{entries: map[string]statEntry{}}))
	must(t, s2.Close())
	if idx, err := readStatCache(path); err != nil || len(idx.entries) != 0 {
		t.Errorf("the other process's stat cache was written over: %d entries, %v", len(idx.entries), err)
	}
	reads.Swap(0)
	s3, err := Open(fx.dir, Options{})
	must(t, err)
	defer s3.Close()
	if _, err := s3.Take(fx.ctx, fx.root, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := reads.Swap(0); got != 20 {
		t.Errorf("a take after another process's (empty) stat cache read %d files, want 20", got)
	}
}

// TestVersion1StoreOpens: a store of version 1 (every blob a file of its
// own, as before packs) is upgraded to version 2 when opened, and its
// snapshots restore from its loose blobs.
func TestVersion1StoreOpens(t *testing.T) {
	fx := newFixture(t, Options{})
	want := map[string]entry{"a.txt": file("hello\n", 0o644), "d": dir(0o755), "d/b.txt": file("in d\n", 0o600)}
	writeTree(t, fx.root, want)
	info := fx.take(TakeOptions{})
	must(t, fx.store.Close())
	// Make it what version 1 wrote: loose blobs, no packs.
	for _, b := range storedBlobs(t, fx.dir) {
		x := hex.EncodeToString(b.h[:])
		must(t, os.MkdirAll(filepath.Join(fx.dir, "blobs", x[:2]), 0o700))
		must(t, os.WriteFile(filepath.Join(fx.dir, "blobs", x[:2], x[2:]), b.read(t), 0o600))
	}
	must(t, os.RemoveAll(filepath.Join(fx.dir, "packs")))
	st := readState(t, fx.dir)
	st.Version = 1
	b, _ := json.Marshal(st)
	must(t, os.WriteFile(filepath.Join(fx.dir, "store.json"), b, 0o600))

	s, err := Open(fx.dir, Options{})
	must(t, err)
	defer s.Close()
	if st := readState(t, fx.dir); st.Version != 2 {
		t.Errorf("store.json after Open: %+v, want version 2", st)
	}
	fx.write("a.txt", "changed\n")
	must(t, os.Remove(filepath.Join(fx.root, "d", "b.txt")))
	if _, err := s.Restore(fx.ctx, info.ID, fx.root, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, listing(t, fx.root)); diff != "" {
		t.Errorf("restore from a version-1 store: mismatch (-want +got):\n%s", diff)
	}
}

// TestTreeMemos: an unchanged re-take encodes no tree object; a change
// encodes the trees of its directory and those above, no other; after a
// collection (which may have removed what the memos name) every tree is
// encoded again, and written where it is gone.
func TestTreeMemos(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, manyFiles(30, 100)) // d00..d09
	ageTree(t, fx.root)
	var mu sync.Mutex
	var encoded []string
	setHook(t, &testHookTreeEncoded, func(rel string) { mu.Lock(); encoded = append(encoded, rel); mu.Unlock() })
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := encoded
		encoded = nil
		sort.Strings(out)
		return out
	}
	a := fx.take(TakeOptions{})
	if got := took(); len(got) != 11 {
		t.Errorf("first take encoded %v, want the 11 trees", got)
	}
	fx.take(TakeOptions{})
	if got := took(); len(got) != 0 {
		t.Errorf("unchanged re-take encoded %v, want none", got)
	}
	fx.write("d03/f003.txt", "changed\n")
	fx.take(TakeOptions{})
	if diff := cmp.Diff([]string{"", "d03"}, took()); diff != "" {
		t.Errorf("take after a change in d03: mismatch (-want +got):\n%s", diff)
	}

	// A collection removes a's trees that no other snapshot holds: the
	// next take must not trust its memo of them.
	fx.write("d03/f003.txt", "changed again\n")
	b := fx.take(TakeOptions{})
	took()
	must(t, fx.store.Drop(a.ID))
	fx.write("d05/f005.txt", "changed in d05\n")
	c := fx.take(TakeOptions{})
	if got := took(); len(got) != 11 {
		t.Errorf("take after a collection encoded %v, want all 11 trees", got)
	}
	wantC := listing(t, fx.root)
	// Only c holds its trees now; it restores whole.
	must(t, fx.store.Drop(b.ID))
	fx.write("d01/f001.txt", "and d01\n")
	if res := fx.restore(c.ID, RestoreOptions{}); res.Written != 1 {
		t.Errorf("restore of c: %+v, want 1 written", res)
	}
	if diff := cmp.Diff(wantC, listing(t, fx.root)); diff != "" {
		t.Errorf("restore of c: mismatch (-want +got):\n%s", diff)
	}
}
