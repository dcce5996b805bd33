package integration

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// recipeStep is a step of a longRunning recipe.
func recipeStep(name, script string, continueOnError bool) map[string]any {
	st := map[string]any{"name": name, "argv": []string{"sh", "-c", script}}
	if continueOnError {
		st["continueOnError"] = true
	}
	return st
}

// TestRecipeFailingMiddleStepSkipsTheRest runs three steps whose second
// fails: start/done, start/fail, skip, with the total known, and a result
// that says which step did what.
func TestRecipeFailingMiddleStepSkipsTheRest(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		h := s.longRun(map[string]any{"label": "ci", "steps": []any{
			recipeStep("fetch", "echo fetched", false),
			recipeStep("build", "echo broken >&2; exit 3", false),
			recipeStep("test", "echo never", false),
		}})
		res := s.toolResultOf(h.HandleID)

		want := []progStep{
			{"fetch", "start", 1, 3}, {"fetch", "done", 1, 3},
			{"build", "start", 2, 3}, {"build", "fail", 2, 3},
			{"test", "skip", 3, 3},
		}
		if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
			t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
		}
		wantSteps := []progStepResult{
			{"fetch", "done", ptr(0)}, {"build", "fail", ptr(3)}, {"test", "skip", nil},
		}
		if diff := cmp.Diff(wantSteps, progStepResults(res.Steps)); diff != "" {
			t.Errorf("result steps mismatch (-want +got):\n%s", diff)
		}
		if res.Success || res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 3 {
			t.Errorf("result status %s success %v exit %v, want completed, false, 3", res.Status, res.Success, res.ExitCode)
		}
		if res.Stdout != "fetched\n" || res.Stderr != "broken\n" {
			t.Errorf("stdout %q stderr %q, want only the steps that ran", res.Stdout, res.Stderr)
		}
		for _, st := range progDecodeAll[protocol.StepTransitionParams](s, "stepTransition", forHandle(h.HandleID)) {
			if st.CommandID != h.CommandID || st.TS.IsZero() {
				t.Errorf("stepTransition %+v: want commandId %s and a ts", st, h.CommandID)
			}
		}
		// The snapshot after the end names the step of the latest
		// transition, the skipped one.
		var p protocol.Progress
		s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &p)
		if p.Status != protocol.StatusCompleted || p.CurrentStep != 3 || p.TotalSteps != 3 || p.StepName != "test" ||
			p.ExitCode == nil || *p.ExitCode != 3 || p.Label != "ci" {
			t.Errorf("snapshot after the end %+v, want completed, step 3/3 test, exit 3, label ci", p)
		}
	})
}

// TestRecipeContinueOnError runs on past a failing step that allows it;
// the recipe still does not succeed, since a step that ran failed.
func TestRecipeContinueOnError(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "ndjson"})
	s.initialize(nil)
	h := s.longRun(map[string]any{"steps": []any{
		recipeStep("lint", "exit 2", true),
		recipeStep("build", "echo built", false),
		recipeStep("test", "exit 0", false),
	}})
	res := s.toolResultOf(h.HandleID)
	want := []progStep{
		{"lint", "start", 1, 3}, {"lint", "fail", 1, 3},
		{"build", "start", 2, 3}, {"build", "done", 2, 3},
		{"test", "start", 3, 3}, {"test", "done", 3, 3},
	}
	if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
		t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
	}
	wantSteps := []progStepResult{{"lint", "fail", ptr(2)}, {"build", "done", ptr(0)}, {"test", "done", ptr(0)}}
	if diff := cmp.Diff(wantSteps, progStepResults(res.Steps)); diff != "" {
		t.Errorf("result steps mismatch (-want +got):\n%s", diff)
	}
	if res.Success || res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 2 {
		t.Errorf("result status %s success %v exit %v, want completed, false, the failed step's 2", res.Status, res.Success, res.ExitCode)
	}
	if res.Stdout != "built\n" {
		t.Errorf("stdout %q, want the later step's", res.Stdout)
	}
}

// TestRecipeCancelMidway cancels a recipe while its second step runs: that
// step is cancelled (announced as fail) and the rest are skipped.
func TestRecipeCancelMidway(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		h := s.longRun(map[string]any{"steps": []any{
			recipeStep("prepare", "exit 0", false),
			recipeStep("wait", "echo waiting; exec sleep 60", false),
			recipeStep("after", "echo never", false),
			recipeStep("last", "echo never", false),
		}})
		isWaitStart := func(p json.RawMessage) bool {
			var st protocol.StepTransitionParams
			return forHandle(h.HandleID)(p) && json.Unmarshal(p, &st) == nil && st.Step == "wait" && st.Status == "start"
		}
		s.notification("stepTransition", 1, isWaitStart, nil)

		var res protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 2000}, &res)
		if res.Status != protocol.StatusCancelled || res.Success {
			t.Errorf("cancel answered status %s success %v, want cancelled, false", res.Status, res.Success)
		}
		wantSteps := []progStepResult{
			{"prepare", "done", ptr(0)}, {"wait", "cancelled", nil}, {"after", "skip", nil}, {"last", "skip", nil},
		}
		if diff := cmp.Diff(wantSteps, progStepResults(res.Steps)); diff != "" {
			t.Errorf("result steps mismatch (-want +got):\n%s", diff)
		}
		final := s.toolResultOf(h.HandleID)
		if diff := cmp.Diff(res, final, ignoreSeq); diff != "" {
			t.Errorf("toolResult differs from cancel's answer (-cancel +toolResult):\n%s", diff)
		}
		want := []progStep{
			{"prepare", "start", 1, 4}, {"prepare", "done", 1, 4},
			{"wait", "start", 2, 4}, {"wait", "fail", 2, 4},
			{"after", "skip", 3, 4}, {"last", "skip", 4, 4},
		}
		if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
			t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestRecipeChildMarkersAreHeartbeats runs a recipe whose step prints
// markers of its own: the recipe's steps stay the only transitions, and
// the child's markers say the running recipe step is alive.
func TestRecipeChildMarkersAreHeartbeats(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "header"})
	s.initialize(nil)
	h := s.longRun(map[string]any{"steps": []any{
		recipeStep("build", `echo '[STEP 00/09] inner' >&2; echo '{"type":"heartbeat","step":"inner","elapsedMs":5}' >&2; echo '  ✓ inner' >&2`, false),
	}})
	res := s.toolResultOf(h.HandleID)
	if !res.Success || res.Stderr != "" {
		t.Fatalf("result %+v, want success with the markers kept out of stderr", res)
	}
	want := []progStep{{"build", "start", 1, 1}, {"build", "done", 1, 1}}
	if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
		t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
	}
	hbs := progDecodeAll[protocol.HeartbeatParams](s, "heartbeat", forHandle(h.HandleID))
	if len(hbs) != 1 || hbs[0].Step != "build" {
		t.Errorf("heartbeats %+v, want one for the recipe step build", hbs)
	}
}
