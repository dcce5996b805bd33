package tools

import (
	"context"

	"github.com/toolhost/toolhost/rpc"
)

// progress answers a snapshot of one handle, or of every running and
// recently finished handle, at once; a destination's, once it answers.
func (t *Tools) progress(_ context.Context, s *rpc.Session, p *rpc.ProgressParams) (*rpc.ProgressResult, func(context.Context) (*rpc.ProgressResult, error), error) {
	d, far, err := t.routeHandle(p.HandleID)
	if d == nil && err == nil && p.HandleID == "" {
		d, err = t.destination(p.Destination)
	}
	if err != nil {
		return nil, nil, err
	}
	if d != nil {
		q := *p
		q.HandleID, q.Destination = far, ""
		return nil, func(ctx context.Context) (*rpc.ProgressResult, error) { return forward(ctx, s, d, rpc.ProgressRequest, &q) }, nil
	}
	res, err := t.localProgress(p)
	return res, nil, err
}

// localProgress answers progress for this server's handles.
func (t *Tools) localProgress(p *rpc.ProgressParams) (*rpc.ProgressResult, error) {
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
