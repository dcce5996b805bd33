package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol of MCP tasks, in the two forms clients speak (see
// docs/mcp.md, "Tasks"): the experimental tasks of MCP 2025-11-25, and the
// extension io.modelcontextprotocol/tasks of 2026-07-28. The SDK knows
// neither: these are its types for them, written from the spec's text.

// Protocol versions and names tasks depend on.
const (
	version20251125 = "2025-11-25"
	version20260728 = "2026-07-28"

	// tasksExtension names the 2026-07-28 extension.
	tasksExtension = "io.modelcontextprotocol/tasks"
	// relatedTaskKey is the _meta member naming the task a 2025-11-25
	// message is about.
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	// immediateResponseKey is the _meta member of a CreateTaskResult that
	// a host may hand the model while the task runs (2025-11-25).
	immediateResponseKey = "io.modelcontextprotocol/model-immediate-response"
	// subscriptionIDKey is the _meta member naming a subscriptions/listen.
	subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

	methodTaskStatus   = "notifications/tasks/status"               // 2025-11-25
	methodTasks        = "notifications/tasks"                      // 2026-07-28
	methodSubscribed   = "notifications/subscriptions/acknowledged" // 2026-07-28
	codeMissingCapable = -32021                                     // Missing Required Client Capability
	resultTypeTask     = "task"                                     // 2026-07-28 CreateTaskResult
	resultTypeComplete = "complete"
)

// taskStatus is a task's state.
type taskStatus string

const (
	taskWorking   taskStatus = "working"
	taskCompleted taskStatus = "completed"
	taskFailed    taskStatus = "failed"
	taskCancelled taskStatus = "cancelled"
)

// terminal reports whether a task in state st never changes again.
func (st taskStatus) terminal() bool { return st != taskWorking && st != "" }

// legacyTask is a Task of 2025-11-25: tasks/get's and tasks/cancel's
// result, an element of tasks/list, notifications/tasks/status's params
// and CreateTaskResult's task.
type legacyTask struct {
	TaskID        string     `json:"taskId"`
	Status        taskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage,omitempty"`
	CreatedAt     string     `json:"createdAt"`
	LastUpdatedAt string     `json:"lastUpdatedAt"`
	// TTL is how long after createdAt the task is kept, in ms (null: for
	// ever; toolhost always has one).
	TTL *int64 `json:"ttl"`
	// PollInterval is the suggested wait between tasks/get, in ms, while
	// the task works.
	PollInterval *int64 `json:"pollInterval,omitempty"`
}

// legacyTaskResult is the answer of tasks/get and tasks/cancel (2025-11-25).
type legacyTaskResult struct {
	sdk.ResultBase
	legacyTask
}

// legacyCreateTaskResult answers a task-augmented tools/call (2025-11-25).
type legacyCreateTaskResult struct {
	sdk.ResultBase
	Task legacyTask `json:"task"`
}

// legacyListTasksResult is tasks/list's answer (2025-11-25).
type legacyListTasksResult struct {
	sdk.ResultBase
	Tasks      []legacyTask `json:"tasks"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// extTask is a DetailedTask of the 2026-07-28 extension: tasks/get's
// result, notifications/tasks's params, and (with resultType "task" and
// neither result nor error) a CreateTaskResult.
type extTask struct {
	sdk.ResultBase
	ResultType    string     `json:"resultType,omitempty"`
	TaskID        string     `json:"taskId"`
	Status        taskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage,omitempty"`
	CreatedAt     string     `json:"createdAt"`
	LastUpdatedAt string     `json:"lastUpdatedAt"`
	TTLMs         *int64     `json:"ttlMs"`
	// PollIntervalMs is present while the task works.
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	// Result is what tools/call would have answered: set when completed.
	Result *sdk.CallToolResult `json:"result,omitempty"`
	// Error is the JSON-RPC error the call failed with: set when failed.
	Error *wireError `json:"error,omitempty"`
}

// wireError is a JSON-RPC error object, as a task's error member holds it.
type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// ackResult is the empty answer of tasks/update and tasks/cancel
// (2026-07-28).
type ackResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskIDParams struct {
	sdk.ParamsBase
	TaskID *string `json:"taskId"`
}

// listTasksParams are tasks/list's params.
type listTasksParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// updateTaskParams are tasks/update's params (2026-07-28).
type updateTaskParams struct {
	sdk.ParamsBase
	TaskID         *string        `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses,omitempty"`
}

// taskAck is the params of a subscription's acknowledgment that names
// task ids.
type taskAck struct {
	Meta          map[string]any `json:"_meta"`
	Notifications struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// listenResult ends a subscriptions/listen (2026-07-28).
type listenResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// Wire errors of tasks. Each is a *jsonrpc.Error with the code the spec
// names; errors.Is matches them by code (errTaskNotFound matches every
// -32602 of a task id).
var (
	errTaskNotFound    = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found"}
	errNoTasks         = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks are not served"}
	errMissingCapable  = &jsonrpc.Error{Code: codeMissingCapable, Message: "missing required client capability"}
	errTaskInvalidArgs = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid task"}
)

// wireErr returns a JSON-RPC error with code's code, a message and data
// (a -32601 carries no data: see methodNotFound).
func wireErr(code *jsonrpc.Error, data any, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if code.Code == jsonrpc.CodeMethodNotFound {
		return &methodNotFound{msg: msg}
	}
	e := &jsonrpc.Error{Code: code.Code, Message: msg}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

// methodNotFound is a -32601 that keeps its message. The SDK's connection
// gives any error that errors.Is its method-not-found its own message
// ("method not found: \"tools/call\""), which would hide why; this one
// is not that error to errors.Is, only to errors.As, which is how the
// connection finds an error's code. errors.Is matches it to errNoTasks.
type methodNotFound struct{ msg string }

func (e *methodNotFound) Error() string { return e.msg }

// Is matches errNoTasks.
func (e *methodNotFound) Is(target error) bool { return target == errNoTasks }

// As gives the wire error.
func (e *methodNotFound) As(target any) bool {
	w, ok := target.(**jsonrpc.Error)
	if ok {
		*w = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: e.msg}
	}
	return ok
}

// missingTasksCapability is the -32021 of a request that needs the
// extension and did not declare it.
func missingTasksCapability(method string) error {
	return wireErr(errMissingCapable, map[string]any{
		"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}},
	}, "missing required client capability: %s needs the extension %s in the request's _meta[%q].extensions", method, tasksExtension, sdk.MetaKeyClientCapabilities)
}
