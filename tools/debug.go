package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolhost/toolhost/rpc"
)

// Debug methods, served only with --debug-methods: they let the tests drive
// what no real method should do through the real binary.
const (
	// MethodDebugPanic panics in its handler.
	MethodDebugPanic = "debug/panic"
	// MethodDebugSleep waits for ms milliseconds or until it is cancelled.
	MethodDebugSleep = "debug/sleep"
)

// RegisterDebug puts the debug methods into the table.
func (t *Tools) RegisterDebug(tab *rpc.Table) {
	tab.Handle(MethodDebugPanic, func(ctx context.Context, s *rpc.Session, raw json.RawMessage) (any, error) {
		panic("debug/panic was called")
	})
	tab.Handle(MethodDebugSleep, func(ctx context.Context, s *rpc.Session, raw json.RawMessage) (any, error) {
		var p struct {
			Ms int64 `json:"ms"`
		}
		if err := rpc.DecodeParams(raw, &p); err != nil {
			return nil, err
		}
		s.Detach(ctx)
		timer := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return map[string]int64{"slept": p.Ms}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
}
