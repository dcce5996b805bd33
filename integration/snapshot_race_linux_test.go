//go:build linux

package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/protocol"
)

// TestSnapshotRestoreSwapRace: while restores of a tree of 400 files run
// through the binary, a goroutine swaps root/d (the directory they write
// into) with a symlink to a directory outside the root holding the same
// names, and back, atomically (RENAME_EXCHANGE), over and over. Whatever
// each restore answers, nothing outside the root changes, byte for byte
// and mode for mode; and once the swapping stops, a restore succeeds and
// gives back the snapshot. Both loops are bounded by count.
func TestSnapshotRestoreSwapRace(t *testing.T) {
	t.Parallel()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	mustDo(t, err)
	snapOpenUpOnCleanup(t, parent)
	root := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	alt := filepath.Join(parent, "swapalt") // the symlink swapped in; outside the root
	d := filepath.Join(root, "d")

	// Snapshot A is the tree; B the tree after a third of its files
	// changed, some removed, some added and some chmodded: restores
	// alternate between them, so that each one writes, removes and
	// chmods all over d.
	a := map[string]snapEntry{"top.txt": snapFile("top\n", 0o644)}
	out := map[string]snapEntry{"secret.txt": snapFile("secret\n", 0o600), "beside/hello.txt": snapFile("beside\n", 0o644)}
	for i := range 20 {
		for j := range 22 {
			name := fmt.Sprintf("sub%02d/f%02d.txt", i, j)
			out["dir/"+name] = snapFile("outside, must stay\n", 0o644)
			if j < 20 {
				a["d/"+name] = snapFile(fmt.Sprintf("inside %d %d\n", i, j), 0o644)
			}
		}
	}
	snapWriteTree(t, root, a)
	snapWriteTree(t, outside, out)
	if err := os.Symlink(filepath.Join(outside, "dir"), alt); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("this filesystem cannot exchange names atomically: %v", err)
	}
	mustDo(t, unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE))

	state := t.TempDir()
	mustDo(t, os.Chmod(state, 0o700))
	s := startSnapshotsIn(t, state, options{root: root})
	var snapA, snapB protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{"label": "A"}, &snapA)
	wantA := snapListing(t, root)
	for i := range 20 {
		for j := range 22 {
			p := filepath.Join(d, fmt.Sprintf("sub%02d/f%02d.txt", i, j))
			switch {
			case j >= 20:
				wsWrite(t, p, "added after A\n")
			case j%3 == 0:
				wsWrite(t, p, fmt.Sprintf("changed %d %d\n", i, j))
			case j%7 == 1:
				mustDo(t, os.Remove(p))
			case j%5 == 2:
				mustDo(t, os.Chmod(p, 0o600))
			}
		}
	}
	s.mustCall("snapshot", map[string]any{"label": "B"}, &snapB)
	before := snapListing(t, parent, "root", "swapalt")

	done := make(chan struct{})
	var wg sync.WaitGroup
	swaps, rearms, writing := 0, 0, 0
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 27))
		for range 200_000 {
			select {
			case <-done:
				return
			default:
			}
			// Quiet for a while (a bounded number of looks), until a
			// restore is writing (a temporary file beside its target): the
			// swaps then come during the apply, not only the scan, and a
			// restore may also run whole between two bursts.
			for range rng.IntN(4000) {
				if sawRestoreTemp(filepath.Join(d, fmt.Sprintf("sub%02d", rng.IntN(20)))) {
					writing++
					break
				}
			}
			// A burst of swaps that ends with d a directory again; each may
			// fail while a restore has removed d (it replaces a symlink it
			// finds there by a directory).
			for range 1 + rng.IntN(40) {
				if unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE) == nil {
					swaps++
				}
			}
			if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
			}
			// A restore that replaced the swapped-in symlink by a directory
			// leaves two directories and no symlink: arm it again.
			dfi, derr := os.Lstat(d)
			afi, aerr := os.Lstat(alt)
			if derr == nil && aerr == nil && dfi.IsDir() && afi.IsDir() {
				snapOpenUp(alt)
				os.RemoveAll(alt)
				if os.Symlink(filepath.Join(outside, "dir"), alt) == nil {
					rearms++
				}
			}
		}
	}()

	outcomes := map[string]int{}
	for i := range 16 {
		id := snapA.SnapshotID
		if i%2 == 1 {
			id = snapB.SnapshotID
		}
		var r protocol.RestoreResult
		if e := s.call("restore", map[string]any{"snapshotId": id}, &r); e != nil {
			phase := "error in the apply"
			if strings.Contains(errData(e).Reason, ": scan ") {
				phase = "error in the scan"
			}
			outcomes[phase]++
			if outcomes[phase] <= 2 {
				t.Logf("restore %d: %d %s", i, e.Code, errData(e).Reason)
			}
			continue
		}
		outcomes["ok"]++
	}
	stop()
	t.Logf("restores by outcome %v; %d swaps, %d bursts while a restore wrote, %d symlinks armed again", outcomes, swaps, writing, rearms)
	if swaps == 0 {
		t.Error("no swap happened: the race was not exercised")
	}
	if diff := cmp.Diff(before, snapListing(t, parent, "root", "swapalt")); diff != "" {
		t.Fatalf("outside the root changed: mismatch (-want +got):\n%s", diff)
	}

	// Quiet again: d a directory (or nothing), and a restore gives A back.
	if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		mustDo(t, os.Remove(d))
	}
	var r protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": snapA.SnapshotID}, &r)
	if diff := cmp.Diff(wantA, snapListing(t, root)); diff != "" {
		t.Errorf("the root after a quiet restore of A: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapListing(t, parent, "root", "swapalt")); diff != "" {
		t.Errorf("outside the root changed: mismatch (-want +got):\n%s", diff)
	}
	s.shutdown()
}

// sawRestoreTemp reports whether dir holds a restore's temporary file.
func sawRestoreTemp(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	for _, n := range names {
		if strings.HasPrefix(n, ".snapshot-") {
			return true
		}
	}
	return false
}
