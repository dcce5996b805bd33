package tools

import (
	"context"
	"fmt"
	"strconv"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// maxReadBytes bounds maxBytes, so that one readFile cannot make the server
// hold more than 64 MiB of file (and its JSON encoding) in memory.
const maxReadBytes = 64 << 20

// encodedReadFile is readFile's handler h with its result encoded by
// appendReadFileResult.
func encodedReadFile(h handler[protocol.ReadFileParams, protocol.ReadFileResult]) func(context.Context, *rpc.Session, *protocol.ReadFileParams) ([]byte, error) {
	return func(ctx context.Context, s *rpc.Session, p *protocol.ReadFileParams) ([]byte, error) {
		r, err := h(ctx, s, p)
		if err != nil {
			return nil, err
		}
		return appendReadFileResult(make([]byte, 0, len(r.Content)+len(r.Content)/16+len(r.Path)+192), r)
	}
}

// appendReadFileResult appends r to dst as encoding/json encodes it (the
// tests compare the two), the strings by appendJSONString: encoding/json
// spent more on the content, one byte at a time, and on reflecting over
// the struct, than the file's reading cost.
func appendReadFileResult(dst []byte, r *protocol.ReadFileResult) ([]byte, error) {
	mtime, err := r.MTime.MarshalJSON() // encoding/json's encoding, and its errors
	if err != nil {
		return nil, fmt.Errorf("encoding mtime: %w", err)
	}
	dst = append(dst, `{"path":`...)
	dst = appendJSONString(dst, r.Path)
	dst = append(dst, `,"content":`...)
	dst = appendJSONString(dst, r.Content)
	dst = append(dst, `,"encoding":`...)
	dst = appendJSONString(dst, string(r.Encoding))
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, r.Size, 10)
	dst = append(dst, `,"startLine":`...)
	dst = strconv.AppendInt(dst, int64(r.StartLine), 10)
	dst = append(dst, `,"endLine":`...)
	dst = strconv.AppendInt(dst, int64(r.EndLine), 10)
	dst = append(dst, `,"totalLines":`...)
	dst = strconv.AppendInt(dst, int64(r.TotalLines), 10)
	dst = append(dst, `,"truncated":`...)
	dst = strconv.AppendBool(dst, r.Truncated)
	dst = append(dst, `,"mtime":`...)
	dst = append(dst, mtime...)
	return append(dst, '}'), nil
}

// readFile reads a file, or a range of its lines, inside the root, a read
// root or the artifacts directory.
func (t *Tools) readFile(ctx context.Context, s *rpc.Session, p *protocol.ReadFileParams) (*protocol.ReadFileResult, error) {
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
	r, inMount, err := t.readMountFile(ctx, ws, p)
	if !inMount {
		if r, err = ws.ReadFile(workspace.ReadOptions{Path: p.Path, Line: p.Line, Limit: p.Limit, MaxBytes: p.MaxBytes}); err != nil {
			err = wsError(err)
		}
	}
	if err != nil {
		return nil, err
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
