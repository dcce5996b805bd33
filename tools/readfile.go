package tools

import (
	"context"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// maxReadBytes bounds maxBytes, so that one readFile cannot make the server
// hold more than 64 MiB of file (and its JSON encoding) in memory.
const maxReadBytes = 64 << 20

// readFile reads a file, or a range of its lines, inside the root, a read
// root or the artifacts directory.
func (t *Tools) readFile(ctx context.Context, s *rpc.Session, p *protocol.ReadFileParams) (*protocol.ReadFileResult, error) {
	d, err := t.destination(p.Destination)
	q := *p
	epoch := 0
	if d == nil && err == nil {
		// A destination's path, as its answers name it.
		var tg hub.Target
		if tg, _, err = t.hub.RoutePath(p.Path); tg.Dest != nil {
			d, epoch, q.Path = tg.Dest, tg.Epoch, tg.Far
		}
	}
	if err != nil {
		return nil, err
	}
	if d != nil {
		q.Destination = ""
		return forward(ctx, s, d, epoch, protocol.ReadFileRequest, &q)
	}
	switch {
	case p.Path == "":
		return nil, protocol.InvalidParams("path", "required")
	case p.Line < 0:
		return nil, protocol.InvalidParams("line", "must be 1 or more (lines are 1-based)")
	case p.Limit < 0:
		return nil, protocol.InvalidParams("limit", "must not be negative")
	case p.MaxBytes < 0:
		return nil, protocol.InvalidParams("maxBytes", "must not be negative")
	case p.MaxBytes > maxReadBytes:
		return nil, protocol.InvalidParams("maxBytes", "must be at most %d (64 MiB); page larger files with line and limit", maxReadBytes)
	}
	ws, _ := t.state()
	r, err := ws.ReadFile(workspace.ReadOptions{Path: p.Path, Line: p.Line, Limit: p.Limit, MaxBytes: p.MaxBytes})
	if err != nil {
		return nil, wsError(err)
	}
	return &protocol.ReadFileResult{
		Path:       r.Path,
		Content:    r.Content,
		Encoding:   protocol.Encoding(r.Encoding),
		Size:       r.Size,
		StartLine:  r.StartLine,
		EndLine:    r.EndLine,
		TotalLines: r.TotalLines,
		Truncated:  r.Truncated,
		MTime:      r.MTime.UTC(),
	}, nil
}
