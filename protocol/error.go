package protocol

import "fmt"

// Error is an error that travels on the wire: a code, a message and data
// saying what and where.
type Error struct {
	Code    int
	Message string
	Data    *ErrorData
}

// NewError returns an Error with the given code, message and data.
func NewError(code int, data *ErrorData, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Data: data}
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// InvalidParams returns a -32602 error naming the field that is wrong.
func InvalidParams(field, format string, args ...any) *Error {
	reason := fmt.Sprintf(format, args...)
	msg := "invalid params: " + reason
	if field != "" {
		msg = fmt.Sprintf("invalid params: %s: %s", field, reason)
	}
	return &Error{Code: CodeInvalidParams, Message: msg, Data: &ErrorData{Field: field, Reason: reason}}
}

// Sentinels to match with errors.Is: an *Error is one of these when its
// code is the sentinel's, whatever its message and data.
var (
	ErrParse                  = &Error{Code: CodeParseError, Message: "parse error"}
	ErrInvalidRequest         = &Error{Code: CodeInvalidRequest, Message: "invalid request"}
	ErrMethodNotFound         = &Error{Code: CodeMethodNotFound, Message: "method not found"}
	ErrInvalidParams          = &Error{Code: CodeInvalidParams, Message: "invalid params"}
	ErrInternal               = &Error{Code: CodeInternalError, Message: "internal error"}
	ErrServerNotInitialized   = &Error{Code: CodeServerNotInitialized, Message: "server not initialized"}
	ErrRequestCancelled       = &Error{Code: CodeRequestCancelled, Message: "request cancelled"}
	ErrPathOutsideWorkspace   = &Error{Code: CodePathOutsideWorkspace, Message: "path outside workspace"}
	ErrNotFound               = &Error{Code: CodeNotFound, Message: "not found"}
	ErrHandleNotFound         = &Error{Code: CodeHandleNotFound, Message: "handle not found"}
	ErrSpawnFailed            = &Error{Code: CodeSpawnFailed, Message: "spawn failed"}
	ErrTooLarge               = &Error{Code: CodeTooLarge, Message: "too large"}
	ErrBusy                   = &Error{Code: CodeBusy, Message: "busy"}
	ErrReadOnlyRoot           = &Error{Code: CodeReadOnlyRoot, Message: "read-only root"}
	ErrConflict               = &Error{Code: CodeConflict, Message: "conflict"}
	ErrSandboxUnavailable     = &Error{Code: CodeSandboxUnavailable, Message: "sandbox unavailable"}
	ErrNotRunning             = &Error{Code: CodeNotRunning, Message: "not running"}
	ErrDestinationUnavailable = &Error{Code: CodeDestinationUnavailable, Message: "destination unavailable"}
	ErrSessionNotFound        = &Error{Code: CodeSessionNotFound, Message: "session not found"}
	ErrSnapshotTooLarge       = &Error{Code: CodeSnapshotTooLarge, Message: "snapshot too large"}
	ErrSnapshotBusy           = &Error{Code: CodeSnapshotBusy, Message: "snapshot busy"}
	ErrSnapshotNotFound       = &Error{Code: CodeSnapshotNotFound, Message: "snapshot not found"}
	ErrApprovalDenied         = &Error{Code: CodeApprovalDenied, Message: "approval denied"}
	ErrMountFailed            = &Error{Code: CodeMountFailed, Message: "mount failed"}
)
