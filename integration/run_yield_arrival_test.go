package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// TestRunCommandYieldCountsFromArrival: runCommand's yieldMs counts from
// the request's arrival, not from the command's start, so a slow start is
// inside it. The start is held up as another toolhost sharing the
// snapshot store holds it: the test holds the store's flock, and the
// snapshot a `snapshot: true` command takes before it runs waits for it.
// Once a second runCommand with the same yieldMs, sent after the first,
// has answered running (so its yieldMs has passed, and the first's too),
// the test lets the start go. The command ends only when the test
// releases its gate, which it does as soon as the command's $/progress
// begin says it runs: the first runCommand must then have answered
// running, before that end, with a handle whose one toolResult follows;
// counted from the start, it would answer yieldMs later, with the final
// result.
func TestRunCommandYieldCountsFromArrival(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	s := start(t, options{args: []string{"--state-dir", state},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "GORACE=atexit_sleep_ms=0"}})
	s.initialize(&protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Window: &protocol.WindowClientCapabilities{WorkDoneProgress: true}}})
	s.mustCall("snapshot", map[string]any{}, nil) // the store and its lock file exist from here
	lock, err := os.OpenFile(filepath.Join(state, "snapshots", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	g := newGate(t, s.root, "gate")
	const yieldMs = 1000
	first := s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", "read x < gate"},
		"snapshot": true, "yieldMs": yieldMs, "workDoneToken": "first"})

	mk := newMarker()
	var second protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env(), "yieldMs": yieldMs}, &second)
	if second.Status != protocol.StatusRunning {
		t.Fatalf("the second runCommand answered %s, want running behind a handle", second.Status)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	s.waitFor(0, "$/progress begin of the first command", func(m msg) bool {
		n, err := progNoticeOf(m.Params)
		return m.Method == "$/progress" && err == nil && n.Token == protocol.NewStringToken("first") && n.Value.Kind == "begin"
	})
	g.release() // the command ends

	var res protocol.ToolResult
	if e := s.answer(first, &res); e != nil {
		t.Fatalf("the first runCommand: %v (data %+v)", e, e.Data)
	}
	if res.Status != protocol.StatusRunning || res.HandleID == "" {
		t.Fatalf("the first runCommand answered %s (handle %q) after its command's end: its yieldMs counted from the start, not from its arrival", res.Status, res.HandleID)
	}
	if tr := s.toolResultOf(res.HandleID); tr.Status != protocol.StatusCompleted || tr.ExitCode == nil || *tr.ExitCode != 0 {
		t.Errorf("the handle's toolResult: %s, exit %v; want completed 0", tr.Status, tr.ExitCode)
	}
	s.mustCall("cancel", map[string]any{"handleId": second.HandleID}, nil)
	s.shutdown()
	if n := s.toolResultCount(res.HandleID); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", res.HandleID, n)
	}
	assertNoneLeft(t, mk, "", "after shutdown")
}
