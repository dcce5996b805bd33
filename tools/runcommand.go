package tools

import (
	"context"

	"github.com/toolhost/toolhost/rpc"
)

// runCommand runs a command to completion and answers with its ToolResult.
// $/cancelRequest stops the command's whole process group and answers
// -32800 with the partial result in error.data.partial.
func (t *Tools) runCommand(ctx context.Context, s *rpc.Session, p *rpc.RunCommandParams) (*rpc.ToolResult, error) {
	ws, mgr := t.state()
	spec, err := t.commandSpec(ws, p, nil)
	if err != nil {
		return nil, err
	}
	w := newWatcher(s, p.WorkDoneToken, quoteArgv(p.Argv), p.WorkDoneToken != nil)
	cmd, err := mgr.Start(spec, w.observer(false))
	if err != nil {
		w.abandon()
		return nil, procError(err)
	}
	w.started(cmd)
	s.Detach(ctx) // it waits on the command now, computing nothing
	if p.WorkDoneToken != nil {
		t.trackToken(*p.WorkDoneToken, cmd)
		defer t.untrackToken(*p.WorkDoneToken)
	}
	select {
	case <-cmd.Done():
	case <-ctx.Done():
		cmd.Cancel(0)
		<-cmd.Done()
		res := toolResult(cmd.Result())
		w.finish(res)
		return nil, rpc.NewError(rpc.CodeRequestCancelled,
			&rpc.ErrorData{Method: rpc.MethodRunCommand, Reason: context.Cause(ctx).Error(), Partial: &res},
			"request cancelled: the command was stopped")
	}
	res := toolResult(cmd.Result())
	w.finish(res)
	return &res, nil
}
