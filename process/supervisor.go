package process

import (
	"time"

	"github.com/sourcegraph/conc/panics"
)

// supervise runs the command from its first process to its Result. It is
// the command's only supervisor goroutine, owned by the Manager's wg.
//
// A recipe runs its steps in order, each a process in its own group, all
// writing to the command's one Capture (flushed between steps). After a
// failing step the rest are skipped unless that step has ContinueOnError.
// A stop (Cancel or the timeout) ends the running step (status
// "cancelled") and skips the rest. The recipe's ExitCode and Signal are
// those of the step a stop ended, else those of the first step that
// failed (ContinueOnError lets the later steps run; it does not make the
// failure a success), else those of the last step: so the recipe succeeds
// only when every step that ran succeeded.
func (c *Command) supervise(first *proc) {
	var (
		last     *proc // the last step that ran to its end
		lastCode *int
		lastSig  string
		failStop bool // a step failed without ContinueOnError
		// failed is set by the first failing step; failCode and failSig
		// are its exit.
		failed   bool
		failCode *int
		failSig  string
	)
	for i := range c.steps {
		step := c.steps[i]
		var p *proc
		if i == 0 {
			p = first
		} else {
			if c.stopRequested() {
				c.mu.Lock()
				c.signalled = true
				c.mu.Unlock()
				c.skipStep(i)
				continue
			}
			if failStop {
				c.skipStep(i)
				continue
			}
			// Give the previous step's pipes a moment to reach EOF so the
			// flush falls between the steps' output.
			if last != nil {
				waitUntil(last.eof, stepDrain)
			}
			c.capture.Flush()
			env, path, err := c.stepEnv(i)
			if err == nil {
				p, err = c.spawnStep(i, env, path)
			}
			if err != nil {
				_, _ = c.stderr.Write([]byte(describeSpawnError(labelOf(step), err)))
				code := spawnFailCode(err)
				c.stepStarted(i, time.Now())
				c.stepEnded(i, StepFail, &code, 0)
				lastCode, lastSig, last = &code, "", nil
				if !failed {
					failed, failCode, failSig = true, &code, ""
				}
				if !step.ContinueOnError {
					failStop = true
				}
				continue
			}
		}
		c.stepStarted(i, p.started)
		stopped := c.waitStep(p)
		code, sig := exitOf(p.state)
		dur := p.ended.Sub(p.started)
		status := StepDone
		switch {
		case stopped:
			status = StepCancelled
		case code == nil || *code != 0:
			status = StepFail
		}
		c.stepEnded(i, status, code, dur)
		last, lastCode, lastSig = p, code, sig
		if status == StepCancelled {
			failed, failCode, failSig = true, code, sig // the stop decides
		} else if status == StepFail && !failed {
			failed, failCode, failSig = true, code, sig
		}
		if status == StepFail && !step.ContinueOnError {
			failStop = true
		}
	}
	if failed {
		lastCode, lastSig = failCode, failSig
	}
	c.end(lastCode, lastSig)
}

// waitStep waits for p to exit. If a stop arrives first, it runs the kill
// ladder on the whole command and reports true; a process that had already
// exited when the stop is seen counts as exiting on its own.
func (c *Command) waitStep(p *proc) bool {
	select {
	case <-p.exited:
		return false
	case <-c.stopCh:
	}
	select {
	case <-p.exited:
		return false
	default:
	}
	c.mu.Lock()
	c.signalled = true
	grace := c.stopGrace
	c.mu.Unlock()
	if !killLadder(c.killTarget(), grace, true, c.m.urgent) {
		c.m.log.Warn("processes survived SIGKILL", "command", c.id)
	}
	<-p.exited
	return true
}

// stopRequested reports whether Cancel or the timeout has fired.
func (c *Command) stopRequested() bool {
	select {
	case <-c.stopCh:
		return true
	default:
		return false
	}
}

// end sweeps the command's tree, drains its pipes and makes the Result
// final, then closes Done.
func (c *Command) end(code *int, sig string) {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Lock()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	signalled := c.signalled
	c.mu.Unlock()
	// The command has ended: end whatever it left behind. After a stop the
	// ladder has spent the grace, so it is KILL at once.
	gone := killLadder(c.killTarget(), c.m.cfg.KillGrace, !signalled, c.m.urgent)
	if !gone {
		c.m.log.Warn("processes survived SIGKILL", "command", c.id)
	}
	if c.portStop != nil {
		// The tree is gone: its ports are closed. The watcher reads the
		// cgroup, so it ends before the cgroup goes to another command.
		close(c.portStop)
		<-c.portDone
	}
	if c.cg != nil {
		if err := c.m.cgs.release(c.cg, gone); err != nil {
			c.m.log.Warn("removing the command's cgroup", "command", c.id, "err", err)
		}
		c.cg = nil // it may be another command's now
	}
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	c.drainPipes(procs)
	if rec := c.pumps.WaitAndRecover(); rec != nil {
		c.m.log.Error("pump or waiter panicked", "command", c.id, "panic", rec.String())
	}
	var events *EventCounts
	if c.jsonl != nil {
		counts := c.jsonl.flush() // a last line without a newline
		events = &counts
	}
	out, err := c.capture.Close()
	if err != nil {
		c.m.log.Error("closing capture", "command", c.id, "err", err)
	}
	c.m.artifacts.Finished(c.id)
	if c.stdin != nil {
		_ = c.stdin.Close()
	}
	c.removeTmp()
	c.finishMarkers(code, signalled)

	ended := time.Now()
	c.mu.Lock()
	status, why := StatusCompleted, ""
	if c.signalled {
		status = c.stopReason
		if status == StatusTimedOut {
			why = c.stopWhy
		}
	}
	c.result = Result{
		CommandID: c.id, HandleID: c.handleID, Status: status, TimeoutReason: why,
		ExitCode: code, Signal: sig,
		StartedAt: c.startedAt, EndedAt: ended, Duration: ended.Sub(c.startedAt),
		Output: out, Steps: append([]StepResult(nil), c.stepResults...),
		Events: events, ProgressPath: c.spec.ProgressPath,
		Network:      c.networkOf(procs), // the proxies have closed with their steps
		NetworkAllow: c.networkAllow(),
	}
	// The waiters have all returned (pumps above): each proc's limit is set.
	for _, p := range procs {
		if c.result.Sandbox == nil {
			c.result.Sandbox = p.report
		}
		if c.result.LimitExceeded == "" {
			c.result.LimitExceeded = p.limit
		}
		if c.recipe && p.step < len(c.result.Steps) {
			c.result.Steps[p.step].Sandbox = p.report
		}
	}
	c.updatedAt = ended
	// Invariant: Done is closed exactly once, after the Result is final.
	// finished is set and the result written under mu, the Manager forgets
	// the command as running, and only then is done closed, here, by the
	// command's only supervisor, which runs end exactly once.
	c.finished = true
	c.mu.Unlock()
	c.m.finished(c)
	close(c.done)
}

// drainPipes waits until the pipes of procs, the command's processes, all
// reach EOF once its tree is gone. A pipe that still brings output is
// drained, however slowly the client takes it (its events wait for room):
// only one that has brought nothing for finalDrain is cut, held open by a
// process nothing could attribute.
func (c *Command) drainPipes(procs []*proc) {
	lasts := make([]int64, len(procs))
	for i, p := range procs {
		lasts[i] = p.pumped.Load()
	}
	// keep reports whether the pipes are still being drained: a pump
	// hands bytes on (to a client that reads slowly: its events wait for
	// room), or one brought bytes since the last look, within
	// finalDrainMax (a stray writer nothing could attribute must not hold
	// the end forever).
	started := time.Now()
	keep := func() bool {
		var brought, handing bool
		for i, p := range procs {
			b, h, now := p.drainState(lasts[i])
			lasts[i] = now
			brought, handing = brought || b, handing || h
		}
		return handing || (brought && time.Since(started) < finalDrainMax)
	}
	deadline := time.NewTimer(finalDrain)
	for _, p := range procs {
		for waiting := true; waiting; {
			select {
			case <-p.eof:
				waiting = false
			case <-deadline.C:
				if keep() {
					deadline.Reset(finalDrain)
					continue
				}
				c.m.log.Warn("closing pipes still held open after the command ended", "command", c.id)
				for _, q := range procs {
					q.forceClose()
				}
				<-p.eof
				waiting = false
			}
		}
	}
	deadline.Stop()
}

// waitUntil waits for ch to close or d to pass.
func waitUntil(ch <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// emit calls f, an observer callback, with the command's callbacks
// serialised; a panic in f is logged, not propagated.
func (c *Command) emit(f func()) {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	var pc panics.Catcher
	pc.Try(f)
	if rec := pc.Recovered(); rec != nil {
		c.m.log.Error("observer panicked", "command", c.id, "panic", rec.String())
	}
}

// emitStep sends a step transition, if anyone listens.
func (c *Command) emitStep(ev StepEvent) {
	if c.obs.OnStep == nil {
		return
	}
	c.emit(func() { c.obs.OnStep(ev) })
}

// stepStarted records and announces the start of recipe step i (a plain
// command's single step is announced only through markers). It is
// idempotent: the first step's output can reach a pump (see onMarker)
// before the supervisor gets to announce it, and whichever comes first
// announces. emitMu is held from the check to the announcement, so nothing
// else about the step goes out before its start.
func (c *Command) stepStarted(i int, at time.Time) {
	if !c.recipe {
		return
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	c.mu.Lock()
	if c.stepResults[i].Status == StepRunning {
		c.mu.Unlock()
		return
	}
	c.curStep, c.stepName = i+1, c.steps[i].Name
	c.tracker.openStart = at
	c.stepResults[i].Status = StepRunning
	c.updatedAt = at
	c.mu.Unlock()
	if c.obs.OnStep == nil {
		return
	}
	ev := StepEvent{Step: c.steps[i].Name, Status: StepStart, Index: i + 1, Total: len(c.steps), TS: at}
	var pc panics.Catcher
	pc.Try(func() { c.obs.OnStep(ev) })
	if rec := pc.Recovered(); rec != nil {
		c.m.log.Error("observer panicked", "command", c.id, "panic", rec.String())
	}
}

// stepEnded records and announces the end of recipe step i. A cancelled
// step is announced as "fail": the wire knows start, done, fail and skip.
func (c *Command) stepEnded(i int, status string, code *int, dur time.Duration) {
	if !c.recipe {
		return
	}
	now := time.Now()
	c.mu.Lock()
	c.stepResults[i] = StepResult{Name: c.steps[i].Name, Status: status, Duration: dur, ExitCode: code}
	c.updatedAt = now
	c.mu.Unlock()
	ev := status
	if ev == StepCancelled {
		ev = StepFail
	}
	c.emitStep(StepEvent{Step: c.steps[i].Name, Status: ev, Index: i + 1, Total: len(c.steps), Elapsed: dur, TS: now})
}

// skipStep records and announces that recipe step i will not run. Like
// every transition it moves the snapshot's current step, so that a
// snapshot names the step of the latest stepTransition.
func (c *Command) skipStep(i int) {
	now := time.Now()
	c.mu.Lock()
	c.curStep, c.stepName = i+1, c.steps[i].Name
	c.stepResults[i] = StepResult{Name: c.steps[i].Name, Status: StepSkip}
	c.updatedAt = now
	c.mu.Unlock()
	c.emitStep(StepEvent{Step: c.steps[i].Name, Status: StepSkip, Index: i + 1, Total: len(c.steps), TS: now})
}
