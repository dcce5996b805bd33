package tools

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/workspace"
)

// commandSpec checks the params runCommand and longRunning share, and a
// recipe's steps, and turns them into a process spec, confined as the
// session and the request say. With steps, argv must be empty. A sandbox
// wider than the session's, given with a justification, is asked about
// (askWider) before anything starts; the outcomes are the asks made, for
// the command's ToolResult (bindAsks).
func (t *Tools) commandSpec(ctx context.Context, ws *workspace.Workspace, p *protocol.RunCommandParams, steps []protocol.StepSpec) (process.Spec, []protocol.ApprovalOutcome, error) {
	spec, err := t.plainSpec(ws, p)
	if err != nil {
		return spec, nil, err
	}
	if len(steps) > 0 {
		if err := stepsSpec(ws, &spec, steps); err != nil {
			return spec, nil, err
		}
	}
	t.mu.Lock()
	conf := t.conf
	t.mu.Unlock()
	var outcomes []protocol.ApprovalOutcome
	wider := func(refusal error) (level, error) { return t.askWider(ctx, conf, p, refusal, &outcomes) }
	if err := conf.confine(p, &spec, steps, wider); err != nil {
		return spec, outcomes, err
	}
	t.mu.Lock()
	a := t.asks
	t.mu.Unlock()
	if spec.Confine != nil && spec.Confine.Network != nil && a != nil && a.canAsk() {
		// A connection the allow-list refuses is asked about.
		argv := spec.Argv
		if len(steps) > 0 {
			argv = steps[0].Argv
		}
		spec.Confine.NetworkAsk = t.networkAsk(argv, spec.Dir)
	}
	return spec, outcomes, nil
}

// plainSpec checks the params runCommand and longRunning share but argv
// and env, which the process manager checks when the command starts.
func (t *Tools) plainSpec(ws *workspace.Workspace, p *protocol.RunCommandParams) (process.Spec, error) {
	var spec process.Spec
	dir, err := ws.Dir(p.Cwd)
	if err != nil {
		return spec, cwdError("cwd", err)
	}
	spec = process.Spec{Argv: p.Argv, Dir: dir, Env: p.Env}
	if p.Stdin != nil {
		spec.Stdin = *p.Stdin
	}
	if p.TimeoutMs != nil {
		if *p.TimeoutMs <= 0 {
			return spec, protocol.InvalidParams("timeoutMs", "must be a positive number of milliseconds, not %d", *p.TimeoutMs)
		}
		spec.Timeout = msDuration(*p.TimeoutMs)
	}
	if p.InactivityTimeoutMs != nil {
		if *p.InactivityTimeoutMs <= 0 {
			return spec, protocol.InvalidParams("inactivityTimeoutMs", "must be a positive number of milliseconds, not %d", *p.InactivityTimeoutMs)
		}
		spec.InactivityTimeout = msDuration(*p.InactivityTimeoutMs)
	}
	if p.YieldMs != nil && (*p.YieldMs < 0 || *p.YieldMs > maxYieldMs) {
		return spec, protocol.InvalidParams("yieldMs", "must be between 0 and %d, not %d", maxYieldMs, *p.YieldMs)
	}
	t.mu.Lock()
	spec.OutputLimit = int(t.outputLimit)
	t.mu.Unlock()
	if p.OutputLimitBytes != nil {
		if *p.OutputLimitBytes <= 0 || *p.OutputLimitBytes > maxOutputLimit {
			return spec, protocol.InvalidParams("outputLimitBytes", "must be between 1 and %d, not %d", maxOutputLimit, *p.OutputLimitBytes)
		}
		spec.OutputLimit = int(*p.OutputLimitBytes)
	}
	return spec, nil
}

// msDuration converts a positive number of milliseconds from the wire to a
// Duration, saturating where time.Duration(ms) * time.Millisecond would
// overflow: a client's "practically never" must not wrap around to a
// moment, or to a negative time.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// stepsSpec checks a recipe's steps and adds them to spec.
func stepsSpec(ws *workspace.Workspace, spec *process.Spec, steps []protocol.StepSpec) error {
	if len(spec.Argv) > 0 {
		return protocol.InvalidParams("steps", "give argv or steps, not both")
	}
	for i, st := range steps {
		field := fmt.Sprintf("steps[%d]", i)
		if strings.TrimSpace(st.Name) == "" {
			return protocol.InvalidParams(field+".name", "required")
		}
		dir := spec.Dir
		if st.Cwd != "" {
			d, err := ws.Dir(st.Cwd)
			if err != nil {
				return cwdError(field+".cwd", err)
			}
			dir = d
		}
		env := mergeEnv(spec.Env, st.Env)
		step := process.Step{Name: st.Name, Argv: st.Argv, Dir: dir, Env: env, ContinueOnError: st.ContinueOnError}
		if st.Pty != nil {
			size, err := ptySize(field+".pty", st.Pty)
			if err != nil {
				return err
			}
			step.Pty = &size
		}
		spec.Steps = append(spec.Steps, step)
	}
	return nil
}

// maxPtySide bounds a terminal's rows and columns.
const maxPtySide = 10000

// ptySize checks a terminal size from the wire; false is the zero size.
func ptySize(field string, p *protocol.PtySize) (process.Winsize, error) {
	if !p.On() {
		return process.Winsize{}, nil
	}
	if err := checkSide(field+".rows", p.Rows); err != nil {
		return process.Winsize{}, err
	}
	if err := checkSide(field+".cols", p.Cols); err != nil {
		return process.Winsize{}, err
	}
	return process.Winsize{Rows: p.Rows, Cols: p.Cols}, nil
}

// checkSide checks one side of a terminal.
func checkSide(field string, n int) error {
	if n < 1 || n > maxPtySide {
		return protocol.InvalidParams(field, "must be between 1 and %d, not %d", maxPtySide, n)
	}
	return nil
}

// mergeEnv returns base with over on top.
func mergeEnv(base, over map[string]*string) map[string]*string {
	if len(base) == 0 {
		return over
	}
	m := make(map[string]*string, len(base)+len(over))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

// cwdError maps a workspace error about a working directory.
func cwdError(field string, err error) error {
	e := wsError(err)
	if we, ok := e.(*protocol.Error); ok && we.Data != nil && we.Code == protocol.CodeInvalidParams {
		we.Data.Field = field
	}
	return e
}

// displayCommand returns argv quoted as a shell would need it, or a
// recipe's steps joined with &&.
func displayCommand(argv []string, steps []process.Step) string {
	if len(steps) > 0 {
		parts := make([]string, len(steps))
		for i, st := range steps {
			parts[i] = quoteArgv(st.Argv)
		}
		return strings.Join(parts, " && ")
	}
	return quoteArgv(argv)
}

// quoteArgv quotes each argument that needs it for a POSIX shell.
func quoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = shellQuote(a)
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
