package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The names of MCP tasks on the wire (issue 19, /work/wt/TASKS_CONTRACT.md).
const (
	// tasksExt is the 2026-07-28 extension's name.
	tasksExt = "io.modelcontextprotocol/tasks"
	// metaVersion, metaClientInfo and metaClientCaps are the _meta triple
	// every 2026-07-28 request carries.
	metaVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo = "io.modelcontextprotocol/clientInfo"
	metaClientCaps = "io.modelcontextprotocol/clientCapabilities"
	// metaSubscription names the subscriptions/listen request a
	// notification belongs to.
	metaSubscription = "io.modelcontextprotocol/subscriptionId"
	// metaRelatedTask ties a tasks/result answer to its task.
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// metaImmediate is the text a 2025-11-25 CreateTaskResult gives the
	// model at once.
	metaImmediate = "io.modelcontextprotocol/model-immediate-response"

	versionTasks2025 = "2025-11-25"
	versionTasks2026 = "2026-07-28"

	// codeMissingCapability is the 2026-07-28 error for a request that
	// needs a client capability the request did not declare.
	codeMissingCapability = -32021
)

// taskSession is a raw MCP session with the toolhost binary, on the Go
// SDK's CommandTransport and its JSON-RPC message types: the test writes
// the requests itself, so that it can speak either task form and look at
// every field on the wire.
type taskSession struct {
	t    *testing.T
	conn sdk.Connection
	root string
	// cmd is the server's process (started by the transport).
	cmd *exec.Cmd
	// killed says the test killed the server's process: its end is then
	// no failure. Set and read on the test's goroutine.
	killed bool
	// meta is the _meta triple added to every request (2026-07-28), or nil
	// (2025-11-25, negotiated by initialize). Set before the first request;
	// read-only afterwards.
	meta map[string]any

	lastID atomic.Int64 // the id of the last request sent

	mu      sync.Mutex
	pending map[jsonrpc.ID]chan taskAnswer // calls awaiting their answer, by id; guarded by mu
	notes   []taskNote                     // every notification received, in order; guarded by mu
	// noted is signalled (without blocking) at each notification.
	noted chan struct{}
	// readDone is closed when the reader goroutine has ended: the
	// server's output ended or the connection was closed.
	readDone chan struct{}
	readErr  error // why the reader ended; written before readDone is closed
}

// taskNote is a notification from the server.
type taskNote struct {
	Method string
	Params json.RawMessage
	// Seq is the message's place in the server's output (1 is the first).
	Seq int
}

// taskAnswer is an answer from the server, with its place in the
// server's output.
type taskAnswer struct {
	resp *jsonrpc.Response
	seq  int
}

// decode decodes the notification's params into out, failing the test
// when they do not fit.
func (n taskNote) decode(t testing.TB, out any) {
	t.Helper()
	if err := json.Unmarshal(n.Params, out); err != nil {
		t.Fatalf("%s params %s: %v", n.Method, n.Params, err)
	}
}

// startTaskSession starts `toolhost mcp` on a root of its own with more
// flags and connects a raw session to it. The session is closed at the
// test's end: stdin closed, the server's exit and the reader awaited.
func startTaskSession(t *testing.T, args ...string) *taskSession {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"mcp", "--root", root, "--log-level", "warn", "--kill-grace", "500ms"}, args...)...)
	cmd.Stderr, cmd.Env = &testLogWriter{t: t}, quickExitEnv()
	return openTaskSession(t, cmd, root)
}

// openTaskSession starts cmd, a server on root, and connects a raw
// session to it, closed at the test's end as startTaskSession's is.
func openTaskSession(t *testing.T, cmd *exec.Cmd, root string) *taskSession {
	t.Helper()
	ctx, cancel := limit()
	defer cancel()
	conn, err := (&sdk.CommandTransport{Command: cmd}).Connect(ctx)
	if err != nil {
		t.Fatalf("starting toolhost mcp: %v", err)
	}
	s := &taskSession{t: t, conn: conn, root: root, cmd: cmd, pending: map[jsonrpc.ID]chan taskAnswer{},
		noted: make(chan struct{}, 1), readDone: make(chan struct{})}
	go s.read() // owned by the session: the cleanup below waits on readDone
	t.Cleanup(func() {
		if err := conn.Close(); err != nil && !s.killed {
			t.Errorf("closing the session (stdin, then the server's exit): %v", err)
		}
		<-s.readDone
	})
	return s
}

// read routes the server's messages until its output ends: answers to the
// calls awaiting them, notifications to notes; a request from the server
// gets method-not-found (these tests declare no client feature).
func (s *taskSession) read() {
	defer close(s.readDone)
	seq := 0 // the place of the message in the server's output
	for {
		m, err := s.conn.Read(context.Background())
		if err != nil {
			s.readErr = err
			return
		}
		seq++
		switch m := m.(type) {
		case *jsonrpc.Response:
			s.mu.Lock()
			ch, ok := s.pending[m.ID]
			delete(s.pending, m.ID)
			s.mu.Unlock()
			if !ok {
				s.t.Errorf("an answer to id %v, which no call awaits", m.ID.Raw())
				continue
			}
			ch <- taskAnswer{resp: m, seq: seq}
		case *jsonrpc.Request:
			if m.IsCall() {
				_ = s.conn.Write(context.Background(), &jsonrpc.Response{ID: m.ID,
					Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the test client serves no " + m.Method}})
				continue
			}
			s.mu.Lock()
			s.notes = append(s.notes, taskNote{Method: m.Method, Params: m.Params, Seq: seq})
			s.mu.Unlock()
			select {
			case s.noted <- struct{}{}:
			default:
			}
		}
	}
}

// taskCall is a request in flight.
type taskCall struct {
	s      *taskSession
	id     jsonrpc.ID
	method string
	done   chan taskAnswer // receives the answer once
	// seq is the answer's place in the server's output, set by await
	// once the answer came.
	seq int
}

// wireID is the request's id as it is on the wire, decoded as JSON
// numbers are: for comparing with ids the server echoes in params.
func (c *taskCall) wireID() float64 { return float64(c.id.Raw().(int64)) }

// send sends a request with the session's _meta triple and returns it in
// flight.
func (s *taskSession) send(method string, params map[string]any) *taskCall {
	return s.sendMeta(method, params, s.meta)
}

// sendMeta sends a request whose _meta carries meta (merged over any
// _meta of params) and returns it in flight. It is safe from any
// goroutine: it reports a failed write with Errorf, and the call then
// never answers.
func (s *taskSession) sendMeta(method string, params map[string]any, meta map[string]any) *taskCall {
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	if len(meta) > 0 {
		m := map[string]any{}
		if old, ok := p["_meta"].(map[string]any); ok {
			for k, v := range old {
				m[k] = v
			}
		}
		for k, v := range meta {
			m[k] = v
		}
		p["_meta"] = m
	}
	raw, err := json.Marshal(p)
	if err != nil {
		s.t.Errorf("%s params: %v", method, err)
	}
	id, _ := jsonrpc.MakeID(float64(s.lastID.Add(1)))
	c := &taskCall{s: s, id: id, method: method, done: make(chan taskAnswer, 1)}
	s.mu.Lock()
	s.pending[id] = c.done
	s.mu.Unlock()
	if err := s.conn.Write(context.Background(), &jsonrpc.Request{ID: id, Method: method, Params: raw}); err != nil {
		s.t.Errorf("writing %s: %v", method, err)
	}
	return c
}

// errNoAnswer says a call got no answer within waitLimit, or the server's
// output ended first.
var errNoAnswer = errors.New("no answer")

// await waits for the answer: its result, or its JSON-RPC error. The last
// error says there was no answer; await is safe from any goroutine.
func (c *taskCall) await() (json.RawMessage, *jsonrpc.Error, error) {
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case a := <-c.done:
		c.seq = a.seq
		r := a.resp
		if r.Error != nil {
			var we *jsonrpc.Error
			if !errors.As(r.Error, &we) {
				we = &jsonrpc.Error{Message: r.Error.Error()}
			}
			return nil, we, nil
		}
		return r.Result, nil, nil
	case <-c.s.readDone:
		return nil, nil, fmt.Errorf("%w to %s (id %v): the server's output ended: %v", errNoAnswer, c.method, c.id.Raw(), c.s.readErr)
	case <-timer.C:
		return nil, nil, fmt.Errorf("%w to %s (id %v) within %v", errNoAnswer, c.method, c.id.Raw(), waitLimit)
	}
}

// result waits for a result and decodes it into out (when not nil); an
// error answer or none fails the test.
func (c *taskCall) result(out any) json.RawMessage {
	c.s.t.Helper()
	res, rerr, err := c.await()
	if err != nil {
		c.s.t.Fatal(err)
	}
	if rerr != nil {
		c.s.t.Fatalf("%s: error %d %q (data %s), want a result", c.method, rerr.Code, rerr.Message, rerr.Data)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			c.s.t.Fatalf("%s result %s: %v", c.method, res, err)
		}
	}
	return res
}

// rpcError waits for an error answer with the code and returns it; a
// result, another code or no answer fails the test.
func (c *taskCall) rpcError(code int64) *jsonrpc.Error {
	c.s.t.Helper()
	res, rerr, err := c.await()
	if err != nil {
		c.s.t.Fatal(err)
	}
	if rerr == nil {
		c.s.t.Fatalf("%s: result %s, want error %d", c.method, res, code)
	}
	if rerr.Code != code {
		c.s.t.Fatalf("%s: error %d %q (data %s), want code %d", c.method, rerr.Code, rerr.Message, rerr.Data, code)
	}
	return rerr
}

// call sends a request and waits for its result, decoded into out.
func (s *taskSession) call(method string, params map[string]any, out any) json.RawMessage {
	s.t.Helper()
	return s.send(method, params).result(out)
}

// callErr sends a request that must fail with code, and returns the error.
func (s *taskSession) callErr(method string, params map[string]any, code int64) *jsonrpc.Error {
	s.t.Helper()
	return s.send(method, params).rpcError(code)
}

// notify sends a notification.
func (s *taskSession) notify(method string, params map[string]any) {
	s.t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.conn.Write(context.Background(), &jsonrpc.Request{Method: method, Params: raw}); err != nil {
		s.t.Fatalf("writing %s: %v", method, err)
	}
}

// cancelRequest ends a request in flight with notifications/cancelled.
func (s *taskSession) cancelRequest(c *taskCall) {
	s.t.Helper()
	s.notify("notifications/cancelled", map[string]any{"requestId": c.id.Raw(), "reason": "the test is done with it"})
}

// snapshot returns every notification received so far, in order.
func (s *taskSession) snapshot() []taskNote {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]taskNote(nil), s.notes...)
}

// notesOf returns the notifications received so far with the method.
func (s *taskSession) notesOf(method string) []taskNote {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []taskNote
	for _, n := range s.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// awaitNotes waits until the notifications received so far satisfy done,
// and returns them all, in order.
func (s *taskSession) awaitNotes(what string, done func([]taskNote) bool) []taskNote {
	s.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got := append([]taskNote(nil), s.notes...)
		s.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-s.noted:
		case <-s.readDone:
			s.t.Fatalf("waiting for %s: the server's output ended (%v) after %d notifications", what, s.readErr, len(got))
		case <-deadline.C:
			var methods []string
			for _, n := range got {
				methods = append(methods, n.Method)
			}
			s.t.Fatalf("waiting for %s: not there after %v; the notifications: %v", what, waitLimit, methods)
		}
	}
}

// v2Meta returns a 2026-07-28 _meta triple; withTasks declares the tasks
// extension in the client capabilities.
func v2Meta(withTasks bool) map[string]any {
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{tasksExt: map[string]any{}}
	}
	return map[string]any{
		metaVersion:    versionTasks2026,
		metaClientInfo: map[string]any{"name": "toolhost-tasks-test", "version": "1"},
		metaClientCaps: caps,
	}
}

// startTasks2026 starts a session that speaks 2026-07-28 with the tasks
// extension declared in every request, and returns it with the
// server/discover result.
func startTasks2026(t *testing.T, args ...string) (*taskSession, map[string]any) {
	t.Helper()
	s := startTaskSession(t, args...)
	s.meta = v2Meta(true)
	var disc map[string]any
	s.call("server/discover", nil, &disc)
	return s, disc
}

// awaitEvictionWarning waits for toolhost's warning that artifacts were
// evicted over --artifacts-cap-bytes, as a notifications/message.
func (s *taskSession) awaitEvictionWarning() {
	s.t.Helper()
	s.awaitNotes("the eviction's warning", func(notes []taskNote) bool {
		for _, n := range notes {
			if n.Method == "notifications/message" && strings.Contains(string(n.Params), "evicted") {
				return true
			}
		}
		return false
	})
}

// startTasks2025 starts a session negotiated by initialize at 2025-11-25,
// and returns it with the initialize result.
func startTasks2025(t *testing.T, args ...string) (*taskSession, map[string]any) {
	t.Helper()
	s := startTaskSession(t, args...)
	var init map[string]any
	s.call("initialize", map[string]any{"protocolVersion": versionTasks2025, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolhost-tasks-test", "version": "1"}}, &init)
	if v := init["protocolVersion"]; v != versionTasks2025 {
		t.Fatalf("initialize negotiated %v, want %s", v, versionTasks2025)
	}
	s.notify("notifications/initialized", map[string]any{})
	return s, init
}

// toolCall sends tools/call with the arguments and, when task is not nil,
// params.task.
func (s *taskSession) toolCall(name string, args map[string]any, task any) *taskCall {
	p := map[string]any{"name": name, "arguments": args}
	if task != nil {
		p["task"] = task
	}
	return s.send("tools/call", p)
}

// task2025 is a Task of the 2025-11-25 form.
type task2025 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval"`
}

// createTask2025 is a 2025-11-25 CreateTaskResult.
type createTask2025 struct {
	Task *task2025      `json:"task"`
	Meta map[string]any `json:"_meta"`
}

// task2026 is a task of the 2026-07-28 form: a CreateTaskResult, a
// tasks/get result, or (without resultType, with _meta) the params of
// notifications/tasks.
type task2026 struct {
	ResultType     string         `json:"resultType"`
	TaskID         string         `json:"taskId"`
	Status         string         `json:"status"`
	StatusMessage  string         `json:"statusMessage"`
	CreatedAt      string         `json:"createdAt"`
	LastUpdatedAt  string         `json:"lastUpdatedAt"`
	TTLMs          *int64         `json:"ttlMs"`
	PollIntervalMs *int64         `json:"pollIntervalMs"`
	Result         *callResult    `json:"result"`
	Error          *jsonrpc.Error `json:"error"`
	Meta           map[string]any `json:"_meta"`
}

// callResult is a CallToolResult as the tests look at it.
type callResult struct {
	ResultType        string           `json:"resultType"`
	IsError           bool             `json:"isError"`
	Content           []map[string]any `json:"content"`
	StructuredContent *toolhostResult  `json:"structuredContent"`
	Meta              map[string]any   `json:"_meta"`
}

// toolhostResult is the part of toolhost's structured content (a
// ToolResult, a LongRunningResult or an error) the tests look at.
type toolhostResult struct {
	Status   string `json:"status"`
	HandleID string `json:"handleId"`
	ExitCode *int   `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Error    *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// taskIDOf returns the taskId in a notification's params.
func taskIDOf(t testing.TB, n taskNote) string {
	t.Helper()
	var p struct {
		TaskID string `json:"taskId"`
	}
	n.decode(t, &p)
	return p.TaskID
}

// checkTimes fails the test unless createdAt and lastUpdatedAt are
// RFC 3339 times, the second not before the first.
func checkTimes(t testing.TB, what, createdAt, lastUpdatedAt string) {
	t.Helper()
	c, err1 := time.Parse(time.RFC3339Nano, createdAt)
	u, err2 := time.Parse(time.RFC3339Nano, lastUpdatedAt)
	if err1 != nil || err2 != nil {
		t.Errorf("%s: createdAt %q, lastUpdatedAt %q: want RFC 3339 times (%v, %v)", what, createdAt, lastUpdatedAt, err1, err2)
		return
	}
	if u.Before(c) {
		t.Errorf("%s: lastUpdatedAt %s before createdAt %s", what, u, c)
	}
}

// checkPollInterval fails the test unless a working task's poll interval
// is given and within the contract's 250..5000 ms.
func checkPollInterval(t testing.TB, what string, ms *int64) {
	t.Helper()
	if ms == nil {
		t.Errorf("%s: no poll interval while working", what)
	} else if *ms < 250 || *ms > 5000 {
		t.Errorf("%s: poll interval %d ms, want 250..5000", what, *ms)
	}
}

// isHandleTaskID says id is a task id that is a handle id: "h-N".
func isHandleTaskID(id string) bool {
	n, ok := strings.CutPrefix(id, "h-")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}

// readLines reads a file of lines the command wrote, e.g. its pids.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(bytes.TrimSpace(b)))
}

// outsidePIDs turns the pids a command printed ($$, $!) into the server's:
// a confined command has a PID namespace of its own, whose pids mean
// nothing outside it. Each live process of mk's tree says its pid in every
// namespace from the server's down (NSpid in /proc/<pid>/status); a pid of
// an unconfined command is the server's already.
func outsidePIDs(t *testing.T, mk marker, printed []string) []string {
	t.Helper()
	// A process in the middle of an exec shows neither its argv nor its
	// environment for a moment: scan again until every printed pid is
	// found, or the namespace shows it never will be.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(waitLimit)
	for {
		outer := namespacePIDs(mk)
		out := make([]string, len(printed))
		missing := ""
		for i, p := range printed {
			o, ok := outer[p]
			switch {
			case ok:
				out[i] = o
			case len(outer) > 0:
				missing = p
			default:
				out[i] = p
			}
		}
		if missing == "" {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %s, printed by the command, is no live process of its namespace", missing)
		}
		<-tick.C
	}
}

// namespacePIDs maps the pids mk's processes have in their own PID
// namespace to this machine's.
func namespacePIDs(mk marker) map[string]string {
	outer := map[string]string{}
	for _, p := range scanProcs(mk, "") {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
		if err != nil {
			continue
		}
		for l := range strings.SplitSeq(string(status), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "NSpid:" {
				outer[f[len(f)-1]] = f[1]
			}
		}
	}
	return outer
}

// alive says whether the process runs (and is not a zombie).
func alive(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return !(i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z')
}
