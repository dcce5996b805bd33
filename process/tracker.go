package process

import (
	"time"

	"github.com/sourcegraph/conc/panics"

	"github.com/toolhost/toolhost/capture"
)

// heartbeatEvery is the least time between two OnHeartbeat calls of one
// command. Extra heartbeats are dropped: the Snapshot keeps the latest.
const heartbeatEvery = time.Second

// markerTracker turns a plain command's step markers into steps. Its
// fields are guarded by the Command's mu.
//
// The rules: a marker step with Index 0 gets the index after the last one
// seen. A "start" for a step other than the open one closes the open one
// as "done" first (the child moved on without saying so); a "start" for
// the open step again is ignored. An end marker (done, fail, skip) closes
// the open step if the names match, else it records a step of its own
// (e.g. a skip for a step that never started). A step still open when the
// command ends is closed as "done" if the command completed with exit code
// 0, else "fail".
type markerTracker struct {
	// open indexes Command.stepResults when hasOpen.
	open    int
	hasOpen bool
	// openStart is when the open marker step started; in a recipe, when
	// the running recipe step started.
	openStart time.Time
	// lastIndex is the 1-based index of the latest step.
	lastIndex int
	// indices parallel Command.stepResults: each step's 1-based index.
	indices []int
}

// onMarker receives the Capture's markers, from the pump goroutines. In a
// recipe the recipe's own steps are authoritative: a child's step markers
// there count as heartbeats of the running step.
func (c *Command) onMarker(mk capture.Marker) {
	now := time.Now()
	ts := mk.TS
	if ts.IsZero() {
		ts = now
	}
	var (
		evs []StepEvent
		hb  *HeartbeatEvent
	)
	c.mu.Lock()
	if c.recipe && c.curStep == 0 {
		// The first step's output came before the supervisor announced
		// the step: announce it now, so the heartbeat follows its start.
		c.mu.Unlock()
		c.stepStarted(0, c.startedAt)
		c.mu.Lock()
	}
	c.updatedAt = now
	if mk.Kind == capture.MarkerHeartbeat || c.recipe {
		c.lastHB = now
		name, el := mk.Step, mk.Elapsed
		switch {
		case c.recipe:
			// The recipe's running step is alive, whatever the child
			// calls its own parts.
			name, el = c.stepName, now.Sub(c.tracker.openStart)
		case el <= 0 && c.tracker.hasOpen:
			el = now.Sub(c.tracker.openStart)
		case el <= 0:
			el = now.Sub(c.startedAt)
		}
		if name == "" {
			name = c.stepName
		}
		hb = &HeartbeatEvent{Step: name, Elapsed: el}
	} else {
		evs = c.trackStep(mk, now, ts)
	}
	c.mu.Unlock()
	for _, ev := range evs {
		c.emitStep(ev)
	}
	if hb != nil {
		c.heartbeat(*hb)
	}
}

// trackStep applies a step marker to a plain command; the caller holds mu.
func (c *Command) trackStep(mk capture.Marker, now, ts time.Time) []StepEvent {
	t := &c.tracker
	if mk.Total > 0 {
		c.totalSteps = mk.Total
	}
	var evs []StepEvent
	switch mk.Status {
	case StepStart:
		if t.hasOpen && c.stepResults[t.open].Name == mk.Step {
			return nil
		}
		if t.hasOpen {
			evs = append(evs, c.closeOpen(StepDone, 0, now, ts))
		}
		idx := mk.Index
		if idx <= 0 {
			idx = t.lastIndex + 1
		}
		t.lastIndex = idx
		c.stepResults = append(c.stepResults, StepResult{Name: mk.Step, Status: StepRunning})
		t.indices = append(t.indices, idx)
		t.open, t.hasOpen, t.openStart = len(c.stepResults)-1, true, now
		c.curStep, c.stepName = idx, mk.Step
		evs = append(evs, StepEvent{Step: mk.Step, Status: StepStart, Index: idx, Total: c.totalSteps, TS: ts})
	case StepDone, StepFail, StepSkip:
		if t.hasOpen && c.stepResults[t.open].Name == mk.Step {
			return append(evs, c.closeOpen(mk.Status, mk.Elapsed, now, ts))
		}
		idx := mk.Index
		if idx <= 0 {
			idx = t.lastIndex + 1
		}
		t.lastIndex = idx
		c.stepResults = append(c.stepResults, StepResult{Name: mk.Step, Status: mk.Status, Duration: mk.Elapsed})
		t.indices = append(t.indices, idx)
		c.curStep, c.stepName = idx, mk.Step
		evs = append(evs, StepEvent{Step: mk.Step, Status: mk.Status, Index: idx, Total: c.totalSteps, Elapsed: mk.Elapsed, TS: ts})
	}
	return evs
}

// closeOpen ends the open marker step with status; elapsed 0 means
// measured. The caller holds mu.
func (c *Command) closeOpen(status string, elapsed time.Duration, now, ts time.Time) StepEvent {
	t := &c.tracker
	if elapsed <= 0 {
		elapsed = now.Sub(t.openStart)
	}
	r := &c.stepResults[t.open]
	r.Status, r.Duration = status, elapsed
	t.hasOpen = false
	idx := t.indices[t.open]
	c.curStep, c.stepName = idx, r.Name
	return StepEvent{Step: r.Name, Status: status, Index: idx, Total: c.totalSteps, Elapsed: elapsed, TS: ts}
}

// finishMarkers closes a plain command's open marker step at its end.
func (c *Command) finishMarkers(code *int, signalled bool) {
	if c.recipe {
		return
	}
	now := time.Now()
	c.mu.Lock()
	if !c.tracker.hasOpen {
		c.mu.Unlock()
		return
	}
	status := StepFail
	if !signalled && code != nil && *code == 0 {
		status = StepDone
	}
	ev := c.closeOpen(status, 0, now, now)
	c.mu.Unlock()
	c.emitStep(ev)
}

// heartbeat forwards ev unless one went out less than heartbeatEvery ago.
func (c *Command) heartbeat(ev HeartbeatEvent) {
	if c.obs.OnHeartbeat == nil {
		return
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	now := time.Now()
	if !c.lastHBSent.IsZero() && now.Sub(c.lastHBSent) < heartbeatEvery {
		return
	}
	c.lastHBSent = now
	var pc panics.Catcher
	pc.Try(func() { c.obs.OnHeartbeat(ev) })
	if rec := pc.Recovered(); rec != nil {
		c.m.log.Error("observer panicked", "command", c.id, "panic", rec.String())
	}
}
