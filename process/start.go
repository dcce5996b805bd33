package process

import (
	"errors"
	"fmt"
	"time"
)

// ErrStopped says a command that Reserve made was stopped (Cancel, the
// Manager's Shutdown) before Launch forked anything: it has ended, with
// the stop's status, and nothing of it ran.
var ErrStopped = errors.New("the command was stopped before it started")

// Reserve makes a command whose start is still being prepared by the
// caller (a snapshot, a scan, the sandbox's planning), so that it can
// become a handle (Promote) before it runs: it has its ids, counts as
// running (MaxProcesses, Shutdown), and Lookup finds it once promoted. It
// runs nothing: the caller then calls Launch with the final spec, or Abort
// when the preparation fails. Until then its Current and Snapshot say
// "running" with no pid and no output, Capture is nil, and a Cancel ends
// it at once with status cancelled (so Launch forks nothing). label names
// it in Snapshot until Launch.
//
// Reserve fails as Start does with ErrClosed and ErrBusy.
func (m *Manager) Reserve(label string) (*Command, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if len(m.running) >= m.cfg.MaxProcesses {
		return nil, fmt.Errorf("%d commands are running: %w", len(m.running), ErrBusy)
	}
	m.nextID++
	c := newCommand(m, m.nextID, Spec{Label: label}, nil, Observer{})
	c.reserved = true
	c.startedAt = time.Now()
	m.running[c] = struct{}{}
	return c, nil
}

// Launch starts a command that Reserve made, with spec and obs, as Start
// would (spec.Handle is ignored: Promote makes it a handle). It returns
// once the first process is forked. When a stop came first it forks
// nothing and returns ErrStopped. When the start fails (spec is invalid,
// argv[0] cannot be spawned, the sandbox refuses, the Manager is shut
// down) it returns the error Start would, and the command ends with
// status failed and that error in Result.Err, or with the stop's status
// when a stop came while it started. Launch is called at most once, and
// not after Abort.
func (c *Command) Launch(spec Spec, obs Observer) error {
	m := c.m
	steps, err := m.validate(&spec)
	if err != nil {
		c.endUnstarted(StatusFailed, err)
		return err
	}
	c.mu.Lock()
	if c.finished || c.stopReason != "" {
		c.mu.Unlock()
		return ErrStopped
	}
	// From here a stop is the supervisor's, or ours below.
	c.launching = true
	c.spec, c.steps, c.recipe, c.obs = spec, steps, len(spec.Steps) > 0, obs
	if c.recipe {
		c.totalSteps = len(steps)
		c.stepResults = make([]StepResult, len(steps))
		for i, s := range steps {
			c.stepResults[i] = StepResult{Name: s.Name, Status: StepSkip}
		}
	}
	c.mu.Unlock()
	for i := range steps {
		if c.stepPty(i).On() {
			c.anyPty = true // read by others only once ready is closed
		}
	}

	m.mu.Lock()
	if m.closed {
		// Shutdown has taken (or will take) its list of commands: this one
		// is ours to end.
		m.mu.Unlock()
		c.endUnstarted(StatusCancelled, nil)
		return ErrClosed
	}
	m.inflight.Add(1) // Shutdown waits for the supervisor to be in wg
	m.mu.Unlock()
	defer m.inflight.Done()

	first, err := c.begin()
	if err != nil {
		c.capture = nil // closed by begin; ready is not closed yet
		c.endUnstarted(StatusFailed, err)
		return err
	}
	close(c.ready)
	m.wg.Go(func() { c.supervise(first) })
	return nil
}

// Abort ends a command that Reserve made whose preparation failed, before
// Launch: status failed, err in Result.Err. A command already ended (a
// stop came first) keeps its status.
func (c *Command) Abort(err error) {
	c.endUnstarted(StatusFailed, err)
}

// endUnstarted ends a command that Reserve made and that forked nothing:
// its Result is final with status (the stop's, when a stop came first,
// whatever status says) and err, it leaves the running set and the
// handles, and Done and Started are closed. Only its first call acts:
// finished is set under mu by it, and done and ready are closed only
// after that (Launch closes ready only when begin succeeded, and then
// endUnstarted is never called).
func (c *Command) endUnstarted(status string, err error) {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	if c.stopReason != "" {
		status, err = c.stopReason, nil
	}
	now := time.Now()
	c.result = Result{
		CommandID: c.id, HandleID: c.handleID, Status: status, Err: err,
		StartedAt: c.startedAt, EndedAt: now, Duration: now.Sub(c.startedAt),
	}
	c.finished = true
	c.mu.Unlock()
	c.m.finished(c)
	close(c.done)
	close(c.ready)
}

// Started is closed once the command's start is over: its first process
// was forked, or it ended without one (see Spawned). For a command that
// Start made it is closed before Start returns.
func (c *Command) Started() <-chan struct{} { return c.ready }

// Spawned reports whether the command's first process was forked: false
// while a command that Reserve made starts, and for one that ended
// before it did.
func (c *Command) Spawned() bool { return c.launched() && c.capture != nil }

// launched reports whether ready is closed: the fields the start sets may
// be read from then on.
func (c *Command) launched() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// unstartedResult is Current for a command without a process: its final
// Result once it has ended, else running, with no output yet.
func (c *Command) unstartedResult() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return c.result
	}
	now := time.Now()
	return Result{CommandID: c.id, HandleID: c.handleID, Status: StatusRunning,
		StartedAt: c.startedAt, EndedAt: now, Duration: now.Sub(c.startedAt)}
}
