package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// mcpToolSchemas returns the input schemas of tools/list by tool name.
func mcpToolSchemas(s *taskSession) map[string]map[string]any {
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	s.call("tools/list", map[string]any{}, &list)
	out := map[string]map[string]any{}
	for _, tool := range list.Tools {
		out[tool.Name] = tool.InputSchema
	}
	return out
}

// destinationEnum returns the enum of a schema's destination property, or
// nil when it has none.
func destinationEnum(schema map[string]any) ([]any, bool) {
	props, _ := schema["properties"].(map[string]any)
	d, ok := props["destination"].(map[string]any)
	if !ok {
		return nil, false
	}
	enum, _ := d["enum"].([]any)
	return enum, true
}

// TestMCPDestinationArgument offers the destination argument only to a
// server started with destinations, naming them.
func TestMCPDestinationArgument(t *testing.T) {
	plain, _ := startTasks2025(t)
	for name, schema := range mcpToolSchemas(plain) {
		if _, ok := destinationEnum(schema); ok {
			t.Errorf("without --destination, %s offers a destination argument", name)
		}
	}
	far := localDest(t, "far")
	hub, _ := startTasks2025(t, "--destination", far.flag())
	schemas := mcpToolSchemas(hub)
	for _, name := range []string{"run_command", "start_command", "read_file", "write_file", "snapshot_workspace", "restore_snapshot", "diff_snapshot"} {
		enum, ok := destinationEnum(schemas[name])
		if diff := cmp.Diff([]any{"far"}, enum); !ok || diff != "" {
			t.Errorf("%s destination enum mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// TestMCPTasksOnDestination runs a task on a destination through MCP: its
// id names the destination, its result's resource_links read the far
// artifacts back, and files are read there.
func TestMCPTasksOnDestination(t *testing.T) {
	far := localDest(t, "far")
	s, _ := startTasks2025(t, "--destination", far.flag())
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "echo far away; pwd > where"}, "destination": "far"}, map[string]any{}).result(&created)
	if created.Task == nil || !strings.HasPrefix(created.Task.TaskID, "far/h-") {
		t.Fatalf("the task of a destination command: %+v, want an id far/h-N", created.Task)
	}
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	if res.StructuredContent == nil || res.StructuredContent.Status != "completed" || res.StructuredContent.Stdout != "far away\n" {
		t.Fatalf("tasks/result of the far task: %+v", res.StructuredContent)
	}
	var uri string
	for _, c := range res.Content {
		if c["type"] == "resource_link" && strings.HasSuffix(fmt.Sprint(c["uri"]), "/output") {
			uri = fmt.Sprint(c["uri"])
		}
	}
	if want := "toolhost://artifacts/" + url.PathEscape("far/cmd-1") + "/output"; uri != want {
		t.Fatalf("output link %q, want %q", uri, want)
	}
	var read struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	s.call("resources/read", map[string]any{"uri": uri}, &read)
	if len(read.Contents) != 1 || read.Contents[0].Text != "far away\n" {
		t.Errorf("the far artifact read back: %+v, want the command's output", read.Contents)
	}
	var file callResult
	s.toolCall("read_file", map[string]any{"path": "where", "destination": "far"}, nil).result(&file)
	if file.IsError || len(file.Content) == 0 || fmt.Sprint(file.Content[0]["text"]) != far.Root+"\n" {
		t.Errorf("read_file on the destination: %+v, want the far root %s", file.Content, far.Root)
	}
	if fileHere := filepath.Join(s.root, "where"); func() bool { _, err := os.Stat(fileHere); return err == nil }() {
		t.Errorf("the far command wrote here: %s", fileHere)
	}
}

// TestMCPTasksLostDestination kills a destination while its task runs: the
// task fails, exactly once, with the lost result (2025-11-25) or the
// -32012 error (2026-07-28).
func TestMCPTasksLostDestination(t *testing.T) {
	for _, form := range []string{versionTasks2025, versionTasks2026} {
		t.Run(form, func(t *testing.T) {
			far := localDest(t, "far")
			var s *taskSession
			var id string
			if form == versionTasks2025 {
				s, _ = startTasks2025(t, "--destination", far.flag())
				var created createTask2025
				s.toolCall("start_command", map[string]any{"argv": []string{"sleep", "300"}, "destination": "far"}, map[string]any{}).result(&created)
				id = created.Task.TaskID
			} else {
				s, _ = startTasks2026(t, "--destination", far.flag())
				var created task2026
				s.toolCall("start_command", map[string]any{"argv": []string{"sleep", "300"}, "destination": "far"}, nil).result(&created)
				if created.ResultType != "task" {
					t.Fatalf("start_command on a destination: resultType %q, want task", created.ResultType)
				}
				id = created.TaskID
			}
			pids := childrenNamed(s.cmd.Process.Pid, "toolhost")
			if len(pids) != 1 {
				t.Fatalf("want one toolhost child (the destination) of the server, found %v", pids)
			}
			if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if form == versionTasks2025 {
				var res callResult
				s.call("tasks/result", map[string]any{"taskId": id}, &res)
				if res.StructuredContent == nil || res.StructuredContent.Status != "lost" {
					t.Errorf("tasks/result of a task whose destination died: %+v, want status lost", res.StructuredContent)
				}
				notes := s.awaitNotes("the terminal status", func(n []taskNote) bool { return len(n) > 0 && hasNote(n, "notifications/tasks/status") })
				var st task2025
				count := 0
				for _, n := range notes {
					if n.Method == "notifications/tasks/status" {
						n.decode(t, &st)
						count++
					}
				}
				if count != 1 || st.Status != "failed" {
					t.Errorf("%d status notifications, the last %+v; want one, failed", count, st)
				}
				return
			}
			// The listen's notification is the event: the task has ended.
			s.send("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
			notes := s.awaitNotes("the task's notification", func(n []taskNote) bool { return hasNote(n, "notifications/tasks") })
			var pushed task2026
			for _, n := range notes {
				if n.Method == "notifications/tasks" {
					n.decode(t, &pushed)
				}
			}
			var got task2026
			s.call("tasks/get", map[string]any{"taskId": id}, &got)
			if pushed.Status != got.Status {
				t.Errorf("notifications/tasks says %s, tasks/get %s", pushed.Status, got.Status)
			}
			if got.Status != "failed" || got.Error == nil || got.Error.Code != -32012 || got.Result != nil {
				t.Errorf("tasks/get of a task whose destination died: %+v (error %+v), want failed with -32012", got, got.Error)
			}
			var data json.RawMessage = got.Error.Data
			if !strings.Contains(string(data), `"lost"`) {
				t.Errorf("the error's data %s does not carry the lost result", data)
			}
		})
	}
}

// hasNote reports whether notes hold one of method.
func hasNote(notes []taskNote, method string) bool {
	for _, n := range notes {
		if n.Method == method {
			return true
		}
	}
	return false
}

// TestMCPTasksOnDestinationEndedFirst asks for a far task's result only
// after its command has ended and its status notification has come: the
// result is there. (The task table once looked for the far artifacts'
// path on this machine, found nothing, and dropped every far task that
// ended before it was asked for as "evicted".)
func TestMCPTasksOnDestinationEndedFirst(t *testing.T) {
	far := localDest(t, "far")
	s, _ := startTasks2025(t, "--destination", far.flag())
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": []string{"echo", "far away"}, "destination": "far"}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatal("start_command with a task member made no task")
	}
	s.awaitNotes("the far task's status", func(n []taskNote) bool { return hasNote(n, "notifications/tasks/status") })
	var got task2025
	s.call("tasks/get", map[string]any{"taskId": created.Task.TaskID}, &got)
	if got.Status != "completed" {
		t.Errorf("tasks/get of the ended far task: %+v, want completed", got)
	}
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	if res.StructuredContent == nil || res.StructuredContent.Status != "completed" || res.StructuredContent.Stdout != "far away\n" {
		t.Fatalf("tasks/result of the far task that ended first: %+v", res.StructuredContent)
	}
}

// TestMCPTasksOnDestinationArtifactsEvicted lets go of an ended far task
// once the far toolhost has evicted its artifacts: the far side, which
// keeps them, is asked.
func TestMCPTasksOnDestinationArtifactsEvicted(t *testing.T) {
	far := localDest(t, "far", "--artifacts-cap-bytes", "4096")
	s, _ := startTasks2025(t, "--destination", far.flag())
	s.call("logging/setLevel", map[string]any{"level": "warning"}, nil)
	fill := []string{"sh", "-c", "head -c 8000 /dev/zero | tr '\\0' x"}
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": fill, "destination": "far"}, map[string]any{}).result(&created)
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	s.awaitNotes("the task's status", func(n []taskNote) bool { return hasNote(n, "notifications/tasks/status") })
	var again callResult
	s.toolCall("run_command", map[string]any{"argv": fill, "destination": "far"}, nil).result(&again)
	// The far toolhost's warning of the eviction, relayed, is the event.
	s.awaitEvictionWarning()
	e := s.callErr("tasks/get", map[string]any{"taskId": created.Task.TaskID}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, "evicted") || !strings.Contains(e.Message, created.Task.TaskID) {
		t.Errorf("tasks/get of a far task whose artifacts were evicted: %q, want it named and the eviction said", e.Message)
	}
}
