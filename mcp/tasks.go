package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/mcp/internal/taskwire"
	"github.com/toolhost/toolhost/protocol"
)

// Bounds of what the task table keeps.
const (
	// DefaultTaskTTL is how long a task is kept when the client asks for
	// no ttl (and, in 2026-07-28, always), unless --task-ttl says.
	DefaultTaskTTL = time.Hour
	// DefaultTaskTTLMax caps the ttl a client may ask for, unless
	// --task-ttl-max says.
	DefaultTaskTTLMax = 24 * time.Hour
	// taskResultBudget bounds the bytes of the results kept; beyond it the
	// oldest ended tasks are let go first.
	taskResultBudget = 64 << 20
	// goneCap bounds the ids remembered as expired or evicted, so that
	// asking for one says why it is gone.
	goneCap = 4096
	// taskPage is how many tasks one tasks/list answer holds.
	taskPage = 100
	// Poll intervals suggested while a task works.
	pollMin = 250 * time.Millisecond
	pollMax = 5 * time.Second
)

// taskForm is the protocol a task was created in: it decides how the
// command's end maps onto the task's states.
type taskForm int

const (
	formLegacy taskForm = iota // 2025-11-25, a task member on tools/call
	formExt                    // 2026-07-28, the extension, the server's choice
)

// task is one MCP task. Its id is its command's handle id; a 2025-11-25
// task whose tool failed before a command existed has an id "t-N" and no
// handle. In a shared table (--persist) either is followed by a dot and
// 128 random bits, in hex: the id is what a later connection presents.
type task struct {
	id       string
	handleID string
	form     taskForm
	seq      int // creation order, for tasks/list
	created  time.Time
	ttl      time.Duration
	// conn is the connection whose call made the task (nil in tests): its
	// notifications go there, and it lists the task in a shared table.
	conn *conn
	// principal is who made it (its connection's): a task belongs to its
	// principal, and to anyone else it does not exist.
	principal string

	// The fields below are guarded by the table's mu.

	// stopProgress ends the notifications/progress of the call's progress
	// token, which a 2025-11-25 task keeps for its life (nil: none).
	stopProgress func()

	status  taskwire.Status
	message string
	updated time.Time
	// result is what tools/call would have answered, once terminal (for a
	// failed 2026-07-28 task, rpcErr instead); artifacts says the result
	// links to its command's artifacts, whose eviction ends the task's
	// life early; size is what the result holds.
	result    *sdk.CallToolResult
	rpcErr    *taskwire.Error
	artifacts bool
	size      int
	// done is closed when the task reaches its terminal state: the one
	// place that closes it is finishLocked, which runs once per task.
	done chan struct{}
	// cancelAsked says a tasks/cancel is under way.
	cancelAsked bool
	// announced says the answer naming the task has been written; routed
	// that the command's toolResult has been through the router, so that
	// every notifications/progress of it has been sent; notified that its
	// terminal notification was sent. The terminal notification goes out
	// once, when the first three hold (invariant: notified is set in one
	// place, maybeNotifyLocked).
	announced, routed, notified bool
	// Activity, for the poll interval: the output size and step last seen,
	// and when either last changed.
	lastOutput   int64
	lastStep     int
	lastActivity time.Time
	// asking are the targets its command waits on the user for (see
	// taskTable.asking): while there is one, a working task shows
	// input_required.
	asking []string
}

// backend is what the task table asks of the session under it: the
// toolhost session that runs the commands, and the MCP connection that
// carries what the SDK has no method for. *Server is one.
type backend interface {
	// finished reports whether the router has seen handleID's toolResult.
	finished(handleID string) bool
	// wait returns handleID's result; the handle has ended.
	wait(ctx context.Context, handleID string) (*protocol.ToolResult, error)
	// progress returns a running handle's snapshot.
	progress(ctx context.Context, handleID string) (*protocol.Progress, error)
	// callResult is the MCP result of a command's ToolResult: what
	// tools/call would have answered.
	callResult(res *protocol.ToolResult) *sdk.CallToolResult
	// artifactsGone reports whether the artifacts of handleID, an ended
	// command's, were evicted. It asks whoever keeps them (toolhost here,
	// or the far toolhost through the hub), and says false when that
	// cannot be known.
	artifactsGone(ctx context.Context, handleID string) bool
	// notify writes a notification on the MCP connection c (nil: the
	// only one).
	notify(c *conn, method string, params any) error
	// logger is where the table says what it could not do.
	logger() *slog.Logger
}

// taskTable holds the tasks of one MCP session.
type taskTable struct {
	s          backend
	defaultTTL time.Duration
	maxTTL     time.Duration
	// shared says the table outlives its connections (Options.Shared).
	shared bool

	mu sync.Mutex
	// tasks maps ids to the tasks kept; order lists them by creation.
	// gone maps ids let go of to the reason, the latest goneCap of them.
	// next numbers "t-N" ids and seqs. bytes is
	// the sum of the kept results' sizes. listeners are the 2026-07-28
	// subscriptions that name tasks. Guarded by mu.
	tasks     map[string]*task
	handles   map[string]*task // the tasks kept that have a handle, by its id
	order     []*task
	gone      recent[goneTask]
	next      int
	bytes     int
	listeners map[*listener]bool
	// pending are the targets each handle's command waits on the user for,
	// an entry per ask in flight, kept whether or not the handle is a
	// task's (the ask may come before its task). Guarded by mu.
	pending map[string][]string
}

// goneTask is why a task let go of is gone, and whose it was.
type goneTask struct{ why, principal string }

// newTaskTable returns the task table of s's session; a ttl of 0 or less
// is the default.
func newTaskTable(s backend, defaultTTL, maxTTL time.Duration) *taskTable {
	if maxTTL <= 0 {
		maxTTL = DefaultTaskTTLMax
	}
	if defaultTTL <= 0 {
		defaultTTL = DefaultTaskTTL
	}
	return &taskTable{s: s, defaultTTL: min(defaultTTL, maxTTL), maxTTL: maxTTL,
		tasks: make(map[string]*task), handles: make(map[string]*task), gone: newRecent[goneTask](goneCap), listeners: make(map[*listener]bool)}
}

// grant returns the ttl a task gets for a request of ms milliseconds
// (nil: none asked).
func (tt *taskTable) grant(ms *int64) time.Duration {
	if ms == nil {
		return tt.defaultTTL
	}
	return min(time.Duration(*ms)*time.Millisecond, tt.maxTTL)
}

// create adds a working task for handle handleID (or, with handleID "", a
// "t-N" task with no command) and returns it. The caller announces it
// (announce) once the answer naming it is written.
func (tt *taskTable) create(handleID string, form taskForm, ttl time.Duration, message string) *task {
	return tt.createOn(nil, handleID, form, ttl, message)
}

// createOn is create for a call of connection c.
func (tt *taskTable) createOn(c *conn, handleID string, form taskForm, ttl time.Duration, message string) *task {
	var secret string
	if tt.shared {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secret = "." + hex.EncodeToString(b[:])
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	now := time.Now() // under mu: creation order and createdAt agree
	tt.sweepLocked(now)
	tt.next++
	t := &task{id: handleID + secret, handleID: handleID, form: form, seq: tt.next, created: now, ttl: ttl, conn: c, principal: c.principalOf(),
		status: taskwire.Working, message: message, updated: now, done: make(chan struct{}), lastActivity: now}
	if handleID == "" {
		t.id = fmt.Sprintf("t-%d", tt.next) + secret
	}
	tt.tasks[t.id] = t
	if handleID != "" {
		tt.handles[handleID] = t
		t.asking = slices.Clone(tt.pending[handleID])
	}
	tt.order = append(tt.order, t)
	return t
}

// bind ties a task to its command's end: the router's toolResult ends
// it. When the toolResult came before the task existed (a command that
// ended at once), the result is fetched now.
func (tt *taskTable) bind(ctx context.Context, t *task) {
	// The task is in the table before the router is asked, and the router
	// marks a handle finished before it calls routed: one of the two sees
	// the other.
	if !tt.s.finished(t.handleID) {
		return
	}
	res, err := tt.s.wait(context.WithoutCancel(ctx), t.handleID)
	if err != nil {
		tt.fail(t, err)
		return
	}
	tt.end(t, res, true)
}

// routed is called by the router with every toolResult, after the
// handle's last event was routed.
func (tt *taskTable) routed(res *protocol.ToolResult) {
	tt.mu.Lock()
	t := tt.handles[res.HandleID]
	tt.mu.Unlock()
	if t != nil {
		tt.end(t, res, true)
	}
}

// end moves t to the terminal state its command's result decides, once:
// whoever comes first (the router, a tasks/cancel, bind) decides, and the
// others find it decided. routed says every notification of the command
// has been sent.
func (tt *taskTable) end(t *task, res *protocol.ToolResult, routed bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if routed {
		t.routed = true
	}
	if !t.status.Terminal() {
		status, msg := taskState(t.form, res)
		if t.form == formExt && res.Status == protocol.StatusLost {
			// A lost destination: the request failed with a JSON-RPC error.
			data, _ := json.Marshal(res)
			t.rpcErr = &taskwire.Error{Code: protocol.CodeDestinationUnavailable, Message: msg, Data: data}
		} else {
			t.result = tt.s.callResult(res)
		}
		if t.cancelAsked && status == taskwire.Cancelled {
			msg = "cancelled by tasks/cancel: " + msg
		}
		t.artifacts = res.Artifacts.OutputPath != ""
		t.size = len(res.Stdout) + len(res.Stderr) + 2048
		tt.bytes += t.size
		tt.finishLocked(t, status, msg)
	}
	tt.maybeNotifyLocked(t)
}

// fail ends t as failed without a command result: toolhost could not be
// asked (its session ended).
func (tt *taskTable) fail(t *task, err error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t.routed = true
	if !t.status.Terminal() {
		t.rpcErr = &taskwire.Error{Code: protocol.CodeInternalError, Message: err.Error()}
		t.result = errorResult(ErrorInfo{Code: protocol.CodeInternalError, Message: err.Error()})
		tt.finishLocked(t, taskwire.Failed, "toolhost could not be asked for the command's result: "+err.Error())
	}
	tt.maybeNotifyLocked(t)
}

// failWith ends a "t-N" task, created for a 2025-11-25 call whose tool
// failed before any command started, with that tool's isError result.
func (tt *taskTable) failWith(t *task, res *sdk.CallToolResult) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t.routed = true
	t.result = res
	msg := "the tool failed"
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			msg = tc.Text
		}
	}
	tt.finishLocked(t, taskwire.Failed, msg)
}

// finishLocked makes t terminal; tt.mu is held. It is the one place done
// is closed.
func (tt *taskTable) finishLocked(t *task, status taskwire.Status, msg string) {
	t.status, t.message, t.updated = status, msg, time.Now()
	close(t.done)
	if t.stopProgress != nil {
		t.stopProgress()
	}
	// Keep the memory held by results bounded: the oldest ended tasks go
	// first, never the one ending now.
	for _, old := range tt.order {
		if tt.bytes <= taskResultBudget {
			break
		}
		if old != t && old.status.Terminal() && old.notified {
			tt.dropLocked(old, fmt.Sprintf("evicted: the results of older tasks are let go to keep under %d MiB", taskResultBudget>>20))
		}
	}
}

// taskState maps a command's result onto a task's state and status
// message, as the task's protocol defines them (docs/mcp.md, "Tasks").
func taskState(form taskForm, res *protocol.ToolResult) (taskwire.Status, string) {
	line := statusLine(res)
	switch res.Status {
	case protocol.StatusCompleted:
		return taskwire.Completed, line
	case protocol.StatusCancelled:
		return taskwire.Cancelled, line
	case protocol.StatusTimedOut:
		line = "timed out" + strings.TrimPrefix(line, string(protocol.StatusTimedOut))
		if form == formExt {
			// A timeout is a tool result, not a JSON-RPC error: the
			// extension keeps failed for the latter.
			return taskwire.Completed, line
		}
		return taskwire.Failed, line
	}
	return taskwire.Failed, line // lost
}

// announce records that the answer naming t has been written, so that
// its terminal notification may follow.
func (tt *taskTable) announce(t *task) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t.announced = true
	tt.maybeNotifyLocked(t)
}

// maybeNotifyLocked sends t's terminal notification once it is terminal,
// routed and announced, and only once; tt.mu is held. The notification is
// written under mu, which keeps a subscription's acknowledgment before its
// notifications and every notification in order with the state it shows;
// a client that stops reading stalls the server's writes in any case.
func (tt *taskTable) maybeNotifyLocked(t *task) {
	if t.notified || !t.status.Terminal() || !t.routed || !t.announced {
		return
	}
	t.notified = true
	switch t.form {
	case formLegacy:
		if err := tt.s.notify(t.conn, taskwire.MethodTaskStatus, t.legacyLocked(time.Now())); err != nil {
			tt.s.logger().Debug("task status not sent", "task", t.id, "err", err)
		}
	case formExt:
		for l := range tt.listeners {
			l.sendLocked(t)
		}
	}
	if time.Since(t.created) >= t.ttl {
		tt.dropLocked(t, t.expiredReason())
	}
}

// disconnected is told that connection c has ended, every call of it
// answered: a task whose answer it never wrote (the connection ended
// first) is announced now, so that its end is kept as any other's. Its
// notification goes nowhere.
func (tt *taskTable) disconnected(c *conn) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for _, t := range tt.order {
		if t.conn == c && !t.announced {
			t.announced = true
			tt.maybeNotifyLocked(t)
		}
	}
}

// handleOf returns the handle of the task id names, or id itself: a
// shared table's task id also names its handle to the tools that take a
// handleId.
func (tt *taskTable) handleOf(id string) string {
	if !tt.shared {
		return id
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if t := tt.tasks[id]; t != nil && t.handleID != "" {
		return t.handleID
	}
	return id
}

// lookup returns the task id names for principal, or the -32602 that says
// it is unknown, expired or evicted. Another principal's task is unknown,
// in the same words as one that never was. It lets go of the tasks whose
// time has come, and of the task asked for if its artifacts were evicted:
// that is asked of whoever keeps them, outside the lock, each time an
// ended task is looked up.
func (tt *taskTable) lookup(ctx context.Context, id *string, principal string) (*task, error) {
	if id == nil {
		return nil, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, nil, "invalid params: taskId is required")
	}
	tt.mu.Lock()
	tt.sweepLocked(time.Now())
	t := tt.tasks[*id]
	if t != nil && t.principal != principal {
		t = nil
	}
	ask := t != nil && t.status.Terminal() && t.notified && t.artifacts
	tt.mu.Unlock()
	if ask && tt.s.artifactsGone(ctx, t.handleID) {
		tt.mu.Lock()
		tt.dropLocked(t, artifactsEvicted)
		tt.mu.Unlock()
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if t := tt.tasks[*id]; t != nil && t.principal == principal {
		return t, nil
	}
	if g, ok := tt.gone.get(*id); ok && g.principal == principal {
		return nil, taskwire.Errorf(taskwire.ErrTaskNotFound, map[string]string{"taskId": *id, "reason": g.why}, "failed to retrieve task %s: %s", *id, g.why)
	}
	where := "in this session"
	if tt.shared {
		where = "among the tasks this server keeps"
	}
	return nil, taskwire.Errorf(taskwire.ErrTaskNotFound, map[string]string{"taskId": *id}, "failed to retrieve task %s: task not found %s", *id, where)
}

// sweepLocked lets go of the tasks past their ttl (never one that works:
// that one goes when it ends, after its terminal notification); tt.mu is
// held. Evicted artifacts are found by lookup, which may ask far away.
func (tt *taskTable) sweepLocked(now time.Time) {
	for _, t := range tt.order {
		if t.status.Terminal() && t.notified && now.Sub(t.created) >= t.ttl {
			tt.dropLocked(t, t.expiredReason())
		}
	}
}

// artifactsEvicted says why a task whose artifacts went is gone.
const artifactsEvicted = "task has expired: its command's artifacts were evicted (--artifacts-cap-bytes), and its result links to them"

// expiredReason says why an expired task is gone.
func (t *task) expiredReason() string {
	return fmt.Sprintf("task has expired: its ttl of %d ms from %s has passed", t.ttl.Milliseconds(), t.created.UTC().Format(time.RFC3339Nano))
}

// dropLocked lets go of t, remembering why; tt.mu is held.
func (tt *taskTable) dropLocked(t *task, why string) {
	if tt.tasks[t.id] != t {
		return
	}
	delete(tt.tasks, t.id)
	if tt.handles[t.handleID] == t {
		delete(tt.handles, t.handleID)
	}
	for i, o := range tt.order {
		if o == t {
			tt.order = append(tt.order[:i:i], tt.order[i+1:]...)
			break
		}
	}
	if t.status.Terminal() {
		tt.bytes -= t.size
	}
	tt.gone.put(t.id, goneTask{why: why, principal: t.principal})
}

// refresh updates a working task's message and activity from its
// handle's snapshot, for tasks/get.
func (tt *taskTable) refresh(ctx context.Context, t *task) {
	if t.handleID == "" {
		return
	}
	tt.mu.Lock()
	working := !t.status.Terminal()
	tt.mu.Unlock()
	if !working {
		return
	}
	p, err := tt.s.progress(ctx, t.handleID)
	if err != nil {
		return
	}
	now := time.Now()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if t.status.Terminal() {
		return
	}
	if p.OutputBytes != t.lastOutput || p.CurrentStep != t.lastStep {
		t.lastOutput, t.lastStep, t.lastActivity = p.OutputBytes, p.CurrentStep, now
	}
	msg := fmt.Sprintf("running for %.1f s, %d bytes of output", float64(p.ElapsedMs)/1000, p.OutputBytes)
	if p.StepName != "" && p.TotalSteps > 0 {
		msg = fmt.Sprintf("step %d/%d %s; %s", p.CurrentStep, p.TotalSteps, p.StepName, msg)
	}
	if msg != t.message {
		t.message = msg
	}
}

// pollLocked is the poll interval suggested for a working task: half the
// time since its command last showed activity (its start, a step, output
// growth seen by a tasks/get), within [pollMin, pollMax]; tt.mu is held.
func (t *task) pollLocked(now time.Time) *int64 {
	if t.status.Terminal() {
		return nil
	}
	d := min(max(now.Sub(t.lastActivity)/2, pollMin), pollMax)
	return ptr(d.Milliseconds())
}

// asking notes that handleID's command waits on the user to decide about
// target (delta 1) or no longer does (delta -1): its task, if it has one,
// shows input_required meanwhile.
func (tt *taskTable) asking(handleID, target string, delta int) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.pending == nil {
		tt.pending = make(map[string][]string)
	}
	targets := tt.pending[handleID]
	if delta > 0 {
		targets = append(targets, target)
	} else if i := slices.Index(targets, target); i >= 0 {
		targets = slices.Delete(targets, i, i+1)
	}
	if len(targets) == 0 {
		delete(tt.pending, handleID)
	} else {
		tt.pending[handleID] = targets
	}
	if t := tt.handles[handleID]; t != nil {
		t.asking = slices.Clone(targets)
		if !t.status.Terminal() {
			t.updated = time.Now()
		}
	}
}

// shownLocked is the status and message t shows: input_required while a
// working task's command waits on the user; the table's mu is held.
func (t *task) shownLocked() (taskwire.Status, string) {
	if t.status == taskwire.Working && len(t.asking) > 0 {
		return taskwire.InputRequired, "waiting for the user to allow or deny a connection to " + strings.Join(t.asking, ", ")
	}
	return t.status, t.message
}

// legacyLocked is t as a 2025-11-25 Task; the table's mu is held.
func (t *task) legacyLocked(now time.Time) taskwire.LegacyTask {
	status, message := t.shownLocked()
	return taskwire.LegacyTask{
		TaskID: t.id, Status: status, StatusMessage: message,
		CreatedAt: stamp(t.created), LastUpdatedAt: stamp(t.updated),
		TTL: ptr(t.ttl.Milliseconds()), PollInterval: t.pollLocked(now),
	}
}

// extLocked is t as a 2026-07-28 DetailedTask; the table's mu is held.
func (t *task) extLocked(now time.Time) *taskwire.ExtTask {
	status, message := t.shownLocked()
	x := &taskwire.ExtTask{
		TaskID: t.id, Status: status, StatusMessage: message,
		CreatedAt: stamp(t.created), LastUpdatedAt: stamp(t.updated),
		TTLMs: ptr(t.ttl.Milliseconds()), PollIntervalMs: t.pollLocked(now),
	}
	switch t.status {
	case taskwire.Completed:
		x.Result = t.result
	case taskwire.Failed:
		x.Error = t.rpcErr
		if x.Error == nil {
			data, _ := json.Marshal(t.result)
			x.Error = &taskwire.Error{Code: protocol.CodeInternalError, Message: t.message, Data: data}
		}
	}
	return x
}

// stamp formats a time as the spec's ISO 8601.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// listener is a 2026-07-28 subscriptions/listen that names tasks.
type listener struct {
	id  json.RawMessage // the listen request's JSON-RPC id
	ids map[string]bool // the tasks it follows
	out *stdio.Outlet
	// acked says the acknowledgment was written: nothing goes out on the
	// subscription before it. Guarded by the table's mu.
	acked bool
}

// sendLocked sends a terminal task's state to l if l follows it; the
// table's mu is held.
func (l *listener) sendLocked(t *task) {
	if !l.acked || !l.ids[t.id] {
		return
	}
	x := t.extLocked(time.Now())
	x.Meta = sdk.Meta{taskwire.SubscriptionIDKey: l.id}
	_ = l.out.Notify(taskwire.MethodTasks, x)
}

// listen starts l: it acknowledges the ids of tasks kept (the others are
// left out), then sends the state of those already ended. From then on
// each follows its task's end.
func (tt *taskTable) listen(l *listener, asked []string, principal string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.sweepLocked(time.Now())
	ack := taskwire.TaskAck{Meta: map[string]any{taskwire.SubscriptionIDKey: l.id}}
	ack.Notifications.TaskIDs = []string{}
	l.ids = make(map[string]bool)
	for _, id := range asked {
		if t := tt.tasks[id]; t != nil && t.principal == principal && !l.ids[id] {
			l.ids[id] = true
			ack.Notifications.TaskIDs = append(ack.Notifications.TaskIDs, id)
		}
	}
	_ = l.out.Notify(taskwire.MethodSubscribed, ack)
	l.acked = true
	tt.listeners[l] = true
	for _, id := range ack.Notifications.TaskIDs {
		if t := tt.tasks[id]; t.notified {
			l.sendLocked(t)
		}
	}
}

// unlisten ends l.
func (tt *taskTable) unlisten(l *listener) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	delete(tt.listeners, l)
}
