package tools

import (
	"context"
	"encoding/base64"
	"errors"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// writeInput writes to a handle's terminal or open stdin. Its first part
// runs in wire order and takes the handle's next turn, so that writes reach
// the command in the order the requests arrived; the write itself waits
// for the command to read, cancellable, and does not detach: a client that
// keeps writing to a command that does not read stops being read once 32
// requests wait, so the server holds at most their params.
func (t *Tools) writeInput(ctx context.Context, s *rpc.Session, p *protocol.WriteInputParams) (*protocol.WriteInputResult, func(context.Context) (*protocol.WriteInputResult, error), error) {
	if p.HandleID == "" {
		return nil, nil, protocol.InvalidParams("handleId", "required")
	}
	if tg, err := t.routeHandle(p.HandleID); tg.Dest != nil || err != nil {
		if err != nil {
			return nil, nil, err
		}
		// Written to the destination here, in wire order.
		d := tg.Dest
		q := *p
		q.HandleID = tg.Far
		wait, err := d.Send(ctx, tg.Epoch, protocol.MethodWriteInput, &q)
		if err != nil {
			return nil, nil, err
		}
		return nil, func(ctx context.Context) (*protocol.WriteInputResult, error) {
			raw, err := wait(ctx)
			if err != nil {
				return nil, err
			}
			return decodeForwarded[protocol.WriteInputResult](protocol.MethodWriteInput, d, raw)
		}, nil
	}
	var data []byte
	switch p.Encoding {
	case "", protocol.EncodingUTF8:
		data = []byte(p.Data)
	case protocol.EncodingBase64:
		var err error
		if data, err = base64.StdEncoding.DecodeString(p.Data); err != nil {
			return nil, nil, protocol.InvalidParams("data", "not valid base64: %v", err)
		}
	default:
		return nil, nil, protocol.InvalidParams("encoding", `must be "utf-8" or "base64", not %q`, p.Encoding)
	}
	cmd, err := t.lookup(p.HandleID)
	if err != nil {
		return nil, nil, err
	}
	turn, err := cmd.InputTurn()
	if err != nil {
		return nil, nil, inputError(p.HandleID, err)
	}
	// The waiting part holds the bytes once: not the params' text too.
	handleID, eof := p.HandleID, p.EOF
	p.Data = ""
	return nil, func(ctx context.Context) (*protocol.WriteInputResult, error) {
		n, err := cmd.WriteInput(ctx, turn, data, eof)
		if err != nil {
			if ctx.Err() != nil {
				return nil, protocol.NewError(protocol.CodeRequestCancelled, &protocol.ErrorData{Method: protocol.MethodWriteInput, HandleID: handleID, Reason: err.Error()},
					"request cancelled: %v", err)
			}
			return nil, inputError(handleID, err)
		}
		return &protocol.WriteInputResult{BytesWritten: int64(n)}, nil
	}, nil
}

// resize sets a handle's terminal size, at once (a destination's is
// forwarded: byHandle).
func (t *Tools) resize(_ context.Context, _ *rpc.Session, p *protocol.ResizeParams) (*protocol.ResizeResult, func(context.Context) (*protocol.ResizeResult, error), error) {
	if p.HandleID == "" {
		return nil, nil, protocol.InvalidParams("handleId", "required")
	}
	if err := checkSide("rows", p.Rows); err != nil {
		return nil, nil, err
	}
	if err := checkSide("cols", p.Cols); err != nil {
		return nil, nil, err
	}
	cmd, err := t.lookup(p.HandleID)
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Resize(process.Winsize{Rows: p.Rows, Cols: p.Cols}); err != nil {
		return nil, nil, inputError(p.HandleID, err)
	}
	return &protocol.ResizeResult{}, nil, nil
}

// signal sends a signal to a handle's foreground process group, at once
// (a destination's is forwarded: byHandle).
func (t *Tools) signal(_ context.Context, _ *rpc.Session, p *protocol.SignalParams) (*protocol.SignalResult, func(context.Context) (*protocol.SignalResult, error), error) {
	if p.HandleID == "" {
		return nil, nil, protocol.InvalidParams("handleId", "required")
	}
	sig, err := process.LookupSignal(p.Signal)
	if err != nil {
		return nil, nil, protocol.InvalidParams("signal", "%v", err)
	}
	cmd, err := t.lookup(p.HandleID)
	if err != nil {
		return nil, nil, err
	}
	pgrp, err := cmd.Signal(sig)
	if err != nil {
		return nil, nil, inputError(p.HandleID, err)
	}
	return &protocol.SignalResult{ProcessGroupID: pgrp}, nil, nil
}

// lookup returns a handle's command, or HandleNotFound.
func (t *Tools) lookup(handleID string) (*process.Command, error) {
	_, mgr := t.state()
	cmd, ok := mgr.Lookup(handleID)
	if !ok {
		return nil, handleNotFound(handleID)
	}
	return cmd, nil
}

// inputError maps an error of a handle's input, terminal or signals.
func inputError(handleID string, err error) error {
	var nr *process.NotRunningError
	switch {
	case errors.As(err, &nr):
		return protocol.NewError(protocol.CodeNotRunning, &protocol.ErrorData{HandleID: handleID, Status: protocol.Status(nr.Status), Reason: nr.Reason},
			"not running: %s", nr.Reason)
	case errors.Is(err, process.ErrNoInput):
		return protocol.InvalidParams("handleId", "%s was started without pty or openStdin: it takes no input", handleID)
	case errors.Is(err, process.ErrNoTerminal):
		return protocol.InvalidParams("handleId", "%s was started without pty: it has no terminal to resize", handleID)
	}
	return protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{HandleID: handleID, Reason: err.Error()}, "%v", err)
}
