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
	Label       string `json:"label,omitempty" jsonschema:"a short name for the snapshot, e.g. \"before the refactor\""`
	Destination string `json:"destination,omitempty" jsonschema:"snapshot this destination's workspace (another machine or container the server was started with), not this one; see the enum for the names"`
}

// RestoreSnapshotInput are the arguments of restore_snapshot.
type RestoreSnapshotInput struct {
	SnapshotID string   `json:"snapshotId" jsonschema:"the snapshot to bring back: from snapshot_workspace, or the snapshotId of a command run with snapshot: true (restoring it undoes the command)"`
	Paths      []string `json:"paths,omitempty" jsonschema:"restore only these paths, relative to the workspace root (a directory names everything under it); default: the whole workspace"`
	Force      bool     `json:"force,omitempty" jsonschema:"restore even while commands of the session run (without it such a restore fails with error -32032): they may then write over what is restored"`
	// A snapshot id of a destination ("NAME/…") already routes there;
	// destination is for the symmetry with the other tools.
	Destination string `json:"destination,omitempty" jsonschema:"restore on this destination's workspace; a snapshotId that starts with a destination's name and a slash goes there anyway"`
}

// DiffSnapshotInput are the arguments of diff_snapshot.
type DiffSnapshotInput struct {
	From        string `json:"from" jsonschema:"the snapshot compared: from snapshot_workspace, or the snapshotId of a command run with snapshot: true"`
	To          string `json:"to,omitempty" jsonschema:"the snapshot compared with (default: the workspace as it is now)"`
	Path        string `json:"path,omitempty" jsonschema:"only this path, relative to the workspace root (a directory: everything under it); when it names one text file that changed, the result has its unified diff (patch)"`
	Destination string `json:"destination,omitempty" jsonschema:"diff on this destination's workspace; a snapshot id that starts with a destination's name and a slash goes there anyway"`
}

// addSnapshotTools registers snapshot_workspace, restore_snapshot and
// diff_snapshot, when the server keeps snapshots.
func (s *Server) addSnapshotTools() {
	if s.cfg.SnapshotDir == nil {
		return
	}
	addTool[SnapshotWorkspaceInput, protocol.SnapshotInfo](s, "snapshot_workspace", "Snapshot the workspace",
		`Record the workspace as it is now (files, directories, symlinks and their permission bits; .git/ is left out) and return its snapshotId, to undo later changes with restore_snapshot or see them with diff_snapshot. Cheap: contents are stored once, and files unchanged since the last snapshot are not read again. To undo one command, rather pass snapshot: true to run_command or start_command.`,
		&sdk.ToolAnnotations{ReadOnlyHint: true}, s.snapshotWorkspace)
	addTool[RestoreSnapshotInput, protocol.RestoreResult](s, "restore_snapshot", "Restore a snapshot",
		`Make the workspace (or only paths) exactly what a snapshot holds: changed files rewritten, files made since removed, deleted ones back, permission bits and symlinks as they were. .git/ and read-only roots are never touched. Every stored content is checked first: a damaged store fails before anything changes. Refused while commands of the session run unless force. Returns how many entries were written and removed.`,
		&sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true}, s.restoreSnapshot)
	addTool[DiffSnapshotInput, protocol.DiffResult](s, "diff_snapshot", "Diff a snapshot",
		`Say what changed since a snapshot (or between two): each path added, modified, deleted, changed in mode or in type, with its size, at most 1000 (then truncated). With path naming one text file, also its unified diff.`,
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
