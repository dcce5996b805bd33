package mcp

import (
	"context"
	"errors"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// The task table's backend: what it asks of the session under it.
var _ backend = (*Server)(nil)

// finished reports whether the router has seen handleID's toolResult.
func (s *Server) finished(handleID string) bool { return s.events.isFinished(handleID) }

// wait returns an ended handle's result.
func (s *Server) wait(ctx context.Context, handleID string) (*protocol.ToolResult, error) {
	return s.th.Wait(ctx, &protocol.WaitParams{HandleID: handleID, TimeoutMs: ptr(int64(maxWaitMs))})
}

// progress returns a running handle's snapshot.
func (s *Server) progress(ctx context.Context, handleID string) (*protocol.Progress, error) {
	res, err := s.th.Progress(ctx, &protocol.ProgressParams{HandleID: handleID})
	if err != nil {
		return nil, err
	}
	if res.One == nil {
		return nil, errors.New("progress of one handle answered a list")
	}
	return res.One, nil
}

// artifactsGone asks toolhost for the first byte of the handle's output:
// readOutput answers NotFound when the artifacts of the ended command were
// evicted. toolhost routes a destination's handle to the far toolhost,
// which keeps that command's artifacts; a path in a result is never looked
// at here, as a far one names a file of another machine. Any other answer
// (a destination that cannot be reached, a handle forgotten) says nothing
// of the artifacts, and the task is kept.
func (s *Server) artifactsGone(ctx context.Context, handleID string) bool {
	_, err := s.th.ReadOutput(ctx, &protocol.ReadOutputParams{HandleID: handleID, Stream: protocol.OutputStreamOutput, MaxBytes: ptr(int64(1))})
	return errors.Is(err, protocol.ErrNotFound)
}

// notify writes a notification the SDK has no method for, on connection
// c (nil: the only one).
func (s *Server) notify(c *conn, method string, params any) error {
	if c == nil {
		return s.out.Notify(method, params)
	}
	return c.out.Notify(method, params)
}

// logger is the session's logger.
func (s *Server) logger() *slog.Logger { return s.log }

// callResult is the MCP result of a command's ToolResult; the artifacts of
// a destination command are remembered for resources/read.
func (s *Server) callResult(res *protocol.ToolResult) *sdk.CallToolResult {
	s.ownCommand(res)
	s.far.note(res)
	return toolResultContent(res)
}
