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
// offset, writeInput, wait and its one toolResult, numbered.
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
	b.shutdown()
	if n := len(b.notifications("toolResult")); n != 1 {
		t.Errorf("%d toolResults, want 1", n)
	}
}
