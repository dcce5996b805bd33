package protocol

import "testing"

// TestStepTransitionMessage describes a transition as progress reports
// show it, with and without a total and an index.
func TestStepTransitionMessage(t *testing.T) {
	for _, c := range []struct {
		p    StepTransitionParams
		want string
	}{
		{StepTransitionParams{Step: "build", Status: StepStart, Index: 2, Total: 5}, "step 2/5: build"},
		{StepTransitionParams{Step: "build", Status: StepFail, Index: 2, Total: 5}, "step 2/5: build (fail)"},
		{StepTransitionParams{Step: "lint", Status: StepSkip, Index: 3, Total: 5}, "step 3/5: lint (skip)"},
		{StepTransitionParams{Step: "test", Status: StepStart, Index: 4}, "step 4: test"},
		{StepTransitionParams{Step: "test", Status: StepDone, Index: 4}, "step 4: test (done)"},
		{StepTransitionParams{Step: "warm-up", Status: StepStart}, "warm-up"},
		{StepTransitionParams{Step: "warm-up", Status: StepDone}, "warm-up (done)"},
	} {
		if got := c.p.Message(); got != c.want {
			t.Errorf("%+v.Message() = %q, want %q", c.p, got, c.want)
		}
	}
}
