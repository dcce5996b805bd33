package process

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// doneResult waits for c's end (bounded, so that a hang fails the test).
func doneResult(t *testing.T, c *Command) Result {
	t.Helper()
	select {
	case <-c.Done():
		return c.Result()
	case <-time.After(20 * time.Second):
		t.Fatalf("command %s not done", c.ID())
		return Result{}
	}
}

// TestReserveCancelForksNothing: a reserved command is a handle before it
// runs; a cancel ends it at once, cancelled, and Launch then forks nothing.
func TestReserveCancelForksNothing(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Reserve("touch marker")
	if err != nil {
		t.Fatal(err)
	}
	id, ok := c.Promote()
	if !ok {
		t.Fatal("Promote of a reserved command: false")
	}
	if got, ok := m.Lookup(id); !ok || got != c {
		t.Fatalf("Lookup(%q) = %v, %v; want the reserved command", id, got, ok)
	}
	if cur := c.Current(); cur.Status != StatusRunning || c.Capture() != nil || c.Snapshot().PID != 0 {
		t.Fatalf("a reserved command: status %s, capture %v, pid %d; want running, none, 0", cur.Status, c.Capture(), c.Snapshot().PID)
	}
	c.Cancel(0)
	if r := doneResult(t, c); r.Status != StatusCancelled || r.Err != nil || r.HandleID != id {
		t.Fatalf("after Cancel: status %s, err %v, handle %q; want cancelled, nil, %q", r.Status, r.Err, r.HandleID, id)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	if err := c.Launch(Spec{Argv: []string{"touch", marker}}, Observer{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Launch after Cancel: %v, want ErrStopped", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran after its cancel: %v", err)
	}
	if n := m.Running(); n != 0 {
		t.Errorf("Running() = %d after the end, want 0", n)
	}
}

// TestReserveLaunchFails: a start that fails ends the reserved command
// failed, with the spawn's error.
func TestReserveLaunchFails(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Reserve("no-such-program")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Launch(Spec{Argv: []string{"toolhost-no-such-program"}}, Observer{})
	if !errors.Is(err, ErrSpawn) {
		t.Fatalf("Launch: %v, want ErrSpawn", err)
	}
	r := doneResult(t, c)
	if r.Status != StatusFailed || !errors.Is(r.Err, ErrSpawn) {
		t.Fatalf("result: status %s, err %v; want failed with the spawn error", r.Status, r.Err)
	}
	if c.Spawned() || c.Capture() != nil {
		t.Error("a command whose start failed says it spawned")
	}

	a, err := m.Reserve("aborted")
	if err != nil {
		t.Fatal(err)
	}
	a.Abort(errors.New("the snapshot failed"))
	if r := doneResult(t, a); r.Status != StatusFailed || r.Err == nil {
		t.Fatalf("after Abort: status %s, err %v; want failed with its error", r.Status, r.Err)
	}
}

// TestReserveLaunchRuns: a launched reserved command runs as a started
// one does.
func TestReserveLaunchRuns(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Reserve("echo hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(Spec{Argv: []string{"sh", "-c", "echo hi"}}, Observer{}); err != nil {
		t.Fatal(err)
	}
	if !c.Spawned() {
		t.Error("Spawned() = false after Launch")
	}
	r := doneResult(t, c)
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 || r.Output.Stdout != "hi\n" {
		t.Fatalf("result: %s, exit %v, stdout %q; want completed 0 %q", r.Status, r.ExitCode, r.Output.Stdout, "hi\n")
	}
}

// TestReserveShutdown: Shutdown ends a reserved command that has not
// launched, and a later Launch forks nothing.
func TestReserveShutdown(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Reserve("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := doneResult(t, c); r.Status != StatusCancelled {
		t.Fatalf("status %s after Shutdown, want cancelled", r.Status)
	}
	if err := c.Launch(Spec{Argv: []string{"true"}}, Observer{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Launch after Shutdown: %v, want ErrStopped", err)
	}
	if _, err := m.Reserve("y"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Shutdown: %v, want ErrClosed", err)
	}
}
