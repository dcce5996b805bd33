package tools

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// DebugSleepParams are the params of debug/sleep.
type DebugSleepParams struct {
	Ms int64 `json:"ms"`
}

// DebugSleepResult is the result of debug/sleep.
type DebugSleepResult struct {
	Slept int64 `json:"slept"`
}

// Debug methods, served only with --debug-methods: they let the tests drive
// what no real method should do through the real binary.
var (
	// DebugPanicRequest panics in its handler.
	DebugPanicRequest = protocol.RequestType[protocol.Null, protocol.Null]("debug/panic")
	// DebugSleepRequest waits for ms milliseconds or until it is cancelled.
	DebugSleepRequest = protocol.RequestType[DebugSleepParams, DebugSleepResult]("debug/sleep")
)

// registerDebug puts the debug methods into the table.
func (t *Tools) registerDebug(tab *rpc.Table) {
	rpc.Handle(tab, DebugPanicRequest, func(ctx context.Context, s *rpc.Session, _ *protocol.Null) (*protocol.Null, error) {
		panic("debug/panic was called")
	})
	rpc.Handle(tab, DebugSleepRequest, func(ctx context.Context, s *rpc.Session, p *DebugSleepParams) (*DebugSleepResult, error) {
		s.Detach(ctx)
		timer := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return &DebugSleepResult{Slept: p.Ms}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
}
