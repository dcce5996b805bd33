package tools

import (
	"context"

	"github.com/toolhost/toolhost/rpc"
)

// progress answers a snapshot of one handle, or of every running and
// recently finished handle.
func (t *Tools) progress(ctx context.Context, s *rpc.Session, p *rpc.ProgressParams) (*rpc.ProgressResult, error) {
	_, mgr := t.state()
	if p.HandleID != "" {
		cmd, ok := mgr.Lookup(p.HandleID)
		if !ok {
			return nil, handleNotFound(p.HandleID)
		}
		one := progressOf(cmd.Snapshot())
		return &rpc.ProgressResult{One: &one}, nil
	}
	cmds := mgr.Handles()
	list := rpc.ProgressList{Handles: make([]rpc.Progress, 0, len(cmds))}
	for _, c := range cmds {
		list.Handles = append(list.Handles, progressOf(c.Snapshot()))
	}
	return &rpc.ProgressResult{List: &list}, nil
}
