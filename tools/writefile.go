package tools

import (
	"context"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// writeFile writes a file atomically inside the root.
func (t *Tools) writeFile(ctx context.Context, s *rpc.Session, p *protocol.WriteFileParams) (*protocol.WriteFileResult, error) {
	if p.Path == "" {
		return nil, protocol.InvalidParams("path", "required")
	}
	switch p.Encoding {
	case "", protocol.EncodingUTF8, protocol.EncodingBase64:
	default:
		return nil, protocol.InvalidParams("encoding", `must be "utf-8" or "base64", not %q`, p.Encoding)
	}
	o := workspace.WriteOptions{Path: p.Path, Content: p.Content, Encoding: string(p.Encoding), CreateDirs: p.CreateDirs}
	if p.ExpectedSha256 != nil {
		o.ExpectedSha256 = *p.ExpectedSha256
	}
	ws, _ := t.state()
	r, err := ws.WriteFile(o)
	if err != nil {
		return nil, wsError(err)
	}
	return &protocol.WriteFileResult{Path: r.Path, Size: r.Size, Sha256: r.Sha256}, nil
}
