package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/mcp/internal/taskwire"
	"github.com/toolhost/toolhost/protocol"
)

// reqInfo is what the tasks middleware knows of a request: the protocol
// version it speaks, and whether it declared the tasks extension.
type reqInfo struct {
	version string
	ext     bool
}

type reqInfoKey struct{}

// infoOf reads a request's protocol version and capabilities: from its
// _meta (2026-07-28), else from the session's initialize.
func infoOf(req sdk.Request) reqInfo {
	var info reqInfo
	var caps *sdk.ClientCapabilities
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		if r, ok := req.(interface {
			ProtocolVersion() string
			ClientCapabilities() *sdk.ClientCapabilities
		}); ok {
			info.version, caps = r.ProtocolVersion(), r.ClientCapabilities()
		}
	} else if ss, _ := req.GetSession().(*sdk.ServerSession); ss != nil {
		// A request without params (tasks/list, say): the SDK's accessors
		// would reach through the nil params of a custom method; the
		// session's initialize is all there is to read.
		if ip := ss.InitializeParams(); ip != nil {
			info.version, caps = ip.ProtocolVersion, ip.Capabilities
		}
	}
	if caps != nil && info.version >= taskwire.Version20260728 {
		_, info.ext = caps.Extensions[taskwire.TasksExtension]
	}
	return info
}

// reqInfoFrom returns the info the middleware put in ctx.
func reqInfoFrom(ctx context.Context) reqInfo {
	info, _ := ctx.Value(reqInfoKey{}).(reqInfo)
	return info
}

// taskCall is a tools/call that may become a task: the middleware puts it
// in ctx, and the tool's handler, once its command has a handle, makes the
// task (startTask) and leaves in it the answer to give instead of its own.
type taskCall struct {
	form taskForm
	ttl  time.Duration
	// task and answer are set by startTask, on the handler's goroutine,
	// and read by the middleware once the handler has returned.
	task   *task
	answer sdk.Result
}

type taskCallKey struct{}

// taskCallFrom returns the taskCall of a tools/call that may become a
// task, or nil.
func taskCallFrom(ctx context.Context) *taskCall {
	tc, _ := ctx.Value(taskCallKey{}).(*taskCall)
	return tc
}

// taskTools are the tools that may become tasks.
var taskTools = map[string]bool{"start_command": true, "run_command": true}

// tasksMiddleware adds tasks to the SDK's handling of requests: the
// capabilities of each version, the tools' task support, tools/call
// answered with a task, and subscriptions that follow tasks. It also
// gives initialize and server/discover the instructions that name the
// network's hosts (instructionsFor).
func (s *Server) tasksMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ctx = withHTTPRequest(ctx, req)
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if r, ok := res.(*sdk.InitializeResult); ok && err == nil {
				r.Instructions = s.instructionsFor(ctx)
				return advertiseInitialize(r), nil
			}
			return res, err
		case "server/discover":
			res, err := next(ctx, method, req)
			if r, ok := res.(*sdk.DiscoverResult); ok && err == nil {
				r.Instructions = s.instructionsFor(ctx)
			}
			if r, ok := res.(*sdk.DiscoverResult); ok && err == nil && r.Capabilities != nil {
				caps := *r.Capabilities
				caps.Extensions = make(map[string]any, len(r.Capabilities.Extensions)+1)
				for k, v := range r.Capabilities.Extensions {
					caps.Extensions[k] = v
				}
				caps.Extensions[taskwire.TasksExtension] = map[string]any{}
				r.Capabilities = &caps
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if r, ok := res.(*sdk.ListToolsResult); ok && err == nil && infoOf(req).version == taskwire.Version20251125 {
				return &toolsWithTasks{ListToolsResult: r}, nil
			}
			return res, err
		case "tools/call":
			return s.callTool(ctx, next, method, req)
		case "subscriptions/listen":
			info := infoOf(req)
			if p, ok := req.GetParams().(*sdk.SubscriptionsListenParams); ok && info.version >= taskwire.Version20260728 {
				if l, ok := stdio.LiftedOf(p.Meta); ok && l.TaskIDs != nil {
					return s.listenTasks(ctx, info, l, sessionOf(req))
				}
			}
		case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
			ctx = context.WithValue(ctx, reqInfoKey{}, infoOf(req))
		}
		return next(ctx, method, req)
	}
}

// callTool is tools/call, which becomes a task when the client asks for
// one (2025-11-25) or, for a client that declared the extension, when the
// tool decides (2026-07-28).
func (s *Server) callTool(ctx context.Context, next sdk.MethodHandler, method string, req sdk.Request) (sdk.Result, error) {
	ctr, ok := req.(*sdk.CallToolRequest)
	if !ok || ctr.Params == nil {
		return next(ctx, method, req)
	}
	info := infoOf(req)
	var tc *taskCall
	switch {
	case info.version == taskwire.Version20251125:
		l, _ := stdio.LiftedOf(ctr.Params.Meta)
		if l.Task == nil {
			break
		}
		ttl, err := s.taskTTL(l.Task)
		if err != nil {
			return nil, err
		}
		if !taskTools[ctr.Params.Name] {
			return nil, taskwire.Errorf(taskwire.ErrNoTasks, nil,
				"tool %s does not support tasks (its execution.taskSupport is forbidden): call it without task; start_command and run_command do", ctr.Params.Name)
		}
		tc = &taskCall{form: formLegacy, ttl: ttl}
	case info.version >= taskwire.Version20260728 && info.ext && taskTools[ctr.Params.Name]:
		tc = &taskCall{form: formExt, ttl: s.tasks.defaultTTL}
	}
	if tc == nil {
		return next(ctx, method, req)
	}
	res, err := next(context.WithValue(ctx, taskCallKey{}, tc), method, req)
	if err != nil || tc.task != nil {
		if tc.task != nil {
			return tc.answer, nil
		}
		return res, err
	}
	ctres, ok := res.(*sdk.CallToolResult)
	if tc.form == formExt || !ok {
		return res, nil
	}
	// A 2025-11-25 client asked for a task, and the tool answered before
	// any command started (an error): the task is made, and fails at once.
	t := s.tasks.createOn(s.connOf(ctr.Session), "", formLegacy, tc.ttl, "starting "+ctr.Params.Name)
	answer := s.createTaskAnswer(t)
	s.tasks.failWith(t, ctres)
	return answer, nil
}

// taskTTL parses a 2025-11-25 task member: an object whose ttl, if any, is
// a whole number of milliseconds.
func (s *Server) taskTTL(raw json.RawMessage) (time.Duration, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		return 0, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, map[string]string{"field": "task"}, "invalid params: task must be an object such as {\"ttl\": 60000}, not %s", raw)
	}
	ttl, ok := p["ttl"]
	if !ok || stdio.IsNull(ttl) {
		return s.tasks.grant(nil), nil
	}
	ms, err := strconv.ParseInt(string(ttl), 10, 64)
	if err != nil || ms < 0 {
		return 0, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, map[string]string{"field": "task.ttl"}, "invalid params: task.ttl must be a whole number of milliseconds, 0 or more, not %s", ttl)
	}
	return s.tasks.grant(&ms), nil
}

// startTask makes the task of a tools/call whose command runs as handle
// handleID, and the answer that names it. A 2025-11-25 task keeps the
// call's progress token until it ends.
func (s *Server) startTask(ctx context.Context, req *sdk.CallToolRequest, tc *taskCall, handleID, msg string) {
	t := s.tasks.createOn(s.connOf(req.Session), handleID, tc.form, tc.ttl, msg)
	if token := req.Params.GetProgressToken(); token != nil && tc.form == formLegacy {
		_, stop := s.events.watch(context.WithoutCancel(ctx), req.Session, token, handleID, true)
		s.tasks.mu.Lock()
		if t.status.Terminal() {
			stop()
		} else {
			t.stopProgress = stop
		}
		s.tasks.mu.Unlock()
	}
	tc.task, tc.answer = t, s.createTaskAnswer(t)
	s.tasks.bind(ctx, t)
}

// createTaskAnswer is the CreateTaskResult of t, as it is now. Its taskId
// is written by the transport, which then announces the task: no
// notification about t goes out before the answer that names it.
func (s *Server) createTaskAnswer(t *task) sdk.Result {
	id, _ := json.Marshal(t.id)
	splice := s.splice
	if t.conn != nil {
		splice = t.conn.splice
	}
	placeholder, _ := splice.HoldThen(id, func() { s.tasks.announce(t) })
	now := time.Now()
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	if t.form == formExt {
		x := t.extLocked(now)
		x.TaskID, x.ResultType, x.Result, x.Error = placeholder, taskwire.ResultTypeTask, nil, nil
		return x
	}
	lt := t.legacyLocked(now)
	lt.TaskID = placeholder
	return &taskwire.LegacyCreateTaskResult{
		ResultBase: sdk.ResultBase{Meta: sdk.Meta{taskwire.ImmediateResponseKey: fmt.Sprintf(
			"%s", immediateText(t))}},
		Task: lt,
	}
}

// immediateText is what a host may tell the model while t runs. The
// model has only tools: tasks/result is the client's, which fetches the
// result itself; what the model can do meanwhile is use the handle.
func immediateText(t *task) string {
	const fetch = "the client fetches its result when it ends"
	if t.handleID == "" {
		return fmt.Sprintf("The call runs as task %s: %s.", t.id, fetch)
	}
	const tools = "read_output, write_input and cancel_command take it as handleId, and wait_command waits for the result"
	if t.id != t.handleID {
		return fmt.Sprintf("The command runs as task %s (handle %s): %s. Meanwhile %s.", t.id, t.handleID, fetch, tools)
	}
	return fmt.Sprintf("The command runs as task %s, which is also its handleId: %s. Meanwhile %s.", t.id, fetch, tools)
}

// addTaskMethods registers tasks/get, tasks/result, tasks/list,
// tasks/cancel and tasks/update.
func (s *Server) addTaskMethods() {
	must := func(err error) {
		if err != nil {
			panic("mcp: " + err.Error())
		}
	}
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/get", s.getTask))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/result", s.taskResult))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/list", s.listTasks))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/cancel", s.cancelTask))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/update", s.updateTask))
}

// checkForm says whether method is served in the version of the request
// in ctx: legacy methods in 2025-11-25, extension methods in 2026-07-28
// to a client that declared the extension.
func checkForm(ctx context.Context, method string, legacy, ext bool) (reqInfo, error) {
	info := reqInfoFrom(ctx)
	switch {
	case info.version == taskwire.Version20251125 && legacy:
		return info, nil
	case info.version >= taskwire.Version20260728 && ext:
		if !info.ext {
			return info, taskwire.MissingTasksCapability(method)
		}
		return info, nil
	case info.version >= taskwire.Version20260728:
		return info, taskwire.Errorf(taskwire.ErrNoTasks, nil, "method not found: %s is not part of the tasks extension %s (MCP %s); use tasks/get", method, taskwire.TasksExtension, info.version)
	case info.version == taskwire.Version20251125:
		return info, taskwire.Errorf(taskwire.ErrNoTasks, nil, "method not found: %s is not part of MCP 2025-11-25's tasks", method)
	}
	return info, taskwire.Errorf(taskwire.ErrNoTasks, nil, "method not found: %s: MCP %q has no tasks (they came with 2025-11-25)", method, info.version)
}

// taskFor checks that method is served to the request in ctx (checkForm)
// and returns the task id names.
func (s *Server) taskFor(ctx context.Context, ss *sdk.ServerSession, method string, legacy, ext bool, id *string) (reqInfo, *task, error) {
	info, err := checkForm(ctx, method, legacy, ext)
	if err != nil {
		return info, nil, err
	}
	t, err := s.tasks.lookup(ctx, id, s.connOf(ss).principal)
	return info, t, err
}

// getTask is tasks/get: the task's state, at once.
func (s *Server) getTask(ctx context.Context, ss *sdk.ServerSession, p *taskwire.TaskIDParams) (sdk.Result, error) {
	info, t, err := s.taskFor(ctx, ss, "tasks/get", true, true, taskIDOf(p))
	if err != nil {
		return nil, err
	}
	s.tasks.refresh(ctx, t)
	return s.taskAnswer(t, info), nil
}

// taskAnswer is t's state as tasks/get answers it in info's version.
func (s *Server) taskAnswer(t *task, info reqInfo) sdk.Result {
	now := time.Now()
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	if info.version >= taskwire.Version20260728 {
		x := t.extLocked(now)
		x.ResultType = taskwire.ResultTypeComplete
		return x
	}
	return &taskwire.LegacyTaskResult{LegacyTask: t.legacyLocked(now)}
}

// taskResult is tasks/result (2025-11-25): it waits for the task's end and
// answers what tools/call would have. Cancelling it ends the wait only.
func (s *Server) taskResult(ctx context.Context, ss *sdk.ServerSession, p *taskwire.TaskIDParams) (sdk.Result, error) {
	_, t, err := s.taskFor(ctx, ss, "tasks/result", true, false, taskIDOf(p))
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.tasks.mu.Lock()
	res := *t.result
	s.tasks.mu.Unlock()
	meta := sdk.Meta{}
	for k, v := range res.Meta {
		meta[k] = v
	}
	meta[taskwire.RelatedTaskKey] = map[string]string{"taskId": t.id}
	res.Meta = meta
	return &res, nil
}

// listTasks is tasks/list (2025-11-25): the session's tasks, oldest first,
// in pages; a shared server's lists those of the asking connection, as
// their ids are what reaches them from another.
func (s *Server) listTasks(ctx context.Context, ss *sdk.ServerSession, p *taskwire.ListTasksParams) (sdk.Result, error) {
	if _, err := checkForm(ctx, "tasks/list", true, false); err != nil {
		return nil, err
	}
	after := 0
	if p != nil && p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return nil, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, map[string]string{"field": "cursor"}, "invalid params: cursor %q is not one tasks/list gave", p.Cursor)
		}
		after = n
	}
	var own *conn
	if s.shared {
		own = s.connOf(ss)
	}
	now := time.Now()
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	s.tasks.sweepLocked(now)
	res := &taskwire.LegacyListTasksResult{Tasks: []taskwire.LegacyTask{}}
	last := 0
	for _, t := range s.tasks.order {
		if t.seq <= after || (own != nil && (t.conn != own || t.principal != own.principal)) {
			continue
		}
		if len(res.Tasks) == taskPage {
			res.NextCursor = strconv.Itoa(last)
			break
		}
		res.Tasks = append(res.Tasks, t.legacyLocked(now))
		last = t.seq
	}
	return res, nil
}

// cancelTask is tasks/cancel: the command's whole tree is stopped (the
// kill ladder) and the answer comes once it is gone. In 2025-11-25 it is
// the task, cancelled, or -32602 naming the state the task ended in first;
// in 2026-07-28 an acknowledgment.
func (s *Server) cancelTask(ctx context.Context, ss *sdk.ServerSession, p *taskwire.TaskIDParams) (sdk.Result, error) {
	info, t, err := s.taskFor(ctx, ss, "tasks/cancel", true, true, taskIDOf(p))
	if err != nil {
		return nil, err
	}
	s.tasks.mu.Lock()
	ended := t.status.Terminal()
	if !ended {
		t.cancelAsked = true
	}
	s.tasks.mu.Unlock()
	if !ended && t.handleID != "" {
		res, err := s.th.Cancel(context.WithoutCancel(ctx), &protocol.CancelParams{HandleID: t.handleID})
		if err != nil {
			s.tasks.fail(t, err)
		} else {
			// The routed toolResult may not have been through the router
			// yet: the state is decided now, the notification waits for it.
			s.tasks.end(t, res, false)
		}
	}
	if info.version >= taskwire.Version20260728 {
		return &taskwire.AckResult{ResultType: taskwire.ResultTypeComplete}, nil
	}
	s.tasks.mu.Lock()
	status := t.status
	s.tasks.mu.Unlock()
	if ended || status != taskwire.Cancelled {
		// The task had ended before this cancel, or its command ended
		// before the cancel took effect: the state it ended in stands.
		return nil, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, map[string]string{"taskId": t.id, "status": string(status)},
			"cannot cancel task %s: already in terminal status '%s'", t.id, status)
	}
	return s.taskAnswer(t, info), nil
}

// updateTask is tasks/update (2026-07-28). toolhost never asks a client
// for input, so every response is one for a key not outstanding, which
// the spec says to ignore: it acknowledges.
func (s *Server) updateTask(ctx context.Context, ss *sdk.ServerSession, p *taskwire.UpdateTaskParams) (sdk.Result, error) {
	var id *string
	if p != nil {
		id = p.TaskID
	}
	if _, _, err := s.taskFor(ctx, ss, "tasks/update", false, true, id); err != nil {
		return nil, err
	}
	return &taskwire.AckResult{ResultType: taskwire.ResultTypeComplete}, nil
}

// listenTasks serves a 2026-07-28 subscriptions/listen that names tasks:
// it acknowledges those it knows, sends each one's terminal state once,
// and lasts until the client cancels it or the session ends.
func (s *Server) listenTasks(ctx context.Context, info reqInfo, l stdio.Lifted, ss *sdk.ServerSession) (sdk.Result, error) {
	if !info.ext {
		return nil, taskwire.MissingTasksCapability("subscriptions/listen with taskIds")
	}
	var ids []string
	if err := json.Unmarshal(l.TaskIDs, &ids); err != nil {
		return nil, taskwire.Errorf(taskwire.ErrTaskInvalidArgs, map[string]string{"field": "notifications.taskIds"}, "invalid params: notifications.taskIds must be an array of task ids: %v", err)
	}
	c := s.connOf(ss)
	lis := &listener{id: json.RawMessage(l.ID), out: c.out}
	s.tasks.listen(lis, ids, c.principal)
	defer s.tasks.unlisten(lis)
	select {
	case <-ctx.Done():
	case <-s.th.Done():
	}
	return &taskwire.ListenResult{ResultBase: sdk.ResultBase{Meta: sdk.Meta{taskwire.SubscriptionIDKey: json.RawMessage(l.ID)}}, ResultType: taskwire.ResultTypeComplete}, nil
}

// sessionOf returns the session a request came on, or nil.
func sessionOf(req sdk.Request) *sdk.ServerSession {
	ss, _ := req.GetSession().(*sdk.ServerSession)
	return ss
}

// taskIDOf returns the task id of p, nil when absent.
func taskIDOf(p *taskwire.TaskIDParams) *string {
	if p == nil {
		return nil
	}
	return p.TaskID
}

// toolsWithTasks is tools/list's answer in 2025-11-25, where the tools
// that may become tasks say so in execution.taskSupport.
type toolsWithTasks struct {
	*sdk.ListToolsResult
}

// MarshalJSON adds execution.taskSupport "optional" to those tools.
func (r *toolsWithTasks) MarshalJSON() ([]byte, error) {
	tools := make([]json.RawMessage, len(r.Tools))
	for i, t := range r.Tools {
		b, err := json.Marshal(t)
		if err == nil && taskTools[t.Name] {
			b, err = setMember(b, "execution", toolExecution{TaskSupport: "optional"})
		}
		if err != nil {
			return nil, err
		}
		tools[i] = b
	}
	b, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return nil, err
	}
	return setMember(b, "tools", tools)
}

// toolExecution is a 2025-11-25 tool's execution member.
type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// initializeWithTasks is initialize's answer with the task capability of
// its version.
type initializeWithTasks struct {
	*sdk.InitializeResult
}

// advertiseInitialize adds tasks to initialize's capabilities: the
// 2025-11-25 tasks capability, or the 2026-07-28 extension; versions
// before 2025-11-25 have no tasks.
func advertiseInitialize(r *sdk.InitializeResult) sdk.Result {
	switch {
	case r.ProtocolVersion == taskwire.Version20251125:
		return &initializeWithTasks{InitializeResult: r}
	case r.ProtocolVersion >= taskwire.Version20260728 && r.Capabilities != nil:
		caps := *r.Capabilities
		caps.Extensions = map[string]any{taskwire.TasksExtension: map[string]any{}}
		for k, v := range r.Capabilities.Extensions {
			caps.Extensions[k] = v
		}
		r.Capabilities = &caps
	}
	return r
}

// legacyTasksCapability is the 2025-11-25 tasks capability: task-augmented
// tools/call, tasks/list and tasks/cancel.
var legacyTasksCapability = map[string]any{
	"list": map[string]any{}, "cancel": map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// MarshalJSON adds capabilities.tasks.
func (r *initializeWithTasks) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.InitializeResult)
	if err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(memberOf(b, "capabilities"), &caps); err != nil || caps == nil {
		caps = map[string]json.RawMessage{}
	}
	tasks, _ := json.Marshal(legacyTasksCapability)
	caps["tasks"] = tasks
	return setMember(b, "capabilities", caps)
}

// memberOf returns member key of the JSON object obj, or nil.
func memberOf(obj []byte, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil
	}
	return m[key]
}

// setMember returns the JSON object obj with member key set to v.
func setMember(obj []byte, key string, v any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[key] = b
	return json.Marshal(m)
}
