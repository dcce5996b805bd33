package integration

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

var snapshotSeed = flag.Uint64("snapshot.seed", 0, "the first seed of TestSnapshotFidelity (0: from the clock); each run logs its seeds")

// snapshotFidelitySeeds is how many seeds one run of
// TestSnapshotFidelity plays, each on a server of its own.
const snapshotFidelitySeeds = 5

// TestSnapshotFidelity: a random tree (text and binary files, small and
// past the store's clone threshold, all sorts of modes, symlinks relative,
// absolute and dangling, empty and deep directories, read-only ones, names
// with unicode, spaces, tabs and newlines) is made in the root and
// snapshotted through the binary; random mutations follow (edits, some
// of one byte; deletions; additions; chmods; file, directory and symlink
// turned into one another; .git touched), then a restore, after which the
// whole tree (type, permission bits, link target, bytes) is what the
// listing taken at the snapshot says, .git as the mutations left it, and a
// diff finds nothing. A failure names its seed: go test ./integration -run
// SnapshotFidelity -args -snapshot.seed=N replays it.
func TestSnapshotFidelity(t *testing.T) {
	t.Parallel()
	base := *snapshotSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	for i := range uint64(snapshotFidelitySeeds) {
		seed := base + i
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSnapshotFidelity(t, seed) })
	}
}

func checkSnapshotFidelity(t *testing.T, seed uint64) {
	t.Logf("seed %d (replay: -args -snapshot.seed=%d)", seed, seed)
	s := startSnapshots(t)
	snapOpenUpOnCleanup(t, s.root)
	g := newSnapGen(seed, s.root)
	ents := map[string]snapEntry{".git": snapDir(0o755), ".git/HEAD": snapFile("ref: refs/heads/main\n", 0o644)}
	g.fill(ents, ".", 0)
	snapWriteTree(t, s.root, ents)
	if seed%2 == 0 {
		snapAge(t, s.root) // the index vouches for the files that did not change
	}
	want := snapListing(t, s.root, ".git")
	files := 0
	for _, e := range want {
		if e.Type == "file" {
			files++
		}
	}
	var info protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{"label": fmt.Sprint("seed ", seed)}, &info)
	if info.Files != files {
		t.Errorf("seed %d: snapshot holds %d files, the tree %d", seed, info.Files, files)
	}

	did := g.mutate(t, 1+int(seed%9))
	changed := !cmp.Equal(want, snapListing(t, s.root, ".git"))
	var before protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": info.SnapshotID}, &before)
	if changed != (len(before.Changes) > 0) {
		t.Errorf("seed %d: the tree changed: %v, but diff says %+v (mutations %q)", seed, changed, before.Changes, did)
	}
	gitBefore := snapListing(t, filepath.Join(s.root, ".git"))

	var res protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": info.SnapshotID}, &res)
	t.Logf("seed %d: %d entries, mutations %q: %d changes, %d written, %d removed, %d ms", seed, len(want), did, len(before.Changes), res.Written, res.Removed, res.Ms)
	if changed && res.Written+res.Removed == 0 {
		t.Errorf("seed %d: the tree changed and the restore did nothing", seed)
	}
	if diff := cmp.Diff(want, snapListing(t, s.root, ".git")); diff != "" {
		t.Fatalf("seed %d: the restored tree mismatch (-want +got) after mutations %q:\n%s", seed, did, diff)
	}
	if diff := cmp.Diff(gitBefore, snapListing(t, filepath.Join(s.root, ".git"))); diff != "" {
		t.Errorf("seed %d: the restore touched .git: mismatch (-want +got):\n%s", seed, diff)
	}
	var after protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": info.SnapshotID}, &after)
	if len(after.Changes) != 0 {
		t.Errorf("seed %d: diff after the restore = %+v, want none", seed, after.Changes)
	}
	s.shutdown()
}
