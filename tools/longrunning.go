package tools

import (
	"context"
	"strings"
	"time"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
)

// longRunning starts a command, or a recipe of steps, behind a handle and
// answers at once. The handle ends in exactly one toolResult notification.
func (t *Tools) longRunning(ctx context.Context, s *rpc.Session, p *rpc.LongRunningParams) (*rpc.LongRunningResult, error) {
	if d, err := t.destination(p.Destination); d != nil || err != nil {
		if err != nil {
			return nil, err
		}
		q := *p
		q.Destination = ""
		return forward(ctx, s, d, rpc.LongRunningRequest, &q)
	}
	ws, mgr := t.state()
	if p.YieldMs != nil {
		return nil, rpc.InvalidParams("yieldMs", "is for runCommand: a longRunning answers at once")
	}
	spec, err := t.commandSpec(ws, &p.RunCommandParams, p.Steps)
	if err != nil {
		return nil, err
	}
	if p.Pty != nil {
		if spec.Pty, err = ptySize("pty", p.Pty); err != nil {
			return nil, err
		}
	}
	spec.OpenStdin = p.OpenStdin
	anyPty := spec.Pty.On()
	for _, st := range spec.Steps {
		anyPty = anyPty || (st.Pty != nil && st.Pty.On())
	}
	if (anyPty || p.OpenStdin) && p.Stdin != nil {
		return nil, rpc.InvalidParams("stdin", "a command with pty or openStdin takes its input from writeInput")
	}
	spec.Handle = true
	spec.Label = p.Label
	spec.StreamOutput = p.StreamOutput
	command := displayCommand(spec.Argv, spec.Steps)
	title := p.Label
	if title == "" {
		title = command
	}

	w := newWatcher(s, p.WorkDoneToken, title, true)
	cmd, err := mgr.Start(spec, w.observer(p.StreamOutput))
	if err != nil {
		w.abandon()
		return nil, procError(err)
	}
	// The handle's notifications wait for the response that names it.
	s.AfterReply(ctx, func() { w.started(cmd) })
	token := p.WorkDoneToken
	if token != nil {
		t.trackToken(*token, cmd)
	}
	wantToken := token == nil && s.ClientCapabilities().Window != nil && s.ClientCapabilities().Window.WorkDoneProgress

	t.sendToolResult(s, w.ready, w, cmd, token, wantToken)

	return &rpc.LongRunningResult{
		HandleID:       cmd.HandleID(),
		CommandID:      cmd.ID(),
		PID:            cmd.PID(),
		ProcessGroupID: cmd.PGID(),
		StartedAt:      cmd.StartedAt().UTC(),
		Command:        command,
	}, nil
}

// sendToolResult starts the one sender of a handle's toolResult: a
// longRunning's, right after Start succeeded, or a runCommand's that
// yielded, right after it became a handle. answered must be closed only
// once the answer that names the handle is queued (AfterReply); token is
// the tracked progress token, or nil, and wantToken asks the client for
// one.
//
// Exactly one toolResult per handle: this function is the only sender of
// toolResult, every handle reaches it exactly once (longRunning after
// Start, runCommand once Promote made it a handle, and a command is
// promoted at most once: the runCommand that started it does it), and the
// goroutine sends after Done, when the result is final. t.senders owns the
// goroutine and Shutdown waits for it, so a session's end still sends
// every result.
func (t *Tools) sendToolResult(s *rpc.Session, answered <-chan struct{}, w *watcher, cmd *process.Command, token *rpc.ProgressToken, wantToken bool) {
	t.senders.Go(func() {
		// The response that names the handle goes first: before the
		// window/workDoneProgress/create request that names it, and before
		// its toolResult.
		<-answered
		if wantToken {
			token = t.createToken(s, w, cmd)
		}
		<-cmd.Done()
		res := toolResult(cmd.Result())
		w.finish(res)
		if token != nil {
			t.untrackToken(*token)
		}
		s.NotifyCritical(rpc.NotifyToolResult, res)
	})
}

// createToken asks the client for a progress token for a handle, when the
// client advertised window.workDoneProgress and gave none. It returns nil
// if the client refuses or does not answer in time.
func (t *Tools) createToken(s *rpc.Session, w *watcher, cmd *process.Command) *rpc.ProgressToken {
	tok := rpc.NewStringToken("toolhost/" + cmd.HandleID())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { // owned by createToken: ends with it
		select {
		case <-cmd.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.Call(ctx, rpc.MethodWorkDoneProgressCreate, rpc.WorkDoneProgressCreateParams{Token: tok}, nil); err != nil {
		t.log.Debug("client did not create a progress token", "handle", cmd.HandleID(), "err", err)
		return nil
	}
	t.trackToken(tok, cmd)
	if !w.setToken(tok) {
		t.untrackToken(tok)
		return nil
	}
	return &tok
}

// trackToken records the command behind a progress token.
func (t *Tools) trackToken(tok rpc.ProgressToken, cmd *process.Command) {
	t.mu.Lock()
	t.tokens[tok.String()] = cmd
	t.mu.Unlock()
}

// untrackToken forgets a progress token.
func (t *Tools) untrackToken(tok rpc.ProgressToken) {
	t.mu.Lock()
	delete(t.tokens, tok.String())
	t.mu.Unlock()
}

// workDoneProgressCancel cancels the command behind a progress token.
func (t *Tools) workDoneProgressCancel(_ context.Context, s *rpc.Session, p *rpc.WorkDoneProgressCancelParams) {
	t.mu.Lock()
	cmd := t.tokens[p.Token.String()]
	t.mu.Unlock()
	// A token given to a destination's command is known only there.
	t.hub.ForEachReady(func(d *hub.Destination) { d.Notify(context.Background(), rpc.NotifyWorkDoneProgressCancel, p) })
	if cmd == nil {
		t.log.Debug("window/workDoneProgress/cancel for an unknown token", "token", strings.TrimPrefix(p.Token.String(), "s:"))
		return
	}
	cmd.Cancel(0)
}
