package integration

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestLongRunningAnswersAtOnce checks the longRunning answer, that the
// handle ends in exactly one toolResult, that cancel of an ended handle
// answers the same result again, and that spawn errors are request errors
// with no toolResult.
func TestLongRunningAnswersAtOnce(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		mk := newMarker()
		before := time.Now()
		h := s.longRun(map[string]any{"argv": []string{"sh", "-c", `echo "it's"; exit 4`, mk.Sleep}, "label": "four"})
		if h.HandleID == "" || h.CommandID == "" || h.PID <= 1 || h.ProcessGroupID != h.PID {
			t.Errorf("longRunning answer: %+v", h)
		}
		if h.StartedAt.Before(before.Add(-time.Second)) || h.StartedAt.After(time.Now()) {
			t.Errorf("startedAt %v is not now", h.StartedAt)
		}
		if want := `sh -c 'echo "it'\''s"; exit 4' ` + mk.Sleep; h.Command != want {
			t.Errorf("command %q, want %q", h.Command, want)
		}
		res := s.toolResultOf(h.HandleID)
		want := ending{Status: "completed", ExitCode: ptr(4)}
		if diff := cmp.Diff(want, endingOf(res)); diff != "" {
			t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
		}
		if res.HandleID != h.HandleID || res.CommandID != h.CommandID || res.Stdout != "it's\n" {
			t.Errorf("toolResult ids or stdout: %+v", res)
		}
		// cancel of the ended handle answers its final result again.
		var again protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID}, &again)
		if diff := cmp.Diff(res, again, ignoreSeq); diff != "" {
			t.Errorf("cancel after the end mismatch (-toolResult +cancel):\n%s", diff)
		}
		// progress of the ended handle.
		var pr protocol.Progress
		s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &pr)
		if pr.Status != "completed" || pr.Label != "four" || pr.ExitCode == nil || *pr.ExitCode != 4 {
			t.Errorf("progress after the end: %+v", pr)
		}
		// Spawn errors are request errors and leave no handle.
		e := s.call("longRunning", map[string]any{"argv": []string{"no-such-tool-7f3a"}}, nil)
		if e == nil || e.Code != -32005 || errData(e).Argv0 != "no-such-tool-7f3a" {
			t.Errorf("longRunning of a missing tool: %v", e)
		}
		if e := s.call("longRunning", map[string]any{"argv": []string{}}, nil); e == nil || e.Code != -32602 {
			t.Errorf("longRunning with empty argv: %v", e)
		}
		if e := s.call("longRunning", map[string]any{"argv": []string{"true"}, "cwd": "missing"}, nil); e == nil || e.Code != -32003 {
			t.Errorf("longRunning in a missing cwd: %v", e)
		}
		s.shutdown()
		if n := len(s.notifications("toolResult")); n != 1 {
			t.Errorf("%d toolResults for one handle", n)
		}
	})
}

// TestCancelLadder checks cancel: TERM, the grace, then KILL (graceMs or
// the server's --kill-grace), an answer only once the processes are gone,
// the same final result in the toolResult, unknown handles and bad params.
func TestCancelLadder(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--kill-grace", "400ms"}})
	s.initialize(nil)
	cases := []struct {
		name  string
		argv  func(mk marker) []string
		grace any // nil: the server's
		want  ending
	}{
		{"TERM ends it", func(mk marker) []string { return []string{"sh", "-c", "echo ready; exec sleep " + mk.Sleep} }, nil,
			ending{Status: "cancelled", Signal: ptr("SIGTERM")}},
		{"TERM ignored: KILL after the server's grace", func(mk marker) []string {
			return []string{"sh", "-c", "trap '' TERM; echo ready; sleep " + mk.Sleep + "; :"}
		}, nil, ending{Status: "cancelled", Signal: ptr("SIGKILL")}},
		{"TERM ignored: KILL after graceMs", func(mk marker) []string {
			return []string{"sh", "-c", "trap '' TERM; echo ready; sleep " + mk.Sleep + "; :"}
		}, 100, ending{Status: "cancelled", Signal: ptr("SIGKILL")}},
		{"graceMs 0: KILL at once", func(mk marker) []string {
			return []string{"sh", "-c", "trap '' TERM; echo ready; sleep " + mk.Sleep + "; :"}
		}, 0, ending{Status: "cancelled", Signal: ptr("SIGKILL")}},
		{"a TERM handler's exit code", func(mk marker) []string {
			return []string{"sh", "-c", "trap 'echo bye; exit 9' TERM; echo ready; sleep " + mk.Sleep + " & wait"}
		}, nil, ending{Status: "cancelled", ExitCode: ptr(9)}},
	}
	for _, c := range cases {
		mk := newMarker()
		h := s.longRun(map[string]any{"argv": c.argv(mk), "env": mk.env(), "streamOutput": true})
		s.awaitOutput(h.HandleID, "ready")
		p := map[string]any{"handleId": h.HandleID}
		if c.grace != nil {
			p["graceMs"] = c.grace
		}
		var res protocol.ToolResult
		s.mustCall("cancel", p, &res)
		assertNoneLeft(t, mk, "", c.name+": after cancel answered")
		if diff := cmp.Diff(c.want, endingOf(res)); diff != "" {
			t.Errorf("%s: cancel result mismatch (-want +got):\n%s", c.name, diff)
		}
		if diff := cmp.Diff(res, s.toolResultOf(h.HandleID), ignoreSeq); diff != "" {
			t.Errorf("%s: toolResult differs from cancel's answer (-cancel +toolResult):\n%s", c.name, diff)
		}
	}
	for _, c := range []struct {
		params map[string]any
		code   int
	}{
		{map[string]any{"handleId": "h-999"}, -32004},
		{map[string]any{"handleId": "nonsense"}, -32004},
		{map[string]any{}, -32602},
		{map[string]any{"handleId": "h-1", "graceMs": -1}, -32602},
	} {
		e := s.call("cancel", c.params, nil)
		if e == nil || e.Code != c.code {
			t.Errorf("cancel %v: %v, want %d", c.params, e, c.code)
		} else if c.code == -32004 && errData(e).HandleID != c.params["handleId"] {
			t.Errorf("cancel %v: data %+v does not name the handle", c.params, e.Data)
		}
	}
	s.shutdown()
	seen := map[string]int{}
	for _, n := range s.notifications("toolResult") {
		seen[idsOf(n).HandleID]++
	}
	for h, n := range seen {
		if n != 1 {
			t.Errorf("%s: %d toolResults", h, n)
		}
	}
	if len(seen) != len(cases) {
		t.Errorf("%d handles with a toolResult, want %d", len(seen), len(cases))
	}
}

// TestMaxProcessesBusy checks --max-processes: beyond it -32007 and nothing
// started; room again once a command ends.
func TestMaxProcessesBusy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, options{args: []string{"--max-processes", "2", "--artifacts-dir", dir}})
	s.initialize(nil)
	mk := newMarker()
	a := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env()})
	s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env()})
	before, _ := os.ReadDir(dir)
	for _, method := range []string{"longRunning", "runCommand"} {
		e := s.call(method, map[string]any{"argv": []string{"sh", "-c", "echo started > started.txt"}}, nil)
		if e == nil || e.Code != -32007 {
			t.Fatalf("%s beyond --max-processes: %v, want -32007", method, e)
		}
		if d := errData(e); d.Reason == "" {
			t.Errorf("Busy without a reason: %+v", e.Data)
		}
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Errorf("a Busy request created artifacts: %d entries before, %d after", len(before), len(after))
	}
	if _, err := os.Stat(s.root + "/started.txt"); err == nil {
		t.Errorf("a Busy request ran its command")
	}
	if n := len(awaitScan(t, mk, "the 2 sleeps", atLeast(2))); n != 2 {
		t.Errorf("%d processes run, want the 2 sleeps", n)
	}
	s.mustCall("cancel", map[string]any{"handleId": a.HandleID}, nil)
	if r := s.run(map[string]any{"argv": []string{"echo", "room"}}); r.Stdout != "room\n" {
		t.Errorf("after a cancel: %+v", r)
	}
	s.shutdown()
	assertNoneLeft(t, mk, "", "after shutdown")
}
