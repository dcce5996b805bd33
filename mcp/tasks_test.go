package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/mcp/internal/taskwire"
	"github.com/toolhost/toolhost/protocol"
)

// newTestTable returns a task table whose notifications arrive on the
// returned channel, a line each. The reader goroutine is owned by the
// test's cleanup, which waits for it.
func newTestTable(t *testing.T) (*taskTable, <-chan string) {
	t.Helper()
	pr, pw := io.Pipe()
	s := &Server{log: slog.New(slog.DiscardHandler), out: &stdio.Outlet{}}
	s.out.Attach(pw, s.log)
	lines := make(chan string, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { pw.Close(); <-done })
	return newTaskTable(s, time.Hour, 24*time.Hour), lines
}

// next returns the next notification line, failing the test if none
// comes within waitLimit.
func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(waitLimit):
		t.Fatalf("no notification within %v", waitLimit)
		return ""
	}
}

// waitLimit bounds a wait for something that should come at once.
const waitLimit = 10 * time.Second

// TestTaskState maps each way a command ends onto the task states of both
// forms.
func TestTaskState(t *testing.T) {
	type row struct {
		status      protocol.Status
		legacy, ext taskwire.Status
	}
	for _, r := range []row{
		{protocol.StatusCompleted, taskwire.Completed, taskwire.Completed},
		{protocol.StatusCancelled, taskwire.Cancelled, taskwire.Cancelled},
		{protocol.StatusTimedOut, taskwire.Failed, taskwire.Completed},
		{protocol.StatusLost, taskwire.Failed, taskwire.Failed},
	} {
		res := &protocol.ToolResult{Status: r.status, TimeoutReason: protocol.TimeoutDeadline}
		if got, _ := taskState(formLegacy, res); got != r.legacy {
			t.Errorf("2025-11-25, command %s: task %s, want %s", r.status, got, r.legacy)
		}
		if got, _ := taskState(formExt, res); got != r.ext {
			t.Errorf("2026-07-28, command %s: task %s, want %s", r.status, got, r.ext)
		}
	}
	if _, msg := taskState(formExt, &protocol.ToolResult{Status: protocol.StatusTimedOut, TimeoutReason: protocol.TimeoutDeadline}); !strings.HasPrefix(msg, "timed out (deadline) after") {
		t.Errorf("a timeout's status message %q does not say so", msg)
	}
}

// TestTaskEndsOnce races many ends of one task, with different outcomes,
// against its announcement: the first end decides, the state never
// changes after, and exactly one terminal notification goes out, after
// the announcement.
func TestTaskEndsOnce(t *testing.T) {
	tt, lines := newTestTable(t)
	for round := range 20 {
		task := tt.create("h-1", formLegacy, time.Hour, "started")
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := protocol.StatusCompleted
				if i%2 == 1 {
					st = protocol.StatusCancelled
				}
				tt.end(task, &protocol.ToolResult{HandleID: "h-1", Status: st, ExitCode: ptr(i)}, i%3 == 0)
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); tt.announce(task) }()
		wg.Wait()
		<-task.done
		var n struct {
			Method string              `json:"method"`
			Params taskwire.LegacyTask `json:"params"`
		}
		if err := json.Unmarshal([]byte(next(t, lines)), &n); err != nil {
			t.Fatal(err)
		}
		tt.mu.Lock()
		want := task.legacyLocked(time.Now())
		tt.mu.Unlock()
		if diff := cmp.Diff(taskwire.MethodTaskStatus, n.Method); diff != "" {
			t.Errorf("round %d: method mismatch (-want +got):\n%s", round, diff)
		}
		if diff := cmp.Diff(want, n.Params); diff != "" {
			t.Errorf("round %d: notified state mismatch (-want +got):\n%s", round, diff)
		}
		// A late end changes nothing and sends nothing.
		tt.end(task, &protocol.ToolResult{HandleID: "h-1", Status: protocol.StatusTimedOut}, true)
		tt.mu.Lock()
		if task.status != want.Status {
			t.Errorf("round %d: a late end moved the task from %s to %s", round, want.Status, task.status)
		}
		delete(tt.tasks, "h-1")
		tt.order = nil
		tt.mu.Unlock()
	}
	select {
	case l := <-lines:
		t.Errorf("a second notification: %s", l)
	default:
	}
}

// TestTaskNotifiedAfterAnnounce holds a task's terminal notification until
// the answer naming it is written, and until its command's notifications
// have been through the router.
func TestTaskNotifiedAfterAnnounce(t *testing.T) {
	tt, lines := newTestTable(t)
	task := tt.create("h-2", formLegacy, time.Hour, "started")
	tt.end(task, &protocol.ToolResult{HandleID: "h-2", Status: protocol.StatusCancelled}, false) // a tasks/cancel decided
	tt.announce(task)
	tt.mu.Lock()
	sent := task.notified
	tt.mu.Unlock()
	if sent {
		t.Fatalf("notified before the command's toolResult was routed")
	}
	tt.routed(&protocol.ToolResult{HandleID: "h-2", Status: protocol.StatusCancelled})
	if l := next(t, lines); !strings.Contains(l, `"status":"cancelled"`) {
		t.Fatalf("notification %q, want the cancelled state", l)
	}
}

// TestTaskExpiry lets go of an ended task once its ttl has passed, and
// says so; a task that still works is kept past its ttl.
func TestTaskExpiry(t *testing.T) {
	tt, _ := newTestTable(t)
	working := tt.create("h-1", formLegacy, 0, "started")
	ended := tt.create("h-2", formLegacy, 0, "started")
	tt.announce(ended)
	tt.end(ended, &protocol.ToolResult{HandleID: "h-2", Status: protocol.StatusCompleted}, true)
	if _, err := tt.lookup(context.Background(), &working.id, ""); err != nil {
		t.Errorf("a working task past its ttl was let go: %v", err)
	}
	_, err := tt.lookup(context.Background(), &ended.id, "")
	if !errors.Is(err, taskwire.ErrTaskNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("lookup of an expired task: %v, want -32602 saying it expired", err)
	}
	tt.announce(working)
	tt.end(working, &protocol.ToolResult{HandleID: "h-1", Status: protocol.StatusCompleted}, true)
	if _, err := tt.lookup(context.Background(), &working.id, ""); !strings.Contains(errString(err), "expired") {
		t.Errorf("a task that ended past its ttl: %v, want expired", err)
	}
	unknown := "h-9"
	if _, err := tt.lookup(context.Background(), &unknown, ""); !errors.Is(err, taskwire.ErrTaskNotFound) || strings.Contains(err.Error(), "expired") {
		t.Errorf("an unknown id: %v, want -32602 not found", err)
	}
}

// TestTaskTTL parses the 2025-11-25 task member.
func TestTaskTTL(t *testing.T) {
	tt, _ := newTestTable(t)
	s := tt.s.(*Server)
	s.tasks = tt
	for raw, want := range map[string]time.Duration{
		`{}`:                   time.Hour,
		`{"ttl":null}`:         time.Hour,
		`{"ttl":60000}`:        time.Minute,
		`{"ttl":0}`:            0,
		`{"ttl":999999999999}`: 24 * time.Hour,
	} {
		got, err := s.taskTTL(json.RawMessage(raw))
		if err != nil || got != want {
			t.Errorf("taskTTL(%s) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`3`, `"x"`, `[]`, `{"ttl":-5}`, `{"ttl":"x"}`, `{"ttl":1.5}`} {
		if _, err := s.taskTTL(json.RawMessage(raw)); !errors.Is(err, taskwire.ErrTaskInvalidArgs) {
			t.Errorf("taskTTL(%s): %v, want -32602", raw, err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fakeBackend is a backend whose answers the test sets: gone says which
// handles' artifacts were evicted; asked counts the questions.
type fakeBackend struct {
	*Server
	gone  map[string]bool
	asked map[string]int
}

func (f *fakeBackend) artifactsGone(_ context.Context, handleID string) bool {
	f.asked[handleID]++
	return f.gone[handleID]
}

// TestTaskArtifactsAskedOfTheirKeeper keeps an ended destination task
// whose result names a far file that does not exist on this machine, for
// as long as the far side says its artifacts are there, and lets it go
// once it says they were evicted: the table never looks at a result's
// paths itself.
func TestTaskArtifactsAskedOfTheirKeeper(t *testing.T) {
	base, _ := newTestTable(t)
	f := &fakeBackend{Server: base.s.(*Server), gone: map[string]bool{}, asked: map[string]int{}}
	tt := newTaskTable(f, time.Hour, 24*time.Hour)
	far := tt.create("far/h-1", formLegacy, 0, "started")
	far.ttl = time.Hour
	tt.announce(far)
	res := &protocol.ToolResult{HandleID: "far/h-1", CommandID: "far/cmd-1", Status: protocol.StatusCompleted,
		Artifacts: protocol.Artifacts{OutputPath: "far//tmp/toolhost-artifacts-x/cmd-1/output.log"}}
	tt.end(far, res, true)
	for range 3 {
		if _, err := tt.lookup(context.Background(), &far.id, ""); err != nil {
			t.Fatalf("an ended far task whose artifacts are there: %v", err)
		}
	}
	if f.asked["far/h-1"] != 3 {
		t.Errorf("the keeper was asked %d times in 3 lookups, want 3", f.asked["far/h-1"])
	}
	f.gone["far/h-1"] = true
	_, err := tt.lookup(context.Background(), &far.id, "")
	if !errors.Is(err, taskwire.ErrTaskNotFound) || !strings.Contains(err.Error(), "evicted") {
		t.Errorf("lookup once the far artifacts were evicted: %v, want -32602 saying so", err)
	}
}

// TestSharedTaskTable: in a table that outlives its connections
// (--persist), a task's id is its handle's with 128 random bits, which
// names the handle to the tools; the command's toolResult, which names
// the handle, ends it; and a connection that ends before the answer
// naming its task was written leaves the task announced, so that its end
// is kept as any other's.
func TestSharedTaskTable(t *testing.T) {
	tt, _ := newTestTable(t)
	tt.shared = true
	c := &conn{out: &stdio.Outlet{}} // never connected: what it is sent goes nowhere
	a := tt.createOn(c, "h-1", formLegacy, time.Hour, "started")
	b := tt.createOn(c, "h-2", formLegacy, time.Hour, "started")
	for _, task := range []*task{a, b} {
		handle, secret, ok := strings.Cut(task.id, ".")
		if !ok || handle != task.handleID || len(secret) != 32 || strings.Trim(secret, "0123456789abcdef") != "" {
			t.Errorf("task id %q, want %s, a dot and 32 hex digits", task.id, task.handleID)
		}
	}
	if a.id[3:] == b.id[3:] {
		t.Errorf("two tasks share the secret of %q", a.id)
	}
	got := []string{tt.handleOf(a.id), tt.handleOf("h-1"), tt.handleOf("h-1.0000")}
	if diff := cmp.Diff([]string{"h-1", "h-1", "h-1.0000"}, got); diff != "" {
		t.Errorf("handleOf mismatch (-want +got):\n%s", diff)
	}
	if _, err := tt.lookup(context.Background(), ptr("h-1"), ""); err == nil {
		t.Errorf("the handle's id alone found the task")
	}

	tt.routed(&protocol.ToolResult{HandleID: "h-1", Status: protocol.StatusCompleted})
	select {
	case <-a.done:
	default:
		t.Fatalf("the handle's toolResult did not end its task")
	}
	tt.disconnected(c)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if !a.announced || !a.notified || !b.announced || b.notified {
		t.Errorf("after the connection's end: a announced %v notified %v, b announced %v notified %v; want both announced, the ended one notified",
			a.announced, a.notified, b.announced, b.notified)
	}
}

// TestTaskOfAnotherPrincipal is not found for anyone but its principal,
// in the words of an id that never was, before and after it expires.
func TestTaskOfAnotherPrincipal(t *testing.T) {
	tt, _ := newTestTable(t)
	mine := &conn{id: "c-1", principal: "http:token", out: &stdio.Outlet{}} // never connected: what it is sent goes nowhere
	task := tt.createOn(mine, "h-1", formLegacy, 0, "started")
	if _, err := tt.lookup(context.Background(), &task.id, "http:token"); err != nil {
		t.Fatalf("its own principal: %v", err)
	}
	never := "h-1x"
	_, want := tt.lookup(context.Background(), &never, "http:other")
	for _, when := range []string{"working", "expired"} {
		if when == "expired" {
			tt.announce(task)
			tt.end(task, &protocol.ToolResult{HandleID: "h-1", Status: protocol.StatusCompleted}, true)
			if _, err := tt.lookup(context.Background(), &task.id, "http:token"); !strings.Contains(errString(err), "expired") {
				t.Fatalf("its own principal, once expired: %v, want expired", err)
			}
		}
		_, err := tt.lookup(context.Background(), &task.id, "http:other")
		if !errors.Is(err, taskwire.ErrTaskNotFound) {
			t.Fatalf("%s, another principal: %v, want not found", when, err)
		}
		if got, w := strings.ReplaceAll(err.Error(), task.id, "ID"), strings.ReplaceAll(want.Error(), never, "ID"); got != w {
			t.Errorf("%s, another principal: %q, want the words of an unknown id: %q", when, got, w)
		}
	}
}
