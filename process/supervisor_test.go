package process

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// stepRecorder collects an Observer's step events and heartbeats.
type stepRecorder struct {
	mu    sync.Mutex
	steps []StepEvent
	hbs   []HeartbeatEvent
	// started is signalled for every "start" event.
	started chan string
}

func newStepRecorder() *stepRecorder {
	return &stepRecorder{started: make(chan string, 64)}
}

func (r *stepRecorder) observer() Observer {
	return Observer{
		OnStep: func(ev StepEvent) {
			r.mu.Lock()
			r.steps = append(r.steps, ev)
			r.mu.Unlock()
			if ev.Status == StepStart {
				r.started <- ev.Step
			}
		},
		OnHeartbeat: func(ev HeartbeatEvent) {
			r.mu.Lock()
			r.hbs = append(r.hbs, ev)
			r.mu.Unlock()
		},
	}
}

func (r *stepRecorder) events() []StepEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StepEvent(nil), r.steps...)
}

// waitStart waits for the start of step name.
func (r *stepRecorder) waitStart(t *testing.T, name string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case s := <-r.started:
			if s == name {
				return
			}
		case <-timer.C:
			t.Fatalf("step %q never started; events %+v", name, r.events())
		}
	}
}

// ev is a StepEvent without its times.
func ev(step, status string, index, total int) StepEvent {
	return StepEvent{Step: step, Status: status, Index: index, Total: total}
}

var ignoreTimes = cmpopts.IgnoreFields(StepEvent{}, "Elapsed", "TS")
var ignoreDurations = cmpopts.IgnoreFields(StepResult{}, "Duration")

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestRecipe(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	tests := []struct {
		name       string
		steps      []Step
		wantEvents []StepEvent
		wantSteps  []StepResult
		wantExit   *int
		wantStdout string
	}{
		{
			name:  "all pass, shared output",
			steps: []Step{{Name: "a", Argv: sh("echo one")}, {Name: "b", Argv: sh("echo two")}},
			wantEvents: []StepEvent{
				ev("a", "start", 1, 2), ev("a", "done", 1, 2), ev("b", "start", 2, 2), ev("b", "done", 2, 2),
			},
			wantSteps:  []StepResult{{Name: "a", Status: "done", ExitCode: intp(0)}, {Name: "b", Status: "done", ExitCode: intp(0)}},
			wantExit:   intp(0),
			wantStdout: "one\ntwo\n",
		},
		{
			name:  "fail fast skips the rest",
			steps: []Step{{Name: "a", Argv: []string{"true"}}, {Name: "b", Argv: sh("exit 4")}, {Name: "c", Argv: sh("echo never")}},
			wantEvents: []StepEvent{
				ev("a", "start", 1, 3), ev("a", "done", 1, 3), ev("b", "start", 2, 3), ev("b", "fail", 2, 3), ev("c", "skip", 3, 3),
			},
			wantSteps: []StepResult{{Name: "a", Status: "done", ExitCode: intp(0)}, {Name: "b", Status: "fail", ExitCode: intp(4)}, {Name: "c", Status: "skip"}},
			wantExit:  intp(4),
		},
		{
			name:  "continueOnError runs on; the failed step's code stands",
			steps: []Step{{Name: "a", Argv: sh("exit 4"), ContinueOnError: true}, {Name: "b", Argv: sh("echo after")}},
			wantEvents: []StepEvent{
				ev("a", "start", 1, 2), ev("a", "fail", 1, 2), ev("b", "start", 2, 2), ev("b", "done", 2, 2),
			},
			wantSteps:  []StepResult{{Name: "a", Status: "fail", ExitCode: intp(4)}, {Name: "b", Status: "done", ExitCode: intp(0)}},
			wantExit:   intp(4),
			wantStdout: "after\n",
		},
		{
			name:  "a step that cannot spawn fails with 127",
			steps: []Step{{Name: "a", Argv: []string{"true"}}, {Name: "b", Argv: []string{"no-such-program-toolhost"}}, {Name: "c", Argv: []string{"true"}}},
			wantEvents: []StepEvent{
				ev("a", "start", 1, 3), ev("a", "done", 1, 3), ev("b", "start", 2, 3), ev("b", "fail", 2, 3), ev("c", "skip", 3, 3),
			},
			wantSteps: []StepResult{{Name: "a", Status: "done", ExitCode: intp(0)}, {Name: "b", Status: "fail", ExitCode: intp(127)}, {Name: "c", Status: "skip"}},
			wantExit:  intp(127),
		},
		{
			name: "step env and dir on top of the spec's",
			steps: []Step{
				{Name: "a", Argv: sh(`echo "$A $B $(pwd)"`), Dir: "/", Env: map[string]*string{"B": ptr("step")}},
				{Name: "b", Argv: sh(`echo "$A ${B-unset}"`), Env: map[string]*string{"A": nil}},
			},
			wantEvents: []StepEvent{
				ev("a", "start", 1, 2), ev("a", "done", 1, 2), ev("b", "start", 2, 2), ev("b", "done", 2, 2),
			},
			wantSteps:  []StepResult{{Name: "a", Status: "done", ExitCode: intp(0)}, {Name: "b", Status: "done", ExitCode: intp(0)}},
			wantExit:   intp(0),
			wantStdout: "spec step /\n spec\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newStepRecorder()
			c, err := m.Start(Spec{Steps: tt.steps, Env: map[string]*string{"A": ptr("spec"), "B": ptr("spec")}, Dir: t.TempDir()}, rec.observer())
			if err != nil {
				t.Fatal(err)
			}
			r := waitDone(t, c, 20*time.Second)
			if diff := cmp.Diff(tt.wantEvents, rec.events(), ignoreTimes); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSteps, r.Steps, ignoreDurations); diff != "" {
				t.Errorf("steps mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExit, r.ExitCode); diff != "" {
				t.Errorf("exit code mismatch (-want +got):\n%s", diff)
			}
			if r.Status != StatusCompleted || r.Output.Stdout != tt.wantStdout {
				t.Errorf("status %q stdout %q, want completed %q", r.Status, r.Output.Stdout, tt.wantStdout)
			}
		})
	}
}

func TestRecipeSpawnFailureReported(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	r := run(t, m, Spec{Steps: []Step{{Name: "a", Argv: []string{"true"}}, {Name: "b", Argv: []string{"no-such-program-toolhost"}}}})
	if want := `step "b": spawn "no-such-program-toolhost": not found`; !strings.Contains(r.Output.Stderr, want) {
		t.Errorf("stderr %q does not say %q", r.Output.Stderr, want)
	}
}

func TestRecipeCancelAndTimeout(t *testing.T) {
	t.Parallel()
	for _, way := range []string{StatusCancelled, StatusTimedOut} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t, Config{})
			u := newMark(t)
			rec := newStepRecorder()
			spec := Spec{Steps: []Step{
				{Name: "a", Argv: []string{"true"}},
				{Name: "b", Argv: []string{"sleep", u.sleep}},
				{Name: "c", Argv: []string{"true"}},
			}, Env: u.env(), Handle: true}
			if way == StatusTimedOut {
				spec.Timeout = 500 * time.Millisecond
			}
			c, err := m.Start(spec, rec.observer())
			if err != nil {
				t.Fatal(err)
			}
			rec.waitStart(t, "b")
			waitCensus(t, u, 1)
			snap := c.Snapshot()
			if snap.Status != StatusRunning || snap.CurrentStep != 2 || snap.TotalSteps != 3 || snap.StepName != "b" || snap.PID != c.PID() {
				t.Errorf("snapshot during b: %+v", snap)
			}
			if way == StatusCancelled {
				c.Cancel(0)
			}
			r := waitDone(t, c, 10*time.Second)
			want := []StepResult{{Name: "a", Status: "done", ExitCode: intp(0)}, {Name: "b", Status: "cancelled"}, {Name: "c", Status: "skip"}}
			if diff := cmp.Diff(want, r.Steps, ignoreDurations); diff != "" {
				t.Errorf("steps mismatch (-want +got):\n%s", diff)
			}
			wantEvents := []StepEvent{
				ev("a", "start", 1, 3), ev("a", "done", 1, 3), ev("b", "start", 2, 3), ev("b", "fail", 2, 3), ev("c", "skip", 3, 3),
			}
			if diff := cmp.Diff(wantEvents, rec.events(), ignoreTimes); diff != "" {
				t.Errorf("events mismatch (-want +got):\n%s", diff)
			}
			if r.Status != way || r.Signal != "SIGTERM" || r.ExitCode != nil {
				t.Errorf("status %q signal %q exit %v, want %s by SIGTERM", r.Status, r.Signal, r.ExitCode, way)
			}
			assertNoneLeft(t, u)
		})
	}
}

// TestRecipeBackgroundLivesUntilEnd: a process a step leaves behind on
// purpose lives through later steps and ends with the command.
func TestRecipeBackgroundLivesUntilEnd(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	u := newMark(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	r := run(t, m, Spec{Steps: []Step{
		{Name: "serve", Argv: sh(fmt.Sprintf("setsid sleep %s >/dev/null 2>&1 & echo $! > %s", u.sleep, pidfile))},
		{Name: "check", Argv: sh("kill -0 $(cat " + pidfile + ") && echo alive")},
	}, Env: u.env()})
	if r.Output.Stdout != "alive\n" {
		t.Errorf("stdout %q: the background process did not outlive its step", r.Output.Stdout)
	}
	if left := u.census(); len(left) != 0 {
		t.Errorf("processes alive after Done: %q", left)
	}
}

// TestStreamOutput: with StreamOutput the observer sees the output as it
// comes; without it, never.
func TestStreamOutput(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	for _, stream := range []bool{true, false} {
		rec := newOutputRecorder("x")
		c, err := m.Start(Spec{Argv: sh("echo out; echo err >&2"), StreamOutput: stream}, Observer{OnOutput: rec.onOutput})
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, c, 10*time.Second)
		rec.mu.Lock()
		got := rec.buf.String()
		rec.mu.Unlock()
		if stream && (!strings.Contains(got, "out\n") || !strings.Contains(got, "err\n")) {
			t.Errorf("streamed %q, want out and err", got)
		}
		if !stream && got != "" {
			t.Errorf("streamed %q without StreamOutput", got)
		}
	}
}
