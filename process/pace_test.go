package process

import (
	"testing"
	"time"
)

// TestPromoteMakesARunningCommandAHandle checks Promote: a running plain
// command becomes a handle Lookup finds, its result and the recent list
// carry the id; an ended one stays without a handle.
func TestPromoteMakesARunningCommandAHandle(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	ended, err := m.Start(Spec{Argv: []string{"true"}}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, ended, 10*time.Second)
	if id, ok := ended.Promote(); ok || id != "" {
		t.Errorf("Promote of an ended command: %q, %v", id, ok)
	}
	u := newMark(t)
	c, err := m.Start(Spec{Argv: []string{"sleep", u.sleep}, Env: u.env()}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Current(); r.Status != StatusRunning || r.HandleID != "" || r.ExitCode != nil {
		t.Errorf("Current of a running command: %+v", r)
	}
	id, ok := c.Promote()
	if !ok || id == "" || c.HandleID() != id {
		t.Fatalf("Promote: %q, %v (HandleID %q)", id, ok, c.HandleID())
	}
	if again, _ := c.Promote(); again != id {
		t.Errorf("a second Promote gave %q, want %q", again, id)
	}
	if got, ok := m.Lookup(id); !ok || got != c {
		t.Errorf("Lookup(%s) after Promote: %v", id, ok)
	}
	c.Cancel(0)
	if r := waitDone(t, c, 10*time.Second); r.HandleID != id || r.Status != StatusCancelled {
		t.Errorf("result of the promoted command: handle %q status %q", r.HandleID, r.Status)
	}
	if got, ok := m.Lookup(id); !ok || got != c || got.Snapshot().Status != StatusCancelled {
		t.Errorf("the promoted handle is not among the recent ones after its end")
	}
	assertNoneLeft(t, u)
}

// TestInactivityTimeoutReason checks that the inactivity timeout ends a
// silent command as timedOut for inactivity, and the deadline one for
// deadline.
func TestInactivityTimeoutReason(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	u := newMark(t)
	for _, c := range []struct {
		spec Spec
		why  string
	}{
		{Spec{Argv: []string{"sleep", u.sleep}, Env: u.env(), InactivityTimeout: 100 * time.Millisecond, Timeout: time.Minute}, TimeoutInactivity},
		{Spec{Argv: []string{"sleep", u.sleep}, Env: u.env(), InactivityTimeout: time.Minute, Timeout: 100 * time.Millisecond}, TimeoutDeadline},
	} {
		cmd, err := m.Start(c.spec, Observer{})
		if err != nil {
			t.Fatal(err)
		}
		if r := waitDone(t, cmd, 10*time.Second); r.Status != StatusTimedOut || r.TimeoutReason != c.why {
			t.Errorf("status %q, reason %q, want timedOut for %s", r.Status, r.TimeoutReason, c.why)
		}
	}
	done, err := m.Start(Spec{Argv: []string{"true"}, InactivityTimeout: time.Minute}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitDone(t, done, 10*time.Second); r.Status != StatusCompleted || r.TimeoutReason != "" {
		t.Errorf("a command that ended on its own: status %q, reason %q", r.Status, r.TimeoutReason)
	}
	assertNoneLeft(t, u)
}
