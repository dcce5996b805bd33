package integration

import (
	"strings"
	"testing"
)

// TestMCPTaskTextNamesTools checks the text a 2025-11-25 task's answer
// gives the model (issue 34: it told the model to call tasks/result, a
// method of the client, not a tool). It names the task, says the client
// fetches the result, and names tools the model has; and they do what it
// says with the task's id as handleId: read_output reads the output,
// wait_command returns the result.
func TestMCPTaskTextNamesTools(t *testing.T) {
	t.Parallel()
	s, _ := startTasks2025(t)
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "echo hello"}}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatalf("start_command as a task answered no task: %+v", created)
	}
	id := created.Task.TaskID
	txt, _ := created.Meta[metaImmediate].(string)
	for _, part := range []string{id, "the client fetches its result", "wait_command", "read_output"} {
		if !strings.Contains(txt, part) {
			t.Errorf("the task's text %q does not say %q", txt, part)
		}
	}
	for _, method := range []string{"tasks/result", "tasks/get"} {
		if strings.Contains(txt, method) {
			t.Errorf("the task's text %q tells the model to call %s, which is no tool", txt, method)
		}
	}

	var waited callResult
	s.call("tools/call", map[string]any{"name": "wait_command", "arguments": map[string]any{"handleId": id}}, &waited)
	if r := waited.StructuredContent; waited.IsError || r == nil || r.Status != "completed" || r.Stdout != "hello\n" {
		t.Errorf("wait_command with the task's id: %+v", waited)
	}
	var read callResult
	s.call("tools/call", map[string]any{"name": "read_output", "arguments": map[string]any{"handleId": id}}, &read)
	if read.IsError || len(read.Content) == 0 || read.Content[0]["text"] != "hello\n" {
		t.Errorf("read_output with the task's id: %+v", read)
	}
}
