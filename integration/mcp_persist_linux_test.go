package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The tests of MCP under --persist (issue 26): a task made on one MCP
// connection is found by tasks/get, tasks/result and tasks/cancel on a
// later one, a new `toolhost mcp --persist` process of the same user,
// root and command line, and its command goes on meanwhile.

// persistTaskID is the form of a task id under --persist: the handle's
// id, a dot and 128 random bits.
var persistTaskID = regexp.MustCompile(`^h-[0-9]+\.[0-9a-f]{32}$`)

// mcpPersist starts an MCP server with --persist on p's root and
// connects a raw session to it; mcp says `toolhost mcp` (else plain
// toolhost, which finds MCP in the first message). Every session of one
// test given the same args shares the holder's MCP session.
func (p *persistEnv) mcpPersist(t *testing.T, mcp bool, args ...string) *taskSession {
	t.Helper()
	all := append(append([]string{"--root", p.root}, p.flags()...), "--log-level", "info", "--kill-grace", "500ms")
	if mcp {
		all = append([]string{"mcp"}, all...)
	}
	cmd := exec.Command(binary, append(all, args...)...)
	cmd.Stderr = &testLogWriter{t: t}
	cmd.Env = append(p.env(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return openTaskSession(t, cmd, p.root)
}

// init2025 negotiates 2025-11-25 on s.
func (s *taskSession) init2025() {
	s.t.Helper()
	var init map[string]any
	s.call("initialize", map[string]any{"protocolVersion": versionTasks2025, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolhost-persist-test", "version": "1"}}, &init)
	if v := init["protocolVersion"]; v != versionTasks2025 {
		s.t.Fatalf("initialize negotiated %v, want %s", v, versionTasks2025)
	}
	s.notify("notifications/initialized", map[string]any{})
}

// init2026 speaks 2026-07-28 with the tasks extension on s.
func (s *taskSession) init2026() {
	s.t.Helper()
	s.meta = v2Meta(true)
	s.call("server/discover", nil, nil)
}

// end ends the connection as the test says: its client closes stdin
// (the front then exits 0), or the front is killed with SIGKILL.
func (s *taskSession) end(kill bool) {
	s.t.Helper()
	if kill {
		s.killed = true
		if err := s.cmd.Process.Kill(); err != nil {
			s.t.Fatal(err)
		}
		_ = s.conn.Close()
		return
	}
	if err := s.conn.Close(); err != nil {
		s.t.Fatalf("closing the connection: %v", err)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Errorf("the front exited %d once its client closed stdin, want 0", code)
	}
}

// TestMCPPersistTask starts a task on connection A,
// ends A (stdin closed, or the front killed), and finds the task on a
// later connection B, still running: tasks/get says working, and once the
// command is let go, tasks/result (2025-11-25) or the subscription and
// tasks/get (2026-07-28) give its result on B.
func TestMCPPersistTask(t *testing.T) {
	t.Parallel()
	// Short names: the runtime directory is the test's, and a unix socket's
	// path has at most 107 bytes.
	for _, c := range []struct {
		name      string
		mcp, kill bool
		v2026     bool
	}{
		{name: "2025-eof", mcp: true},
		{name: "2025-kill", mcp: true, kill: true},
		{name: "2026-kill", mcp: true, kill: true, v2026: true},
		{name: "plain-2026-eof", v2026: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newPersistEnv(t)
			g := newGate(t, p.root, "gate")
			args := map[string]any{"argv": []string{"sh", "-c", "echo started; read x < gate; echo done"}}

			a := p.mcpPersist(t, c.mcp)
			var id string
			if c.v2026 {
				a.init2026()
				var created task2026
				a.toolCall("start_command", args, nil).result(&created)
				if created.ResultType != "task" || created.Status != "working" {
					t.Fatalf("start_command answered resultType %q status %q, want a working task", created.ResultType, created.Status)
				}
				id = created.TaskID
			} else {
				a.init2025()
				var created createTask2025
				a.toolCall("start_command", args, map[string]any{}).result(&created)
				if created.Task == nil || created.Task.Status != "working" {
					t.Fatalf("CreateTaskResult %+v, want a working task", created)
				}
				id = created.Task.TaskID
			}
			if !persistTaskID.MatchString(id) {
				t.Errorf("task id %q under --persist, want h-N, a dot and 32 hex digits (128 random bits)", id)
			}
			a.end(c.kill)

			b := p.mcpPersist(t, c.mcp)
			if c.v2026 {
				b.init2026()
				var running task2026
				b.call("tasks/get", map[string]any{"taskId": id}, &running)
				if running.TaskID != id || running.Status != "working" {
					t.Fatalf("tasks/get on a later connection: taskId %q status %q, want %s working", running.TaskID, running.Status, id)
				}
				listen := b.listen(id)
				g.release()
				b.awaitTaskNote(listen, id)
				b.cancelRequest(listen)
				var done task2026
				b.call("tasks/get", map[string]any{"taskId": id}, &done)
				if done.Status != "completed" {
					t.Errorf("tasks/get once the command ended: status %q, want completed", done.Status)
				}
				checkCompleted(t, "tasks/get on the later connection", done.Result, "started\ndone\n")
			} else {
				b.init2025()
				var running task2025
				b.call("tasks/get", map[string]any{"taskId": id}, &running)
				if running.TaskID != id || running.Status != "working" {
					t.Fatalf("tasks/get on a later connection: %+v, want %s working", running, id)
				}
				// tasks/list names this connection's tasks only: a task id
				// is what reaches a task from another connection.
				var list struct {
					Tasks []task2025 `json:"tasks"`
				}
				b.call("tasks/list", nil, &list)
				if len(list.Tasks) != 0 {
					t.Errorf("tasks/list on the later connection: %+v, want none (the task is A's)", list.Tasks)
				}
				waiting := b.send("tasks/result", map[string]any{"taskId": id})
				g.release()
				var res callResult
				waiting.result(&res)
				checkCompleted(t, "tasks/result on the later connection", &res, "started\ndone\n")
				if diff := cmp.Diff(map[string]any{"taskId": id}, res.Meta[metaRelatedTask]); diff != "" {
					t.Errorf("tasks/result _meta[%s] mismatch (-want +got):\n%s", metaRelatedTask, diff)
				}
			}
			// The task id also names the command's handle to the tools.
			var out callResult
			b.toolCall("read_output", map[string]any{"handleId": id}, nil).result(&out)
			if out.IsError || len(out.Content) == 0 || out.Content[0]["text"] != "started\ndone\n" {
				t.Errorf("read_output with the task id: %+v, want the command's output", out)
			}
		})
	}
}

// TestMCPPersistCancelLater cancels, on a later connection, a task whose
// connection ended: tasks/cancel answers once the command's whole tree
// is gone, and the task says cancelled.
func TestMCPPersistCancelLater(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	started := filepath.Join(p.root, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "echo $$ > pids; sleep " + mk.Sleep + " & echo $! >> pids; setsid sleep " + mk.Sleep + " & echo $! >> pids; echo started > started; wait"

	a := p.mcpPersist(t, true)
	a.init2025()
	var created createTask2025
	a.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", script}, "env": mk.env()}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", created)
	}
	id := created.Task.TaskID
	awaitFIFO(t, started)
	pids := outsidePIDs(t, mk, readLines(t, filepath.Join(p.root, "pids")))
	if len(pids) != 3 {
		t.Fatalf("the command wrote pids %v, want its shell and two sleeps", pids)
	}
	a.end(false)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %s of the task's command is gone once its connection ended, want it running", pid)
		}
	}

	b := p.mcpPersist(t, true)
	b.init2025()
	var cancelled task2025
	b.call("tasks/cancel", map[string]any{"taskId": id}, &cancelled)
	if cancelled.TaskID != id || cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel on a later connection: %+v, want %s cancelled", cancelled, id)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %s still runs once tasks/cancel answered", pid)
		}
	}
	assertNoneLeft(t, mk, "", "once tasks/cancel answered")
	var got task2025
	b.call("tasks/get", map[string]any{"taskId": id}, &got)
	if got.Status != "cancelled" {
		t.Errorf("tasks/get after the cancel: status %q, want cancelled", got.Status)
	}
}

// TestMCPPersistOtherRoot: a task is found only under the root (and
// command line) it was made in: another root's later connection, of the
// same user and state, gets -32602 for it; so does a guess at its id.
func TestMCPPersistOtherRoot(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	g := newGate(t, p.root, "gate")
	a := p.mcpPersist(t, true)
	a.init2025()
	var created createTask2025
	a.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", "read x < gate"}}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", created)
	}
	id := created.Task.TaskID

	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	q := *p
	q.root = other
	b := q.mcpPersist(t, true)
	b.init2025()
	e := b.callErr("tasks/get", map[string]any{"taskId": id}, jsonrpc.CodeInvalidParams)
	if !strings.Contains(e.Message, id) {
		t.Errorf("tasks/get of another root's task: message %q does not name it", e.Message)
	}
	b.callErr("tasks/cancel", map[string]any{"taskId": id}, jsonrpc.CodeInvalidParams)

	// On the same root, the handle's id alone is no task id.
	c := p.mcpPersist(t, true)
	c.init2025()
	handle, _, _ := strings.Cut(id, ".")
	c.callErr("tasks/get", map[string]any{"taskId": handle}, jsonrpc.CodeInvalidParams)
	var running task2025
	c.call("tasks/get", map[string]any{"taskId": id}, &running)
	if running.Status != "working" {
		t.Errorf("tasks/get on the task's root: %+v, want working", running)
	}
	g.release()
	var res callResult
	c.call("tasks/result", map[string]any{"taskId": id}, &res)
	if res.StructuredContent == nil || res.StructuredContent.Status != "completed" {
		t.Errorf("tasks/result: %+v, want completed", res.StructuredContent)
	}
}

// TestMCPPersistLinger: with no MCP connection attached for --linger,
// the MCP session ends: its commands are killed, and a later connection
// no longer finds its tasks.
func TestMCPPersistLinger(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	started := filepath.Join(p.root, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "echo $$ > pids; sleep " + mk.Sleep + " & echo $! >> pids; echo started > started; wait"
	a := p.mcpPersist(t, true, "--linger", "300ms")
	a.init2025()
	var created createTask2025
	a.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", script}, "env": mk.env()}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", created)
	}
	awaitFIFO(t, started)
	pids := outsidePIDs(t, mk, readLines(t, filepath.Join(p.root, "pids")))
	a.end(false)
	for _, pid := range pids {
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatal(err)
		}
		awaitPidGone(t, n, waitLimit)
	}
	assertNoneLeft(t, mk, "", "once the linger passed")

	b := p.mcpPersist(t, true, "--linger", "300ms")
	b.init2025()
	b.callErr("tasks/get", map[string]any{"taskId": created.Task.TaskID}, jsonrpc.CodeInvalidParams)
}

// TestMCPPersistHolderKilled: the holder killed with SIGKILL loses the
// MCP task table with it, never the processes: the next holder for the
// root kills what is left of the task's command (its MCP session's
// journal says where), and a later connection is told the task is not
// found.
func TestMCPPersistHolderKilled(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	started := filepath.Join(p.root, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "sleep " + mk.Sleep + " & setsid sleep " + mk.Sleep + " & echo started > started; wait"
	a := p.mcpPersist(t, true)
	a.init2025()
	var created createTask2025
	a.toolCall("start_command", map[string]any{"argv": []string{"sh", "-c", script}, "env": mk.env()}, map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatalf("CreateTaskResult %+v, want a task", created)
	}
	awaitFIFO(t, started)
	a.killed = true // its front ends with its holder
	p.killHolders()

	b := p.mcpPersist(t, true)
	b.init2025()
	awaitGone(t, mk, "", waitLimit)
	b.callErr("tasks/get", map[string]any{"taskId": created.Task.TaskID}, jsonrpc.CodeInvalidParams)
}
