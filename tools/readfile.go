package tools

import (
	"context"

	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// maxReadBytes bounds maxBytes, so that one readFile cannot make the server
// hold more than 64 MiB of file (and its JSON encoding) in memory.
const maxReadBytes = 64 << 20

// readFile reads a file, or a range of its lines, inside the root, a read
// root or the artifacts directory.
func (t *Tools) readFile(ctx context.Context, s *rpc.Session, p *rpc.ReadFileParams) (*rpc.ReadFileResult, error) {
	d, err := t.destination(p.Destination)
	q := *p
	if d == nil && err == nil {
		// A destination's artifact path, as its ToolResult gave it.
		var far string
		if d, far, _, err = t.hub.RoutePath(p.Path); d != nil {
			q.Path = far
		}
	}
	if err != nil {
		return nil, err
	}
	if d != nil {
		q.Destination = ""
		r, err := forward(ctx, s, d, rpc.ReadFileRequest, &q)
		if err == nil {
			r.Path = farPath(d, r.Path)
		}
		return r, err
	}
	switch {
	case p.Path == "":
		return nil, rpc.InvalidParams("path", "required")
	case p.Line < 0:
		return nil, rpc.InvalidParams("line", "must be 1 or more (lines are 1-based)")
	case p.Limit < 0:
		return nil, rpc.InvalidParams("limit", "must not be negative")
	case p.MaxBytes < 0:
		return nil, rpc.InvalidParams("maxBytes", "must not be negative")
	case p.MaxBytes > maxReadBytes:
		return nil, rpc.InvalidParams("maxBytes", "must be at most %d (64 MiB); page larger files with line and limit", maxReadBytes)
	}
	ws, _ := t.state()
	r, err := ws.ReadFile(workspace.ReadOptions{Path: p.Path, Line: p.Line, Limit: p.Limit, MaxBytes: p.MaxBytes})
	if err != nil {
		return nil, wsError(err)
	}
	return &rpc.ReadFileResult{
		Path:       r.Path,
		Content:    r.Content,
		Encoding:   rpc.Encoding(r.Encoding),
		Size:       r.Size,
		StartLine:  r.StartLine,
		EndLine:    r.EndLine,
		TotalLines: r.TotalLines,
		Truncated:  r.Truncated,
		MTime:      r.MTime.UTC(),
	}, nil
}
