package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// heldStart starts a server whose snapshot store's lock the test holds, as
// another toolhost sharing the store would: the snapshot a `snapshot:
// true` command takes before it runs, and so its whole start, waits until
// release is called. release is idempotent.
func heldStart(t *testing.T) (s *server, release func()) {
	t.Helper()
	state := snapStateDir(t)
	s = start(t, options{args: []string{"--state-dir", state},
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "GORACE=atexit_sleep_ms=0"}})
	s.initialize(nil)
	s.mustCall("snapshot", map[string]any{}, nil) // the store and its lock file exist from here
	lock, err := os.OpenFile(filepath.Join(state, "snapshots", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		lock.Close()
	}
	t.Cleanup(release)
	return s, release
}

// runningHandle sends a runCommand with snapshot: true and a small yieldMs
// while the start is held, and returns its handle: the answer must come,
// "running", before the test lets the start go.
func runningHandle(s *server, argv ...string) string {
	s.t.Helper()
	var res protocol.ToolResult
	if e := s.call("runCommand", map[string]any{"argv": argv, "snapshot": true, "yieldMs": 20}, &res); e != nil {
		s.t.Fatalf("runCommand %q while its start is held: %v (data %+v)", argv, e, e.Data)
	}
	if res.Status != protocol.StatusRunning || res.HandleID == "" {
		s.t.Fatalf("runCommand %q while its start is held answered %s (handle %q), want running behind a handle", argv, res.Status, res.HandleID)
	}
	return res.HandleID
}

// TestRunCommandYieldsWhileStarting: a runCommand whose start (here the
// snapshot before it) outlasts its yieldMs answers running with a handle
// while the start is still held; wait, progress and readOutput find
// the handle then, and once the start goes on, wait gives the command's
// real result, which is also its one toolResult.
func TestRunCommandYieldsWhileStarting(t *testing.T) {
	t.Parallel()
	s, release := heldStart(t)
	h := runningHandle(s, "sh", "-c", "echo out; touch ran")

	var snap protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h, "timeoutMs": 0}, &snap)
	if snap.Status != protocol.StatusRunning || snap.HandleID != h {
		t.Errorf("wait 0 while starting: %s (handle %q), want running %s", snap.Status, snap.HandleID, h)
	}
	var out protocol.ReadOutputResult
	s.mustCall("readOutput", map[string]any{"handleId": h}, &out)
	if out.Data != "" || !out.Running || out.EOF {
		t.Errorf("readOutput while starting: %+v, want no data, running", out)
	}
	var list protocol.ProgressList
	s.mustCall("progress", map[string]any{}, &list)
	found := false
	for _, p := range list.Handles {
		if p.HandleID == h {
			found = true
			if p.Status != protocol.StatusRunning || p.PID != 0 {
				t.Errorf("progress while starting: %s pid %d, want running with no pid", p.Status, p.PID)
			}
		}
	}
	if !found {
		t.Errorf("progress while starting does not list %s: %+v", h, list.Handles)
	}

	release()
	var res protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h}, &res)
	if res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "out\n" || res.SnapshotID == "" {
		t.Errorf("wait: %s exit %v stdout %q snapshot %q; want completed 0 %q with its snapshot", res.Status, res.ExitCode, res.Stdout, res.SnapshotID, "out\n")
	}
	if _, err := os.Stat(filepath.Join(s.root, "ran")); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
	if tr := s.toolResultOf(h); tr.Status != protocol.StatusCompleted || tr.Error != nil {
		t.Errorf("toolResult: %s, error %+v; want completed", tr.Status, tr.Error)
	}
	s.shutdown()
	if n := s.toolResultCount(h); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h, n)
	}
}

// TestRunCommandCancelWhileStarting: cancel of a handle still starting
// answers cancelled at once, while the start is held, and the command
// never runs, even once the start goes on: the file it would make is
// absent after the session's end, which waits for the start.
func TestRunCommandCancelWhileStarting(t *testing.T) {
	t.Parallel()
	s, release := heldStart(t)
	h := runningHandle(s, "touch", "ran")
	var res protocol.ToolResult
	s.mustCall("cancel", map[string]any{"handleId": h}, &res)
	if res.Status != protocol.StatusCancelled || res.HandleID != h {
		t.Errorf("cancel while starting: %s (handle %q), want cancelled %s", res.Status, res.HandleID, h)
	}
	if tr := s.toolResultOf(h); tr.Status != protocol.StatusCancelled {
		t.Errorf("toolResult: %s, want cancelled", tr.Status)
	}
	release()
	s.shutdown()
	if _, err := os.Stat(filepath.Join(s.root, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cancelled command ran: %v", err)
	}
	if n := s.toolResultCount(h); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h, n)
	}
}

// TestRunCommandStartFailsAfterAnswer: a start that fails after the answer
// said running (argv[0] does not exist) ends the handle in one toolResult,
// "failed", carrying the error runCommand would have answered (-32005).
func TestRunCommandStartFailsAfterAnswer(t *testing.T) {
	t.Parallel()
	s, release := heldStart(t)
	h := runningHandle(s, "toolhost-no-such-program")
	release()
	tr := s.toolResultOf(h)
	if tr.Status != protocol.StatusFailed || tr.Success || tr.Error == nil || tr.Error.Code != protocol.CodeSpawnFailed ||
		tr.Error.Data == nil || tr.Error.Data.Argv0 != "toolhost-no-such-program" {
		t.Errorf("toolResult: %s, success %v, error %+v; want failed with -32005 naming argv[0]", tr.Status, tr.Success, tr.Error)
	}
	var res protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h}, &res)
	if res.Status != protocol.StatusFailed || res.Error == nil || res.Error.Code != protocol.CodeSpawnFailed {
		t.Errorf("wait: %s, error %+v; want failed with -32005", res.Status, res.Error)
	}
	s.shutdown()
	if n := s.toolResultCount(h); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h, n)
	}
}

// TestMCPRunCommandYieldsWhileStarting: MCP's run_command with yieldMs
// (no progress token, no task) is toolhost's runCommand: it answers
// running with a handle while its start is held, and wait_command gives
// the real result once the start goes on.
func TestMCPRunCommandYieldsWhileStarting(t *testing.T) {
	t.Parallel()
	state := snapStateDir(t)
	s := startMCP(t, mcpOptions{extra: []string{"--state-dir", state}})
	s.ok("run_command", map[string]any{"argv": []string{"true"}, "snapshot": true}, nil) // the store and its lock file exist from here
	lock, err := os.OpenFile(filepath.Join(state, "snapshots", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", "echo out"}, "snapshot": true, "yieldMs": 20}, &res)
	if res.Status != protocol.StatusRunning || res.HandleID == "" {
		t.Fatalf("run_command while its start is held: %s (handle %q), want running behind a handle", res.Status, res.HandleID)
	}
	var bad protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"toolhost-no-such-program"}, "snapshot": true, "yieldMs": 20}, &bad)
	if bad.Status != protocol.StatusRunning || bad.HandleID == "" {
		t.Fatalf("run_command of a missing program while its start is held: %s (handle %q), want running behind a handle", bad.Status, bad.HandleID)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	var end protocol.ToolResult
	s.ok("wait_command", map[string]any{"handleId": res.HandleID}, &end)
	if end.Status != protocol.StatusCompleted || end.Stdout != "out\n" {
		t.Errorf("wait_command: %s stdout %q, want completed %q", end.Status, end.Stdout, "out\n")
	}
	// The failed start's text says what failed, not only that it did.
	out := s.call("wait_command", map[string]any{"handleId": bad.HandleID})
	if txt := text(out); !strings.Contains(txt, "failed") || !strings.Contains(txt, "error -32005") || !strings.Contains(txt, "toolhost-no-such-program") {
		t.Errorf("wait_command of the failed start: %q, want it to say failed with error -32005 naming the program", txt)
	}
}
