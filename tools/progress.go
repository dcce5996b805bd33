package tools

import (
	"context"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// progress answers a snapshot of one handle, or of every running and
// recently finished handle, at once; a destination's, once it answers.
func (t *Tools) progress(_ context.Context, s *rpc.Session, p *protocol.ProgressParams) (*protocol.ProgressResult, func(context.Context) (*protocol.ProgressResult, error), error) {
	tg, err := t.routeHandle(p.HandleID)
	if tg.Dest == nil && err == nil && p.HandleID == "" {
		tg.Dest, err = t.destination(p.Destination)
	}
	if err != nil {
		return nil, nil, err
	}
	if tg.Dest != nil {
		q := *p
		q.HandleID, q.Destination = tg.Far, ""
		return nil, func(ctx context.Context) (*protocol.ProgressResult, error) {
			return forward(ctx, s, tg.Dest, tg.Epoch, protocol.ProgressRequest, &q)
		}, nil
	}
	res, err := t.localProgress(p)
	return res, nil, err
}

// localProgress answers progress for this server's handles.
func (t *Tools) localProgress(p *protocol.ProgressParams) (*protocol.ProgressResult, error) {
	_, mgr := t.state()
	if p.HandleID != "" {
		cmd, ok := mgr.Lookup(p.HandleID)
		if !ok {
			return nil, handleNotFound(p.HandleID)
		}
		one := progressOf(cmd.Snapshot())
		return &protocol.ProgressResult{One: &one}, nil
	}
	cmds := mgr.Handles()
	list := protocol.ProgressList{Handles: make([]protocol.Progress, 0, len(cmds))}
	for _, c := range cmds {
		list.Handles = append(list.Handles, progressOf(c.Snapshot()))
	}
	return &protocol.ProgressResult{List: &list}, nil
}
