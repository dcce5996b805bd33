package rpc

import (
	"bytes"
	"encoding/json"
)

// RequestType names a request method together with the Go types of its
// params and result, so that the method table, the Go client and the
// generated TypeScript all carry them from this one declaration.
type RequestType[P, R any] string

// Method returns the method name.
func (t RequestType[P, R]) Method() string { return string(t) }

// NotificationType names a notification method together with the Go type
// of its params.
type NotificationType[P any] string

// Method returns the method name.
func (t NotificationType[P]) Method() string { return string(t) }

// Null stands for absent params or a null result (shutdown, exit).
//
//tsgen:type null
type Null struct{}

// MarshalJSON encodes null.
func (Null) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// UnmarshalJSON accepts anything: the value carries nothing.
func (*Null) UnmarshalJSON([]byte) error { return nil }

// InitializedParams are the params of initialized: an empty object.
type InitializedParams struct{}

// ProgressResult is the result of progress: one handle's snapshot when the
// params name a handle, else every handle's. Exactly one of One and List is
// set.
//
//tsgen:type Progress | ProgressList
type ProgressResult struct {
	One  *Progress
	List *ProgressList
}

// MarshalJSON encodes the snapshot or the list that is set.
func (r ProgressResult) MarshalJSON() ([]byte, error) {
	if r.One != nil {
		return json.Marshal(r.One)
	}
	if r.List == nil {
		return []byte(`{"handles":[]}`), nil
	}
	return json.Marshal(r.List)
}

// UnmarshalJSON decodes a list (an object with "handles") or a snapshot.
func (r *ProgressResult) UnmarshalJSON(b []byte) error {
	var probe struct {
		Handles json.RawMessage `json:"handles"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if probe.Handles != nil && !bytes.Equal(bytes.TrimSpace(probe.Handles), []byte("null")) {
		r.One, r.List = nil, new(ProgressList)
		return json.Unmarshal(b, r.List)
	}
	r.One, r.List = new(Progress), nil
	return json.Unmarshal(b, r.One)
}

// The requests a client sends, with their types.
var (
	InitializeRequest  = RequestType[InitializeParams, InitializeResult](MethodInitialize)
	ShutdownRequest    = RequestType[Null, Null](MethodShutdown)
	RunCommandRequest  = RequestType[RunCommandParams, ToolResult](MethodRunCommand)
	LongRunningRequest = RequestType[LongRunningParams, LongRunningResult](MethodLongRunning)
	CancelRequest      = RequestType[CancelParams, ToolResult](MethodCancel)
	ReadFileRequest    = RequestType[ReadFileParams, ReadFileResult](MethodReadFile)
	WriteFileRequest   = RequestType[WriteFileParams, WriteFileResult](MethodWriteFile)
	ProgressRequest    = RequestType[ProgressParams, ProgressResult](MethodProgress)
)

// The notifications a client sends, with their types.
var (
	InitializedNotification            = NotificationType[InitializedParams](NotifyInitialized)
	ExitNotification                   = NotificationType[Null](NotifyExit)
	CancelRequestNotification          = NotificationType[CancelRequestParams](MethodCancelRequest)
	WorkDoneProgressCancelNotification = NotificationType[WorkDoneProgressCancelParams](NotifyWorkDoneProgressCancel)
)

// The notifications and requests the server sends, with their types.
var (
	ToolResultNotification        = NotificationType[ToolResult](NotifyToolResult)
	StepTransitionNotification    = NotificationType[StepTransitionParams](NotifyStepTransition)
	HeartbeatNotification         = NotificationType[HeartbeatParams](NotifyHeartbeat)
	OutputNotification            = NotificationType[OutputParams](NotifyOutput)
	WorkDoneProgressNotification  = NotificationType[ProgressNotification](NotifyProgress)
	LogMessageNotification        = NotificationType[LogMessageParams](NotifyLogMessage)
	WorkDoneProgressCreateRequest = RequestType[WorkDoneProgressCreateParams, Null](MethodWorkDoneProgressCreate)
)
