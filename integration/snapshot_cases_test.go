package integration

import (
	"bytes"
	"crypto/sha256"
	varint "encoding/binary"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestSnapshotHandleCommands: snapshot: true on a longRunning recipe (one
// step under a terminal of its own) and on a longRunning under a PTY. The
// toolResult notification and wait both carry the snapshotId and the
// changes, the same, and one restore brings the whole tree back.
func TestSnapshotHandleCommands(t *testing.T) {
	t.Parallel()
	s := startSnapshots(t)
	snapWriteTree(t, s.root, map[string]snapEntry{
		"keep.txt":       snapFile("same\n", 0o644),
		"edit.txt":       snapFile("before\n", 0o644),
		"gone.txt":       snapFile("bye\n", 0o644),
		"run.sh":         snapFile("#!/bin/sh\n", 0o755),
		"dir/inner.txt":  snapFile("inner\n", 0o600),
		"link":           snapLink("keep.txt"),
		".git/HEAD":      snapFile("ref: refs/heads/main\n", 0o644),
		"empty":          snapDir(0o700),
		"dir/nested/x.y": snapFile("x\n", 0o644),
	})
	original := snapListing(t, s.root)
	for _, c := range []struct {
		name   string
		params map[string]any
	}{
		{"recipe", map[string]any{"label": "gen", "steps": []map[string]any{
			{"name": "edit", "argv": []string{"sh", "-c", "echo after > edit.txt && rm gone.txt"}},
			{"name": "under a terminal", "argv": []string{"sh", "-c", "mkdir new && echo made > new/made.txt && chmod 600 run.sh"}, "pty": map[string]any{"rows": 10, "cols": 40}},
			{"name": "retype", "argv": []string{"sh", "-c", "rm link && mkdir link && rm -r dir/nested && echo git > .git/HEAD"}},
		}}},
		{"pty", map[string]any{"pty": map[string]any{"rows": 24, "cols": 80}, "argv": []string{"sh", "-c",
			"test -t 1 || exit 9; echo after > edit.txt && rm gone.txt && mkdir new && echo made > new/made.txt && chmod 600 run.sh && rm link && mkdir link && rm -r dir/nested && echo git > .git/HEAD"}}},
	} {
		c.params["snapshot"] = true
		h := s.longRun(c.params)
		res := s.toolResultOf(h.HandleID)
		if res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 || res.SnapshotID == "" {
			t.Fatalf("%s: toolResult = %s, exit %v, snapshot %q: %s", c.name, res.Status, res.ExitCode, res.SnapshotID, res.Stdout)
		}
		want := []protocol.Change{
			{Path: "dir/nested", Kind: protocol.ChangeDeleted}, // a directory has no size of its own
			{Path: "dir/nested/x.y", Kind: protocol.ChangeDeleted, Size: 2},
			{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 6},
			{Path: "gone.txt", Kind: protocol.ChangeDeleted, Size: 4},
			{Path: "link", Kind: protocol.ChangeType},
			{Path: "new", Kind: protocol.ChangeAdded},
			{Path: "new/made.txt", Kind: protocol.ChangeAdded, Size: 5},
			{Path: "run.sh", Kind: protocol.ChangeMode, Size: 10},
		}
		if diff := cmp.Diff(want, res.Changes); diff != "" || res.ChangesTruncated {
			t.Errorf("%s: toolResult changes mismatch (truncated %v) (-want +got):\n%s", c.name, res.ChangesTruncated, diff)
		}
		var waited protocol.ToolResult
		s.mustCall("wait", map[string]any{"handleId": h.HandleID}, &waited)
		if waited.SnapshotID != res.SnapshotID {
			t.Errorf("%s: wait says snapshot %q, the toolResult %q", c.name, waited.SnapshotID, res.SnapshotID)
		}
		if diff := cmp.Diff(res.Changes, waited.Changes); diff != "" {
			t.Errorf("%s: wait's changes differ from the toolResult's (-toolResult +wait):\n%s", c.name, diff)
		}
		git := snapListing(t, filepath.Join(s.root, ".git"))
		var r protocol.RestoreResult
		s.mustCall("restore", map[string]any{"snapshotId": res.SnapshotID}, &r)
		got := snapListing(t, s.root)
		// .git is the command's: a restore never touches it.
		wantTree := map[string]snapEntry{}
		for p, e := range original {
			if p != ".git" && !strings.HasPrefix(p, ".git/") {
				wantTree[p] = e
			}
		}
		for p, e := range git {
			wantTree[".git/"+p] = e
		}
		wantTree[".git"] = original[".git"]
		if diff := cmp.Diff(wantTree, got); diff != "" {
			t.Errorf("%s: the tree after one restore mismatch (-want +got):\n%s", c.name, diff)
		}
		// Back to the original .git for the next case.
		snapWriteTree(t, s.root, map[string]snapEntry{".git/HEAD": original[".git/HEAD"]})
	}
	s.shutdown()
}

// damageStored flips a byte of content where the store of state keeps it:
// a blob file of its own, or a range of a pack (both hold the bytes as
// they are).
func damageStored(t *testing.T, state, content string) {
	t.Helper()
	for _, sub := range []string{"blobs", "packs"} {
		var found string
		filepath.WalkDir(filepath.Join(state, "snapshots", sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || found != "" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			if i := bytes.Index(b, []byte(content)); i >= 0 {
				b[i+len(content)/2] ^= 0xff
				mustDo(t, os.Chmod(p, 0o600))
				mustDo(t, os.WriteFile(p, b, 0o600))
				found = p
			}
			return nil
		})
		if found != "" {
			return
		}
	}
	t.Fatalf("the store under %s does not hold %q", state, content)
}

// storeBlobs returns the count and bytes of the blobs the store of state
// holds: its blob files, and the blobs its packs' indexes name (see
// snapshot/doc.go: after the magic line, a uvarint count, then for each
// blob its 32-byte sha256, offset and length as uvarints). Files made but
// not yet in the store (temporary names, starting with a dot) count too,
// as blobs of one byte each, so that leftovers show.
func storeBlobs(t *testing.T, state string) (n int, size int64) {
	t.Helper()
	filepath.WalkDir(filepath.Join(state, "snapshots", "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n, size = n+1, size+fi.Size()
			}
		}
		return nil
	})
	ents, _ := os.ReadDir(filepath.Join(state, "snapshots", "packs"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			n, size = n+1, size+1
			continue
		}
		if !strings.HasSuffix(e.Name(), ".idx") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(state, "snapshots", "packs", e.Name()))
		mustDo(t, err)
		const magic = "toolhost-snapshot-packidx 1\n"
		if !bytes.HasPrefix(b, []byte(magic)) || len(b) < len(magic)+sha256.Size {
			t.Fatalf("pack index %s: %q...", e.Name(), b[:min(len(b), 40)])
		}
		p := b[len(magic) : len(b)-sha256.Size]
		count, k := varint.Uvarint(p)
		p = p[k:]
		for range count {
			p = p[sha256.Size:]
			_, k = varint.Uvarint(p) // offset
			p = p[k:]
			l, k := varint.Uvarint(p)
			p = p[k:]
			n, size = n+1, size+int64(l)
		}
	}
	return n, size
}

// TestSnapshotDamagedStore: a byte flipped in a blob under the state
// directory: a restore that needs it fails, naming the damage, and the
// root is as it was, byte for byte and mode for mode; a restore of paths
// that do not need it works, and so does a diff.
func TestSnapshotDamagedStore(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	s := startSnapshotsIn(t, state, options{})
	const damaged = "the content whose blob is damaged\n"
	snapWriteTree(t, s.root, map[string]snapEntry{
		"a.txt":     snapFile(damaged, 0o644),
		"b.txt":     snapFile("b, fine\n", 0o600),
		"sub/c.txt": snapFile("c, fine\n", 0o755),
	})
	var snap protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{}, &snap)
	wsWrite(t, filepath.Join(s.root, "a.txt"), "changed\n")
	mustDo(t, os.Remove(filepath.Join(s.root, "b.txt")))
	mustDo(t, os.Chmod(filepath.Join(s.root, "sub/c.txt"), 0o644))
	wsWrite(t, filepath.Join(s.root, "new.txt"), "made since\n")
	before := snapListing(t, s.root)

	damageStored(t, state, damaged)

	e := s.call("restore", map[string]any{"snapshotId": snap.SnapshotID}, nil)
	if e == nil || e.Code != protocol.CodeInternalError || !strings.Contains(errData(e).Reason, "damaged") || !strings.Contains(e.Message, "nothing was written") {
		t.Fatalf("restore from a damaged store = %v (%+v), want -32603 saying the store is damaged", e, errData(e))
	}
	if diff := cmp.Diff(before, snapListing(t, s.root)); diff != "" {
		t.Fatalf("the root changed under a refused restore: mismatch (-want +got):\n%s", diff)
	}
	// What does not need the damaged blob still comes back.
	var r protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": snap.SnapshotID, "paths": []string{"b.txt", "sub"}}, &r)
	if r.Written != 2 {
		t.Errorf("restore of b.txt and sub = %+v, want 2 written", r)
	}
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": snap.SnapshotID}, &d)
	if diff := cmp.Diff([]protocol.Change{{Path: "a.txt", Kind: protocol.ChangeModified, Size: 8}, {Path: "new.txt", Kind: protocol.ChangeAdded, Size: 11}}, d.Changes); diff != "" {
		t.Errorf("diff after the partial restore mismatch (-want +got):\n%s", diff)
	}
	s.shutdown()
}

// TestSnapshotTooLarge: a root over --snapshot-max-bytes is refused with
// -32031, whose data names the largest directories, and leaves nothing in
// the store; a command run with snapshot: true then does not run.
func TestSnapshotTooLarge(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	s := startSnapshotsIn(t, state, options{args: []string{"--snapshot-max-bytes", "1K"}})
	snapWriteTree(t, s.root, map[string]snapEntry{
		"big/inner/blob.bin": snapFile(strings.Repeat("x", 3000), 0o644),
		"mid/m.txt":          snapFile(strings.Repeat("m", 500), 0o644),
		"small.txt":          snapFile("0123456789", 0o644),
	})
	e := s.call("snapshot", map[string]any{}, nil)
	if e == nil || e.Code != protocol.CodeSnapshotTooLarge {
		t.Fatalf("snapshot over the cap = %v, want -32031", e)
	}
	data := errData(e)
	want := []protocol.DirSize{{Path: "big", Bytes: 3000}, {Path: "big/inner", Bytes: 3000}, {Path: "mid", Bytes: 500}, {Path: ".", Bytes: 10}}
	if diff := cmp.Diff(want, data.Largest); diff != "" {
		t.Errorf("data.largest mismatch (-want +got):\n%s", diff)
	}
	if data.Limit != 1024 || data.Size <= 1024 {
		t.Errorf("data.limit = %d, data.size = %d; want 1024 and more", data.Limit, data.Size)
	}
	e = s.call("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo ran > ran.txt"}, "snapshot": true}, nil)
	if e == nil || e.Code != protocol.CodeSnapshotTooLarge {
		t.Errorf("runCommand with snapshot: true over the cap = %v, want -32031", e)
	}
	if _, err := os.Lstat(filepath.Join(s.root, "ran.txt")); !os.IsNotExist(err) {
		t.Errorf("the command ran although its snapshot was refused: %v", err)
	}
	var list protocol.SnapshotList
	s.mustCall("snapshots", map[string]any{}, &list)
	if len(list) != 0 {
		t.Errorf("snapshots = %+v, want none", list)
	}
	if blobs, _ := storeBlobs(t, state); blobs != 0 {
		t.Errorf("a refused snapshot left %d blobs", blobs)
	}
	s.shutdown()
}

// TestSnapshotOtherRoot: two servers share one --state-dir with different
// roots; the one cannot restore, diff, drop or export the other's
// snapshot (-32602, naming snapshotId), does not list it, and its root is
// untouched; the owner still restores it.
func TestSnapshotOtherRoot(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	one := startSnapshotsIn(t, state, options{})
	two := startSnapshotsIn(t, state, options{})
	wsWrite(t, filepath.Join(one.root, "a.txt"), "one's\n")
	wsWrite(t, filepath.Join(two.root, "a.txt"), "two's\n")
	wsWrite(t, filepath.Join(two.root, "only-two.txt"), "two\n")
	var snap protocol.SnapshotInfo
	one.mustCall("snapshot", map[string]any{}, &snap)
	var mine protocol.SnapshotInfo
	two.mustCall("snapshot", map[string]any{}, &mine)
	twoBefore := snapListing(t, two.root)
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"restore", map[string]any{"snapshotId": snap.SnapshotID}},
		{"restore", map[string]any{"snapshotId": snap.SnapshotID, "force": true, "paths": []string{"a.txt"}}},
		{"diff", map[string]any{"from": snap.SnapshotID}},
		{"diff", map[string]any{"from": mine.SnapshotID, "to": snap.SnapshotID}},
		{"dropSnapshot", map[string]any{"snapshotId": snap.SnapshotID}},
		{"exportSnapshot", map[string]any{"snapshotId": snap.SnapshotID}},
	} {
		e := two.call(c.method, c.params, nil)
		if e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(errData(e).Reason+e.Message, "another root") {
			t.Errorf("%s %v of another root's snapshot = %v (%+v), want -32602", c.method, c.params, e, errData(e))
		}
	}
	if diff := cmp.Diff(twoBefore, snapListing(t, two.root)); diff != "" {
		t.Errorf("the other root changed: mismatch (-want +got):\n%s", diff)
	}
	var list protocol.SnapshotList
	two.mustCall("snapshots", map[string]any{}, &list)
	if len(list) != 1 || list[0].SnapshotID != mine.SnapshotID {
		t.Errorf("snapshots of two = %+v, want only its own", list)
	}
	wsWrite(t, filepath.Join(one.root, "a.txt"), "changed\n")
	one.mustCall("restore", map[string]any{"snapshotId": snap.SnapshotID}, nil)
	if b, _ := os.ReadFile(filepath.Join(one.root, "a.txt")); string(b) != "one's\n" {
		t.Errorf("one's a.txt after its restore = %q", b)
	}
	one.shutdown()
	two.shutdown()
}

// TestSnapshotConcurrent: many snapshot requests of one root at once, from
// two servers sharing the store: every one succeeds with the same tree,
// exactly one stores the contents (the others find them there, which
// they would not all do unless taken one at a time), the store's count of
// bytes is the size of its blobs, and each diffs empty against the root.
func TestSnapshotConcurrent(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	one := startSnapshotsIn(t, state, options{})
	two := startSnapshotsIn(t, state, options{root: one.root})
	ents := map[string]snapEntry{}
	for i := range 60 {
		ents[filepath.Join("d"+string(rune('a'+i%6)), "f"+string(rune('a'+i/6))+".txt")] = snapFile(strings.Repeat(string(rune('A'+i%26)), 100+i), 0o644)
	}
	snapWriteTree(t, one.root, ents)
	const each = 6
	type pending struct {
		s *server
		p *client.Pending
	}
	var ps []pending
	for i := range 2 * each {
		s := one
		if i%2 == 1 {
			s = two
		}
		ps = append(ps, pending{s, s.request("snapshot", map[string]any{"label": "concurrent"})})
	}
	ids := map[string]bool{}
	stored := 0
	var first protocol.SnapshotInfo
	for i, p := range ps {
		var info protocol.SnapshotInfo
		if e := p.s.answer(p.p, &info); e != nil {
			t.Fatalf("snapshot %d of %d at once: %v", i, len(ps), e)
		}
		if ids[info.SnapshotID] {
			t.Errorf("snapshot id %s answered twice", info.SnapshotID)
		}
		ids[info.SnapshotID] = true
		if info.NewBytes > 0 {
			stored++
			first = info
		}
		if info.Files != 60 {
			t.Errorf("snapshot %s holds %d files, want 60", info.SnapshotID, info.Files)
		}
	}
	if stored != 1 || first.NewBytes < first.Bytes {
		t.Errorf("%d of the snapshots stored new contents (the first %d bytes of %d), want exactly one storing all", stored, first.NewBytes, first.Bytes)
	}
	var list protocol.SnapshotList
	one.mustCall("snapshots", map[string]any{}, &list)
	if len(list) != 2*each {
		t.Errorf("snapshots lists %d, want %d", len(list), 2*each)
	}
	for id := range ids {
		var d protocol.DiffResult
		one.mustCall("diff", map[string]any{"from": id}, &d)
		if len(d.Changes) != 0 {
			t.Errorf("diff of %s = %+v, want none", id, d.Changes)
		}
	}
	var store struct {
		Bytes int64 `json:"bytes"`
	}
	b, err := os.ReadFile(filepath.Join(state, "snapshots", "store.json"))
	mustDo(t, err)
	mustDo(t, json.Unmarshal(b, &store))
	if _, blobBytes := storeBlobs(t, state); store.Bytes != blobBytes {
		t.Errorf("store.json counts %d bytes, its blobs are %d", store.Bytes, blobBytes)
	}
	one.shutdown()
	two.shutdown()
}
