package tools

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// The bounds of wait's timeoutMs.
const (
	defaultWaitMs = 30_000
	maxWaitMs     = 3_600_000
)

// wait answers a handle's final ToolResult once it has ended, or its
// snapshot (status "running") when timeoutMs passes first. It only waits:
// the command goes on, and any number of waits on one handle each answer.
func (t *Tools) wait(ctx context.Context, s *rpc.Session, p *protocol.WaitParams) (*protocol.ToolResult, error) {
	if p.HandleID == "" {
		return nil, protocol.InvalidParams("handleId", "required")
	}
	ms := int64(defaultWaitMs)
	if p.TimeoutMs != nil {
		ms = *p.TimeoutMs
		if ms < 0 || ms > maxWaitMs {
			return nil, protocol.InvalidParams("timeoutMs", "must be between 0 and %d, not %d", maxWaitMs, ms)
		}
	}
	_, mgr := t.state()
	cmd, ok := mgr.Lookup(p.HandleID)
	if !ok {
		if r, ok := t.adoptedResult(p.HandleID); ok {
			return &r, nil
		}
		return nil, handleNotFound(p.HandleID)
	}
	select {
	case <-cmd.Done():
		res := t.finalResult(cmd)
		return &res, nil
	default:
	}
	s.Detach(ctx) // it only waits
	tm := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer tm.Stop()
	select {
	case <-cmd.Done():
	case <-tm.C:
	case <-ctx.Done():
		return nil, protocol.NewError(protocol.CodeRequestCancelled, &protocol.ErrorData{Method: protocol.MethodWait, HandleID: p.HandleID, Reason: context.Cause(ctx).Error()},
			"request cancelled: the wait ended, the command goes on")
	}
	// The final result once Done is closed, else the snapshot now.
	select {
	case <-cmd.Done():
		res := t.finalResult(cmd)
		return &res, nil
	default:
	}
	res := toolResult(cmd.Current())
	return &res, nil
}
