package tools

import (
	"context"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// progress answers a snapshot of one handle of this server, or of every
// running and recently finished handle, at once (a destination's is
// forwarded: routeProgress).
func (t *Tools) progress(_ context.Context, _ *rpc.Session, p *protocol.ProgressParams) (*protocol.ProgressResult, func(context.Context) (*protocol.ProgressResult, error), error) {
	_, mgr := t.state()
	if p.HandleID != "" {
		cmd, ok := mgr.Lookup(p.HandleID)
		if !ok {
			return nil, nil, handleNotFound(p.HandleID)
		}
		one := progressOf(cmd.Snapshot())
		return &protocol.ProgressResult{One: &one}, nil, nil
	}
	cmds := mgr.Handles()
	list := protocol.ProgressList{Handles: make([]protocol.Progress, 0, len(cmds))}
	for _, c := range cmds {
		list.Handles = append(list.Handles, progressOf(c.Snapshot()))
	}
	return &protocol.ProgressResult{List: &list}, nil, nil
}
