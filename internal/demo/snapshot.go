package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/tools"
)

// demoWorkspace makes a temporary workspace root whose name starts with
// prefix, and a private state directory for its snapshots, and points cfg
// at both; remove removes both.
func demoWorkspace(cfg *tools.Config, prefix string) (root string, remove func(), err error) {
	root, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	state, err := os.MkdirTemp("", "toolhost-demo-state-")
	if err == nil {
		err = os.Chmod(state, 0o700)
	}
	if err != nil {
		os.RemoveAll(root)
		if state != "" {
			os.RemoveAll(state)
		}
		return "", nil, err
	}
	cfg.Root = root
	cfg.SnapshotDir = func() (string, error) { return filepath.Join(state, "snapshots"), nil }
	return root, func() { os.RemoveAll(root); os.RemoveAll(state) }, nil
}

// snapshots runs a command with snapshot: true, which says what it
// changed, and undoes it with one restore, after which diff finds nothing.
func (s *session) snapshots() error {
	s.p.say("\nUndo a command: with snapshot: true its result lists what it changed (added, modified,")
	s.p.say("deleted) and names the snapshot taken before it; one restore of that snapshot undoes it:")
	var res protocol.ToolResult
	if err := s.call(protocol.MethodRunCommand, protocol.RunCommandParams{Snapshot: true,
		Argv: []string{"sh", "-c", "echo five >> notes/hello.txt; rm -f inside.txt; mkdir build; echo built > build/app"}}, &res); err != nil {
		return err
	}
	if res.SnapshotID == "" {
		return fmt.Errorf("runCommand with snapshot: true gave no snapshotId")
	}
	if err := s.call(protocol.MethodRestore, protocol.RestoreParams{SnapshotID: res.SnapshotID}, nil); err != nil {
		return err
	}
	return s.call(protocol.MethodDiff, protocol.DiffParams{From: res.SnapshotID}, nil)
}

// mcpSnapshots does what snapshots does, with the MCP tools.
func mcpSnapshots(ctx context.Context, p *printer, cs *sdk.ClientSession) error {
	p.say("\nUndo a command: run_command with snapshot: true lists what the command changed and names a snapshot;")
	p.say("restore_snapshot of it undoes the command, and diff_snapshot then finds nothing:")
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"snapshot": true,
		"argv": []string{"sh", "-c", "echo five >> notes/hello.txt; mkdir build; echo built > build/app"}}})
	if err != nil {
		return err
	}
	var out struct {
		SnapshotID string `json:"snapshotId"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.SnapshotID == "" {
		return fmt.Errorf("run_command with snapshot: true gave no snapshotId: %s", b)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"restore_snapshot", map[string]any{"snapshotId": out.SnapshotID}},
		{"diff_snapshot", map[string]any{"from": out.SnapshotID}},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.name, Arguments: c.args})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s failed", c.name)
		}
	}
	return nil
}
