package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The tests of MCP tasks (issue 19) drive the binary with a raw client on
// the Go SDK's transport, in both forms: 2026-07-28 (the extension
// io.modelcontextprotocol/tasks, declared per request) and 2025-11-25
// (experimental tasks, negotiated by initialize). The wire contract is
// /work/wt/TASKS_CONTRACT.md.

// TestMCPTasksDiscover checks that server/discover offers the tasks
// extension and not the 2025-11-25 tasks capability.
func TestMCPTasksDiscover(t *testing.T) {
	_, disc := startTasks2026(t)
	var got struct {
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]any `json:"extensions"`
			Tasks      any            `json:"tasks"`
		} `json:"capabilities"`
	}
	b, _ := json.Marshal(disc)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("server/discover result %s: %v", b, err)
	}
	if !slices.Contains(got.SupportedVersions, versionTasks2026) {
		t.Errorf("supportedVersions %v lack %s", got.SupportedVersions, versionTasks2026)
	}
	ext, ok := got.Capabilities.Extensions[tasksExt]
	if !ok {
		t.Fatalf("capabilities.extensions %v lack %s; discover: %s", got.Capabilities.Extensions, tasksExt, b)
	}
	if diff := cmp.Diff(map[string]any{}, ext); diff != "" {
		t.Errorf("capabilities.extensions[%s] mismatch (-want +got):\n%s", tasksExt, diff)
	}
	if got.Capabilities.Tasks != nil {
		t.Errorf("server/discover has the 2025-11-25 capability tasks = %v, want none", got.Capabilities.Tasks)
	}
}

// TestMCPTasksStartCommand starts a command as a 2026-07-28 task and
// follows it with tasks/get: working while it runs, then completed with
// the tool's result.
func TestMCPTasksStartCommand(t *testing.T) {
	s, _ := startTasks2026(t)
	g := newGate(t, s.root, "gate")
	var created task2026
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "read x < gate; echo done"}}, nil).result(&created)
	if created.ResultType != "task" || !isHandleTaskID(created.TaskID) || created.Status != "working" {
		t.Fatalf("start_command answered resultType %q taskId %q status %q, want a working task h-N", created.ResultType, created.TaskID, created.Status)
	}
	if created.TTLMs == nil || *created.TTLMs <= 0 {
		t.Errorf("CreateTaskResult ttlMs %v, want a granted ttl", created.TTLMs)
	}
	checkPollInterval(t, "CreateTaskResult", created.PollIntervalMs)
	checkTimes(t, "CreateTaskResult", created.CreatedAt, created.LastUpdatedAt)
	if created.StatusMessage == "" {
		t.Errorf("CreateTaskResult has no statusMessage")
	}
	if created.Result != nil || created.Error != nil {
		t.Errorf("CreateTaskResult carries a result %v or an error %v", created.Result, created.Error)
	}

	var running task2026
	s.call("tasks/get", map[string]any{"taskId": created.TaskID}, &running)
	if running.ResultType != "complete" || running.TaskID != created.TaskID || running.Status != "working" || running.CreatedAt != created.CreatedAt {
		t.Errorf("tasks/get while running: resultType %q taskId %q status %q createdAt %q, want complete %s working %s",
			running.ResultType, running.TaskID, running.Status, running.CreatedAt, created.TaskID, created.CreatedAt)
	}
	checkPollInterval(t, "tasks/get while running", running.PollIntervalMs)
	if running.Result != nil || running.Error != nil {
		t.Errorf("tasks/get while running carries a result %v or an error %v", running.Result, running.Error)
	}

	listen := s.listen(created.TaskID)
	g.release()
	s.awaitTaskNote(listen, created.TaskID)
	s.cancelRequest(listen)

	var done task2026
	s.call("tasks/get", map[string]any{"taskId": created.TaskID}, &done)
	if done.ResultType != "complete" || done.Status != "completed" || done.PollIntervalMs != nil || done.Error != nil {
		t.Errorf("tasks/get once ended: resultType %q status %q pollIntervalMs %v error %v, want complete, completed, no poll interval, no error",
			done.ResultType, done.Status, done.PollIntervalMs, done.Error)
	}
	checkTimes(t, "tasks/get once ended", done.CreatedAt, done.LastUpdatedAt)
	checkCompleted(t, "tasks/get once ended", done.Result, "done\n")
}

// TestMCPTasksListen subscribes to tasks with subscriptions/listen: the
// acknowledgement names the known ones, then each task gets exactly one
// notifications/tasks with its terminal state, at once for a task that
// already ended.
func TestMCPTasksListen(t *testing.T) {
	s, _ := startTasks2026(t)
	ga, gb := newGate(t, s.root, "a"), newGate(t, s.root, "b")
	var a, b task2026
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "read x < a; echo a"}}, nil).result(&a)
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "read x < b; echo b"}}, nil).result(&b)
	if a.ResultType != "task" || b.ResultType != "task" {
		t.Fatalf("start_command answered resultType %q and %q, want task", a.ResultType, b.ResultType)
	}

	listen := s.send("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{a.TaskID, b.TaskID, "h-999999"}}})
	ack := s.awaitAck(listen)
	if diff := cmp.Diff([]string{a.TaskID, b.TaskID}, ack.Notifications.TaskIDs); diff != "" {
		t.Errorf("acknowledged taskIds (the known ones of those asked) mismatch (-want +got):\n%s", diff)
	}

	ga.release()
	na := s.awaitTaskNote(listen, a.TaskID)
	checkTaskNote(t, na, a.TaskID, "a\n")
	gb.release()
	nb := s.awaitTaskNote(listen, b.TaskID)
	checkTaskNote(t, nb, b.TaskID, "b\n")
	// b ended after a: a second notification for a would have come first.
	for _, id := range []string{a.TaskID, b.TaskID} {
		if n := len(s.taskNotes(listen, id)); n != 1 {
			t.Errorf("%d notifications/tasks for %s, want exactly 1", n, id)
		}
	}
	if !s.ackedFirst(listen) {
		t.Errorf("a notifications/tasks of the subscription came before its acknowledgement")
	}
	select {
	case a := <-listen.done:
		t.Errorf("subscriptions/listen answered %s %v while still subscribed, want it open", a.resp.Result, a.resp.Error)
	default:
	}

	// A task that already ended: its notification comes at once after the
	// acknowledgement.
	again := s.send("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{a.TaskID}}})
	ack2 := s.awaitAck(again)
	if diff := cmp.Diff([]string{a.TaskID}, ack2.Notifications.TaskIDs); diff != "" {
		t.Errorf("second acknowledgement taskIds mismatch (-want +got):\n%s", diff)
	}
	checkTaskNote(t, s.awaitTaskNote(again, a.TaskID), a.TaskID, "a\n")
	s.cancelRequest(listen)
	s.cancelRequest(again)
	// The session goes on, and the first subscription got nothing more.
	var got task2026
	s.call("tasks/get", map[string]any{"taskId": b.TaskID}, &got)
	if n := len(s.taskNotes(listen, a.TaskID)); n != 1 {
		t.Errorf("%d notifications/tasks for %s on the first subscription, want exactly 1", n, a.TaskID)
	}
}

// TestMCPTasksCancel cancels a 2026-07-28 task mid-command: tasks/cancel
// answers once the whole tree is gone, and the task is cancelled; a second
// cancel is acknowledged and changes nothing.
func TestMCPTasksCancel(t *testing.T) {
	s, _ := startTasks2026(t)
	mk := newMarker()
	started := filepath.Join(s.root, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "echo $$ > pids; sleep " + mk.Sleep + " & echo $! >> pids; setsid sleep " + mk.Sleep + " & echo $! >> pids; echo started > started; wait"
	var created task2026
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", script}, "env": mk.env()}, nil).result(&created)
	if created.ResultType != "task" {
		t.Fatalf("start_command answered resultType %q, want task", created.ResultType)
	}
	awaitFIFO(t, started)
	pids := outsidePIDs(t, mk, readLines(t, filepath.Join(s.root, "pids")))
	if len(pids) != 3 {
		t.Fatalf("the command wrote pids %v, want its shell and two sleeps", pids)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %s of the command is not running before the cancel", pid)
		}
	}

	var ack struct {
		ResultType string `json:"resultType"`
	}
	s.call("tasks/cancel", map[string]any{"taskId": created.TaskID}, &ack)
	if ack.ResultType != "complete" {
		t.Errorf("tasks/cancel answered resultType %q, want complete", ack.ResultType)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %s still runs once tasks/cancel answered", pid)
		}
	}
	assertNoneLeft(t, mk, "", "once tasks/cancel answered")

	var got task2026
	s.call("tasks/get", map[string]any{"taskId": created.TaskID}, &got)
	if got.Status != "cancelled" || got.Result != nil || got.Error != nil || got.PollIntervalMs != nil {
		t.Errorf("tasks/get after the cancel: status %q result %v error %v pollIntervalMs %v, want cancelled and nothing else",
			got.Status, got.Result, got.Error, got.PollIntervalMs)
	}

	// Already terminal: acknowledged, state unchanged.
	s.call("tasks/cancel", map[string]any{"taskId": created.TaskID}, &ack)
	if ack.ResultType != "complete" {
		t.Errorf("tasks/cancel of a cancelled task answered resultType %q, want complete", ack.ResultType)
	}
	var after task2026
	s.call("tasks/get", map[string]any{"taskId": created.TaskID}, &after)
	if after.Status != "cancelled" || after.LastUpdatedAt != got.LastUpdatedAt {
		t.Errorf("a second tasks/cancel changed the task: status %q lastUpdatedAt %q, want cancelled %q", after.Status, after.LastUpdatedAt, got.LastUpdatedAt)
	}
	e := s.callErr("tasks/cancel", map[string]any{"taskId": "h-999999"}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, "h-999999") {
		t.Errorf("tasks/cancel of an unknown task: message %q does not name it", e.Message)
	}
}

// TestMCPTasksRunCommand checks when run_command becomes a 2026-07-28
// task: when its yieldMs passes with the command running; not when the
// command ended first, without yieldMs, nor on a tool error.
func TestMCPTasksRunCommand(t *testing.T) {
	s, _ := startTasks2026(t)
	g := newGate(t, s.root, "gate")
	var yielded task2026
	s.toolCall("run_command", map[string]any{"argv": []string{"sh", "-c", "read x < gate; echo late"}, "yieldMs": 100}, nil).result(&yielded)
	if yielded.ResultType != "task" || !isHandleTaskID(yielded.TaskID) || yielded.Status != "working" {
		t.Fatalf("run_command past its yieldMs answered resultType %q taskId %q status %q, want a working task h-N", yielded.ResultType, yielded.TaskID, yielded.Status)
	}
	checkPollInterval(t, "run_command's CreateTaskResult", yielded.PollIntervalMs)

	for _, c := range []struct {
		what string
		args map[string]any
		task any
		out  string
	}{
		{"ended before its yieldMs", map[string]any{"argv": []string{"echo", "quick"}, "yieldMs": 30000}, nil, "quick\n"},
		{"without yieldMs", map[string]any{"argv": []string{"echo", "plain"}}, nil, "plain\n"},
		{"with params.task (ignored in this form)", map[string]any{"argv": []string{"echo", "ignored"}}, map[string]any{"ttl": 5}, "ignored\n"},
	} {
		var res callResult
		raw := s.toolCall("run_command", c.args, c.task).result(&res)
		if res.ResultType != "complete" || strings.Contains(string(raw), `"taskId"`) {
			t.Errorf("run_command %s: %s, want the ordinary result (resultType complete)", c.what, raw)
			continue
		}
		checkCompleted(t, "run_command "+c.what, &res, c.out)
	}
	var failed callResult
	raw := s.toolCall("run_command", map[string]any{"argv": []string{"/no/such/program"}, "yieldMs": 100}, nil).result(&failed)
	if failed.ResultType != "complete" || !failed.IsError || strings.Contains(string(raw), `"taskId"`) {
		t.Errorf("run_command of a missing program: %s, want the ordinary isError result, no task", raw)
	}

	listen := s.listen(yielded.TaskID)
	g.release()
	n := s.awaitTaskNote(listen, yielded.TaskID)
	checkTaskNote(t, n, yielded.TaskID, "late\n")
	s.cancelRequest(listen)
}

// TestMCPTasksNotOptedIn sends 2026-07-28 requests that do not declare the
// tasks extension: no call becomes a task, and the task methods answer
// -32021 naming the extension.
func TestMCPTasksNotOptedIn(t *testing.T) {
	s, _ := startTasks2026(t)
	plain := v2Meta(false)
	g := newGate(t, s.root, "gate")
	var yielded callResult
	raw := s.sendMeta("tools/call", map[string]any{"name": "run_command", "arguments": map[string]any{
		"argv": []string{"sh", "-c", "read x < gate"}, "yieldMs": 100}}, plain).result(&yielded)
	if strings.Contains(string(raw), `"taskId"`) || strings.Contains(string(raw), `"resultType":"task"`) ||
		yielded.StructuredContent == nil || yielded.StructuredContent.Status != "running" || !isHandleTaskID(yielded.StructuredContent.HandleID) {
		t.Fatalf("run_command past its yieldMs without the extension: %s, want the ordinary result with status running and a handle", raw)
	}
	var started callResult
	raw = s.sendMeta("tools/call", map[string]any{"name": "start_command", "arguments": map[string]any{"argv": []string{"true"}}}, plain).result(&started)
	if strings.Contains(string(raw), `"taskId"`) || started.StructuredContent == nil || !isHandleTaskID(started.StructuredContent.HandleID) {
		t.Errorf("start_command without the extension: %s, want the ordinary result with a handle", raw)
	}

	handle := yielded.StructuredContent.HandleID
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/get", map[string]any{"taskId": handle}},
		{"tasks/update", map[string]any{"taskId": handle, "inputResponses": map[string]any{}}},
		{"tasks/cancel", map[string]any{"taskId": handle}},
		{"subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{handle}}}},
	} {
		e := s.sendMeta(c.method, c.params, plain).rpcError(codeMissingCapability)
		var data struct {
			RequiredCapabilities struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"requiredCapabilities"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Errorf("%s without the extension: error data %s: %v", c.method, e.Data, err)
			continue
		}
		if _, ok := data.RequiredCapabilities.Extensions[tasksExt]; !ok {
			t.Errorf("%s without the extension: data %s does not name requiredCapabilities.extensions[%s]", c.method, e.Data, tasksExt)
		}
	}
	// The command the refused tasks/cancel named still runs: it ends when
	// the gate opens, and its wait says so.
	g.release()
	var waited callResult
	s.sendMeta("tools/call", map[string]any{"name": "wait_command", "arguments": map[string]any{"handleId": handle, "timeoutMs": 30000}}, plain).result(&waited)
	if waited.StructuredContent == nil || waited.StructuredContent.Status != "completed" {
		t.Errorf("wait_command on %s after the refused tasks/cancel: %+v, want completed", handle, waited.StructuredContent)
	}
}

// TestMCPTasksMethods checks the 2026-07-28 task methods that toolhost
// does not serve or serves trivially.
func TestMCPTasksMethods(t *testing.T) {
	s, _ := startTasks2026(t)
	var created task2026
	s.toolCall("start_command", map[string]any{"argv": []string{"true"}}, nil).result(&created)
	if created.ResultType != "task" {
		t.Fatalf("start_command answered resultType %q, want task", created.ResultType)
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		s.callErr(m, map[string]any{"taskId": created.TaskID}, jsonrpc.CodeMethodNotFound)
	}
	var upd map[string]any
	s.call("tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}, &upd)
	if upd["resultType"] != "complete" {
		t.Errorf("tasks/update answered %v, want resultType complete", upd)
	}
	for _, m := range []string{"tasks/update", "tasks/get"} {
		e := s.callErr(m, map[string]any{"taskId": "h-999999", "inputResponses": map[string]any{}}, jsonrpc.CodeInvalidParams)
		if !strings.Contains(e.Message, "h-999999") {
			t.Errorf("%s of an unknown task: message %q does not name it", m, e.Message)
		}
	}
}

// TestMCPTasksLegacyNegotiation checks what initialize at 2025-11-25
// offers (the tasks capability, tools that support tasks), and that an
// older version gets none of it.
func TestMCPTasksLegacyNegotiation(t *testing.T) {
	s, init := startTasks2025(t)
	caps, _ := init["capabilities"].(map[string]any)
	want := map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	if diff := cmp.Diff(want, caps["tasks"]); diff != "" {
		t.Errorf("initialize capabilities.tasks mismatch (-want +got):\n%s", diff)
	}
	var tools struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution any    `json:"execution"`
		} `json:"tools"`
	}
	s.call("tools/list", map[string]any{}, &tools)
	got := map[string]any{}
	for _, tool := range tools.Tools {
		got[tool.Name] = tool.Execution
	}
	optional := map[string]any{"taskSupport": "optional"}
	wantExec := map[string]any{"start_command": optional, "run_command": optional, "cancel_command": nil, "list_commands": nil,
		"read_file": nil, "read_output": nil, "wait_command": nil, "write_file": nil, "write_input": nil,
		"snapshot_workspace": nil, "restore_snapshot": nil, "diff_snapshot": nil}
	if diff := cmp.Diff(wantExec, got); diff != "" {
		t.Errorf("tools/list execution mismatch (-want +got):\n%s", diff)
	}

	old := startTaskSession(t)
	var oldInit map[string]any
	old.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolhost-tasks-test", "version": "1"}}, &oldInit)
	old.notify("notifications/initialized", map[string]any{})
	if c, _ := oldInit["capabilities"].(map[string]any); c["tasks"] != nil {
		t.Errorf("initialize at 2025-06-18 offers tasks %v, want none", c["tasks"])
	}
	old.callErr("tasks/get", map[string]any{"taskId": "h-1"}, jsonrpc.CodeMethodNotFound)
	var res callResult
	raw := old.toolCall("run_command", map[string]any{"argv": []string{"echo", "no task"}}, map[string]any{}).result(&res)
	if strings.Contains(string(raw), `"taskId"`) {
		t.Errorf("run_command with params.task at 2025-06-18: %s, want the ordinary result", raw)
	}
	checkCompleted(t, "run_command with params.task at 2025-06-18", &res, "no task\n")
}

// TestMCPTasksLegacyRun runs a command as a 2025-11-25 task with a
// progress token: CreateTaskResult at once, tasks/get, tasks/result
// waiting for the end, and exactly one notifications/tasks/status, after
// every progress.
func TestMCPTasksLegacyRun(t *testing.T) {
	s, _ := startTasks2025(t)
	g := newGate(t, s.root, "gate")
	script := `echo '[STEP 0/2] one' >&2; read x < gate; echo '[STEP 1/2] two' >&2; echo out`
	var created createTask2025
	create := s.send("tools/call", map[string]any{"name": "run_command", "arguments": map[string]any{"argv": []string{"sh", "-c", script}, "yieldMs": 10},
		"task": map[string]any{}, "_meta": map[string]any{"progressToken": "tok"}})
	create.result(&created)
	task := created.Task
	if task == nil || !isHandleTaskID(task.TaskID) || task.Status != "working" {
		t.Fatalf("CreateTaskResult %+v, want a working task h-N", created)
	}
	if task.TTL == nil || *task.TTL != 3600000 {
		t.Errorf("CreateTaskResult ttl %v, want the default 3600000", task.TTL)
	}
	checkPollInterval(t, "CreateTaskResult", task.PollInterval)
	checkTimes(t, "CreateTaskResult", task.CreatedAt, task.LastUpdatedAt)
	if txt, _ := created.Meta[metaImmediate].(string); txt == "" {
		t.Errorf("CreateTaskResult _meta %v lacks the text of %s", created.Meta, metaImmediate)
	}

	var running task2025
	s.call("tasks/get", map[string]any{"taskId": task.TaskID}, &running)
	if running.Status != "working" || running.TaskID != task.TaskID {
		t.Errorf("tasks/get while running: %+v, want %s working", running, task.TaskID)
	}
	// Two waits on the result: both answer.
	results := []*taskCall{s.send("tasks/result", map[string]any{"taskId": task.TaskID}), s.send("tasks/result", map[string]any{"taskId": task.TaskID})}
	g.release()
	for i, r := range results {
		var res callResult
		r.result(&res)
		checkCompleted(t, fmt.Sprintf("tasks/result %d", i+1), &res, "out\n")
		if diff := cmp.Diff(map[string]any{"taskId": task.TaskID}, res.Meta[metaRelatedTask]); diff != "" {
			t.Errorf("tasks/result %d _meta[%s] mismatch (-want +got):\n%s", i+1, metaRelatedTask, diff)
		}
	}
	s.awaitNotes("the task's status notification", func(ns []taskNote) bool { return len(statusNotes(t, ns, task.TaskID)) > 0 })
	// One more round trip: a second status notification would have come
	// before its answer.
	var done task2025
	s.call("tasks/get", map[string]any{"taskId": task.TaskID}, &done)
	if done.Status != "completed" || done.PollInterval != nil {
		t.Errorf("tasks/get once ended: %+v, want completed without pollInterval", done)
	}
	all := s.snapshot()
	st := statusNotes(t, all, task.TaskID)
	if len(st) != 1 || st[0].Status != "completed" || st[0].PollInterval != nil {
		t.Errorf("notifications/tasks/status for %s: %+v, want exactly one, completed", task.TaskID, st)
	}
	// Progress: the steps came, none after the status notification.
	var steps []string
	ended := false
	for _, n := range all {
		switch n.Method {
		case "notifications/progress":
			var p struct {
				ProgressToken any    `json:"progressToken"`
				Message       string `json:"message"`
			}
			n.decode(t, &p)
			if p.ProgressToken != "tok" {
				continue
			}
			steps = append(steps, p.Message)
			if ended {
				t.Errorf("a notifications/progress for the task came after its status notification: %s", n.Params)
			}
		case "notifications/tasks/status":
			ended = true
			if n.Seq < create.seq {
				t.Errorf("the status notification came before the CreateTaskResult")
			}
		}
	}
	steps = slices.DeleteFunc(steps, func(m string) bool { return strings.Contains(m, "alive") }) // heartbeats: their number depends on timing
	wantSteps := []string{"step 1/2: one", "step 1/2: one (done)", "step 2/2: two", "step 2/2: two (done)"}
	if diff := cmp.Diff(wantSteps, steps); diff != "" {
		t.Errorf("progress messages mismatch (-want +got):\n%s", diff)
	}
}

// TestMCPTasksExactlyOnce starts 200 start_command tasks at once
// (2025-11-25), half of them cancelled at random moments (some racing
// their natural end), each with a tasks/result waiting: every tasks/result
// answers, every task has exactly one terminal notification, a cancel
// that lost the race says so with the status that won, tasks/list agrees,
// and no process is left.
func TestMCPTasksExactlyOnce(t *testing.T) {
	const n = 200
	s, _ := startTasks2025(t, "--max-processes", "400")
	mk := newMarker()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 19))

	type plan struct {
		cancel bool          // tasks/cancel is sent
		long   bool          // the command sleeps until cancelled: the cancel must win
		runMs  int           // how long a short command sleeps
		after  time.Duration // when the cancel is sent, after the CreateTaskResult
	}
	type outcome struct {
		created   createTask2025
		result    callResult     // tasks/result's answer
		cancelAck *task2025      // tasks/cancel's answer when the cancel won
		cancelErr *jsonrpc.Error // its error when it lost
	}
	plans := make([]plan, n)
	for i, k := range rng.Perm(n) {
		plans[i] = plan{cancel: k < n/2, long: k < n/4, runMs: rng.IntN(500), after: time.Duration(rng.IntN(600)) * time.Millisecond}
	}

	t0 := time.Now()
	creates := make([]*taskCall, n)
	for i, p := range plans {
		sleep := fmt.Sprintf("0.%03d", p.runMs)
		if p.long {
			sleep = mk.Sleep
		}
		creates[i] = s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "sleep " + sleep + "; echo ended"}, "env": mk.env()}, map[string]any{})
	}
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // owned by the test: wg.Wait below
			defer wg.Done()
			o := &outs[i] // this goroutine's own slot, read after wg.Wait
			raw, rerr, err := creates[i].await()
			if err != nil || rerr != nil {
				t.Errorf("task %d: tools/call: %v %v", i, err, rerr)
				return
			}
			if err := json.Unmarshal(raw, &o.created); err != nil || o.created.Task == nil {
				t.Errorf("task %d: CreateTaskResult %s: %v", i, raw, err)
				return
			}
			id := o.created.Task.TaskID
			res := s.send("tasks/result", map[string]any{"taskId": id})
			if plans[i].cancel {
				// The moment of the cancel is random; nothing is awaited here.
				<-time.After(plans[i].after)
				craw, cerr, err := s.send("tasks/cancel", map[string]any{"taskId": id}).await()
				switch {
				case err != nil:
					t.Errorf("task %s: tasks/cancel: %v", id, err)
				case cerr != nil:
					o.cancelErr = cerr
				default:
					o.cancelAck = &task2025{}
					if err := json.Unmarshal(craw, o.cancelAck); err != nil {
						t.Errorf("task %s: tasks/cancel result %s: %v", id, craw, err)
					}
				}
			}
			rraw, rerr, err := res.await()
			if err != nil || rerr != nil {
				t.Errorf("task %s: tasks/result: %v %v", id, err, rerr)
				return
			}
			if err := json.Unmarshal(rraw, &o.result); err != nil {
				t.Errorf("task %s: tasks/result %s: %v", id, rraw, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ids := map[string]int{}
	for i, o := range outs {
		id := o.created.Task.TaskID
		if _, dup := ids[id]; dup || !isHandleTaskID(id) || o.created.Task.Status != "working" {
			t.Errorf("task %d: CreateTaskResult %+v: want a working task with an id of its own", i, *o.created.Task)
		}
		ids[id] = i
	}
	all := s.awaitNotes("a status notification for every task", func(ns []taskNote) bool {
		seen := map[string]bool{}
		for _, nt := range ns {
			if nt.Method == "notifications/tasks/status" {
				seen[taskIDOf(t, nt)] = true
			}
		}
		return len(seen) >= n
	})
	elapsed := time.Since(t0)

	// tasks/list: one more round trip after the last status notification.
	var listed []task2025
	pages := 0
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tasks      []task2025 `json:"tasks"`
			NextCursor string     `json:"nextCursor"`
		}
		s.call("tasks/list", params, &page)
		pages++
		if len(page.Tasks) > 100 {
			t.Errorf("tasks/list page %d has %d tasks, want at most 100", pages, len(page.Tasks))
		}
		listed = append(listed, page.Tasks...)
		if cursor = page.NextCursor; cursor == "" || pages > n {
			break
		}
	}
	all = s.snapshot()

	final := map[string]task2025{}
	count := map[string]int{}
	noteSeq := map[string]int{}
	for _, nt := range all {
		if nt.Method != "notifications/tasks/status" {
			continue
		}
		var tk task2025
		nt.decode(t, &tk)
		count[tk.TaskID]++
		final[tk.TaskID] = tk
		noteSeq[tk.TaskID] = nt.Seq
	}
	won, lost := 0, 0
	for i, o := range outs {
		id, p := o.created.Task.TaskID, plans[i]
		st := final[id].Status
		if count[id] != 1 || (st != "completed" && st != "cancelled") {
			t.Errorf("task %s: %d status notifications, the last %q; want exactly one, terminal", id, count[id], st)
			continue
		}
		if noteSeq[id] < creates[i].seq {
			t.Errorf("task %s: its status notification came before its CreateTaskResult", id)
		}
		if got := o.result.StructuredContent; got == nil || got.Status != st {
			t.Errorf("task %s: tasks/result %+v, want the status of its notification, %s", id, got, st)
		}
		if diff := cmp.Diff(map[string]any{"taskId": id}, o.result.Meta[metaRelatedTask]); diff != "" {
			t.Errorf("task %s: tasks/result _meta[%s] mismatch (-want +got):\n%s", id, metaRelatedTask, diff)
		}
		switch {
		case !p.cancel:
			if st != "completed" || o.result.StructuredContent.ExitCode == nil || *o.result.StructuredContent.ExitCode != 0 {
				t.Errorf("task %s, never cancelled: status %s, tasks/result %+v; want completed, exit 0", id, st, o.result.StructuredContent)
			}
		case o.cancelAck != nil:
			won++
			if o.cancelAck.TaskID != id || o.cancelAck.Status != "cancelled" || st != "cancelled" {
				t.Errorf("task %s: tasks/cancel answered %+v, the task ended %s; want both cancelled", id, *o.cancelAck, st)
			}
		case o.cancelErr != nil:
			lost++
			if p.long {
				t.Errorf("task %s sleeps until cancelled, yet tasks/cancel answered %d %q", id, o.cancelErr.Code, o.cancelErr.Message)
			}
			want := fmt.Sprintf("cannot cancel task %s: already in terminal status '%s'", id, st)
			var data struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			}
			_ = json.Unmarshal(o.cancelErr.Data, &data)
			if o.cancelErr.Code != jsonrpc.CodeInvalidParams || o.cancelErr.Message != want || data.TaskID != id || data.Status != st || st != "completed" {
				t.Errorf("task %s ended %s; the cancel that lost answered %d %q data %s; want -32602 %q with data {taskId, status}",
					id, st, o.cancelErr.Code, o.cancelErr.Message, o.cancelErr.Data, want)
			}
		}
	}
	if len(listed) != n {
		t.Errorf("tasks/list listed %d tasks in %d pages, want %d", len(listed), pages, n)
	}
	var prev time.Time
	for _, tk := range listed {
		if _, ok := ids[tk.TaskID]; !ok {
			t.Errorf("tasks/list lists %s, which no call created", tk.TaskID)
		}
		if want := final[tk.TaskID].Status; tk.Status != want || tk.PollInterval != nil {
			t.Errorf("tasks/list: %s %s (pollInterval %v), want %s without pollInterval", tk.TaskID, tk.Status, tk.PollInterval, want)
		}
		created, err := time.Parse(time.RFC3339Nano, tk.CreatedAt)
		if err != nil || created.Before(prev) {
			t.Errorf("tasks/list: %s created %q, listed after one created %v (%v): want oldest first", tk.TaskID, tk.CreatedAt, prev, err)
		}
		prev = created
	}
	assertNoneLeft(t, mk, "", "once every task has ended")
	t.Logf("%d tasks, %d cancels won, %d lost to the natural end: every task terminal in %v; tasks/list in %d pages",
		n, won, lost, elapsed.Round(time.Millisecond), pages)
}

// TestMCPTasksExpiry lets a finished 2025-11-25 task outlive its ttl: it
// answers tasks/get right after its creation, then, once its ttl has
// passed, -32602 saying it expired.
func TestMCPTasksExpiry(t *testing.T) {
	s, _ := startTasks2025(t)
	var created createTask2025
	s.toolCall("run_command", map[string]any{"argv": []string{"true"}}, map[string]any{"ttl": 200}).result(&created)
	task := created.Task
	if task == nil || task.TTL == nil || *task.TTL != 200 {
		t.Fatalf("CreateTaskResult %+v, want the ttl asked for, 200", created)
	}
	var got task2025
	s.call("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
	if got.TaskID != task.TaskID {
		t.Errorf("tasks/get right after the creation: %+v", got)
	}
	s.awaitNotes("the status notification", func(ns []taskNote) bool { return len(statusNotes(t, ns, task.TaskID)) > 0 })
	s.awaitExpired(t, task)
}

// TestMCPTasksExpiryAfterCommand gives a 2025-11-25 task a ttl its command
// outlives: the task stays while the command runs, its tasks/result
// answers, and it expires only after its terminal notification.
func TestMCPTasksExpiryAfterCommand(t *testing.T) {
	s, _ := startTasks2025(t)
	g := newGate(t, s.root, "gate")
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "read x < gate; echo late"}}, map[string]any{"ttl": 200}).result(&created)
	task := created.Task
	if task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", created)
	}
	createdAt, err := time.Parse(time.RFC3339Nano, task.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	res := s.send("tasks/result", map[string]any{"taskId": task.TaskID})
	// The ttl passes while the command runs: the task stays.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Since(createdAt) < 3*time.Duration(*task.TTL)*time.Millisecond {
		var got task2025
		s.call("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
		if got.Status != "working" {
			t.Fatalf("tasks/get while the command runs: %+v, want working", got)
		}
		<-tick.C
	}
	g.release()
	var out callResult
	res.result(&out)
	checkCompleted(t, "tasks/result of a task past its ttl", &out, "late\n")
	s.awaitNotes("the status notification", func(ns []taskNote) bool { return len(statusNotes(t, ns, task.TaskID)) > 0 })
	s.awaitExpired(t, task)
}

// awaitExpired polls tasks/get until the task is gone, then checks how
// the task methods answer for it. The task must be terminal.
func (s *taskSession) awaitExpired(t *testing.T, task *task2025) {
	t.Helper()
	createdAt, err := time.Parse(time.RFC3339Nano, task.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		raw, rerr, err := s.send("tasks/get", map[string]any{"taskId": task.TaskID}).await()
		if err != nil {
			t.Fatal(err)
		}
		if rerr != nil {
			if age := time.Since(createdAt); age < time.Duration(*task.TTL)*time.Millisecond {
				t.Errorf("tasks/get failed %v after the creation, before the ttl of %d ms: %d %q", age, *task.TTL, rerr.Code, rerr.Message)
			}
			if rerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rerr.Message, "expired") {
				t.Errorf("tasks/get of an expired task: %d %q, want -32602 saying it expired", rerr.Code, rerr.Message)
			}
			break
		}
		var got task2025
		if err := json.Unmarshal(raw, &got); err != nil || (got.Status != "completed" && got.Status != "cancelled" && got.Status != "failed") {
			t.Fatalf("tasks/get of a finished task: %s (%v), want it terminal", raw, err)
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("task %s (ttl %d ms) still answers tasks/get after %v", task.TaskID, *task.TTL, waitLimit)
		}
	}
	e := s.callErr("tasks/result", map[string]any{"taskId": task.TaskID}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, "expired") {
		t.Errorf("tasks/result of an expired task: %q, want it to say expired", e.Message)
	}
	var page struct {
		Tasks []task2025 `json:"tasks"`
	}
	s.call("tasks/list", map[string]any{}, &page)
	for _, tk := range page.Tasks {
		if tk.TaskID == task.TaskID {
			t.Errorf("tasks/list still lists the expired task %s", task.TaskID)
		}
	}
}

// TestMCPTasksBadInput sends bad task input at 2025-11-25: each gets the
// spec's error with a message that says what was wrong, and the session
// goes on. A tool that fails before its command starts still makes a
// task, which fails.
func TestMCPTasksBadInput(t *testing.T) {
	s, _ := startTasks2025(t)
	goesOn := func(after string) {
		t.Helper()
		var res callResult
		s.toolCall("run_command", map[string]any{"argv": []string{"echo", "still here"}}, nil).result(&res)
		checkCompleted(t, "run_command after "+after, &res, "still here\n")
	}

	e := s.callErr("tasks/get", map[string]any{"taskId": "h-424242"}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, "h-424242") {
		t.Errorf("tasks/get of an unknown task: message %q does not name it", e.Message)
	}
	goesOn("tasks/get of an unknown task")
	for _, m := range []string{"tasks/result", "tasks/cancel"} {
		e := s.callErr(m, map[string]any{"taskId": "h-424242"}, jsonrpc.CodeInvalidParams)
		if !strings.Contains(e.Message, "h-424242") {
			t.Errorf("%s of an unknown task: message %q does not name it", m, e.Message)
		}
	}
	s.callErr("tasks/update", map[string]any{"taskId": "h-1", "inputResponses": map[string]any{}}, jsonrpc.CodeMethodNotFound)
	goesOn("tasks/update")

	e = s.toolCall("read_file", map[string]any{"path": "x"}, map[string]any{}).rpcError(jsonrpc.CodeMethodNotFound)
	if !strings.Contains(e.Message, "read_file") {
		t.Errorf("a task on read_file: message %q does not name the tool", e.Message)
	}
	goesOn("a task on read_file")

	for _, c := range []struct {
		what string
		task any
		word string // the message names what is wrong
	}{
		{"a negative ttl", map[string]any{"ttl": -5}, "ttl"},
		{"a ttl that is a string", map[string]any{"ttl": "x"}, "ttl"},
		{"a ttl that is not an integer", map[string]any{"ttl": 1.5}, "ttl"},
		{"a task that is a number", 3, "task"},
	} {
		e := s.toolCall("run_command", map[string]any{"argv": []string{"echo", "never"}}, c.task).rpcError(jsonrpc.CodeInvalidParams)
		if !strings.Contains(e.Message, c.word) {
			t.Errorf("%s: message %q does not name %s", c.what, e.Message, c.word)
		}
		goesOn(c.what)
	}

	// A program that does not exist: a task without a handle, which fails.
	var created createTask2025
	s.toolCall("run_command", map[string]any{"argv": []string{"/no/such/program"}}, map[string]any{}).result(&created)
	task := created.Task
	if task == nil || !strings.HasPrefix(task.TaskID, "t-") {
		t.Fatalf("CreateTaskResult for a missing program %+v, want a task t-N", created)
	}
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if !res.IsError || res.StructuredContent == nil || res.StructuredContent.Error == nil {
		t.Errorf("tasks/result for a missing program: %+v, want the isError result", res)
	}
	var got task2025
	s.call("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
	if got.Status != "failed" {
		t.Errorf("tasks/get for a missing program: %+v, want failed", got)
	}
	notes := s.awaitNotes("the status notification", func(ns []taskNote) bool { return len(statusNotes(t, ns, task.TaskID)) > 0 })
	if st := statusNotes(t, notes, task.TaskID); len(st) != 1 || st[0].Status != "failed" {
		t.Errorf("notifications/tasks/status for %s: %+v, want one, failed", task.TaskID, st)
	}
	goesOn("a task that failed")
}

// statusNotes returns the notifications/tasks/status of the task.
func statusNotes(t testing.TB, notes []taskNote, id string) []task2025 {
	t.Helper()
	var out []task2025
	for _, n := range notes {
		if n.Method != "notifications/tasks/status" {
			continue
		}
		var tk task2025
		n.decode(t, &tk)
		if tk.TaskID == id {
			out = append(out, tk)
		}
	}
	return out
}

// checkCompleted fails the test unless res is a command's CallToolResult
// that completed with exit code 0 and printed stdout.
func checkCompleted(t testing.TB, what string, res *callResult, stdout string) {
	t.Helper()
	if res == nil || res.StructuredContent == nil {
		t.Errorf("%s: no CallToolResult with structured content", what)
		return
	}
	sc := res.StructuredContent
	if res.IsError || sc.Status != "completed" || sc.ExitCode == nil || *sc.ExitCode != 0 || sc.Stdout != stdout {
		t.Errorf("%s: isError %v status %q exit %v stdout %q, want completed, exit 0, %q", what, res.IsError, sc.Status, sc.ExitCode, sc.Stdout, stdout)
	}
}

// checkTaskNote checks a notifications/tasks of a command that completed
// printing stdout: the tasks/get shape without resultType or
// pollIntervalMs.
func checkTaskNote(t testing.TB, n taskNote, id, stdout string) {
	t.Helper()
	var tk task2026
	n.decode(t, &tk)
	var keys map[string]json.RawMessage
	n.decode(t, &keys)
	if _, ok := keys["resultType"]; ok {
		t.Errorf("notifications/tasks for %s carries resultType: %s", id, n.Params)
	}
	if tk.TaskID != id || tk.Status != "completed" || tk.PollIntervalMs != nil || tk.TTLMs == nil || tk.Error != nil {
		t.Errorf("notifications/tasks %s, want %s completed with ttlMs, without pollIntervalMs or error", n.Params, id)
	}
	checkTimes(t, "notifications/tasks", tk.CreatedAt, tk.LastUpdatedAt)
	checkCompleted(t, "notifications/tasks result", tk.Result, stdout)
}

// ackParams are the params of notifications/subscriptions/acknowledged.
type ackParams struct {
	Meta          map[string]any `json:"_meta"`
	Notifications struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// listen opens subscriptions/listen for the tasks and waits for its
// acknowledgement.
func (s *taskSession) listen(ids ...string) *taskCall {
	s.t.Helper()
	c := s.send("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}})
	s.awaitAck(c)
	return c
}

// awaitAck waits for the acknowledgement of a subscriptions/listen and
// returns its params.
func (s *taskSession) awaitAck(listen *taskCall) ackParams {
	s.t.Helper()
	var ack ackParams
	s.awaitNotes(fmt.Sprintf("the acknowledgement of subscriptions/listen %v", listen.id.Raw()), func(ns []taskNote) bool {
		for _, n := range ns {
			if n.Method != "notifications/subscriptions/acknowledged" {
				continue
			}
			var p ackParams
			n.decode(s.t, &p)
			if p.Meta[metaSubscription] == listen.wireID() {
				ack = p
				return true
			}
		}
		return false
	})
	return ack
}

// taskNotes returns the notifications/tasks of the subscription for the
// task received so far.
func (s *taskSession) taskNotes(listen *taskCall, id string) []taskNote {
	s.t.Helper()
	var out []taskNote
	for _, n := range s.notesOf("notifications/tasks") {
		var p struct {
			TaskID string         `json:"taskId"`
			Meta   map[string]any `json:"_meta"`
		}
		n.decode(s.t, &p)
		if p.TaskID == id && p.Meta[metaSubscription] == listen.wireID() {
			out = append(out, n)
		}
	}
	return out
}

// awaitTaskNote waits for the notifications/tasks of the subscription for
// the task and returns the first.
func (s *taskSession) awaitTaskNote(listen *taskCall, id string) taskNote {
	s.t.Helper()
	s.awaitNotes(fmt.Sprintf("notifications/tasks for %s on subscription %v", id, listen.id.Raw()), func([]taskNote) bool {
		return len(s.taskNotes(listen, id)) > 0
	})
	return s.taskNotes(listen, id)[0]
}

// ackedFirst says whether the subscription's acknowledgement came
// before every notifications/tasks of it.
func (s *taskSession) ackedFirst(listen *taskCall) bool {
	s.mu.Lock()
	notes := append([]taskNote(nil), s.notes...)
	s.mu.Unlock()
	acked := false
	for _, n := range notes {
		var p struct {
			Meta map[string]any `json:"_meta"`
		}
		_ = json.Unmarshal(n.Params, &p)
		if p.Meta[metaSubscription] != listen.wireID() {
			continue
		}
		switch n.Method {
		case "notifications/subscriptions/acknowledged":
			acked = true
		case "notifications/tasks":
			if !acked {
				return false
			}
		}
	}
	return true
}

// awaitFIFO waits until a command has written a line to the FIFO at path
// and closed it.
func awaitFIFO(t *testing.T, path string) {
	t.Helper()
	got := make(chan error, 1)
	go func() { // owned by awaitFIFO, which receives from got on every path
		_, err := os.ReadFile(path)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		// Be the writer the command never was, so that the read ends.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatalf("the command never wrote to %s", path)
	}
}

// TestMCPTasksTimeout maps a command's timeout in each form: a completed
// 2026-07-28 task (a timeout is a tool result) and a failed 2025-11-25
// one, both saying "timed out".
func TestMCPTasksTimeout(t *testing.T) {
	mk := newMarker()
	args := map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env(), "timeoutMs": 200, "yieldMs": 50}

	s26, _ := startTasks2026(t)
	var created task2026
	s26.toolCall("run_command", args, nil).result(&created)
	if created.ResultType != "task" {
		t.Fatalf("run_command past its yieldMs answered resultType %q, want task", created.ResultType)
	}
	listen := s26.listen(created.TaskID)
	var tk task2026
	s26.awaitTaskNote(listen, created.TaskID).decode(t, &tk)
	s26.cancelRequest(listen)
	if tk.Status != "completed" || !strings.Contains(tk.StatusMessage, "timed out") || tk.Error != nil ||
		tk.Result == nil || tk.Result.StructuredContent == nil || tk.Result.StructuredContent.Status != "timedOut" {
		t.Errorf("2026-07-28 task of a command that timed out: status %q statusMessage %q error %v result %+v; want completed, \"timed out\", the timedOut result",
			tk.Status, tk.StatusMessage, tk.Error, tk.Result)
	}

	s25, _ := startTasks2025(t)
	var legacy createTask2025
	s25.toolCall("run_command", args, map[string]any{}).result(&legacy)
	if legacy.Task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", legacy)
	}
	var res callResult
	s25.call("tasks/result", map[string]any{"taskId": legacy.Task.TaskID}, &res)
	if res.StructuredContent == nil || res.StructuredContent.Status != "timedOut" {
		t.Errorf("tasks/result of a command that timed out: %+v, want its timedOut result", res.StructuredContent)
	}
	notes := s25.awaitNotes("the status notification", func(ns []taskNote) bool { return len(statusNotes(t, ns, legacy.Task.TaskID)) > 0 })
	if st := statusNotes(t, notes, legacy.Task.TaskID); st[0].Status != "failed" || !strings.Contains(st[0].StatusMessage, "timed out") {
		t.Errorf("2025-11-25 status notification of a command that timed out: %+v, want failed, \"timed out\"", st[0])
	}
	assertNoneLeft(t, mk, "", "once both timed out")
}

// TestMCPTasksEndWithStdin closes stdin while a task's command runs and a
// tasks/result waits on it: the server exits 0, and the command's whole
// tree is gone by then, as for any command of a session that ends.
func TestMCPTasksEndWithStdin(t *testing.T) {
	s, _ := startTasks2025(t)
	mk := newMarker()
	started := filepath.Join(s.root, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "echo $$ > pids; sleep " + mk.Sleep + " & echo $! >> pids; echo started > started; wait"
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", script}, "env": mk.env()}, map[string]any{}).result(&created)
	awaitFIFO(t, started)
	pids := outsidePIDs(t, mk, readLines(t, filepath.Join(s.root, "pids")))
	waiting := s.send("tasks/result", map[string]any{"taskId": created.Task.TaskID})
	if err := s.conn.Close(); err != nil { // stdin closed, then the exit awaited
		t.Fatalf("the session's end: %v", err)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the server exited %d, want 0", code)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %s of the task's command outlived the session", pid)
		}
	}
	assertNoneLeft(t, mk, "", "once the server exited")
	if _, _, err := waiting.await(); err == nil {
		t.Logf("the waiting tasks/result was answered before the end")
	}
}

// TestMCPTasksArtifactsEvicted lets go of an ended task once the
// artifacts its result links to are evicted over --artifacts-cap-bytes,
// and says so.
func TestMCPTasksArtifactsEvicted(t *testing.T) {
	s, _ := startTasks2025(t, "--artifacts-cap-bytes", "4096")
	s.call("logging/setLevel", map[string]any{"level": "warning"}, nil)
	fill := []string{"sh", "-c", "head -c 8000 /dev/zero | tr '\\0' x"}
	var created createTask2025
	s.toolCall("start_command", map[string]any{"argv": fill}, map[string]any{}).result(&created)
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	s.awaitNotes("the task's status", func(n []taskNote) bool { return hasNote(n, "notifications/tasks/status") })
	var again callResult
	s.toolCall("run_command", map[string]any{"argv": fill}, nil).result(&again)
	// toolhost's warning of the eviction is the event.
	s.awaitEvictionWarning()
	e := s.callErr("tasks/get", map[string]any{"taskId": created.Task.TaskID}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, "evicted") || !strings.Contains(e.Message, created.Task.TaskID) {
		t.Errorf("tasks/get of a task whose artifacts were evicted: %q, want it named and the eviction said", e.Message)
	}
}

// TestMCPTasksProgressSharedWithWait follows a 2025-11-25 task's steps on
// its own progress token after a wait_command with another token watched
// the same handle and ended: the task's token keeps getting the steps.
func TestMCPTasksProgressSharedWithWait(t *testing.T) {
	s, _ := startTasks2025(t)
	g1, g2 := newGate(t, s.root, "gate1"), newGate(t, s.root, "gate2")
	script := `echo '[STEP 0/3] one' >&2; read x < gate1; echo '[STEP 1/3] two' >&2; read x < gate2; echo '[STEP 2/3] three' >&2`
	var created createTask2025
	s.send("tools/call", map[string]any{"name": "start_command", "arguments": map[string]any{"argv": []string{"sh", "-c", script}},
		"task": map[string]any{}, "_meta": map[string]any{"progressToken": "task"}}).result(&created)
	progressOf := func(notes []taskNote, token string) []string {
		var msgs []string
		for _, n := range notes {
			var p struct {
				ProgressToken any    `json:"progressToken"`
				Message       string `json:"message"`
			}
			if n.Method == "notifications/progress" && json.Unmarshal(n.Params, &p) == nil && p.ProgressToken == token && !strings.Contains(p.Message, "alive") {
				msgs = append(msgs, p.Message)
			}
		}
		return msgs
	}
	s.awaitNotes("the first step on the task's token", func(n []taskNote) bool { return slices.Contains(progressOf(n, "task"), "step 1/3: one") })
	// A wait with a token of its own watches the handle, and its answer
	// (running, at its timeout) says it has stopped watching.
	var waited callResult
	s.send("tools/call", map[string]any{"name": "wait_command", "arguments": map[string]any{"handleId": created.Task.TaskID, "timeoutMs": 50},
		"_meta": map[string]any{"progressToken": "wait"}}).result(&waited)
	if waited.StructuredContent == nil || waited.StructuredContent.Status != "running" {
		t.Fatalf("wait_command of the running task: %+v, want running at its timeout", waited.StructuredContent)
	}
	g1.release()
	g2.release()
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	s.awaitNotes("the task's status", func(n []taskNote) bool { return hasNote(n, "notifications/tasks/status") })
	want := []string{"step 1/3: one", "step 1/3: one (done)", "step 2/3: two", "step 2/3: two (done)", "step 3/3: three", "step 3/3: three (done)"}
	if diff := cmp.Diff(want, progressOf(s.snapshot(), "task")); diff != "" {
		t.Errorf("the task's progress around a wait_command's mismatch (-want +got):\n%s", diff)
	}
	if got := progressOf(s.snapshot(), "wait"); len(got) != 0 {
		t.Errorf("the ended wait's token got steps after its answer: %q", got)
	}
}
