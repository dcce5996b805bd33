package process

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMarkerSteps: a plain command's markers, on stderr and on the events
// pipe, become step events, Snapshot state and Result.Steps.
func TestMarkerSteps(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	tests := []struct {
		name       string
		script     string
		wantEvents []StepEvent
		wantSteps  []StepResult
		wantStderr string
	}{
		{
			name: "text markers: implied done, explicit done, open step closed at exit",
			script: `echo "[STEP 00/03] fetch @ 2026-03-23T14:05:58Z" >&2
echo plain >&2
echo "[STEP 01/03] build" >&2
echo "  ✓ build (2.5s)" >&2
echo "[STEP 02/03] test" >&2`,
			wantEvents: []StepEvent{
				ev("fetch", "start", 1, 3), ev("fetch", "done", 1, 3),
				ev("build", "start", 2, 3), ev("build", "done", 2, 3),
				ev("test", "start", 3, 3), ev("test", "done", 3, 3),
			},
			wantSteps:  []StepResult{{Name: "fetch", Status: "done"}, {Name: "build", Status: "done"}, {Name: "test", Status: "done"}},
			wantStderr: "plain\n",
		},
		{
			name: "events pipe JSON, index 0 takes the next, skip of an unstarted step",
			script: `echo '{"type":"step_transition","step":"x","status":"start"}' >&$TOOLHOST_EVENTS_FD
echo '{"type":"step_transition","step":"x","status":"fail"}' >&3
echo "⊘ deploy" >&3
exit 1`,
			wantEvents: []StepEvent{ev("x", "start", 1, 0), ev("x", "fail", 1, 0), ev("deploy", "skip", 2, 0)},
			wantSteps:  []StepResult{{Name: "x", Status: "fail"}, {Name: "deploy", Status: "skip"}},
		},
		{
			name:       "open step fails with the command",
			script:     `echo "[STEP 00/??] only" >&2; exit 2`,
			wantEvents: []StepEvent{ev("only", "start", 1, 0), ev("only", "fail", 1, 0)},
			wantSteps:  []StepResult{{Name: "only", Status: "fail"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newStepRecorder()
			c, err := m.Start(Spec{Argv: sh(tt.script)}, rec.observer())
			if err != nil {
				t.Fatal(err)
			}
			r := waitDone(t, c, 10*time.Second)
			if diff := cmp.Diff(tt.wantEvents, rec.events(), ignoreTimes); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSteps, r.Steps, ignoreDurations); diff != "" {
				t.Errorf("steps mismatch (-want +got):\n%s", diff)
			}
			if r.Output.Stderr != tt.wantStderr {
				t.Errorf("stderr %q, want %q", r.Output.Stderr, tt.wantStderr)
			}
			last := tt.wantEvents[len(tt.wantEvents)-1]
			snap := c.Snapshot()
			if snap.CurrentStep != last.Index || snap.StepName != last.Step || snap.TotalSteps != last.Total {
				t.Errorf("snapshot step %d/%d %q, want %d/%d %q", snap.CurrentStep, snap.TotalSteps, snap.StepName, last.Index, last.Total, last.Step)
			}
		})
	}
	t.Run("stated elapsed is kept", func(t *testing.T) {
		t.Parallel()
		rec := newStepRecorder()
		c, err := m.Start(Spec{Argv: sh(`echo "[STEP 00/01] b" >&2; echo "✓ b (2.5s)" >&2`)}, rec.observer())
		if err != nil {
			t.Fatal(err)
		}
		r := waitDone(t, c, 10*time.Second)
		evs := rec.events()
		if len(evs) != 2 || evs[1].Elapsed != 2500*time.Millisecond || len(r.Steps) != 1 || r.Steps[0].Duration != 2500*time.Millisecond {
			t.Errorf("events %+v steps %+v, want elapsed 2.5s", evs, r.Steps)
		}
	})
}

// TestHeartbeatsCoalesced: a burst of heartbeats reaches the observer about
// once per second; the Snapshot still has the latest.
func TestHeartbeatsCoalesced(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	rec := newStepRecorder()
	start := time.Now()
	c, err := m.Start(Spec{Argv: sh(`i=0; while [ $i -lt 200 ]; do echo "[HEARTBEAT] build — $((i+1))s elapsed" >&2; i=$((i+1)); done`)}, rec.observer())
	if err != nil {
		t.Fatal(err)
	}
	r := waitDone(t, c, 10*time.Second)
	burst := time.Since(start)
	rec.mu.Lock()
	hbs := append([]HeartbeatEvent(nil), rec.hbs...)
	rec.mu.Unlock()
	if max := 1 + int(burst/heartbeatEvery); len(hbs) < 1 || len(hbs) > max {
		t.Errorf("%d heartbeats delivered in %v, want 1..%d", len(hbs), burst, max)
	}
	if len(hbs) > 0 && (hbs[0] != HeartbeatEvent{Step: "build", Elapsed: time.Second}) {
		t.Errorf("first heartbeat %+v, want build at 1s", hbs[0])
	}
	snap := c.Snapshot()
	if snap.LastHeartbeatAt.IsZero() || snap.LastHeartbeatAt.Before(start) || snap.LastHeartbeatAt.After(r.EndedAt) {
		t.Errorf("LastHeartbeatAt %v outside the run [%v, %v]", snap.LastHeartbeatAt, start, r.EndedAt)
	}
	if r.Output.Stderr != "" {
		t.Errorf("heartbeats leaked into stderr: %q", r.Output.Stderr)
	}
}
