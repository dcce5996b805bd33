package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// startMCPSnapshots starts toolhost mcp with a snapshot store of the
// test's.
func startMCPSnapshots(t *testing.T) *mcpSession {
	t.Helper()
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return startMCP(t, mcpOptions{extra: []string{"--state-dir", state}})
}

// mcpWrite writes files under root.
func mcpWrite(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		wsWrite(t, filepath.Join(root, name), data)
	}
}

// mcpCheckFiles checks that root holds files (nil content: absent).
func mcpCheckFiles(t *testing.T, root, when string, files map[string]*string) {
	t.Helper()
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(root, name))
		switch {
		case want == nil && !os.IsNotExist(err):
			t.Errorf("%s: %s is there (%q, %v), want it gone", when, name, b, err)
		case want != nil && (err != nil || string(b) != *want):
			t.Errorf("%s: %s = %q, %v; want %q", when, name, b, err, *want)
		}
	}
}

// TestMCPSnapshotRoundTrip: a run_command and a start_command recipe run
// with snapshot: true say what they changed (structured content and a
// line of text), restore_snapshot undoes each, and diff_snapshot is then
// empty; snapshot_workspace and diff_snapshot with a path give a patch.
func TestMCPSnapshotRoundTrip(t *testing.T) {
	s := startMCPSnapshots(t)
	mcpWrite(t, s.root, map[string]string{"keep.txt": "same\n", "edit.txt": "before\n", "gone.txt": "bye\n"})
	original := map[string]*string{"keep.txt": ptr("same\n"), "edit.txt": ptr("before\n"), "gone.txt": ptr("bye\n"), "new/made.txt": nil}

	t.Run("run_command", func(t *testing.T) {
		var res protocol.ToolResult
		out := s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", "echo after > edit.txt; rm gone.txt; mkdir new; echo hi > new/made.txt"}, "snapshot": true}, &res)
		if res.SnapshotID == "" || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("run_command = %+v", res)
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
		line := "changed 4 paths (snapshot " + res.SnapshotID + "; restore_snapshot undoes it): modified edit.txt, deleted gone.txt, added new, added new/made.txt"
		if txt := text(out); !strings.Contains(txt, line) {
			t.Errorf("the text for the model lacks %q:\n%s", line, txt)
		}
		var r protocol.RestoreResult
		out = s.ok("restore_snapshot", map[string]any{"snapshotId": res.SnapshotID}, &r)
		if r.Written == 0 || r.Removed == 0 || !strings.Contains(text(out), "restored the workspace to snapshot "+res.SnapshotID) {
			t.Errorf("restore_snapshot = %+v, %q", r, text(out))
		}
		mcpCheckFiles(t, s.root, "after restore_snapshot", original)
		var d protocol.DiffResult
		out = s.ok("diff_snapshot", map[string]any{"from": res.SnapshotID}, &d)
		if len(d.Changes) != 0 || d.Truncated || !strings.HasPrefix(text(out), "no changes between") {
			t.Errorf("diff_snapshot after the restore = %+v, %q; want no changes", d, text(out))
		}
	})

	t.Run("start_command recipe", func(t *testing.T) {
		var h protocol.LongRunningResult
		s.ok("start_command", map[string]any{"snapshot": true, "label": "gen", "steps": []map[string]any{
			{"name": "edit", "argv": []string{"sh", "-c", "echo one > edit.txt"}},
			{"name": "make", "argv": []string{"sh", "-c", "mkdir -p new && echo two > new/made.txt && rm keep.txt"}},
		}}, &h)
		var res protocol.ToolResult
		out := s.ok("wait_command", map[string]any{"handleId": h.HandleID, "timeoutMs": 60000}, &res)
		if res.Status != protocol.StatusCompleted || res.SnapshotID == "" {
			t.Fatalf("wait_command = %+v", res)
		}
		want := []protocol.Change{
			{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 4},
			{Path: "keep.txt", Kind: protocol.ChangeDeleted, Size: 5},
			{Path: "new", Kind: protocol.ChangeAdded},
			{Path: "new/made.txt", Kind: protocol.ChangeAdded, Size: 4},
		}
		if diff := cmp.Diff(want, res.Changes); diff != "" {
			t.Errorf("changes mismatch (-want +got):\n%s", diff)
		}
		if txt := text(out); !strings.Contains(txt, "changed 4 paths (snapshot "+res.SnapshotID+"; restore_snapshot undoes it)") {
			t.Errorf("the text for the model lacks the changes line:\n%s", txt)
		}
		// A snapshot of the changed tree, then a patch of one file against it.
		var after protocol.SnapshotInfo
		out = s.ok("snapshot_workspace", map[string]any{"label": "after gen"}, &after)
		if after.SnapshotID == "" || after.Label != "after gen" || after.Files != 3 || !strings.Contains(text(out), after.SnapshotID) {
			t.Errorf("snapshot_workspace = %+v, %q", after, text(out))
		}
		var r protocol.RestoreResult
		s.ok("restore_snapshot", map[string]any{"snapshotId": res.SnapshotID}, &r)
		mcpCheckFiles(t, s.root, "after restore_snapshot", original)
		var d protocol.DiffResult
		out = s.ok("diff_snapshot", map[string]any{"from": after.SnapshotID, "path": "edit.txt"}, &d)
		if diff := cmp.Diff([]protocol.Change{{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 7}}, d.Changes); diff != "" {
			t.Errorf("diff_snapshot of edit.txt mismatch (-want +got):\n%s", diff)
		}
		if !strings.Contains(d.Patch, "-one") || !strings.Contains(d.Patch, "+before") || !strings.Contains(text(out), "+before") {
			t.Errorf("diff_snapshot's patch = %q, text %q", d.Patch, text(out))
		}
		if !strings.HasPrefix(text(out), "1 path changed between ") {
			t.Errorf("diff_snapshot's text for one change = %q, want it to begin \"1 path changed\"", text(out))
		}
		// Only new/ back from the later snapshot: the rest stays.
		s.ok("restore_snapshot", map[string]any{"snapshotId": after.SnapshotID, "paths": []string{"new"}}, &r)
		mcpCheckFiles(t, s.root, "after restoring new/ only", map[string]*string{"new/made.txt": ptr("two\n"), "edit.txt": ptr("before\n"), "keep.txt": ptr("same\n")})
		s.ok("diff_snapshot", map[string]any{"from": after.SnapshotID, "to": res.SnapshotID}, &d)
		if len(d.Changes) != 4 {
			t.Errorf("diff_snapshot between the two = %+v, want 4 changes", d.Changes)
		}
	})
}

// TestMCPSnapshotErrors: an unknown snapshot is a tool error with
// SnapshotNotFound, a missing id names the field, and a restore while a
// command runs is SnapshotBusy unless forced.
func TestMCPSnapshotErrors(t *testing.T) {
	s := startMCPSnapshots(t)
	const unknown = "20990101-000000-000000000000"
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"restore_snapshot", map[string]any{"snapshotId": unknown}},
		{"diff_snapshot", map[string]any{"from": unknown}},
	} {
		e := s.toolErr(c.tool, c.args)
		if e.Error.Code != protocol.CodeSnapshotNotFound || e.Error.Data.SnapshotID != unknown {
			t.Errorf("%s of an unknown snapshot = %+v, want -32033 naming it", c.tool, e.Error)
		}
	}
	for tool, field := range map[string]string{"restore_snapshot": "snapshotId", "diff_snapshot": "from"} {
		e := s.toolErr(tool, map[string]any{})
		if e.Error.Code != protocol.CodeInvalidParams || e.Error.Data.Field != field {
			t.Errorf("%s without %s = %+v, want -32602 naming it", tool, field, e.Error)
		}
	}
	mcpWrite(t, s.root, map[string]string{"a.txt": "a\n"})
	var snap protocol.SnapshotInfo
	s.ok("snapshot_workspace", map[string]any{}, &snap)
	e := s.toolErr("restore_snapshot", map[string]any{"snapshotId": snap.SnapshotID, "paths": []string{"../outside"}})
	if e.Error.Code != protocol.CodeInvalidParams {
		t.Errorf("restore_snapshot of a path outside = %+v, want -32602", e.Error)
	}
	var h protocol.LongRunningResult
	s.ok("start_command", map[string]any{"argv": []string{"sleep", "60"}}, &h)
	e = s.toolErr("restore_snapshot", map[string]any{"snapshotId": snap.SnapshotID})
	if e.Error.Code != protocol.CodeSnapshotBusy {
		t.Errorf("restore_snapshot while a command runs = %+v, want -32032", e.Error)
	}
	var r protocol.RestoreResult
	s.ok("restore_snapshot", map[string]any{"snapshotId": snap.SnapshotID, "force": true}, &r)
	s.ok("cancel_command", map[string]any{"handleId": h.HandleID, "graceMs": 100}, nil)
}
