// Package taskwire is the wire of MCP tasks, which the Go SDK does not
// have: the types, method names, _meta keys and errors of the two forms
// clients speak (see docs/mcp.md, "Tasks"), the experimental tasks of MCP
// 2025-11-25 and the extension io.modelcontextprotocol/tasks of
// 2026-07-28, written from the spec's text. It holds declarations only;
// package mcp keeps the tasks. It imports the SDK and nothing of toolhost.
package taskwire

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol versions and names tasks depend on.
const (
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28"

	// TasksExtension names the 2026-07-28 extension.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// RelatedTaskKey is the _meta member naming the task a 2025-11-25
	// message is about.
	RelatedTaskKey = "io.modelcontextprotocol/related-task"
	// ImmediateResponseKey is the _meta member of a CreateTaskResult that
	// a host may hand the model while the task runs (2025-11-25).
	ImmediateResponseKey = "io.modelcontextprotocol/model-immediate-response"
	// SubscriptionIDKey is the _meta member naming a subscriptions/listen.
	SubscriptionIDKey = "io.modelcontextprotocol/subscriptionId"

	MethodTaskStatus   = "notifications/tasks/status"               // 2025-11-25
	MethodTasks        = "notifications/tasks"                      // 2026-07-28
	MethodSubscribed   = "notifications/subscriptions/acknowledged" // 2026-07-28
	codeMissingCapable = -32021                                     // Missing Required Client Capability
	ResultTypeTask     = "task"                                     // 2026-07-28 CreateTaskResult
	ResultTypeComplete = "complete"
)

// Status is a task's state.
type Status string

const (
	Working Status = "working"
	// InputRequired is shown while a working task waits on its client's
	// user (an elicitation); it goes back to working after the answer.
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether a task in state st never changes again.
func (st Status) Terminal() bool { return st != Working && st != InputRequired && st != "" }

// LegacyTask is a Task of 2025-11-25: tasks/get's and tasks/cancel's
// result, an element of tasks/list, notifications/tasks/status's params
// and CreateTaskResult's task.
type LegacyTask struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is how long after createdAt the task is kept, in ms (null: for
	// ever; toolhost always has one).
	TTL *int64 `json:"ttl"`
	// PollInterval is the suggested wait between tasks/get, in ms, while
	// the task works.
	PollInterval *int64 `json:"pollInterval,omitempty"`
}

// LegacyTaskResult is the answer of tasks/get and tasks/cancel (2025-11-25).
type LegacyTaskResult struct {
	sdk.ResultBase
	LegacyTask
}

// LegacyCreateTaskResult answers a task-augmented tools/call (2025-11-25).
type LegacyCreateTaskResult struct {
	sdk.ResultBase
	Task LegacyTask `json:"task"`
}

// LegacyListTasksResult is tasks/list's answer (2025-11-25).
type LegacyListTasksResult struct {
	sdk.ResultBase
	Tasks      []LegacyTask `json:"tasks"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// ExtTask is a DetailedTask of the 2026-07-28 extension: tasks/get's
// result, notifications/tasks's params, and (with resultType "task" and
// neither result nor error) a CreateTaskResult.
type ExtTask struct {
	sdk.ResultBase
	ResultType    string `json:"resultType,omitempty"`
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTLMs         *int64 `json:"ttlMs"`
	// PollIntervalMs is present while the task works.
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	// Result is what tools/call would have answered: set when completed.
	Result *sdk.CallToolResult `json:"result,omitempty"`
	// Error is the JSON-RPC error the call failed with: set when failed.
	Error *Error `json:"error,omitempty"`
}

// Error is a JSON-RPC error object, as a task's error member holds it.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// AckResult is the empty answer of tasks/update and tasks/cancel
// (2026-07-28).
type AckResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// TaskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type TaskIDParams struct {
	sdk.ParamsBase
	TaskID *string `json:"taskId"`
}

// ListTasksParams are tasks/list's params.
type ListTasksParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// UpdateTaskParams are tasks/update's params (2026-07-28).
type UpdateTaskParams struct {
	sdk.ParamsBase
	TaskID         *string        `json:"taskId"`
	InputResponses map[string]any `json:"inputResponses,omitempty"`
}

// TaskAck is the params of a subscription's acknowledgment that names
// task ids.
type TaskAck struct {
	Meta          map[string]any `json:"_meta"`
	Notifications struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

// ListenResult ends a subscriptions/listen (2026-07-28).
type ListenResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// Wire errors of tasks. Each is a *jsonrpc.Error with the code the spec
// names; errors.Is matches them by code (errTaskNotFound matches every
// -32602 of a task id).
var (
	ErrTaskNotFound    = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task not found"}
	ErrNoTasks         = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks are not served"}
	errMissingCapable  = &jsonrpc.Error{Code: codeMissingCapable, Message: "missing required client capability"}
	ErrTaskInvalidArgs = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid task"}
)

// Errorf returns a JSON-RPC error with code's code, a message and data
// (a -32601 carries no data: see methodNotFound).
func Errorf(code *jsonrpc.Error, data any, format string, args ...any) error {
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
func (e *methodNotFound) Is(target error) bool { return target == ErrNoTasks }

// As gives the wire error.
func (e *methodNotFound) As(target any) bool {
	w, ok := target.(**jsonrpc.Error)
	if ok {
		*w = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: e.msg}
	}
	return ok
}

// MissingTasksCapability is the -32021 of a request that needs the
// extension and did not declare it.
func MissingTasksCapability(method string) error {
	return Errorf(errMissingCapable, map[string]any{
		"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}},
	}, "missing required client capability: %s needs the extension %s in the request's _meta[%q].extensions", method, TasksExtension, sdk.MetaKeyClientCapabilities)
}
