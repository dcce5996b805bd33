package tools

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// cancel stops a handle's processes (TERM to the group, the grace, then
// KILL) and answers with its final ToolResult once they are gone. A handle
// that already ended answers its final result again.
func (t *Tools) cancel(ctx context.Context, s *rpc.Session, p *protocol.CancelParams) (*protocol.ToolResult, error) {
	if p.HandleID == "" {
		return nil, protocol.InvalidParams("handleId", "required")
	}
	_, mgr := t.state()
	cmd, ok := mgr.Lookup(p.HandleID)
	if !ok {
		return nil, handleNotFound(p.HandleID)
	}
	var grace time.Duration // 0: the server's kill grace
	if p.GraceMs != nil {
		if *p.GraceMs < 0 {
			return nil, protocol.InvalidParams("graceMs", "must not be negative")
		}
		grace = msDuration(*p.GraceMs)
		if grace == 0 {
			grace = time.Nanosecond // no grace: KILL right after TERM
		}
	}
	cmd.Cancel(grace)
	s.Detach(ctx) // it waits for the processes to be gone
	select {
	case <-cmd.Done():
	case <-ctx.Done():
		return nil, protocol.NewError(protocol.CodeRequestCancelled, &protocol.ErrorData{Method: protocol.MethodCancel, HandleID: p.HandleID, Reason: context.Cause(ctx).Error()},
			"request cancelled before the handle's processes were gone")
	}
	res := t.finalResult(cmd)
	return &res, nil
}

// handleNotFound is the error for an unknown handle.
func handleNotFound(id string) error {
	return protocol.NewError(protocol.CodeHandleNotFound, &protocol.ErrorData{HandleID: id, Reason: "no running or recently finished handle has this id"},
		"handle not found: %q", id)
}
