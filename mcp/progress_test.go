package mcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/protocol"
)

// TestProgressCount grows progress with every event, whole at each step,
// through any number of heartbeats.
func TestProgressCount(t *testing.T) {
	step := func(i int, st protocol.StepStatus) event {
		return event{step: &protocol.StepTransitionParams{Step: "s", Index: i, Total: 2, Status: st}}
	}
	beat := event{beat: &protocol.HeartbeatParams{Step: "s", ElapsedMs: 1500}}
	var c progressCount
	type out struct {
		Progress, Total float64
		Msg             string
	}
	var got []out
	for _, ev := range []event{step(1, protocol.StepStart), beat, step(1, protocol.StepDone), step(2, protocol.StepStart), beat, step(2, protocol.StepDone), beat} {
		p, total, msg := c.next(ev)
		got = append(got, out{p, total, msg})
	}
	want := []out{
		{0, 2, "step 1/2: s"}, {0.5, 2, "s: alive after 1.5s"}, {1, 2, "step 1/2: s (done)"},
		{1.5, 2, "step 2/2: s"}, {1 + 2.0/3, 2, "s: alive after 1.5s"}, {2, 2, "step 2/2: s (done)"},
		{2.5, 0, "s: alive after 1.5s"},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
	last := c.last
	for i := range 10_000 { // far past the 53 halvings a float64 can tell apart
		p, _, _ := c.next(beat)
		if p <= last || p >= 3 {
			t.Fatalf("heartbeat %d: progress %v after %v", i, p, last)
		}
		last = p
	}
}
