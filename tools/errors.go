package tools

import (
	"errors"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/workspace"
)

// wsError maps a workspace error to its wire error, with data saying which
// path and why.
func wsError(err error) error {
	if pe, ok := isPolicy(err); ok {
		return policyError(pe)
	}
	data := &protocol.ErrorData{Reason: err.Error()}
	var pe *workspace.PathError
	if errors.As(err, &pe) {
		data.Path, data.Reason = pe.Path, pe.Reason
		data.Size, data.Limit = pe.Size, pe.Limit
		data.Expected, data.Actual = pe.Expected, pe.Actual
		if data.Reason == "" {
			data.Reason = err.Error()
		}
	}
	code := protocol.CodeInternalError
	switch {
	case errors.Is(err, workspace.ErrOutside):
		code = protocol.CodePathOutsideWorkspace
	case errors.Is(err, workspace.ErrNotFound):
		code = protocol.CodeNotFound
	case errors.Is(err, workspace.ErrReadOnly):
		code = protocol.CodeReadOnlyRoot
	case errors.Is(err, workspace.ErrTooLarge):
		code = protocol.CodeTooLarge
	case errors.Is(err, workspace.ErrConflict):
		code = protocol.CodeConflict
	case errors.Is(err, workspace.ErrNotRegular), errors.Is(err, workspace.ErrInvalid):
		code = protocol.CodeInvalidParams
		data.Field = "path"
		if pe != nil && pe.Field != "" {
			data.Field = pe.Field // bad content or expectedSha256, not the path
		}
	}
	return protocol.NewError(code, data, "%v", err)
}

// procError maps a process error to its wire error.
func procError(err error) error {
	if e, ok := sandboxError(err); ok {
		return e
	}
	data := &protocol.ErrorData{Reason: err.Error()}
	var se *process.SpawnError
	if errors.As(err, &se) {
		data.Argv0, data.Reason = se.Argv0, se.Reason
	}
	switch {
	case errors.Is(err, process.ErrSpawn):
		return protocol.NewError(protocol.CodeSpawnFailed, data, "%v", err)
	case errors.Is(err, process.ErrBusy):
		return protocol.NewError(protocol.CodeBusy, data, "%v", err)
	case errors.Is(err, process.ErrNotFound):
		return protocol.NewError(protocol.CodeNotFound, data, "%v", err)
	case errors.Is(err, process.ErrClosed):
		data.Reason = "the session is ending"
		return protocol.NewError(protocol.CodeInvalidRequest, data, "%v", err)
	case errors.Is(err, process.ErrInvalid):
		var ie *process.InvalidError
		if errors.As(err, &ie) {
			return protocol.InvalidParams(ie.Field, "%s", ie.Reason)
		}
		return protocol.NewError(protocol.CodeInvalidParams, data, "%v", err)
	}
	return protocol.NewError(protocol.CodeInternalError, data, "%v", err)
}
