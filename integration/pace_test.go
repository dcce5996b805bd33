package integration

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// gate is a FIFO a test child blocks on (`read x < PATH`) until the test
// releases it: the test decides when the child goes on, without sleeps.
type gate struct {
	t    testing.TB
	Path string
}

// newGate makes a FIFO in dir.
func newGate(t testing.TB, dir, name string) gate {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return gate{t: t, Path: path}
}

// release lets the child blocked on the gate go on: opening the FIFO for
// writing waits for the child's open for reading, then a line ends its
// read.
func (g gate) release() {
	g.t.Helper()
	f, err := os.OpenFile(g.Path, os.O_WRONLY, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := f.WriteString("go\n"); err != nil {
		g.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		g.t.Fatal(err)
	}
}

// readOutput calls readOutput and fails the test on an error answer.
func (s *server) readOutput(params map[string]any) protocol.ReadOutputResult {
	s.t.Helper()
	var r protocol.ReadOutputResult
	s.mustCall("readOutput", params, &r)
	return r
}

// bytesOf decodes a readOutput result's data.
func bytesOf(t testing.TB, r protocol.ReadOutputResult) []byte {
	t.Helper()
	if r.Encoding == protocol.EncodingBase64 {
		b, err := base64.StdEncoding.DecodeString(r.Data)
		if err != nil {
			t.Fatalf("base64 data %q: %v", r.Data, err)
		}
		return b
	}
	if r.Encoding != protocol.EncodingUTF8 {
		t.Fatalf("encoding %q", r.Encoding)
	}
	return []byte(r.Data)
}

// TestYieldOnARunningCommandAnswersRunningThenOneToolResult checks that a
// runCommand outliving its yieldMs answers "running" with a handle and the
// output so far, that $/cancelRequest after it leaves the handle alone,
// that the handle then works as a longRunning's (progress), and that it
// ends in exactly one toolResult, after that answer, with the whole
// output.
func TestYieldOnARunningCommandAnswersRunningThenOneToolResult(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	g := newGate(t, s.root, "gate")
	p := s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo a; read x < gate; echo b"}, "yieldMs": 1000})
	var res protocol.ToolResult
	if e := s.answer(p, &res); e != nil {
		t.Fatalf("runCommand: %v", e)
	}
	if res.Status != protocol.StatusRunning || res.HandleID == "" || res.ExitCode != nil || res.Success {
		t.Fatalf("yield answer: %+v", res)
	}
	if res.Stdout != "a\n" || res.Artifacts.ByteCount != 2 || res.Artifacts.Sha256 != "" {
		t.Errorf("yield answer's output: stdout %q, artifacts %+v", res.Stdout, res.Artifacts)
	}
	// $/cancelRequest after the yield finds the request answered: the
	// handle lives on.
	s.notify("$/cancelRequest", map[string]any{"id": p.ID()})
	var pr protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": res.HandleID}, &pr)
	if pr.Status != protocol.StatusRunning || pr.CommandID != res.CommandID {
		t.Errorf("progress of the yielded handle: %+v", pr)
	}
	g.release()
	final := s.toolResultOf(res.HandleID)
	want := ending{Status: "completed", Success: true, ExitCode: ptr(0)}
	if diff := cmp.Diff(want, endingOf(final)); diff != "" {
		t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
	}
	if final.Stdout != "a\nb\n" || final.CommandID != res.CommandID {
		t.Errorf("toolResult: %+v", final)
	}
	_, answerAt := s.responseAt(wireID(p))
	_, resultAt := s.waitFor(0, "toolResult", func(m msg) bool { return m.Method == "toolResult" })
	if resultAt < answerAt {
		t.Errorf("toolResult (message %d) came before the answer naming the handle (message %d)", resultAt, answerAt)
	}
	s.shutdown()
	if n := len(s.notifications("toolResult")); n != 1 {
		t.Errorf("%d toolResults for one yielded handle", n)
	}
}

// TestYieldCommandThatEndsFirstHasNoHandle checks that a command ending
// before its yieldMs answers its final result with no handle, leaves no
// handle behind and sends no toolResult.
func TestYieldCommandThatEndsFirstHasNoHandle(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	res := s.run(map[string]any{"argv": []string{"echo", "quick"}, "yieldMs": 60000})
	if res.Status != protocol.StatusCompleted || res.HandleID != "" || res.Stdout != "quick\n" || res.Artifacts.Sha256 == "" {
		t.Errorf("result: %+v", res)
	}
	var list protocol.ProgressResult
	s.mustCall("progress", map[string]any{}, &list)
	if list.List == nil || len(list.List.Handles) != 0 {
		t.Errorf("handles after a command that ended before its yield: %+v", list.List)
	}
	s.shutdown()
	if n := len(s.notifications("toolResult")); n != 0 {
		t.Errorf("%d toolResults for a command without a handle", n)
	}
}

// TestCancelRequestBeforeYieldStopsTheCommand checks that $/cancelRequest
// before the yield still stops the command and answers -32800 with the
// partial result.
func TestCancelRequestBeforeYieldStopsTheCommand(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	p := s.request("runCommand", map[string]any{"argv": []string{"sleep", mk.Sleep}, "yieldMs": 3600000})
	e := s.cancelRequest(p)
	if e == nil || e.Code != protocol.CodeRequestCancelled || errData(e).Partial == nil || errData(e).Partial.Status != protocol.StatusCancelled {
		t.Fatalf("cancelled runCommand with a yield: %v (data %+v)", e, errData(e))
	}
	if errData(e).Partial.HandleID != "" {
		t.Errorf("a command cancelled before its yield got handle %q", errData(e).Partial.HandleID)
	}
}

// TestWaitTimesOutThenAnswersTheEnd checks a wait that times out (the
// snapshot, status "running", the command goes on), then one that
// answers the end: the same result as the toolResult, and again after the
// end.
func TestWaitTimesOutThenAnswersTheEnd(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	g := newGate(t, s.root, "gate")
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "echo a; read x < gate; echo b"}})
	var early protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 20}, &early)
	if early.Status != protocol.StatusRunning || early.HandleID != h.HandleID || early.ExitCode != nil {
		t.Errorf("wait that timed out: %+v", early)
	}
	p := s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 3600000})
	g.release()
	var res protocol.ToolResult
	if e := s.answer(p, &res); e != nil {
		t.Fatalf("wait: %v", e)
	}
	if res.Status != protocol.StatusCompleted || res.Stdout != "a\nb\n" {
		t.Errorf("wait that saw the end: %+v", res)
	}
	if diff := cmp.Diff(s.toolResultOf(h.HandleID), res, ignoreSeq); diff != "" {
		t.Errorf("wait mismatch (-toolResult +wait):\n%s", diff)
	}
	var again protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 0}, &again)
	if diff := cmp.Diff(res, again); diff != "" {
		t.Errorf("wait after the end mismatch (-first +again):\n%s", diff)
	}
}

// TestFiveConcurrentWaitsOnOneHandleAllAnswer checks that every one of
// five waits in flight on one handle answers the final result.
func TestFiveConcurrentWaitsOnOneHandleAllAnswer(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	g := newGate(t, s.root, "gate")
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "read x < gate; echo end"}})
	var ps []*client.Pending
	for range 5 {
		ps = append(ps, s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 3600000}))
	}
	// A progress answer after the five waits were sent: they are all in
	// flight (requests are read in order) before the release.
	s.mustCall("progress", map[string]any{"handleId": h.HandleID}, nil)
	g.release()
	final := s.toolResultOf(h.HandleID)
	for i, w := range ps {
		var res protocol.ToolResult
		if e := s.answer(w, &res); e != nil {
			t.Fatalf("wait %d: %v", i, e)
		}
		if diff := cmp.Diff(final, res, ignoreSeq); diff != "" {
			t.Errorf("wait %d mismatch (-toolResult +wait):\n%s", i, diff)
		}
	}
}

// TestWaitIsCancellable checks that $/cancelRequest ends a wait, not the
// command.
func TestWaitIsCancellable(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}})
	p := s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 3600000})
	if e := s.cancelRequest(p); e == nil || e.Code != protocol.CodeRequestCancelled || errData(e).HandleID != h.HandleID {
		t.Fatalf("cancelled wait: %v", e)
	}
	var pr protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &pr)
	if pr.Status != protocol.StatusRunning {
		t.Errorf("the command after its wait was cancelled: %+v", pr)
	}
	var res protocol.ToolResult
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID}, &res)
	if res.Status != protocol.StatusCancelled {
		t.Errorf("cancel: %+v", res)
	}
}

// TestReadOutputFollowsGrowingOutputToEOF follows a command's output.log
// with readOutput from offset 0 to eof, in small reads, while the command
// prints text, a rune split across two writes, and binary bytes. The
// pieces reassemble byte for byte into the artifact; a read of a running
// command stops before an incomplete rune; a read waiting with waitMs
// answers with the new bytes, the command still running, once the child
// writes them.
func TestReadOutputFollowsGrowingOutputToEOF(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	g1, g2 := newGate(t, s.root, "g1"), newGate(t, s.root, "g2")
	script := `printf 'h\303\251llo\n\342\202'; read x < g1; printf '\254 euro\n\377\000bin\n'; read x < g2; printf 'end\n'`
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}})
	want := []byte("h\u00e9llo\n\u20ac euro\n\xff\x00bin\nend\n")

	first := s.readOutput(map[string]any{"handleId": h.HandleID, "waitMs": 60000})
	wantFirst := protocol.ReadOutputResult{Data: "h\u00e9llo\n", Encoding: protocol.EncodingUTF8, Offset: 0, NextOffset: 7, TotalBytes: 9, Running: true}
	if diff := cmp.Diff(wantFirst, first); diff != "" {
		t.Fatalf("first read mismatch (-want +got):\n%s", diff)
	}
	// maxBytes never splits a rune of a running command either.
	cut := s.readOutput(map[string]any{"handleId": h.HandleID, "maxBytes": 2})
	if cut.Data != "h" || cut.NextOffset != 1 {
		t.Errorf("a read of 2 bytes ending inside a rune: %+v", cut)
	}
	// Nothing but an incomplete rune at offset 7: the read waits, and the
	// child's next write wakes it while the child still runs (blocked on
	// g2), so it was the bytes that answered it, not the end or waitMs.
	p := s.request("readOutput", map[string]any{"handleId": h.HandleID, "offset": 7, "maxBytes": 4, "waitMs": 60000})
	g1.release()
	var woken protocol.ReadOutputResult
	if e := s.answer(p, &woken); e != nil {
		t.Fatalf("waiting readOutput: %v", e)
	}
	if !woken.Running || woken.Offset != 7 || woken.NextOffset <= 7 || !bytes.HasPrefix(bytesOf(t, woken), []byte("\u20ac")) {
		t.Fatalf("waiting readOutput answered %+v", woken)
	}
	got := append(bytesOf(t, first), bytesOf(t, woken)...)
	next, last := woken.NextOffset, woken
	released := false
	for {
		if !released && last.NextOffset == last.TotalBytes && last.Running {
			released = true // caught up with the child blocked on g2
			g2.release()
		}
		r := s.readOutput(map[string]any{"handleId": h.HandleID, "offset": next, "maxBytes": 4, "waitMs": 60000})
		if r.Offset != next || r.NextOffset-r.Offset > 4 {
			t.Fatalf("read at %d: %+v", next, r)
		}
		got = append(got, bytesOf(t, r)...)
		next, last = r.NextOffset, r
		if r.EOF {
			if r.Running || r.NextOffset != r.TotalBytes {
				t.Errorf("eof read: %+v", r)
			}
			break
		}
	}
	if !released {
		t.Errorf("the reads never caught up with the running command")
	}
	if !bytes.Equal(got, want) {
		t.Errorf("reassembled %q, want %q", got, want)
	}
	final := s.toolResultOf(h.HandleID)
	artifact, err := os.ReadFile(final.Artifacts.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, artifact) {
		t.Errorf("reassembled %q, artifact %q", got, artifact)
	}
}

// TestReadOutputTailAndStreamsAfterTheEnd checks reads of an ended
// command: a tail by a negative offset, each stream's file, and a read
// past the end (nothing, at once), all with eof.
func TestReadOutputTailAndStreamsAfterTheEnd(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "echo out1; echo err1 >&2; echo out2"}})
	final := s.toolResultOf(h.HandleID)
	total := final.Artifacts.ByteCount
	// The streams' pipes are read concurrently: output.log's order is the
	// arrival order, so it is compared with the artifact.
	output, err := os.ReadFile(final.Artifacts.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	tail := s.readOutput(map[string]any{"handleId": h.HandleID, "offset": -5})
	wantTail := protocol.ReadOutputResult{Data: string(output[total-5:]), Encoding: protocol.EncodingUTF8, Offset: total - 5, NextOffset: total, TotalBytes: total, EOF: true}
	if diff := cmp.Diff(wantTail, tail); diff != "" {
		t.Errorf("tail mismatch (-want +got):\n%s", diff)
	}
	stdoutTail := s.readOutput(map[string]any{"handleId": h.HandleID, "stream": "stdout", "offset": -5})
	if stdoutTail.Data != "out2\n" || stdoutTail.Offset != 5 || !stdoutTail.EOF {
		t.Errorf("stdout tail: %+v", stdoutTail)
	}
	for _, c := range []struct {
		stream, want string
	}{{"stdout", "out1\nout2\n"}, {"stderr", "err1\n"}, {"output", string(output)}} {
		r := s.readOutput(map[string]any{"handleId": h.HandleID, "stream": c.stream, "waitMs": 60000})
		want := protocol.ReadOutputResult{Data: c.want, Encoding: protocol.EncodingUTF8, NextOffset: int64(len(c.want)), TotalBytes: int64(len(c.want)), EOF: true}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("stream %s mismatch (-want +got):\n%s", c.stream, diff)
		}
	}
	past := s.readOutput(map[string]any{"handleId": h.HandleID, "offset": total + 10, "waitMs": 60000})
	if past.Data != "" || past.NextOffset != total+10 || !past.EOF || past.Running {
		t.Errorf("read past the end: %+v", past)
	}
}

// TestReadOutputAfterEvictionSaysEvicted checks that reading an artifact
// evicted over --artifacts-cap-bytes is NotFound with a reason that says
// so.
func TestReadOutputAfterEvictionSaysEvicted(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--artifacts-cap-bytes", "1000"}})
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "yes | head -c 4000"}})
	s.toolResultOf(h.HandleID)
	s.run(map[string]any{"argv": []string{"true"}}) // a new capture evicts the finished one over the cap
	e := s.call("readOutput", map[string]any{"handleId": h.HandleID}, nil)
	if e == nil || e.Code != protocol.CodeNotFound || !strings.HasPrefix(errData(e).Reason, "evicted") || errData(e).HandleID != h.HandleID {
		t.Fatalf("readOutput of an evicted artifact: %v (data %+v)", e, errData(e))
	}
}

// TestInactivityTimeoutFiresOnASilentCommand checks that a command that
// prints nothing for inactivityTimeoutMs ends timedOut for "inactivity",
// by the kill ladder.
func TestInactivityTimeoutFiresOnASilentCommand(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	res := s.run(map[string]any{"argv": []string{"sh", "-c", "echo start; exec sleep " + mk.Sleep}, "inactivityTimeoutMs": 300})
	want := ending{Status: "timedOut", Signal: ptr("SIGTERM")}
	if diff := cmp.Diff(want, endingOf(res)); diff != "" {
		t.Errorf("ending mismatch (-want +got):\n%s", diff)
	}
	if res.TimeoutReason != protocol.TimeoutInactivity || res.Stdout != "start\n" {
		t.Errorf("result: timeoutReason %q, stdout %q", res.TimeoutReason, res.Stdout)
	}
	h := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "inactivityTimeoutMs": 200})
	if r := s.toolResultOf(h.HandleID); r.Status != protocol.StatusTimedOut || r.TimeoutReason != protocol.TimeoutInactivity {
		t.Errorf("longRunning's toolResult: status %q, timeoutReason %q", r.Status, r.TimeoutReason)
	}
}

// TestInactivityTimeoutDoesNotFireWhileTheCommandPrints checks that output
// every 100 ms keeps a command alive past its inactivityTimeoutMs: on
// stdout, on stderr, and by heartbeat markers alone on TOOLHOST_EVENTS_FD
// (fd 3), which print nothing.
func TestInactivityTimeoutDoesNotFireWhileTheCommandPrints(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	prints := []string{`echo "$i"`, `echo "$i" >&2`, `echo '{"type":"heartbeat"}' >&3`}
	var ps []*client.Pending
	for _, print := range prints { // concurrently: the test takes 1.5 s, not three times that
		script := fmt.Sprintf(`i=0; while [ $i -lt 15 ]; do %s; sleep 0.1; i=$((i+1)); done`, print)
		ps = append(ps, s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", script}, "inactivityTimeoutMs": 1000}))
	}
	for i, p := range ps {
		var res protocol.ToolResult
		if e := s.answer(p, &res); e != nil {
			t.Fatalf("%s: %v", prints[i], e)
		}
		if res.Status != protocol.StatusCompleted || res.TimeoutReason != "" || res.DurationMs < 1000 || (i == 2 && res.Artifacts.LineCount != 15) {
			t.Errorf("%s: status %q, timeoutReason %q, durationMs %d", prints[i], res.Status, res.TimeoutReason, res.DurationMs)
		}
	}
}

// TestBothTimeoutsOnOneCommandSayWhichFired checks that with timeoutMs and
// inactivityTimeoutMs together the first to come ends the command and
// timeoutReason names it.
func TestBothTimeoutsOnOneCommandSayWhichFired(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	silent := s.run(map[string]any{"argv": []string{"sleep", mk.Sleep}, "inactivityTimeoutMs": 200, "timeoutMs": 60000})
	if silent.Status != protocol.StatusTimedOut || silent.TimeoutReason != protocol.TimeoutInactivity {
		t.Errorf("silent command: status %q, timeoutReason %q", silent.Status, silent.TimeoutReason)
	}
	chatty := s.run(map[string]any{"argv": []string{"sh", "-c", "while :; do echo tick; sleep 0.1; done"}, "inactivityTimeoutMs": 60000, "timeoutMs": 500})
	if chatty.Status != protocol.StatusTimedOut || chatty.TimeoutReason != protocol.TimeoutDeadline {
		t.Errorf("chatty command: status %q, timeoutReason %q", chatty.Status, chatty.TimeoutReason)
	}
}

// TestYieldedRunCommandKeepsItsProgressToken checks that a runCommand's
// workDoneToken goes on working after the yield: the token cancels the
// handle, and $/progress end comes before the handle's one toolResult.
func TestYieldedRunCommandKeepsItsProgressToken(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	newGate(t, s.root, "gate") // never released: the token's cancel ends the command
	var res protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo a; read x < gate"}, "yieldMs": 200, "workDoneToken": "tok-y"}, &res)
	if res.Status != protocol.StatusRunning || res.HandleID == "" {
		t.Fatalf("yield answer: %+v", res)
	}
	s.notify("window/workDoneProgress/cancel", map[string]any{"token": "tok-y"})
	final := s.toolResultOf(res.HandleID)
	if final.Status != protocol.StatusCancelled {
		t.Errorf("toolResult after the token's cancel: %+v", final)
	}
	_, endAt := s.waitFor(0, "$/progress end", func(m msg) bool { return m.Method == "$/progress" && progIsEnd(m.Params) })
	_, resultAt := s.waitFor(0, "toolResult", func(m msg) bool { return m.Method == "toolResult" })
	if endAt > resultAt {
		t.Errorf("$/progress end (message %d) came after the toolResult (message %d)", endAt, resultAt)
	}
}
