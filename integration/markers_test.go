package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// markerPieces is a child's stderr with every marker form the brief lists,
// arriving every way a line can arrive: split across writes (inside a rune
// too), with CRLF, very long, with invalid UTF-8, and with a step name full
// of control characters and longer than 128 characters. Plain lines sit
// between the markers.
func markerPieces() (pieces []progPiece, plain string) {
	longName := "ctl\x01\x1b[31m" + strings.Repeat("n", 200)
	longLine := "[STEP 09/22] " + strings.Repeat("x", 70<<10) + "\n" // past 64 KiB: plain output
	pieces = []progPiece{
		{data: "plain before\n"},
		{data: `{"type":"step_transition","step":"fetch","status":"start","ts":1743554401.12}` + "\n"},
		{data: `{"type":"step_transition","step":"fetch","status":"done","ts":1743554402.5}` + "\n"},
		{data: `{"type":"step_transition","step":"lint","status":"start"}` + "\n"},
		{data: `{"type":"step_transition","step":"lint","status":"fail"}` + "\n"},
		{data: `{"type":"step_transition","step":"docs","status":"skip"}` + "\n"},
		{data: "[STEP 03/??] test\r\n"},
		{data: "  ✗ test (1.5s)\r\n"},
		{data: "[STEP 04/22] compile @ 2026-03-23T14:05:58Z\n"},
		{data: "[HEART", pause: true},
		{data: "BEAT] compile — 10s elapsed\n"},
		{data: "  \xe2\x9c", pause: true}, // ✓ cut inside its encoding
		{data: "\x93 compile (38.2s)\n"},
		{data: "  ⊘ deploy\n"},
		{data: "  ⚠ audit (0.3s)\n"},
		{data: "plain \xff\xfe invalid\n"},
		{data: "[STEP 07/22] bad\xffname\n"},
		{data: longLine},
		{data: "[STEP 08/22] " + longName + "\n"},
		{data: "[NOT A MARKER] x\n"},
		{data: "plain after, no newline"},
	}
	plain = "plain before\n" + "plain \xff\xfe invalid\n" + longLine + "[NOT A MARKER] x\n" + "plain after, no newline"
	return pieces, plain
}

// TestMarkersEveryFormFromStderr drives a child that prints every marker
// form and checks the stepTransitions and heartbeat it becomes, and where
// the marker lines went: not into inline stderr nor stderr.log, all of them
// into output.log.
func TestMarkersEveryFormFromStderr(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		pieces, plain := markerPieces()
		progWriteFile(t, s.root, "markers.sh", []byte(progShellScript(2, pieces)))

		h := s.longRun(map[string]any{"argv": []string{"sh", "markers.sh"}, "outputLimitBytes": 1 << 20})
		res := s.toolResultOf(h.HandleID)
		if !res.Success {
			t.Fatalf("the child failed: %+v", res)
		}

		longStep := "ctl[31m" + strings.Repeat("n", 128-len("ctl[31m"))
		want := []progStep{
			{"fetch", "start", 1, 0}, {"fetch", "done", 1, 0},
			{"lint", "start", 2, 0}, {"lint", "fail", 2, 0},
			{"docs", "skip", 3, 0},
			{"test", "start", 4, 0}, {"test", "fail", 4, 0},
			{"compile", "start", 5, 22}, {"compile", "done", 5, 22},
			{"deploy", "skip", 6, 22},
			{"audit", "done", 7, 22},
			{"bad\uFFFDname", "start", 8, 22}, {"bad\uFFFDname", "done", 8, 22},
			{longStep, "start", 9, 22}, {longStep, "done", 9, 22}, // closed as done at exit 0
		}
		if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
			t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
		}

		all := progDecodeAll[protocol.StepTransitionParams](s, "stepTransition", forHandle(h.HandleID))
		byKey := map[string]protocol.StepTransitionParams{}
		for _, st := range all {
			if st.CommandID != h.CommandID {
				t.Errorf("stepTransition %+v: commandId %q, want %q", st, st.CommandID, h.CommandID)
			}
			byKey[st.Step+"/"+string(st.Status)] = st
		}
		for key, wantTS := range map[string]time.Time{
			"fetch/start":   time.UnixMicro(1743554401120000).UTC(),
			"fetch/done":    time.UnixMicro(1743554402500000).UTC(),
			"compile/start": time.Date(2026, 3, 23, 14, 5, 58, 0, time.UTC),
		} {
			if got := byKey[key].TS; !got.Equal(wantTS) {
				t.Errorf("%s ts %v, want the child's %v", key, got, wantTS)
			}
		}
		for key, wantMs := range map[string]int64{"compile/done": 38200, "test/fail": 1500, "audit/done": 300} {
			if got := byKey[key].ElapsedMs; got != wantMs {
				t.Errorf("%s elapsedMs %d, want the child's %d", key, got, wantMs)
			}
		}

		var hb protocol.HeartbeatParams
		s.notification("heartbeat", 1, forHandle(h.HandleID), &hb)
		if diff := cmp.Diff(protocol.HeartbeatParams{HandleID: h.HandleID, CommandID: h.CommandID, Step: "compile", ElapsedMs: 10000}, hb); diff != "" {
			t.Errorf("heartbeat mismatch (-want +got):\n%s", diff)
		}

		if diff := cmp.Diff(strings.ToValidUTF8(plain, "\uFFFD"), res.Stderr); diff != "" {
			t.Errorf("inline stderr mismatch (-want +got):\n%s", diff)
		}
		if got := string(progReadFile(t, res.Artifacts.StderrPath)); got != plain {
			t.Errorf("stderr.log mismatch (-want +got):\n%s", cmp.Diff(plain, got))
		}
		if got, want := string(progReadFile(t, res.Artifacts.OutputPath)), progJoin(pieces); got != want {
			t.Errorf("output.log is not every byte the child wrote (-want +got):\n%s", cmp.Diff(want, got))
		}
		if res.Stdout != "" {
			t.Errorf("stdout %q, want none", res.Stdout)
		}
	})
}

// TestMarkersEventsPipe drives a child that reports on TOOLHOST_EVENTS_FD:
// its events become notifications and reach output.log, and nothing of the
// pipe mixes into stderr.
func TestMarkersEventsPipe(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "ndjson"})
	s.initialize(nil)
	script := `test -n "$TOOLHOST_EVENTS_FD" || exit 9
echo '{"type":"step_transition","step":"build","status":"start","total":2}' >&$TOOLHOST_EVENTS_FD
echo 'plain stderr' >&2
printf '{"type":"heartbeat","step":"bu' >&$TOOLHOST_EVENTS_FD
sleep 0.05
echo 'ild","elapsedMs":2500}' >&$TOOLHOST_EVENTS_FD
echo 'not a marker, dropped' >&$TOOLHOST_EVENTS_FD
echo '{"type":"step_transition","step":"build","status":"done","elapsedMs":3000}' >&$TOOLHOST_EVENTS_FD
echo 'plain stdout'
`
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}})
	res := s.toolResultOf(h.HandleID)
	if !res.Success {
		t.Fatalf("the child failed: %+v", res)
	}
	want := []progStep{{"build", "start", 1, 2}, {"build", "done", 1, 2}}
	if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
		t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
	}
	var hb protocol.HeartbeatParams
	s.notification("heartbeat", 1, forHandle(h.HandleID), &hb)
	if hb.Step != "build" || hb.ElapsedMs != 2500 {
		t.Errorf("heartbeat %+v, want step build at 2500 ms", hb)
	}
	if res.Stderr != "plain stderr\n" {
		t.Errorf("inline stderr %q, want only the plain line", res.Stderr)
	}
	if got := string(progReadFile(t, res.Artifacts.StderrPath)); got != "plain stderr\n" {
		t.Errorf("stderr.log %q, want only the plain line", got)
	}
	out := string(progReadFile(t, res.Artifacts.OutputPath))
	for _, line := range []string{
		`{"type":"step_transition","step":"build","status":"start","total":2}` + "\n",
		`{"type":"heartbeat","step":"build","elapsedMs":2500}` + "\n",
		`{"type":"step_transition","step":"build","status":"done","elapsedMs":3000}` + "\n",
		"plain stderr\n", "plain stdout\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output.log lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "dropped") {
		t.Errorf("output.log holds a line of the events pipe that is no marker:\n%s", out)
	}
}

// TestMarkersRunCommandOnlyWithToken checks that runCommand reports steps
// only when given a workDoneToken, and then names its command, not a
// handle.
func TestMarkersRunCommandOnlyWithToken(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "header"})
	s.initialize(nil)
	script := `echo '{"type":"step_transition","step":"one","status":"start"}' >&2
echo '{"type":"heartbeat","step":"one"}' >&2
echo '  ✓ one (0.1s)' >&2`

	var quiet protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": []string{"sh", "-c", script}}, &quiet)
	var loud protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": []string{"sh", "-c", script}, "workDoneToken": "rc-1"}, &loud)
	if quiet.Stderr != "" || loud.Stderr != "" {
		t.Errorf("markers reached inline stderr: %q, %q", quiet.Stderr, loud.Stderr)
	}
	// The response of the second came after everything about the first.
	if got := progSteps(s, forCommand(quiet.CommandID)); len(got) != 0 {
		t.Errorf("runCommand without a token sent stepTransitions: %+v", got)
	}
	if got := progDecodeAll[json.RawMessage](s, "heartbeat", forCommand(quiet.CommandID)); len(got) != 0 {
		t.Errorf("runCommand without a token sent heartbeats: %s", got)
	}
	want := []progStep{{"one", "start", 1, 0}, {"one", "done", 1, 0}}
	if diff := cmp.Diff(want, progSteps(s, forCommand(loud.CommandID))); diff != "" {
		t.Errorf("stepTransitions with a token mismatch (-want +got):\n%s", diff)
	}
	for _, st := range progDecodeAll[map[string]any](s, "stepTransition", forCommand(loud.CommandID)) {
		if _, ok := st["handleId"]; ok {
			t.Errorf("a runCommand's stepTransition names a handle: %v", st)
		}
	}
	if got := progDecodeAll[protocol.HeartbeatParams](s, "heartbeat", forCommand(loud.CommandID)); len(got) != 1 || got[0].Step != "one" {
		t.Errorf("heartbeats with a token: %+v, want one for step one", got)
	}
}

// TestMarkersHeartbeatsCoalesced drives a child that prints 200 heartbeats
// at once: far fewer heartbeat notifications reach the client, the last
// heartbeat shows in the snapshot, and every other marker still arrives.
func TestMarkersHeartbeatsCoalesced(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "ndjson"})
	s.initialize(nil)
	script := `echo '[STEP 00/01] spin' >&2
i=0
while [ $i -lt 200 ]; do
  echo "{\"type\":\"heartbeat\",\"step\":\"spin\",\"elapsedMs\":$i}" >&2
  echo "[HEARTBEAT] spin — ${i}s elapsed" >&2
  i=$((i+1))
done
echo '  ✓ spin' >&2`
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}})
	res := s.toolResultOf(h.HandleID)
	if !res.Success || res.Stderr != "" {
		t.Fatalf("result %+v, want success and no stderr", res)
	}
	hbs := progDecodeAll[protocol.HeartbeatParams](s, "heartbeat", forHandle(h.HandleID))
	if len(hbs) == 0 || len(hbs) > 20 {
		t.Errorf("%d heartbeat notifications for 400 heartbeats, want between 1 and 20", len(hbs))
	}
	want := []progStep{{"spin", "start", 1, 1}, {"spin", "done", 1, 1}}
	if diff := cmp.Diff(want, progSteps(s, forHandle(h.HandleID))); diff != "" {
		t.Errorf("stepTransitions mismatch (-want +got):\n%s", diff)
	}
	var p protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &p)
	if p.LastHeartbeatAt == nil {
		t.Errorf("progress has no lastHeartbeatAt after 400 heartbeats: %+v", p)
	}
}
