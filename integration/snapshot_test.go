package integration

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// startSnapshots starts a server whose snapshot store is the test's.
func startSnapshots(t *testing.T) *server {
	t.Helper()
	return startSnapshotsIn(t, snapStateDir(t), options{})
}

// snapStateDir makes a state directory (0700) for a test.
func snapStateDir(t *testing.T) string {
	t.Helper()
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return state
}

// startSnapshotsIn starts a server with o whose --state-dir is state, and
// initializes it.
func startSnapshotsIn(t *testing.T, state string, o options) *server {
	t.Helper()
	o.args = append([]string{"--state-dir", state}, o.args...)
	if o.env == nil {
		// The minimal environment of start, without the race detector's
		// second of sleep at the exit that every shutdown would pay.
		o.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "GORACE=atexit_sleep_ms=0"}
	}
	s := start(t, o)
	res := s.initialize(nil)
	if !res.Capabilities.Snapshots {
		t.Fatal("initialize does not say snapshots")
	}
	return s
}

// TestSnapshotCommandChangesAndUndo: a command run with snapshot: true
// says what it added, modified and deleted, and one restore of its
// snapshot undoes it.
func TestSnapshotCommandChangesAndUndo(t *testing.T) {
	t.Parallel()
	s := startSnapshots(t)
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(s.root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("keep.txt", "same\n")
	write("edit.txt", "before\n")
	write("gone.txt", "bye\n")
	res := s.run(map[string]any{"argv": []string{"sh", "-c", "echo after > edit.txt; rm gone.txt; mkdir new; echo hi > new/made.txt"}, "snapshot": true})
	if res.SnapshotID == "" {
		t.Fatalf("no snapshotId in %+v", res)
	}
	want := []protocol.Change{
		{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 6},
		{Path: "gone.txt", Kind: protocol.ChangeDeleted, Size: 4},
		{Path: "new", Kind: protocol.ChangeAdded},
		{Path: "new/made.txt", Kind: protocol.ChangeAdded, Size: 3},
	}
	if diff := cmp.Diff(want, res.Changes); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s", diff)
	}
	var restored protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": res.SnapshotID}, &restored)
	for name, data := range map[string]string{"keep.txt": "same\n", "edit.txt": "before\n", "gone.txt": "bye\n"} {
		b, err := os.ReadFile(filepath.Join(s.root, name))
		if err != nil || string(b) != data {
			t.Errorf("%s after the restore = %q, %v; want %q", name, b, err, data)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.root, "new")); !os.IsNotExist(err) {
		t.Errorf("new/ is still there after the restore: %v", err)
	}
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": res.SnapshotID}, &d)
	if len(d.Changes) != 0 {
		t.Errorf("diff after the restore = %+v, want none", d.Changes)
	}
	var list protocol.SnapshotList
	s.mustCall("snapshots", map[string]any{}, &list)
	if len(list) != 1 || list[0].SnapshotID != res.SnapshotID {
		t.Errorf("snapshots = %+v, want the one", list)
	}
	s.shutdown()
}

// TestSnapshotMethods: snapshot, diff with a patch, export (a tar whose
// listing is the root's), dropSnapshot, and the errors: an unknown
// snapshot, a restore while a command runs, a path outside the root.
func TestSnapshotMethods(t *testing.T) {
	t.Parallel()
	s := startSnapshots(t)
	if err := os.WriteFile(filepath.Join(s.root, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(s.root, "link")); err != nil {
		t.Fatal(err)
	}
	var snap protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{"label": "first"}, &snap)
	if snap.Files != 1 || snap.Label != "first" {
		t.Errorf("snapshot = %+v", snap)
	}
	if err := os.WriteFile(filepath.Join(s.root, "a.txt"), []byte("one\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": snap.SnapshotID, "path": "a.txt"}, &d)
	if len(d.Changes) != 1 || !strings.Contains(d.Patch, "-two") || !strings.Contains(d.Patch, "+three") {
		t.Errorf("diff = %+v", d)
	}
	var ex protocol.ExportSnapshotResult
	s.mustCall("exportSnapshot", map[string]any{"snapshotId": snap.SnapshotID}, &ex)
	f, err := os.Open(ex.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"a.txt", "link"}, names, cmp.Transformer("trim", func(s []string) []string {
		var out []string
		for _, n := range s {
			if n != "./" && n != "." {
				out = append(out, filepath.Clean(n))
			}
		}
		return out
	})); diff != "" {
		t.Errorf("export listing mismatch (-want +got):\n%s", diff)
	}

	e := s.call("restore", map[string]any{"snapshotId": "20990101-000000-000000000000"}, nil)
	if e == nil || e.Code != protocol.CodeSnapshotNotFound {
		t.Errorf("restore of an unknown snapshot = %v, want -32033", e)
	}
	e = s.call("restore", map[string]any{"snapshotId": snap.SnapshotID, "paths": []string{"../outside"}}, nil)
	if e == nil || e.Code != protocol.CodeInvalidParams {
		t.Errorf("restore of a path outside = %v, want -32602", e)
	}
	h := s.longRun(map[string]any{"argv": []string{"sleep", "30"}})
	e = s.call("restore", map[string]any{"snapshotId": snap.SnapshotID}, nil)
	if e == nil || e.Code != protocol.CodeSnapshotBusy {
		t.Errorf("restore while a command runs = %v, want -32032", e)
	}
	var r protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": snap.SnapshotID, "force": true}, &r)
	if b, _ := os.ReadFile(filepath.Join(s.root, "a.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("a.txt after a forced restore = %q", b)
	}
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID}, nil)
	s.mustCall("dropSnapshot", map[string]any{"snapshotId": snap.SnapshotID}, nil)
	e = s.call("diff", map[string]any{"from": snap.SnapshotID}, nil)
	if e == nil || e.Code != protocol.CodeSnapshotNotFound {
		t.Errorf("diff of a dropped snapshot = %v, want -32033", e)
	}
	s.shutdown()
}
