package integration

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// resumeParams are initialize params that resume session id.
func resumeParams(id string, lastSeq *int64) *protocol.InitializeParams {
	return &protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Resume: &protocol.ResumeOptions{SessionID: id, LastSeq: lastSeq}}}
}

// TestPersistDetachByEOFThenResume: a session whose client closes its
// stdin is detached, not ended; a later toolhost --persist resumes it by
// id, and the command that kept running is there: readOutput from an
// offset, writeInput, wait and its one toolResult, numbered; and cancel
// of another.
func TestPersistDetachByEOFThenResume(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	a := start(t, p.options())
	init := a.initialize(nil)
	if init.SessionID == "" || !init.Capabilities.Resume {
		t.Fatalf("initialize = sessionId %q, resume %v; want an id and resume", init.SessionID, init.Capabilities.Resume)
	}
	h := a.longRun(map[string]any{"argv": []string{"sh", "-c", `echo first; read line; echo "got $line"; exit 3`}, "openStdin": true, "streamOutput": true})
	a.awaitOutput(h.HandleID, "first\n")
	long := a.longRun(map[string]any{"argv": []string{"sleep", "600"}})
	a.closeStdin()
	if code := a.wait(); code != 1 {
		t.Errorf("the detached front exited %d, want 1 (no shutdown)", code)
	}

	b := start(t, p.options())
	res := b.initialize(resumeParams(init.SessionID, nil))
	if res.SessionID != init.SessionID {
		t.Fatalf("resumed sessionId = %q, want %q", res.SessionID, init.SessionID)
	}
	var out protocol.ReadOutputResult
	b.mustCall("readOutput", map[string]any{"handleId": h.HandleID, "offset": 2}, &out)
	if out.Data != "rst\n" {
		t.Errorf("readOutput from offset 2 = %q, want %q", out.Data, "rst\n")
	}
	var wi protocol.WriteInputResult
	b.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "hello\n"}, &wi)
	var waited protocol.ToolResult
	b.mustCall("wait", map[string]any{"handleId": h.HandleID}, &waited)
	if waited.Status != protocol.StatusCompleted || waited.ExitCode == nil || *waited.ExitCode != 3 || !strings.Contains(waited.Stdout, "got hello") {
		t.Fatalf("wait = status %s, exit %v, stdout %q; want completed, 3, got hello", waited.Status, waited.ExitCode, waited.Stdout)
	}
	got := b.toolResultOf(h.HandleID)
	if got.Seq < 1 {
		t.Errorf("toolResult seq = %d, want ≥ 1", got.Seq)
	}
	got.Seq = 0
	if diff := cmp.Diff(waited, got); diff != "" {
		t.Errorf("toolResult differs from wait's answer: mismatch (-want +got):\n%s", diff)
	}
	var cancelled protocol.ToolResult
	b.mustCall("cancel", map[string]any{"handleId": long.HandleID}, &cancelled)
	if cancelled.Status != protocol.StatusCancelled {
		t.Errorf("cancel of a handle made before the detach = %s, want cancelled", cancelled.Status)
	}
	b.toolResultOf(long.HandleID)
	b.shutdown()
	if n := len(b.notifications("toolResult")); n != 2 {
		t.Errorf("%d toolResults, want 2", n)
	}
}

// TestPersistPtyShellSurvives: a shell under a PTY keeps its state across
// a detach and a resume, and writeInput, resize and signal work on it from
// the new connection: a variable set before is echoed after, the new
// size shows in stty, and the shell's trap of SIGUSR1 runs.
func TestPersistPtyShellSurvives(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	a := start(t, p.options())
	init := a.initialize(nil)
	h := a.longRun(map[string]any{"argv": []string{"sh", "-i"}, "pty": true, "streamOutput": true, "env": mk.env()})
	var wi protocol.WriteInputResult
	a.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "trap 'echo got-usr1' USR1; X=forty-two; echo set-$X\n"}, &wi)
	a.awaitPtyOutput(h.HandleID, "set-forty-two")
	a.closeStdin()
	a.wait()

	b := start(t, p.options())
	b.initialize(resumeParams(init.SessionID, nil))
	b.mustCall("resize", map[string]any{"handleId": h.HandleID, "rows": 33, "cols": 101}, nil)
	b.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "echo again-$X; stty size\n"}, &wi)
	b.awaitPtyOutput(h.HandleID, "again-forty-two")
	b.awaitPtyOutput(h.HandleID, "33 101")
	b.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "SIGUSR1"}, nil)
	b.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "echo ping\n"}, &wi)
	b.awaitPtyOutput(h.HandleID, "got-usr1")
	b.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "exit 5\n"}, &wi)
	res := b.toolResultOf(h.HandleID)
	if res.ExitCode == nil || *res.ExitCode != 5 {
		t.Errorf("the shell ended with %v, want exit 5", res.ExitCode)
	}
	b.shutdown()
}

// awaitPtyOutput waits until the handle's PTY output read from the start
// holds text, reading it again as it grows.
func (s *server) awaitPtyOutput(handle, text string) {
	s.t.Helper()
	var next int64
	var all strings.Builder
	for range 200 {
		var out protocol.ReadOutputResult
		s.mustCall("readOutput", map[string]any{"handleId": handle, "stream": "pty", "offset": next, "maxBytes": 1 << 20, "waitMs": 5000}, &out)
		all.WriteString(out.Data)
		next = out.NextOffset
		if strings.Contains(all.String(), text) {
			return
		}
	}
	s.t.Fatalf("%q never showed in %s's output: %q", text, handle, all.String())
}
