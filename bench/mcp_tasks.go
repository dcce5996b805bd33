package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// taskProtocol is the MCP version whose experimental tasks toolhost
// serves to a client that does not opt in per request: tools/call with
// params.task, then tasks/result.
const taskProtocol = "2025-11-25"

// startTaskMCP starts toolhost mcp, driven by the minimal client, and opens
// the session with the initialize handshake of MCP 2025-11-25 (no roots):
// the server must declare capabilities.tasks with tools/call requests.
func (b *bench) startTaskMCP(name string) (*rawMCP, error) {
	s, ini, err := b.startRawMCPAt(name, taskProtocol)
	if err != nil {
		return nil, err
	}
	var ir struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	var caps struct {
		Tasks *struct {
			Requests struct {
				Tools struct {
					Call *struct{} `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	if json.Unmarshal(ini, &ir) != nil || json.Unmarshal(ir.Capabilities, &caps) != nil || ir.ProtocolVersion != taskProtocol ||
		caps.Tasks == nil || caps.Tasks.Requests.Tools.Call == nil {
		s.end()
		return nil, fmt.Errorf("initialize at %s declared no tasks for tools/call: protocolVersion %q, capabilities %s", taskProtocol, ir.ProtocolVersion, ir.Capabilities)
	}
	return s, nil
}

// timedRequest sends a request and returns its result as raw JSON and the
// moment the line of its answer was read, before any decoding.
func (s *rawMCP) timedRequest(method string, params any) (json.RawMessage, time.Time, error) {
	s.nextID++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		return nil, time.Time{}, err
	}
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		return nil, time.Time{}, err
	}
	for {
		line, err := s.out.ReadBytes('\n')
		at := time.Now()
		if err != nil {
			return nil, at, err
		}
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, at, err
		}
		if m.ID == nil || *m.ID != s.nextID {
			continue // a notification (notifications/tasks/status among them)
		}
		if m.Error != nil {
			return nil, at, fmt.Errorf("%s: %s", method, m.Error)
		}
		return m.Result, at, nil
	}
}

// startTask calls start_command on argv as a task (params.task {}) and
// returns the task's id, checked against the CreateTaskResult's shape.
func (s *rawMCP) startTask(argv []string) (string, error) {
	res, err := s.request("tools/call", map[string]any{"name": "start_command", "arguments": map[string]any{"argv": argv}, "task": map[string]any{}})
	if err != nil {
		return "", err
	}
	var ct struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	// The answer is the task as it is when answered: true may have ended
	// by then, the command's result on its way to tasks/result.
	if err := json.Unmarshal(res, &ct); err != nil || ct.Task.TaskID == "" || (ct.Task.Status != "working" && ct.Task.Status != "completed") {
		return "", fmt.Errorf("start_command as a task answered %s, want a CreateTaskResult with a working (or, for a quick command, completed) task", res)
	}
	return ct.Task.TaskID, nil
}

// taskResult is the part of a tasks/result answer the figures check.
type taskResult struct {
	IsError           bool `json:"isError"`
	StructuredContent struct {
		Success bool      `json:"success"`
		Stdout  string    `json:"stdout"`
		EndedAt time.Time `json:"endedAt"`
	} `json:"structuredContent"`
	Meta struct {
		RelatedTask struct {
			TaskID string `json:"taskId"`
		} `json:"io.modelcontextprotocol/related-task"`
	} `json:"_meta"`
}

// awaitTask sends tasks/result for a task and returns its decoded answer and
// the moment its line was read; the answer must be the task's, and a
// successful command's.
func (s *rawMCP) awaitTask(taskID string) (taskResult, time.Time, error) {
	var r taskResult
	res, at, err := s.timedRequest("tasks/result", map[string]any{"taskId": taskID})
	if err != nil {
		return r, at, err
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return r, at, err
	}
	if r.IsError || !r.StructuredContent.Success || r.Meta.RelatedTask.TaskID != taskID {
		return r, at, fmt.Errorf("tasks/result of %s answered %s, want the successful result of that task", taskID, res)
	}
	return r, at, nil
}

// mcpTaskVsCall measures, on one MCP 2025-11-25 session with the minimal
// client, start_command of true as a task followed by tasks/result (from
// the tools/call sent to the tasks/result answer read) against run_command
// of true without a task, interleaved.
func (b *bench) mcpTaskVsCall() error {
	s, err := b.startTaskMCP("mcp-tasks")
	if err != nil {
		return err
	}
	defer s.end()
	// The first call opens the workspace.
	if _, err := s.call("run_command", map[string]any{"argv": []string{"true"}}); err != nil {
		return err
	}
	warm, n := b.iters(20, 5), b.iters(400, 30)
	var task, call durations
	for i := range warm + n {
		t0 := time.Now()
		id, err := s.startTask([]string{"true"})
		if err != nil {
			return err
		}
		_, at, err := s.awaitTask(id)
		if err != nil {
			return err
		}
		dt := at.Sub(t0)
		t0 = time.Now()
		res, at, err := s.timedRequest("tools/call", map[string]any{"name": "run_command", "arguments": map[string]any{"argv": []string{"true"}}})
		if err != nil {
			return err
		}
		dc := at.Sub(t0)
		if !strings.Contains(string(res), `"success":true`) {
			return fmt.Errorf("run_command true did not succeed: %s", res)
		}
		if i >= warm {
			task, call = append(task, dt), append(call, dc)
		}
	}
	t50, c50 := task.pct(50), call.pct(50)
	b.add(row{Figure: "MCP task: `start_command` of `true` with `params.task` → `tasks/result` answered, p50", Value: fmtDur(t50),
		Baseline: "`run_command` of `true`, same session: " + fmtDur(c50), Ratio: ratio(float64(t50), float64(c50)),
		Target: "≤ 1.3×", Met: met(float64(t50) <= 1.3*float64(c50))})
	b.note("MCP task round trip: one `toolhost mcp` session at MCP %s driven by the minimal client (a line written, lines read until the answer; notifications such as `notifications/tasks/status` are read and skipped), %d rounds (after %d to warm up), each a task then a plain call: `tools/call` of `start_command` `[\"true\"]` with `params.task {}`, its CreateTaskResult read, then `tasks/result` of its taskId, timed from before the `tools/call` is written to when the `tasks/result` answer's line is read (two requests, against one for the baseline); and `tools/call` of `run_command` `[\"true\"]` without a task, timed the same way; the answers checked (the task's result successful and naming its taskId in `_meta`); medians.", taskProtocol, n, warm)
	return nil
}

// mcpTaskWake measures how soon a blocked tasks/result answers after the
// task's command exits. The command prints a CLOCK_REALTIME stamp in
// nanoseconds as the last thing it does (exec date +%s%N after a sleep
// that gives the tasks/result time to reach its wait); the figure is the
// moment the answer's line is read minus that stamp. Its baseline is the
// same command run by os/exec in this process: Output's return minus the
// stamp.
func (b *bench) mcpTaskWake() error {
	s, err := b.startTaskMCP("mcp-task-wake")
	if err != nil {
		return err
	}
	defer s.end()
	if _, err := s.call("run_command", map[string]any{"argv": []string{"true"}}); err != nil {
		return err
	}
	argv := []string{"sh", "-c", "sleep 0.05; exec date +%s%N"}
	stamp := func(stdout string) (time.Time, error) {
		ns, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("the command printed %q, not a stamp in nanoseconds", stdout)
		}
		return time.Unix(0, ns), nil
	}
	warm, n := b.iters(10, 3), b.iters(200, 20)
	var wake, exitToEnd, endToAnswer, base durations
	late := 0 // rounds whose tasks/result was written after the command's stamp, left out
	for i := 0; len(wake) < n; i++ {
		if late > n {
			return fmt.Errorf("%d of %d rounds wrote tasks/result after the command had ended: no wait to wake", late, i)
		}
		id, err := s.startTask(argv)
		if err != nil {
			return err
		}
		sent := time.Now()
		r, at, err := s.awaitTask(id)
		if err != nil {
			return err
		}
		st, err := stamp(r.StructuredContent.Stdout)
		if err != nil {
			return err
		}

		cmd := exec.Command(argv[0], argv[1:]...)
		out, err := cmd.Output()
		done := time.Now()
		if err != nil {
			return fmt.Errorf("baseline %v: %w", argv, err)
		}
		bst, err := stamp(string(out))
		if err != nil {
			return err
		}

		if i < warm {
			continue
		}
		if !sent.Before(st) {
			late++
			continue
		}
		wake = append(wake, at.Sub(st))
		exitToEnd = append(exitToEnd, r.StructuredContent.EndedAt.Sub(st))
		endToAnswer = append(endToAnswer, at.Sub(r.StructuredContent.EndedAt))
		base = append(base, done.Sub(bst))
	}
	w50, w99, b50, b99 := wake.pct(50), wake.pct(99), base.pct(50), base.pct(99)
	b.add(row{Figure: "MCP task: blocked `tasks/result` woken by the command's exit → answer, p50", Value: fmtDur(w50),
		Baseline: "`os/exec` `Output` in the bench: " + fmtDur(b50), Ratio: ratio(float64(w50), float64(b50)),
		Target: "≤ 2 ms", Met: met(w50 <= 2*time.Millisecond)})
	b.add(row{Figure: "MCP task: blocked `tasks/result` woken by the command's exit → answer, p99", Value: fmtDur(w99),
		Baseline: "`os/exec` `Output` in the bench: " + fmtDur(b99), Ratio: ratio(float64(w99), float64(b99))})
	b.note("MCP task wake-up: one `toolhost mcp` session at MCP %s driven by the minimal client, %d rounds (after %d to warm up; %d more left out because their `tasks/result` was written after the command's stamp): `start_command` of `sh -c 'sleep 0.05; exec date +%%s%%N'` as a task, then at once `tasks/result` of its taskId, which waits; `date` prints the CLOCK_REALTIME time in nanoseconds and exits, and the figure is when the answer's line is read (the same clock) minus that stamp. It includes `date` writing its line and exiting, toolhost seeing the pipes' end and reaping the process, the result made final (output in its artifacts), the in-process hop to the MCP layer (toolhost's result as a JSON-RPC notification over an in-memory pipe), the task's completion and the `tasks/result` answer written and read over the pipe. Split at the result's `endedAt` (toolhost's own stamp of the result made final), p50: stamp → `endedAt` %s, `endedAt` → answer read %s. Baseline, after each round: the same command by `os/exec` `Output` in the bench, its return minus its stamp (the exit, the pipe's end and the reap, with nothing after).",
		taskProtocol, n, warm, late, fmtDur(exitToEnd.pct(50)), fmtDur(endToAnswer.pct(50)))
	return nil
}
