package tools

import (
	"errors"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// wsError maps a workspace error to its wire error, with data saying which
// path and why.
func wsError(err error) error {
	data := &rpc.ErrorData{Reason: err.Error()}
	var pe *workspace.PathError
	if errors.As(err, &pe) {
		data.Path, data.Reason = pe.Path, pe.Reason
		data.Size, data.Limit = pe.Size, pe.Limit
		data.Expected, data.Actual = pe.Expected, pe.Actual
		if data.Reason == "" {
			data.Reason = err.Error()
		}
	}
	code := rpc.CodeInternalError
	switch {
	case errors.Is(err, workspace.ErrOutside):
		code = rpc.CodePathOutsideWorkspace
	case errors.Is(err, workspace.ErrNotFound):
		code = rpc.CodeNotFound
	case errors.Is(err, workspace.ErrReadOnly):
		code = rpc.CodeReadOnlyRoot
	case errors.Is(err, workspace.ErrTooLarge):
		code = rpc.CodeTooLarge
	case errors.Is(err, workspace.ErrConflict):
		code = rpc.CodeConflict
	case errors.Is(err, workspace.ErrNotRegular), errors.Is(err, workspace.ErrInvalid):
		code = rpc.CodeInvalidParams
		data.Field = "path"
		if pe != nil && pe.Field != "" {
			data.Field = pe.Field // bad content or expectedSha256, not the path
		}
	}
	return rpc.NewError(code, data, "%v", err)
}

// procError maps a process error to its wire error.
func procError(err error) error {
	if e, ok := sandboxError(err); ok {
		return e
	}
	data := &rpc.ErrorData{Reason: err.Error()}
	var se *process.SpawnError
	if errors.As(err, &se) {
		data.Argv0, data.Reason = se.Argv0, se.Reason
	}
	switch {
	case errors.Is(err, process.ErrSpawn):
		return rpc.NewError(rpc.CodeSpawnFailed, data, "%v", err)
	case errors.Is(err, process.ErrBusy):
		return rpc.NewError(rpc.CodeBusy, data, "%v", err)
	case errors.Is(err, process.ErrNotFound):
		return rpc.NewError(rpc.CodeNotFound, data, "%v", err)
	case errors.Is(err, process.ErrClosed):
		data.Reason = "the session is ending"
		return rpc.NewError(rpc.CodeInvalidRequest, data, "%v", err)
	case errors.Is(err, process.ErrInvalid):
		var ie *process.InvalidError
		if errors.As(err, &ie) {
			return rpc.InvalidParams(ie.Field, "%s", ie.Reason)
		}
		return rpc.NewError(rpc.CodeInvalidParams, data, "%v", err)
	}
	return rpc.NewError(rpc.CodeInternalError, data, "%v", err)
}
