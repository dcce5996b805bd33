//go:build linux

package process

import (
	"fmt"
	"testing"
	"time"
)

// TestCgroupReused: a command's empty cgroup goes to the next command,
// which it still confines whole; a cgroup that was killed through
// cgroup.kill is not reused (the kernel would kill every process forked
// into it), and the command after it runs.
func TestCgroupReused(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{KillGrace: 100 * time.Millisecond})
	if m.cgroups() == nil {
		t.Skip("no writable cgroup2 hierarchy here")
	}
	made := func() uint64 {
		m.cgs.mu.Lock()
		defer m.cgs.mu.Unlock()
		return m.cgs.seq
	}
	if r := run(t, m, Spec{Argv: []string{"true"}}); r.Status != StatusCompleted {
		t.Fatalf("true: status %q", r.Status)
	}
	u := newMark(t)
	r := run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf("setsid env -i sleep %s & sleep 0.2", u.sleep)}, Env: u.env()})
	if r.Status != StatusCompleted {
		t.Errorf("status %q", r.Status)
	}
	if left := u.census(); len(left) != 0 {
		t.Errorf("processes alive after Done in a reused cgroup: %q", left)
	}
	if n := made(); n != 1 {
		t.Errorf("%d cgroups made for two commands one after the other, want 1", n)
	}
	// A command whose tree ignores TERM is swept through cgroup.kill: the
	// next command gets a new cgroup and runs to its end.
	rec := newOutputRecorder("ready")
	c, err := m.Start(Spec{Argv: []string{"sh", "-c", "trap '' TERM; echo ready; sleep 30"}, StreamOutput: true}, Observer{OnOutput: rec.onOutput})
	if err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	c.Cancel(0)
	if r := waitDone(t, c, 10*time.Second); r.Signal != "SIGKILL" {
		t.Errorf("TERM-ignoring command: signal %q, want SIGKILL", r.Signal)
	}
	r = run(t, m, Spec{Argv: []string{"sh", "-c", "sleep 0.05; echo done"}})
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 || r.Output.Stdout != "done\n" {
		t.Errorf("after a killed cgroup: status %q exit %v signal %q stdout %q, want completed 0 \"done\\n\"", r.Status, r.ExitCode, r.Signal, r.Output.Stdout)
	}
	if n := made(); n != 2 {
		t.Errorf("%d cgroups made, want 2: a killed cgroup must not be reused", n)
	}
}
