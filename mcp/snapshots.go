package mcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// SnapshotWorkspaceInput are the arguments of snapshot_workspace.
type SnapshotWorkspaceInput struct {
	Label       string `json:"label,omitempty" jsonschema:"a short name, e.g. \"before the refactor\""`
	Destination string `json:"destination,omitempty" jsonschema:"snapshot this destination's workspace instead"`
}

// RestoreSnapshotInput are the arguments of restore_snapshot.
type RestoreSnapshotInput struct {
	SnapshotID string   `json:"snapshotId" jsonschema:"from snapshot_workspace, or a command run with snapshot: true (restoring it undoes the command)"`
	Paths      []string `json:"paths,omitempty" jsonschema:"only these, relative to the workspace root (a directory: all under it); default: everything"`
	Force      bool     `json:"force,omitempty" jsonschema:"restore even while commands of the session run (else error -32032); they may write over it"`
	// A snapshot id of a destination ("NAME/…") already routes there;
	// destination is for the symmetry with the other tools.
	Destination string `json:"destination,omitempty" jsonschema:"on this destination; a snapshotId starting with a destination's name and a slash goes there anyway"`
}

// DiffSnapshotInput are the arguments of diff_snapshot.
type DiffSnapshotInput struct {
	From        string `json:"from" jsonschema:"the snapshot: from snapshot_workspace, or a command run with snapshot: true"`
	To          string `json:"to,omitempty" jsonschema:"the other snapshot (default: the workspace now)"`
	Path        string `json:"path,omitempty" jsonschema:"only this path (a directory: all under it); naming one changed text file, the result also has its unified diff"`
	Destination string `json:"destination,omitempty" jsonschema:"as in restore_snapshot"`
}

// addSnapshotTools registers snapshot_workspace, restore_snapshot and
// diff_snapshot, when the server keeps snapshots.
func (s *Server) addSnapshotTools() {
	if s.cfg.SnapshotDir == nil {
		return
	}
	addTool[SnapshotWorkspaceInput, protocol.SnapshotInfo](s, "snapshot_workspace", "Snapshot the workspace",
		`Record the workspace now (files, directories, symlinks, permission bits; not .git/) and return its snapshotId, for restore_snapshot and diff_snapshot. Cheap: contents are stored once, unchanged files not read again. To undo one command, give it snapshot: true instead.`,
		&sdk.ToolAnnotations{ReadOnlyHint: true}, s.snapshotWorkspace)
	addTool[RestoreSnapshotInput, protocol.RestoreResult](s, "restore_snapshot", "Restore a snapshot",
		`Make the workspace (or paths) exactly what a snapshot holds: files rewritten, new ones removed, deleted ones back, modes and symlinks as they were; .git/ and read-only roots untouched. A damaged store fails before anything changes. Returns the entries written and removed.`,
		&sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}, s.restoreSnapshot)
	addTool[DiffSnapshotInput, protocol.DiffResult](s, "diff_snapshot", "Diff a snapshot",
		`Say what changed since a snapshot, or between two: each path added, modified, deleted, or changed in mode or type, with its size; at most 1000 (then truncated).`,
		&sdk.ToolAnnotations{ReadOnlyHint: true}, s.diffSnapshot)
}

// snapshotWorkspace runs snapshot_workspace: toolhost's snapshot.
func (s *Server) snapshotWorkspace(ctx context.Context, req *sdk.CallToolRequest, in *SnapshotWorkspaceInput) (*sdk.CallToolResult, error) {
	var res protocol.SnapshotInfo
	if err := s.th.Call(ctx, protocol.MethodSnapshot, &protocol.SnapshotParams{Label: in.Label, Destination: in.Destination}, &res); err != nil {
		return s.toolError(err)
	}
	return structured(&res, "snapshot %s: %d files, %d bytes (%d new in the store), %d ms; restore_snapshot brings it back, diff_snapshot says what changed since",
		res.SnapshotID, res.Files, res.Bytes, res.NewBytes, res.Ms), nil
}

// restoreSnapshot runs restore_snapshot: toolhost's restore.
func (s *Server) restoreSnapshot(ctx context.Context, req *sdk.CallToolRequest, in *RestoreSnapshotInput) (*sdk.CallToolResult, error) {
	var res protocol.RestoreResult
	if err := s.th.Call(ctx, protocol.MethodRestore, &protocol.RestoreParams{SnapshotID: in.SnapshotID, Paths: in.Paths, Force: in.Force, Destination: in.Destination}, &res); err != nil {
		return s.toolError(err)
	}
	what := "the workspace"
	if len(in.Paths) > 0 {
		what = strings.Join(in.Paths, ", ")
	}
	return structured(&res, "restored %s to snapshot %s: %d written, %d removed (%d ms)", what, in.SnapshotID, res.Written, res.Removed, res.Ms), nil
}

// diffSnapshot runs diff_snapshot: toolhost's diff.
func (s *Server) diffSnapshot(ctx context.Context, req *sdk.CallToolRequest, in *DiffSnapshotInput) (*sdk.CallToolResult, error) {
	var res protocol.DiffResult
	if err := s.th.Call(ctx, protocol.MethodDiff, &protocol.DiffParams{From: in.From, To: in.To, Path: in.Path, Destination: in.Destination}, &res); err != nil {
		return s.toolError(err)
	}
	if res.Changes == nil {
		res.Changes = []protocol.Change{}
	}
	to := "now"
	if in.To != "" {
		to = in.To
	}
	var b strings.Builder
	switch n := len(res.Changes); {
	case n == 0:
		fmt.Fprintf(&b, "no changes between %s and %s", in.From, to)
	case res.Truncated:
		fmt.Fprintf(&b, "more than %d paths changed between %s and %s; the first %d:", n, in.From, to, n)
	case n == 1:
		fmt.Fprintf(&b, "1 path changed between %s and %s:", in.From, to)
	default:
		fmt.Fprintf(&b, "%d paths changed between %s and %s:", n, in.From, to)
	}
	for _, c := range res.Changes {
		fmt.Fprintf(&b, "\n%s %s", c.Kind, c.Path)
		if c.Kind != protocol.ChangeDeleted {
			fmt.Fprintf(&b, " (%d bytes)", c.Size)
		}
	}
	if res.Patch != "" {
		b.WriteString("\n\n" + headTail(res.Patch))
	}
	return structured(&res, "%s", b.String()), nil
}

// changesLine says what a command run with snapshot: true changed, and how
// to undo it: the names of the first few changed paths, the rest being in
// the structured content.
func changesLine(res *protocol.ToolResult) string {
	const named = 10
	n := len(res.Changes)
	more := ""
	if res.ChangesTruncated {
		more = "more than "
	}
	noun := "paths"
	if n == 1 && !res.ChangesTruncated {
		noun = "path"
	}
	line := fmt.Sprintf("changed %s%d %s (snapshot %s; restore_snapshot undoes it)", more, n, noun, res.SnapshotID)
	if n == 0 {
		return fmt.Sprintf("changed nothing (snapshot %s)", res.SnapshotID)
	}
	var names []string
	for i, c := range res.Changes {
		if i == named {
			names = append(names, "…")
			break
		}
		names = append(names, string(c.Kind)+" "+c.Path)
	}
	return line + ": " + strings.Join(names, ", ")
}
