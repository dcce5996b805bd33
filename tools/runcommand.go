package tools

import (
	"context"
	"errors"
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
// the start costs (the snapshot before the command, the scan of its
// repositories, the sandbox, the process manager's start, a handler that
// started late) is inside it. With yieldMs the command is reserved first
// (process.Manager.Reserve): it has its ids, and can be a handle, before
// that work, which runs in a goroutine of its own (launch). When yieldMs
// passes first, the answer is the handle, "running" with no pid yet; the
// start goes on, and a start that fails then ends the handle "failed" in
// its one toolResult. A start that ends before yieldMs changes nothing on
// the wire: its failure is the error answer, as without yieldMs.
func (t *Tools) runCommand(ctx context.Context, s *rpc.Session, p *protocol.RunCommandParams) (*protocol.ToolResult, error) {
	arrived := arrival(ctx)
	ws, mgr := t.state()
	spec, asked, err := t.commandSpec(ctx, ws, p, nil)
	if err != nil {
		return nil, err
	}
	w := newWatcher(s, p.WorkDoneToken, quoteArgv(p.Argv), p.WorkDoneToken != nil)
	if p.YieldMs == nil {
		cmd, err := t.startNow(ctx, mgr, spec, p, w)
		if err != nil {
			return nil, err
		}
		t.bindAsks(cmd, asked)
		s.Detach(ctx) // it waits on the command now, computing nothing
		return t.awaitCommand(ctx, s, w, cmd, p.WorkDoneToken, nil)
	}

	// Past already when the handler started late: it fires at once.
	tm := time.NewTimer(time.Until(arrived.Add(time.Duration(*p.YieldMs) * time.Millisecond)))
	defer tm.Stop()
	cmd, err := mgr.Reserve(quoteArgv(p.Argv))
	if err != nil {
		return nil, procError(err)
	}
	t.bindAsks(cmd, asked)
	if p.WorkDoneToken != nil {
		t.trackToken(*p.WorkDoneToken, cmd)
	}
	s.Detach(ctx) // it waits on the start, then on the command
	launched := make(chan error, 1)
	// t.senders owns the start: it ends once the command has launched or
	// ended, and Shutdown waits for it. It outlives the request when the
	// yield answers first: the request's end must not cut it short.
	lctx := context.WithoutCancel(ctx)
	t.senders.Go(func() { launched <- t.launch(lctx, cmd, spec, p, w) })
	select {
	case err := <-launched:
		if err != nil {
			t.untrack(p.WorkDoneToken)
			return nil, err
		}
	case <-tm.C:
		// The start outlasts yieldMs: the answer names the handle now.
		if res, ok := t.yieldHandle(ctx, s, w, cmd, p.WorkDoneToken); ok {
			return res, nil
		}
		// It ended as the yield came, before it had a handle: a start
		// that failed answers its error, as before yieldMs.
		if err := <-launched; err != nil {
			t.untrack(p.WorkDoneToken)
			return nil, err
		}
		return t.awaitCommand(ctx, s, w, cmd, p.WorkDoneToken, nil)
	case <-ctx.Done():
		// The cancel ends a command still starting at once (it never
		// runs), and stops a launched one: awaitCommand answers -32800.
		return t.awaitCommand(ctx, s, w, cmd, p.WorkDoneToken, nil)
	}
	return t.awaitCommand(ctx, s, w, cmd, p.WorkDoneToken, tm.C)
}

// arrival is when the request ctx serves arrived (rpc.Arrived); now for
// a call from no request.
func arrival(ctx context.Context) time.Time {
	if arrived := rpc.Arrived(ctx); !arrived.IsZero() {
		return arrived
	}
	return time.Now()
}

// startNow makes a runCommand's start without yieldMs: the snapshot before
// it, the scan of its repositories, and the process manager's Start.
func (t *Tools) startNow(ctx context.Context, mgr *process.Manager, spec process.Spec, p *protocol.RunCommandParams, w *watcher) (*process.Command, error) {
	var before *commandSnapshot
	if p.Snapshot {
		var err error
		if before, err = t.beforeCommand(ctx, quoteArgv(p.Argv)); err != nil {
			return nil, err
		}
	}
	repos := t.protectRepos(&spec, p, nil)
	cm, err := t.mountCommand(ctx, &spec)
	if err != nil {
		w.abandon()
		return nil, err
	}
	cmd, err := mgr.Start(spec, w.observer(false))
	if err != nil {
		cm.release()
		w.abandon()
		return nil, procError(err)
	}
	t.attachMounts(cmd, cm)
	t.attachSnapshot(cmd, before)
	attachRepos(cmd, repos)
	w.started(cmd)
	if p.WorkDoneToken != nil {
		t.trackToken(*p.WorkDoneToken, cmd)
	}
	return cmd, nil
}

// launch makes the start of a runCommand with yieldMs, reserved as cmd:
// the snapshot before it, the scan of its repositories, then Launch. It
// returns the error the runCommand answers when its start fails, which
// also ends cmd "failed" with it (Abort, or Launch's own end); nil when the
// command launched, or was stopped before it did (then it has ended,
// cancelled, and nothing ran). It closes w's ready either way (started or
// abandon), so that the handle's toolResult sender, which waits for it
// when the command spawned, sends $/progress begin before end.
func (t *Tools) launch(ctx context.Context, cmd *process.Command, spec process.Spec, p *protocol.RunCommandParams, w *watcher) error {
	if p.Snapshot {
		before, err := t.beforeCommand(ctx, quoteArgv(p.Argv))
		if err != nil {
			cmd.Abort(err)
			w.abandon()
			return err
		}
		t.attachSnapshot(cmd, before)
	}
	attachRepos(cmd, t.protectRepos(&spec, p, nil))
	cm, err := t.mountCommand(ctx, &spec)
	if err != nil {
		cmd.Abort(err)
		w.abandon()
		return err
	}
	// Attached first: a command stopped before it launched has a final
	// result, which releases the views.
	t.attachMounts(cmd, cm)
	if err := cmd.Launch(spec, w.observer(false)); err != nil {
		w.abandon()
		if errors.Is(err, process.ErrStopped) {
			return nil
		}
		return procError(err)
	}
	w.started(cmd)
	return nil
}

// awaitCommand waits for a runCommand's command: its end, the yield (nil
// without yieldMs) or the request's cancel.
func (t *Tools) awaitCommand(ctx context.Context, s *rpc.Session, w *watcher, cmd *process.Command, token *protocol.ProgressToken, yield <-chan time.Time) (*protocol.ToolResult, error) {
	select {
	case <-cmd.Done():
	case <-yield:
		if res, ok := t.yieldHandle(ctx, s, w, cmd, token); ok {
			return res, nil
		}
		<-cmd.Done() // it ended as the yield came: the final result, no handle
	case <-ctx.Done():
		cmd.Cancel(0)
		<-cmd.Done()
		res := t.finalResult(cmd)
		w.finish(res)
		t.untrack(token)
		return nil, protocol.NewError(protocol.CodeRequestCancelled,
			&protocol.ErrorData{Method: protocol.MethodRunCommand, Reason: context.Cause(ctx).Error(), Partial: &res},
			"request cancelled: the command was stopped")
	}
	res := t.finalResult(cmd)
	w.finish(res)
	t.untrack(token)
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
