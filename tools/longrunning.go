package tools

import (
	"context"
	"strings"
	"time"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// longRunning starts a command, or a recipe of steps, behind a handle and
// answers at once. The handle ends in exactly one toolResult notification.
func (t *Tools) longRunning(ctx context.Context, s *rpc.Session, p *protocol.LongRunningParams) (*protocol.LongRunningResult, error) {
	ws, mgr := t.state()
	if p.YieldMs != nil {
		return nil, protocol.InvalidParams("yieldMs", "is for runCommand: a longRunning answers at once")
	}
	spec, asked, err := t.commandSpec(ctx, ws, &p.RunCommandParams, p.Steps)
	if err != nil {
		return nil, err
	}
	if p.Pty != nil {
		if spec.Pty, err = ptySize("pty", p.Pty); err != nil {
			return nil, err
		}
	}
	spec.OpenStdin = p.OpenStdin
	switch p.StdoutFormat {
	case "", protocol.StdoutText:
	case protocol.StdoutJSONL:
		if anyPtyOf(spec) {
			return nil, protocol.InvalidParams("stdoutFormat", `"jsonl" needs a plain stdout: a terminal's output is one stream`)
		}
		spec.StdoutJSONL = true
		spec.MaxEventBytes = t.maxEventBytes()
	default:
		return nil, protocol.InvalidParams("stdoutFormat", `must be "text" or "jsonl", not %q`, p.StdoutFormat)
	}
	spec.WatchPorts = true
	if (anyPtyOf(spec) || p.OpenStdin) && p.Stdin != nil {
		return nil, protocol.InvalidParams("stdin", "a command with pty or openStdin takes its input from writeInput")
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
	if p.ProgressFile != nil {
		label := p.Label
		if label == "" {
			label = displayLabel(spec)
		}
		pf, err := t.openProgressFile(ws, p.ProgressFile, label)
		if err != nil {
			return nil, err
		}
		if pf != nil {
			w.progress = pf
			spec.ProgressPath = pf.path()
			spec.Env = mergeEnv(spec.Env, map[string]*string{EnvProgressFile: &spec.ProgressPath})
			for i := range spec.Steps {
				spec.Steps[i].Env = mergeEnv(spec.Steps[i].Env, map[string]*string{EnvProgressFile: &spec.ProgressPath})
			}
		}
	}
	var before *commandSnapshot
	if p.Snapshot {
		if before, err = t.beforeCommand(ctx, command); err != nil {
			w.abandon()
			return nil, err
		}
	}
	repos := t.protectRepos(&spec, &p.RunCommandParams, p.Steps)
	cm, err := t.mountCommand(ctx, &spec)
	if err != nil {
		w.abandon()
		return nil, err
	}
	cmd, err := mgr.Start(spec, w.observer(p.StreamOutput))
	if err != nil {
		cm.release()
		w.abandon()
		return nil, procError(err)
	}
	t.attachMounts(cmd, cm)
	t.attachSnapshot(cmd, before)
	attachRepos(cmd, repos)
	t.bindAsks(cmd, asked)
	// The handle's notifications wait for the response that names it.
	s.AfterReply(ctx, func() { w.started(cmd) })
	token := p.WorkDoneToken
	if token != nil {
		t.trackToken(*token, cmd)
	}
	wantToken := token == nil && s.ClientCapabilities().Window != nil && s.ClientCapabilities().Window.WorkDoneProgress

	t.sendToolResult(s, w.ready, w, cmd, token, wantToken)

	return &protocol.LongRunningResult{
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
// promoted at most once: the runCommand that started it does it, still
// starting or not), and the goroutine sends after Done, when the result
// is final. A handle whose start failed after the answer is no
// exception: its start ends it (process.Command.Abort, Launch) and this
// goroutine sends that "failed" result, once. t.senders owns the
// goroutine and Shutdown waits for it, so a session's end still sends
// every result. $/progress end is sent here too (w.finish), once: for a
// command that spawned, only after its start has sent begin (w.ready).
func (t *Tools) sendToolResult(s *rpc.Session, answered <-chan struct{}, w *watcher, cmd *process.Command, token *protocol.ProgressToken, wantToken bool) {
	t.handleStarted(cmd, cmd.Snapshot().Label)
	t.senders.Go(func() {
		// The response that names the handle goes first: before the
		// window/workDoneProgress/create request that names it, and before
		// its toolResult.
		<-answered
		if wantToken {
			token = t.createToken(s, w, cmd)
		}
		<-cmd.Done()
		if cmd.Spawned() {
			// A runCommand's start that outlasted its yieldMs calls
			// w.started right after the command launched: its begin goes
			// before this end.
			<-w.ready
		}
		res := t.finalResult(cmd)
		w.finish(res)
		if token != nil {
			t.untrackToken(*token)
		}
		s.NotifyNumbered(protocol.NotifyToolResult, res)
	})
}

// createToken asks the client for a progress token for a handle, when the
// client advertised window.workDoneProgress and gave none. It returns nil
// if the client refuses or does not answer in time.
func (t *Tools) createToken(s *rpc.Session, w *watcher, cmd *process.Command) *protocol.ProgressToken {
	tok := protocol.NewStringToken("toolhost/" + cmd.HandleID())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { // owned by createToken: ends with it
		select {
		case <-cmd.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.Call(ctx, protocol.MethodWorkDoneProgressCreate, protocol.WorkDoneProgressCreateParams{Token: tok}, nil); err != nil {
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
func (t *Tools) trackToken(tok protocol.ProgressToken, cmd *process.Command) {
	t.mu.Lock()
	t.tokens[tok.String()] = cmd
	t.mu.Unlock()
}

// untrackToken forgets a progress token.
func (t *Tools) untrackToken(tok protocol.ProgressToken) {
	t.mu.Lock()
	delete(t.tokens, tok.String())
	t.mu.Unlock()
}

// workDoneProgressCancel cancels the command behind a progress token.
func (t *Tools) workDoneProgressCancel(_ context.Context, s *rpc.Session, p *protocol.WorkDoneProgressCancelParams) {
	t.mu.Lock()
	cmd := t.tokens[p.Token.String()]
	t.mu.Unlock()
	// A token given to a destination's command is known only there.
	t.hub.ForEachReady(func(d *hub.Destination) { d.Notify(context.Background(), protocol.NotifyWorkDoneProgressCancel, p) })
	if cmd == nil {
		t.log.Debug("window/workDoneProgress/cancel for an unknown token", "token", strings.TrimPrefix(p.Token.String(), "s:"))
		return
	}
	cmd.Cancel(0)
}

// anyPtyOf reports whether a step of spec runs under a terminal.
func anyPtyOf(spec process.Spec) bool {
	if spec.Pty.On() {
		return true
	}
	for _, st := range spec.Steps {
		if st.Pty != nil && st.Pty.On() {
			return true
		}
	}
	return false
}

// maxEventBytes is the longest stdout line sent as an event: what fits in
// a message the client takes, with room for the envelope.
func (t *Tools) maxEventBytes() int {
	n := t.cfg.MaxMessageBytes
	if n <= 0 {
		n = 16 << 20
	}
	return int(max(n-1024, 1024))
}

// displayLabel is the label process gives a command without one: the
// step names, or the argv, joined.
func displayLabel(spec process.Spec) string {
	if len(spec.Steps) > 0 {
		names := make([]string, len(spec.Steps))
		for i, st := range spec.Steps {
			names[i] = st.Name
		}
		return strings.Join(names, ", ")
	}
	return strings.Join(spec.Argv, " ")
}
