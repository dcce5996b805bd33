package tools

import (
	"context"
	"encoding/json"

	"github.com/toolhost/toolhost/rpc"
)

// progress answers a snapshot of one handle, or of every running and
// recently finished handle.
func (t *Tools) progress(ctx context.Context, s *rpc.Session, raw json.RawMessage) (any, error) {
	var p rpc.ProgressParams
	if err := rpc.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	_, mgr := t.state()
	if p.HandleID != "" {
		cmd, ok := mgr.Lookup(p.HandleID)
		if !ok {
			return nil, handleNotFound(p.HandleID)
		}
		return progressOf(cmd.Snapshot()), nil
	}
	cmds := mgr.Handles()
	list := rpc.ProgressList{Handles: make([]rpc.Progress, 0, len(cmds))}
	for _, c := range cmds {
		list.Handles = append(list.Handles, progressOf(c.Snapshot()))
	}
	return list, nil
}
