package process

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/sandbox"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/panics"

	"github.com/toolhost/toolhost/capture"
)

// Command is a started command: one process, or a recipe of steps.
type Command struct {
	m *Manager
	// Set before the command is shared, then read-only.
	seq uint64
	id  string
	// handleID is "h-<seq>" for a handle, else ""; it is set before the
	// command is shared (Spec.Handle) or by Promote, under mu, before the
	// command has finished, and never changes after. Read it through
	// HandleID.
	handleID  string
	marker    string // TOOLHOST_COMMAND value: "<nonce>/<id>"
	spec      Spec
	steps     []Step
	recipe    bool
	obs       Observer
	startedAt time.Time
	// tmpDir is the confined command's own temporary directory (its
	// TMPDIR), made by begin and removed by end; "" when unconfined.
	tmpDir  string
	capture *capture.Capture
	// stdout, stderr and events serialise the capture's writers for the
	// pumps of overlapping steps.
	stdout, stderr, events *lockedWriter
	// stdin holds Spec.Stdin in an unlinked temporary file; nil when empty.
	stdin *os.File
	// anyPty says a step runs under a pseudo-terminal; set before the
	// command is shared.
	anyPty bool
	// ptyStep says the running step has a terminal: its stdout is
	// streamed as "pty". Written by spawnStep, read by the pumps.
	ptyStep atomic.Bool
	// input is the running step's terminal or open stdin (input.go).
	input input
	// jsonl splits a Spec.StdoutJSONL stdout; nil otherwise. Set by begin.
	jsonl *jsonlSplitter
	// portStop ends watchPorts; closed by end. portDone is closed by
	// watchPorts as it returns. Both nil without WatchPorts.
	portStop, portDone chan struct{}
	timer              *time.Timer
	// idleTimer enforces Spec.InactivityTimeout: one timer that re-arms
	// itself for the rest of the idle time (checkIdle), so that output
	// costs an atomic store, not a timer reset. Set by begin and stopped
	// by end, both under mu.
	idleTimer *time.Timer
	// cg is the command's cgroup, nil without cgroups; end releases it to
	// the session, which may hand it to a later command, and sets it nil.
	cg *cgroup

	// pumps owns the pumps and waiters of every step; the supervisor waits
	// for it before the Result is final.
	pumps conc.WaitGroup
	// stopCh is closed by the first stop request (Cancel or the timeout).
	stopCh chan struct{}
	// done is closed exactly once, after the Result is final: by the
	// supervisor (see supervise), or by endUnstarted for a command that
	// Reserve made and that ended before its first process was forked.
	done chan struct{}
	// ready is closed exactly once, when the command's start is over: by
	// Start and Launch once the first process is forked (before the
	// supervisor runs), or by endUnstarted. The fields begin and Launch
	// set (spec, steps, capture, tmpDir, the writers, the timers) are read
	// by other goroutines only after it is closed (see launched); Launch
	// writes those that readers under mu look at under mu.
	ready chan struct{}
	// reserved says Reserve made the command; set before it is shared.
	// Its startedAt is then the reservation's time, not the fork's.
	reserved bool
	// exitKick (buffered, 1) gets a value, without blocking, each time a
	// step's main process has been waited for: it wakes a kill ladder.
	exitKick chan struct{}

	mu sync.Mutex // guards everything below
	// stopReason, stopWhy and stopGrace are set once, by the first stop
	// request; stopWhy is the timeout's reason for a timedOut stop.
	stopReason string
	stopWhy    string
	stopGrace  time.Duration
	// signalled says the supervisor acted on the stop while a step still
	// ran (or before a step started): the status is then stopReason.
	signalled bool
	// launching says Launch took a reserved command: from then on a stop
	// is the supervisor's to act on (or Launch's, when the start fails),
	// not requestStop's, which ends a reserved command not launching at
	// once (endUnstarted).
	launching bool
	// pid and pgid are the current (or last) step's.
	pid, pgid int
	// pgids are the groups of every step so far; dead ones are pruned.
	pgids []int
	// mains are the step pids whose Wait has not returned.
	mains map[int]struct{}
	// settled are orphans found unattributable (no marker after retries).
	settled map[int]struct{}
	// ports are the ports the tree listens on, sorted (watchPorts).
	ports []Port
	// procs are every step's processes, for the final drain.
	procs []*proc
	// Snapshot state.
	curStep, totalSteps int
	stepName            string
	updatedAt, lastHB   time.Time
	// stepResults are the recipe's steps (len(steps)) or the marker steps.
	stepResults []StepResult
	// tracker turns child markers into steps (plain commands only).
	tracker markerTracker
	// result is valid once finished is set.
	result   Result
	finished bool

	// emitMu serialises observer calls, so a step's start precedes its
	// end; lastHBSent (guarded by emitMu) coalesces heartbeats.
	emitMu     sync.Mutex
	lastHBSent time.Time
}

func newCommand(m *Manager, seq uint64, spec Spec, steps []Step, obs Observer) *Command {
	c := &Command{
		m:        m,
		seq:      seq,
		id:       fmt.Sprintf("cmd-%d", seq),
		spec:     spec,
		steps:    steps,
		recipe:   len(spec.Steps) > 0,
		obs:      obs,
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
		ready:    make(chan struct{}),
		exitKick: make(chan struct{}, 1),
		mains:    make(map[int]struct{}),
		settled:  make(map[int]struct{}),
	}
	if spec.Handle {
		c.handleID = fmt.Sprintf("h-%d", seq)
	}
	for i := range steps {
		if c.stepPty(i).On() {
			c.anyPty = true
		}
	}
	c.marker = m.nonce + "/" + c.id
	if c.recipe {
		c.totalSteps = len(steps)
		c.stepResults = make([]StepResult, len(steps))
		for i, s := range steps {
			c.stepResults[i] = StepResult{Name: s.Name, Status: StepSkip}
		}
	}
	return c
}

// begin prepares the capture and forks the first step. On error nothing
// runs and nothing is left behind but the capture's artifact files.
func (c *Command) begin() (*proc, error) {
	// Resolve before creating the capture, so a missing executable costs
	// no artifacts.
	if c.spec.Confine != nil {
		// Made first: the environment names it.
		dir, err := c.m.takeTmp()
		if err != nil {
			return nil, fmt.Errorf("the command's temporary directory: %w", err)
		}
		c.tmpDir = dir
	}
	env, path, err := c.stepEnv(0)
	if err != nil {
		c.removeTmp()
		return nil, err
	}
	opts := capture.Options{InlineLimit: c.spec.OutputLimit, OnMarker: c.onMarker}
	if c.spec.StreamOutput && c.obs.OnOutput != nil {
		opts.OnOutput = c.onOutput
	}
	c.capture, err = c.m.artifacts.NewCapture(c.id, opts)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	c.stdout = &lockedWriter{w: c.capture.Stdout()}
	if c.spec.StdoutJSONL {
		c.jsonl = &jsonlSplitter{next: c.capture.Stdout(), max: c.spec.MaxEventBytes, onEvent: c.onEvent,
			onOversize: func(n int64) {
				if n == 1 { // once per command; the result counts them all
					c.m.log.Warn("a stdout line was longer than a message may be: it was not sent as an event (the stdout artifact holds it)",
						"command", c.id, "limit", c.spec.MaxEventBytes)
				}
			}}
		if c.spec.StreamOutput && c.obs.OnOutput != nil {
			c.jsonl.onPlain = func(line []byte) { c.forwardOutput("stdout", line) }
		}
		c.stdout = &lockedWriter{w: c.jsonl}
	}
	c.stderr = &lockedWriter{w: c.capture.Stderr()}
	c.events = &lockedWriter{w: c.capture.Events()}
	abandon := func() {
		c.removeTmp()
		if c.cg != nil {
			_ = c.m.cgs.release(c.cg, true) // nothing was forked into it
			c.cg = nil
		}
		_, _ = c.capture.Close()
		c.m.artifacts.Finished(c.id)
		if c.stdin != nil {
			_ = c.stdin.Close()
		}
	}
	if c.spec.Stdin != "" {
		if c.stdin, err = stdinFile(c.spec.Stdin); err != nil {
			abandon()
			return nil, err
		}
	}
	if cs := c.m.cgroups(); cs != nil {
		if c.cg, err = cs.newGroup(); err != nil {
			c.m.log.Debug("no cgroup for the command", "command", c.id, "err", err)
			c.cg = nil
		}
	}
	if !c.reserved {
		c.startedAt = time.Now()
	}
	p, err := c.spawnStep(0, env, path)
	if err != nil {
		abandon()
		return nil, err
	}
	if c.spec.WatchPorts {
		c.portStop, c.portDone = make(chan struct{}), make(chan struct{})
		c.pumps.Go(func() {
			defer close(c.portDone)
			c.watchPorts(c.portStop)
		})
	}
	if c.spec.Timeout > 0 {
		// The timer's function only records the stop; the supervisor acts.
		c.timer = time.AfterFunc(c.spec.Timeout, func() { c.requestStop(StatusTimedOut, TimeoutDeadline, c.m.cfg.KillGrace) })
	}
	if d := c.spec.InactivityTimeout; d > 0 {
		c.mu.Lock()
		c.idleTimer = time.AfterFunc(d, c.checkIdle)
		c.mu.Unlock()
	}
	return p, nil
}

// stdinFile writes text to an unlinked temporary file open for reading:
// children read it without a writer goroutine that could block.
func stdinFile(text string) (*os.File, error) {
	f, err := os.CreateTemp("", "toolhost-stdin-")
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	_ = os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stdin: %w", err)
	}
	return f, nil
}

// stepEnv builds step i's environment (allowlist, Spec.Env, Step.Env, then
// the package's variables) and resolves its argv[0] in that environment's
// PATH.
func (c *Command) stepEnv(i int) ([]string, string, error) {
	s := c.steps[i]
	env := maps.Clone(c.m.baseEnv)
	applyEnv(env, c.spec.Env)
	applyEnv(env, s.Env)
	env[EnvCommand] = c.marker
	env[EnvEventsFD] = eventsFD
	if c.tmpDir != "" && !setsVar("TMPDIR", c.spec.Env, s.Env) {
		env["TMPDIR"] = c.tmpDir
	}
	if c.stepPty(i).On() && !setsVar("TERM", c.spec.Env, s.Env) {
		env["TERM"] = "xterm-256color"
	}
	if cf := c.spec.Confine; cf != nil {
		for k, v := range cf.DefaultEnv {
			if _, ok := env[k]; !ok && !setsVar(k, c.spec.Env, s.Env) {
				env[k] = v
			}
		}
	}
	path, err := resolveArgv0(s.Argv[0], s.Dir, env["PATH"])
	if err != nil {
		return nil, "", err
	}
	return envList(env), path, nil
}

// stepPty returns step i's terminal size: zero for none, else the size
// the latest Resize set, or else its own or the Spec's.
func (c *Command) stepPty(i int) Winsize {
	size := c.spec.Pty
	if p := c.steps[i].Pty; p != nil {
		size = *p
	}
	if !size.On() {
		return Winsize{}
	}
	c.input.mu.Lock()
	defer c.input.mu.Unlock()
	if c.input.resized.On() {
		return c.input.resized
	}
	return size
}

// spawnStep forks step i.
func (c *Command) spawnStep(i int, env []string, path string) (*proc, error) {
	s := c.steps[i]
	pty := c.stepPty(i)
	if c.stdin != nil {
		if _, err := c.stdin.Seek(0, 0); err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
	}
	// Before the fork: the pumps start with it, and a child that prints at
	// once must have its first bytes streamed under the right name.
	c.ptyStep.Store(pty.On())
	proxy := c.proxyConfig() // before mu, which it takes
	// mu is held across the fork so a concurrent ladder sees the new
	// group and pid as soon as they exist.
	c.mu.Lock()
	defer c.mu.Unlock()
	p, broken, err := spawnProc(spawnRequest{
		path: path, argv: s.Argv, dir: s.Dir, env: env, stdin: c.stdin,
		pty: pty, openStdin: c.spec.OpenStdin && !pty.On(),
		stdout: c.stdout, stderr: c.stderr, events: c.events,
		onExit: func(p *proc) {
			c.input.endStep(p.input)
			c.mu.Lock()
			delete(c.mains, p.pid)
			c.mu.Unlock()
			select {
			case c.exitKick <- struct{}{}:
			default:
			}
		},
		cg:      c.cg,
		confine: c.confinement(i),
		proxy:   proxy,
		logger:  c.m.log,
	}, &c.pumps)
	if broken {
		c.m.disableCgroups(c.id)
	}
	if err != nil {
		return nil, err
	}
	p.step = i
	if pty.On() {
		c.input.mu.Lock()
		c.input.size = pty
		c.input.mu.Unlock()
	}
	c.input.setStep(p.input, pty.On())
	c.pid, c.pgid = p.pid, p.pgid
	c.pgids = append(c.pgids, p.pgid)
	c.mains[p.pid] = struct{}{}
	c.procs = append(c.procs, p)
	c.updatedAt = p.started
	return p, nil
}

// ID returns the command id, unique in the session.
func (c *Command) ID() string { return c.id }

// HandleID returns the handle id, or "" unless Spec.Handle or Promote.
func (c *Command) HandleID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handleID
}

// Promote makes a running command that was started without Spec.Handle a
// handle (a runCommand that yields): it gets its handle id and joins the
// handles Lookup finds. It returns the id, or false when the command has
// already finished (then it stays without a handle). Promoting a handle
// returns its id.
func (c *Command) Promote() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handleID != "" {
		return c.handleID, true
	}
	if c.finished {
		return "", false
	}
	// Under mu, before finished: end reads handleID after setting
	// finished under mu, so it sees this id and moves the handle to the
	// recent list.
	c.handleID = fmt.Sprintf("h-%d", c.seq)
	c.m.reg.add(c)
	return c.handleID, true
}

// Capture returns the command's capture: its artifact files' lengths,
// the inline output so far, and the broadcast of new bytes. It is nil
// while a command that Reserve made starts (Started is not closed yet),
// and for one that ended before its first process was forked.
func (c *Command) Capture() *capture.Capture {
	if !c.launched() {
		return nil
	}
	return c.capture
}

// checkIdle runs when the inactivity timer fires: it stops the command if
// nothing arrived for Spec.InactivityTimeout, else re-arms the timer for
// the rest of that time.
func (c *Command) checkIdle() {
	d := c.spec.InactivityTimeout
	idle := c.capture.Idle()
	if idle >= d {
		c.requestStop(StatusTimedOut, TimeoutInactivity, c.m.cfg.KillGrace)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.finished && c.stopReason == "" {
		c.idleTimer.Reset(d - idle)
	}
}

// PID returns the current (for a finished command, the last) step's pid.
func (c *Command) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

// PGID returns the current (or last) step's process group id.
func (c *Command) PGID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pgid
}

// StartedAt returns when the first process was forked; for a command that
// Reserve made, when it was reserved.
func (c *Command) StartedAt() time.Time { return c.startedAt }

// Done is closed once the command has ended, its processes are gone and its
// Result is final.
func (c *Command) Done() <-chan struct{} { return c.done }

// Result returns the final result; it is valid after Done is closed (before,
// it is the zero Result).
func (c *Command) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.finished {
		return Result{}
	}
	r := c.result
	r.Steps = slices.Clone(r.Steps)
	return r
}

// Current returns the final Result once the command has finished, else
// the Result so far: Status running, no exit code, EndedAt now, the output
// written so far (capture.Capture.Snapshot), the steps so far and what
// confined the first process.
func (c *Command) Current() Result {
	if !c.Spawned() {
		return c.unstartedResult()
	}
	out := c.capture.Snapshot()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		r := c.result
		r.Steps = slices.Clone(r.Steps)
		return r
	}
	now := time.Now()
	r := Result{
		CommandID: c.id, HandleID: c.handleID, Status: StatusRunning,
		StartedAt: c.startedAt, EndedAt: now, Duration: now.Sub(c.startedAt),
		Output: out, Steps: slices.Clone(c.stepResults),
	}
	if len(c.procs) > 0 {
		r.Sandbox = c.procs[0].report // set at the fork, before procs holds it
	}
	r.Network = c.networkOf(c.procs)
	r.NetworkAllow = c.networkAllow()
	return r
}

// Cancel stops the command: TERM to its groups and descendants, grace (<= 0:
// Config.KillGrace), then KILL. It is idempotent; the first stop request
// (Cancel or the timeout) decides the status and grace. A command whose
// last process exits on its own before the stop is acted on stays
// "completed". Cancel does not wait: wait for Done.
func (c *Command) Cancel(grace time.Duration) {
	if grace <= 0 {
		grace = c.m.cfg.KillGrace
	}
	c.requestStop(StatusCancelled, "", grace)
}

// requestStop records the first stop request and wakes the supervisor;
// why is the timeout's reason when reason is StatusTimedOut.
// A reserved command that Launch has not taken ends at once, with the
// stop's status: nothing of it runs, and Launch will fork nothing.
func (c *Command) requestStop(reason, why string, grace time.Duration) {
	c.mu.Lock()
	if c.stopReason != "" {
		c.mu.Unlock()
		return
	}
	c.stopReason, c.stopWhy, c.stopGrace = reason, why, grace
	close(c.stopCh)
	unstarted := c.reserved && !c.launching
	c.mu.Unlock()
	if unstarted {
		c.endUnstarted(reason, nil)
	}
}

// Snapshot returns the command's progress now. OutputBytes counts the
// user-visible bytes (stdout, and stderr without markers) so far.
func (c *Command) Snapshot() Snapshot {
	out := int64(0)
	spawned := c.Spawned()
	if spawned {
		out = c.capture.Bytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{
		HandleID: c.handleID, CommandID: c.id, Label: c.spec.Label,
		Status: StatusRunning, PID: c.pid,
		CurrentStep: c.curStep, TotalSteps: c.totalSteps, StepName: c.stepName,
		UpdatedAt: c.updatedAt, LastHeartbeatAt: c.lastHB, OutputBytes: out,
		ProgressPath: c.spec.ProgressPath,
	}
	if c.finished {
		s.Status = c.result.Status
		s.Elapsed = c.result.Duration
		s.ExitCode = c.result.ExitCode
		return s
	}
	s.Elapsed = time.Since(c.startedAt)
	if !spawned {
		return s // starting: no pid, no ports, no input yet
	}
	s.Ports = slices.Clone(c.ports)
	c.input.mu.Lock()
	if c.input.f != nil {
		s.InputOpen = true
		if c.input.pty {
			s.Pty = c.input.size
		}
	}
	c.input.mu.Unlock()
	return s
}

// killTarget returns the ladder target for the command's whole tree: its
// groups, its live step processes and their descendants, and the orphans
// that carry its marker or sit in one of its groups.
func (c *Command) killTarget() killTarget {
	return killTarget{
		groups: func() []int {
			c.mu.Lock()
			defer c.mu.Unlock()
			// An empty group's id could be reused by an unrelated
			// process: prune it once it is gone, and never signal it again.
			live := c.pgids[:0]
			for _, g := range c.pgids {
				if groupAlive(g) {
					live = append(live, g)
				}
			}
			c.pgids = live
			return slices.Clone(live)
		},
		find:   c.findTree,
		cg:     c.cg,
		exited: c.exitKick,
	}
}

// findTree lists the processes of the command outside what group signals
// reach for sure: live step processes and their descendants, and orphans
// attributed to the command.
func (c *Command) findTree() []int {
	c.mu.Lock()
	mains := make([]int, 0, len(c.mains))
	for p := range c.mains {
		mains = append(mains, p)
	}
	groups := slices.Clone(c.pgids)
	c.mu.Unlock()
	if c.cg != nil {
		// The cgroup holds every descendant, whatever its group, session
		// or environment: nothing else to look for.
		return c.cg.pids()
	}
	var out []int
	for _, p := range mains {
		out = append(out, p)
		out = subtree(p, out)
	}
	if c.m.subreaper {
		var unsure []int
		for _, r := range orphanRoots() {
			switch c.attribute(r, groups) {
			case attrOurs:
				out = append(out, r)
				out = subtree(r, out)
			case attrUnsure:
				unsure = append(unsure, r)
			}
		}
		// An empty environment is either cleared on purpose (env -i) or
		// read in the middle of an execve. Look again a few times before
		// settling that the process is not attributable.
		for try := 0; len(unsure) > 0 && try < unsureRetries; try++ {
			waitUntil(nil, unsureWait)
			next := unsure[:0]
			for _, r := range unsure {
				switch c.attribute(r, groups) {
				case attrOurs:
					out = append(out, r)
					out = subtree(r, out)
				case attrUnsure:
					next = append(next, r)
				}
			}
			unsure = next
		}
		if len(unsure) > 0 {
			c.mu.Lock()
			for _, r := range unsure {
				c.settled[r] = struct{}{}
			}
			c.mu.Unlock()
		}
		return out
	}
	for _, p := range scanMarkers(func(s string) bool { return s == c.marker }) {
		out = append(out, p)
		out = subtree(p, out)
	}
	return out
}

// Attribution of an orphan to a command.
const (
	attrOthers = iota // another command's, or nothing to kill
	attrOurs
	attrUnsure // no marker to read (yet)
)

// How often and how long findTree looks again at an orphan whose
// environment reads empty.
const (
	unsureRetries = 5
	unsureWait    = 10 * time.Millisecond
)

// attribute says whether orphan r belongs to the command: it carries the
// command's marker, or it carries none and sits in one of the command's
// groups. Zombies have nothing left to kill; orphans settled as
// unattributable are not looked at again.
func (c *Command) attribute(r int, groups []int) int {
	if mk := procMarker(r); mk != "" {
		if mk == c.marker {
			return attrOurs
		}
		return attrOthers
	}
	pi, err := readStat(r)
	switch {
	case err != nil || pi.state == 'Z':
		return attrOthers
	case slices.Contains(groups, pi.pgid):
		return attrOurs
	}
	c.mu.Lock()
	_, settled := c.settled[r]
	c.mu.Unlock()
	if settled {
		return attrOthers
	}
	return attrUnsure
}

// onOutput forwards streamed output to the observer; a terminal's output,
// which the capture keeps as stdout, streams as "pty". A jsonl stdout's
// plain lines are forwarded by its splitter instead.
func (c *Command) onOutput(stream string, p []byte) {
	if stream == "stdout" && c.jsonl != nil {
		return
	}
	if stream == "stdout" && c.ptyStep.Load() {
		stream = "pty"
	}
	c.forwardOutput(stream, p)
}

// onEvent passes a JSON object line of a jsonl stdout to the observer,
// from the pump: the pump waits as long as the observer does.
func (c *Command) onEvent(line []byte) {
	if c.obs.OnEvent == nil {
		return
	}
	var pc panics.Catcher
	pc.Try(func() { c.obs.OnEvent(line) })
	if rec := pc.Recovered(); rec != nil {
		c.m.log.Error("event observer panicked", "command", c.id, "panic", rec.String())
	}
}

// forwardOutput passes output to the observer.
func (c *Command) forwardOutput(stream string, p []byte) {
	data := slices.Clone(p) // the capture may reuse p
	c.emit(func() { c.obs.OnOutput(stream, data) })
}

// labelOf is the step name used in messages.
func labelOf(s Step) string {
	if s.Name != "" {
		return s.Name
	}
	return strings.Join(s.Argv, " ")
}

// confinement returns the sandbox spec of step i, nil when unconfined.
func (c *Command) confinement(i int) *sandbox.Spec {
	cf := c.spec.Confine
	if cf == nil {
		return nil
	}
	pol := cf.Policy
	if p := c.steps[i].Policy; p != nil {
		pol = *p
	}
	pol.TempDir = c.tmpDir
	spec := &sandbox.Spec{Policy: pol, Limits: cf.Limits, Require: cf.Require, Caps: cf.Caps}
	if cf.Network != nil {
		// The allow-list narrows whatever the policy says.
		spec.Policy.Network, spec.Policy.Proxy = false, true
		spec.ProxyEnv = netproxy.Env
	}
	return spec
}

// removeTmp removes the command's temporary directory, once its processes
// are gone.
func (c *Command) removeTmp() {
	if c.tmpDir == "" {
		return
	}
	c.m.giveTmp(c.tmpDir)
	c.tmpDir = ""
}

// setsVar reports whether one of the overrides sets or unsets name.
func setsVar(name string, overrides ...map[string]*string) bool {
	for _, o := range overrides {
		if _, ok := o[name]; ok {
			return true
		}
	}
	return false
}
