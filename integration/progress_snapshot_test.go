package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/protocol"
)

// progFIFO makes a FIFO in the root for a child to wait on, and returns its
// name and a function that releases the child: it opens the FIFO for
// writing (which waits for the child to open it for reading), writes a line
// and closes it.
func progFIFO(t testing.TB, root, name string) (string, func()) {
	t.Helper()
	path := filepath.Join(root, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return name, func() {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString("go\n")
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestProgressSnapshotsAgreeWithNotifications asks for progress while a
// handle waits in a step and after it ended, and checks the snapshots
// against the notifications sent so far.
func TestProgressSnapshotsAgreeWithNotifications(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		fifo, release := progFIFO(t, s.root, "trigger")

		quick := s.longRun(map[string]any{"argv": []string{"true"}, "label": "quick"})
		quickRes := s.toolResultOf(quick.HandleID)

		script := `printf 'hello\n' >&2
echo '[STEP 01/03] build' >&2
echo '{"type":"heartbeat","step":"build","elapsedMs":1200}' >&2
read x < ` + fifo + `
echo '  ✓ build (2s)' >&2
exit 4`
		h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}, "label": "builder"})
		var hb protocol.HeartbeatParams
		s.notification("heartbeat", 1, forHandle(h.HandleID), &hb)
		steps := progDecodeAll[protocol.StepTransitionParams](s, "stepTransition", forHandle(h.HandleID))
		if len(steps) != 1 {
			t.Fatalf("stepTransitions before the heartbeat: %+v, want one start", steps)
		}
		last := steps[0]

		var running protocol.Progress
		s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &running)
		want := protocol.Progress{
			HandleID: h.HandleID, CommandID: h.CommandID, Label: "builder", Status: protocol.StatusRunning, PID: h.PID,
			CurrentStep: last.Index, TotalSteps: last.Total, StepName: last.Step, OutputBytes: int64(len("hello\n")),
		}
		ignore := cmpopts.IgnoreFields(protocol.Progress{}, "ElapsedMs", "UpdatedAt", "LastHeartbeatAt")
		if diff := cmp.Diff(want, running, ignore); diff != "" {
			t.Errorf("running snapshot mismatch (-want +got):\n%s", diff)
		}
		if running.CurrentStep != 2 || running.TotalSteps != 3 || running.StepName != "build" {
			t.Errorf("snapshot step %d/%d %q, want 2/3 build as [STEP 01/03] says", running.CurrentStep, running.TotalSteps, running.StepName)
		}
		if running.LastHeartbeatAt == nil || running.LastHeartbeatAt.Before(h.StartedAt) {
			t.Errorf("lastHeartbeatAt %v after a heartbeat notification, want a time after the start %v", running.LastHeartbeatAt, h.StartedAt)
		}
		if running.UpdatedAt.Before(h.StartedAt) || running.ElapsedMs < 0 {
			t.Errorf("updatedAt %v elapsedMs %d, want a time after the start %v", running.UpdatedAt, running.ElapsedMs, h.StartedAt)
		}

		var list protocol.ProgressList
		s.mustCall("progress", map[string]any{}, &list)
		wantQuick := protocol.Progress{
			HandleID: quick.HandleID, CommandID: quick.CommandID, Label: "quick", Status: protocol.StatusCompleted,
			PID: quick.PID, ExitCode: ptr(0),
		}
		if diff := cmp.Diff([]protocol.Progress{wantQuick, running}, list.Handles,
			cmpopts.IgnoreFields(protocol.Progress{}, "ElapsedMs", "UpdatedAt"),
			cmpopts.SortSlices(func(a, b protocol.Progress) bool { return a.HandleID < b.HandleID })); diff != "" {
			t.Errorf("progress {} mismatch (-want +got):\n%s", diff)
		}
		for _, p := range list.Handles {
			if p.HandleID == quick.HandleID && p.ElapsedMs != quickRes.DurationMs {
				t.Errorf("finished handle's elapsedMs %d, want its durationMs %d", p.ElapsedMs, quickRes.DurationMs)
			}
		}

		release()
		res := s.toolResultOf(h.HandleID)
		steps = progDecodeAll[protocol.StepTransitionParams](s, "stepTransition", forHandle(h.HandleID))
		last = steps[len(steps)-1]
		if last.Step != "build" || last.Status != "done" {
			t.Errorf("last stepTransition %+v, want build done", last)
		}
		var ended protocol.Progress
		s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &ended)
		want.Status, want.ExitCode = protocol.StatusCompleted, ptr(4)
		want.CurrentStep, want.TotalSteps, want.StepName = last.Index, last.Total, last.Step
		if diff := cmp.Diff(want, ended, ignore); diff != "" {
			t.Errorf("ended snapshot mismatch (-want +got):\n%s", diff)
		}
		if ended.ElapsedMs != res.DurationMs {
			t.Errorf("ended elapsedMs %d, want the result's durationMs %d", ended.ElapsedMs, res.DurationMs)
		}

		if e := s.call("progress", map[string]any{"handleId": "h-404"}, nil); e == nil || e.Code != -32004 {
			t.Errorf("progress of an unknown handle: %v, want -32004", e)
		}
		// A client that did not advertise window.workDoneProgress is never
		// asked to create a token.
		if m, _ := progFirst(s, func(m msg) bool { return m.Method == "window/workDoneProgress/create" }); m != nil {
			t.Errorf("the server asked a client without the capability for a token: %s", m.raw)
		}
	})
}

// progFirst returns the first message received so far that matches, and
// its index, or nil.
func progFirst(s *server, match func(msg) bool) (*msg, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.msgs {
		if match(s.msgs[i]) {
			m := s.msgs[i]
			return &m, i
		}
	}
	return nil, -1
}
