package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// orphanCase is one shape of process tree in the orphan matrix. Each keeps
// its main process alive, so the way the command ends is the test's.
type orphanCase struct {
	name string
	// script is run by sh -c; %s is the unique sleep argument.
	script string
	// procs is how many tagged processes run once the tree is up.
	procs int
	// helper runs the TERM-ignoring Go helper instead of a script.
	helper bool
}

var orphanCases = []orphanCase{
	{name: "plain sleep", script: "exec sleep %s", procs: 1},
	{name: "ignores TERM", helper: true, procs: 1},
	{name: "sh ignoring TERM with child", script: "trap '' TERM; sleep %s & wait", procs: 2},
	{name: "background and wait", script: "sleep %s & wait", procs: 2},
	{name: "setsid", script: "setsid sleep %[1]s & sleep %[1]s", procs: 3},
	{name: "setsid ignoring TERM", script: "trap '' TERM; setsid sleep %[1]s & sleep %[1]s", procs: 3},
	{name: "double fork daemon", script: "(setsid sleep %[1]s &); sleep %[1]s", procs: 3},
	{name: "nohup", script: "nohup sleep %[1]s >/dev/null 2>&1 & sleep %[1]s", procs: 3},
	{name: "setsid with cleared env", script: "setsid env -i sleep %[1]s & sleep %[1]s", procs: 3},
}

// startOrphanCase starts oc tagged with u.
func startOrphanCase(t *testing.T, m *Manager, oc orphanCase, u uniqueMark, timeout time.Duration) *Command {
	t.Helper()
	var spec Spec
	rec := newOutputRecorder("ready")
	if oc.helper {
		spec = helperSpec("ignore-term")
		spec.Env["TEST_MARK"] = ptr(u.token)
		spec.StreamOutput = true
	} else {
		spec = Spec{Argv: []string{"sh", "-c", fmt.Sprintf(oc.script, u.sleep)}, Env: u.env()}
	}
	spec.Timeout = timeout
	c, err := m.Start(spec, Observer{OnOutput: rec.onOutput})
	if err != nil {
		t.Fatal(err)
	}
	if oc.helper {
		rec.wait(t) // SIGTERM is ignored from here on
	}
	waitCensus(t, u, oc.procs)
	return c
}

// TestOrphanMatrix: every tree shape, ended every way, leaves no process
// and no zombie behind.
func TestOrphanMatrix(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name string
		end  func(t *testing.T, m *Manager, c *Command)
		want string
	}{
		{"cancel", func(t *testing.T, m *Manager, c *Command) { c.Cancel(0) }, StatusCancelled},
		{"timeout", nil, StatusTimedOut},
		{"shutdown", func(t *testing.T, m *Manager, c *Command) {
			if err := m.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}, StatusCancelled},
	}
	for _, attr := range attributions {
		for _, oc := range orphanCases {
			for _, way := range ways {
				t.Run(attr.name+"/"+oc.name+"/"+way.name, func(t *testing.T) {
					t.Parallel()
					u := newMark(t)
					m := newTestManager(t, Config{DisableCgroups: attr.disable})
					attr.check(t, m)
					timeout := time.Duration(0)
					if way.end == nil {
						timeout = 700 * time.Millisecond
					}
					c := startOrphanCase(t, m, oc, u, timeout)
					start := time.Now()
					if way.end != nil {
						way.end(t, m, c)
					}
					r := waitDone(t, c, 15*time.Second)
					if r.Status != way.want {
						t.Errorf("status %q, want %q", r.Status, way.want)
					}
					// Done means the processes are gone: no polling needed.
					if left := u.census(); len(left) != 0 {
						t.Errorf("processes alive after Done: %q", left)
					}
					if d := time.Since(start); d > timeout+m.cfg.KillGrace+3*time.Second {
						t.Errorf("ending took %v", d)
					}
					if !waitFor(5*time.Second, func() bool { return len(ourZombies()) == 0 }) {
						t.Errorf("zombies not reaped: %v", ourZombies())
					}
				})
			}
		}
	}
}

// attributions are the two ways descendants are tied to their command:
// a cgroup per command where the kernel allows it, and markers alone.
var attributions = []struct {
	name    string
	disable bool
	check   func(t *testing.T, m *Manager)
}{
	{"cgroup", false, func(t *testing.T, m *Manager) {
		if m.cgroups() == nil {
			t.Skip("no writable cgroup2 hierarchy here")
		}
	}},
	{"markers", true, func(t *testing.T, m *Manager) {
		if m.cgroups() != nil {
			t.Fatal("DisableCgroups left cgroups on")
		}
	}},
}

// TestOrphansOfCompletedCommands: trees whose main process exits on its
// own, as in the brief; the end of the command ends what it left behind.
func TestOrphansOfCompletedCommands(t *testing.T) {
	t.Parallel()
	scripts := []string{
		"sleep %s &",
		"setsid sleep %s &",
		"(setsid sleep %s &)",
		"nohup sleep %s >/dev/null 2>&1 &",
		"trap '' TERM; setsid sleep %s >/dev/null 2>&1 &",
	}
	for _, attr := range attributions {
		for _, s := range scripts {
			t.Run(attr.name+"/"+s, func(t *testing.T) {
				t.Parallel()
				u := newMark(t)
				m := newTestManager(t, Config{DisableCgroups: attr.disable})
				attr.check(t, m)
				r := run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf(s, u.sleep)}, Env: u.env()})
				if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
					t.Errorf("status %q exit %v, want completed 0", r.Status, r.ExitCode)
				}
				if left := u.census(); len(left) != 0 {
					t.Errorf("processes alive after Done: %q", left)
				}
			})
		}
	}
}

// TestCgroupAttributesAnything: with a cgroup per command, even a
// descendant that cleared its environment and left the group after its
// command ended goes with the command.
func TestCgroupAttributesAnything(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	m := newTestManager(t, Config{})
	if m.cgroups() == nil {
		t.Skip("no writable cgroup2 hierarchy here")
	}
	r := run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf("setsid env -i sleep %s & sleep 0.2", u.sleep)}, Env: u.env()})
	if r.Status != StatusCompleted {
		t.Errorf("status %q", r.Status)
	}
	if left := u.census(); len(left) != 0 {
		t.Errorf("processes alive after Done: %q", left)
	}
}

// TestPipeHoldingGrandchild: a grandchild that keeps stdout open does not
// keep Done waiting, even when it left the group and ignores SIGTERM.
func TestPipeHoldingGrandchild(t *testing.T) {
	t.Parallel()
	for _, script := range []string{
		"sleep %s & echo started",
		"trap '' TERM; setsid sleep %s & echo started",
	} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			u := newMark(t)
			m := newTestManager(t, Config{KillGrace: 500 * time.Millisecond})
			start := time.Now()
			r := run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf(script, u.sleep)}, Env: u.env(), Timeout: time.Second})
			if d := time.Since(start); d > time.Second+m.cfg.KillGrace+time.Second {
				t.Errorf("took %v, want about 1s + grace at most", d)
			}
			if r.Output.Stdout != "started\n" {
				t.Errorf("stdout %q", r.Output.Stdout)
			}
			if left := u.census(); len(left) != 0 {
				t.Errorf("processes alive after Done: %q", left)
			}
		})
	}
}

// TestCancelIsolation: ending one command ends its whole tree and nothing
// of another's; an orphan a running command left behind lives until that
// command ends, whatever other commands do meanwhile.
func TestCancelIsolation(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	ua, ub := newMark(t), newMark(t)
	script := "(setsid sleep %[1]s &); setsid sleep %[1]s & sleep %[1]s"
	a, err := m.Start(Spec{Argv: []string{"sh", "-c", fmt.Sprintf(script, ua.sleep)}, Env: ua.env()}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Start(Spec{Argv: []string{"sh", "-c", fmt.Sprintf(script, ub.sleep)}, Env: ub.env()}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	waitCensus(t, ua, 4)
	waitCensus(t, ub, 4)
	before := ub.census()
	// Another command ending (and sweeping its own tree) leaves both alone.
	uc := newMark(t)
	run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf("setsid sleep %s &", uc.sleep)}, Env: uc.env()})
	if got := len(ua.census()); got != 4 {
		t.Errorf("a has %d processes after another command ended, want 4: %q", got, ua.census())
	}
	a.Cancel(0)
	waitDone(t, a, 10*time.Second)
	if left := ua.census(); len(left) != 0 {
		t.Errorf("a's processes alive after its Done: %q", left)
	}
	if diff := strings.Join(before, "\n") + "|" + strings.Join(ub.census(), "\n"); len(ub.census()) != 4 {
		t.Errorf("b lost processes when a was cancelled: before|after %s", diff)
	}
	b.Cancel(0)
	waitDone(t, b, 10*time.Second)
	assertNoneLeft(t, ub)
	assertNoneLeft(t, uc)
}

// TestKillLadderTiming: a process that ignores SIGTERM gets SIGKILL after
// the grace, not before; one that honours it goes at once.
func TestKillLadderTiming(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{KillGrace: 400 * time.Millisecond})
	u := newMark(t)
	c := startOrphanCase(t, m, orphanCase{helper: true, procs: 1}, u, 0)
	start := time.Now()
	c.Cancel(0)
	r := waitDone(t, c, 10*time.Second)
	d := time.Since(start)
	if d < m.cfg.KillGrace || d > m.cfg.KillGrace+2*time.Second {
		t.Errorf("TERM-ignoring process ended after %v, want the grace %v then KILL", d, m.cfg.KillGrace)
	}
	if r.Signal != "SIGKILL" || r.ExitCode != nil {
		t.Errorf("signal %q exit %v, want SIGKILL", r.Signal, r.ExitCode)
	}

	u2 := newMark(t)
	c2 := startOrphanCase(t, m, orphanCase{script: "exec sleep %s", procs: 1}, u2, 0)
	start = time.Now()
	c2.Cancel(5 * time.Second) // a long grace that an obedient process never uses
	r2 := waitDone(t, c2, 10*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("obedient process took %v to end", d)
	}
	if r2.Signal != "SIGTERM" {
		t.Errorf("signal %q, want SIGTERM", r2.Signal)
	}
}

// TestShutdownKillsUnattributedOrphans: a descendant that both cleared its
// environment and left the group after its command ended carries nothing
// that ties it to a command; it is still the session's, and Shutdown ends
// it.
func TestShutdownKillsUnattributedOrphans(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	m := newTestManager(t, Config{DisableCgroups: true})
	r := run(t, m, Spec{Argv: []string{"sh", "-c", fmt.Sprintf("setsid env -i sleep %s & sleep 0.2", u.sleep)}, Env: u.env()})
	if r.Status != StatusCompleted {
		t.Errorf("status %q", r.Status)
	}
	t.Logf("before Shutdown: %q", u.census())
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := u.census(); len(left) != 0 {
		t.Errorf("processes alive after Shutdown: %q", left)
	}
}
