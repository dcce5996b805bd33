package tools

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// maxYieldMs caps runCommand's yieldMs (an hour).
const maxYieldMs = 3_600_000

// runCommand runs a command to completion and answers with its ToolResult.
// $/cancelRequest stops the command's whole process group and answers
// -32800 with the partial result in error.data.partial. With yieldMs, a
// command still running then becomes a handle and the answer is its
// snapshot (status "running"); from then on $/cancelRequest no longer
// reaches it.
//
// yieldMs counts from the request's arrival (rpc.Arrived), so that what
// the start costs (the snapshot before the command, the sandbox, a
// handler that started late) is inside it: a start that outlasts it is
// answered, running, as soon as the command has a handle. A handle exists
// only once its process does (process.Command.Promote), so the answer
// cannot come before the start ends.
func (t *Tools) runCommand(ctx context.Context, s *rpc.Session, p *protocol.RunCommandParams) (*protocol.ToolResult, error) {
	arrived := rpc.Arrived(ctx)
	if arrived.IsZero() {
		arrived = time.Now()
	}
	if d, err := t.destination(p.Destination); d != nil || err != nil {
		if err != nil {
			return nil, err
		}
		s.Detach(ctx) // it waits on the destination
		q := *p
		q.Destination = ""
		if p.YieldMs != nil {
			// The far side counts from its own arrival: give it what is left.
			left := max(0, *p.YieldMs-time.Since(arrived).Milliseconds())
			q.YieldMs = &left
		}
		return forward(ctx, s, d, 0, protocol.RunCommandRequest, &q)
	}
	ws, mgr := t.state()
	spec, err := t.commandSpec(ws, p, nil)
	if err != nil {
		return nil, err
	}
	var before *commandSnapshot
	if p.Snapshot {
		if before, err = t.beforeCommand(ctx, quoteArgv(p.Argv)); err != nil {
			return nil, err
		}
	}
	w := newWatcher(s, p.WorkDoneToken, quoteArgv(p.Argv), p.WorkDoneToken != nil)
	repos := t.protectRepos(&spec, p, nil)
	cmd, err := mgr.Start(spec, w.observer(false))
	if err != nil {
		w.abandon()
		return nil, procError(err)
	}
	t.attachSnapshot(cmd, before)
	attachRepos(cmd, repos)
	w.started(cmd)
	s.Detach(ctx) // it waits on the command now, computing nothing
	if p.WorkDoneToken != nil {
		t.trackToken(*p.WorkDoneToken, cmd)
	}
	var yield <-chan time.Time
	if p.YieldMs != nil {
		// Past already when the start took longer: it fires at once.
		tm := time.NewTimer(time.Until(arrived.Add(time.Duration(*p.YieldMs) * time.Millisecond)))
		defer tm.Stop()
		yield = tm.C
	}
	select {
	case <-cmd.Done():
	case <-yield:
		if res, ok := t.yieldHandle(ctx, s, w, cmd, p.WorkDoneToken); ok {
			return res, nil
		}
		<-cmd.Done() // it ended as the yield came: the final result, no handle
	case <-ctx.Done():
		cmd.Cancel(0)
		<-cmd.Done()
		res := t.finalResult(cmd)
		w.finish(res)
		t.untrack(p.WorkDoneToken)
		return nil, protocol.NewError(protocol.CodeRequestCancelled,
			&protocol.ErrorData{Method: protocol.MethodRunCommand, Reason: context.Cause(ctx).Error(), Partial: &res},
			"request cancelled: the command was stopped")
	}
	res := t.finalResult(cmd)
	w.finish(res)
	t.untrack(p.WorkDoneToken)
	return &res, nil
}

// yieldHandle makes a runCommand's still running command a handle and
// returns the answer naming it: the snapshot so far. The handle's
// toolResult, and its $/progress end when it has a token, are sent by the
// handle's one sender once that answer is queued. It reports false when
// the command had already finished (then it has no handle).
func (t *Tools) yieldHandle(ctx context.Context, s *rpc.Session, w *watcher, cmd *process.Command, token *protocol.ProgressToken) (*protocol.ToolResult, bool) {
	if _, ok := cmd.Promote(); !ok {
		return nil, false
	}
	answered := make(chan struct{})
	s.AfterReply(ctx, func() { close(answered) })
	// The token stays tracked until the sender sees the end.
	t.sendToolResult(s, answered, w, cmd, token, false)
	res := toolResult(cmd.Current())
	return &res, true
}

// untrack forgets a progress token, if there is one.
func (t *Tools) untrack(tok *protocol.ProgressToken) {
	if tok != nil {
		t.untrackToken(*tok)
	}
}
