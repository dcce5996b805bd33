package integration

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// orphanChild is a command of the orphan matrix. Its argv prints "ready"
// on stdout once its whole tree is set up, and every process of the tree
// carries the marker's sleep duration in its argv.
type orphanChild struct {
	name string
	argv func(mk marker) []string
	// clearsEnv says a descendant clears its environment and leaves the
	// command's group: only a cgroup attributes it while the session runs.
	clearsEnv bool
}

// orphanChildren are the children of the orphan matrix.
var orphanChildren = []orphanChild{
	{name: "plain sleep", argv: func(mk marker) []string {
		return []string{"sh", "-c", "echo ready; exec sleep " + mk.Sleep}
	}},
	{name: "ignores TERM", argv: func(mk marker) []string {
		return []string{"sh", "-c", "trap '' TERM; echo ready; sleep " + mk.Sleep + "; :"}
	}},
	{name: "ignores TERM two levels down", argv: func(mk marker) []string {
		return []string{"sh", "-c", "trap '' TERM; sh -c 'sleep " + mk.Sleep + "; :' & echo ready; wait"}
	}},
	{name: "background and wait", argv: func(mk marker) []string {
		return []string{"sh", "-c", "sleep " + mk.Sleep + " & echo ready; wait"}
	}},
	{name: "setsid", argv: func(mk marker) []string {
		return []string{"sh", "-c", "setsid sleep " + mk.Sleep + " & echo ready; wait"}
	}},
	{name: "setsid and exit", argv: func(mk marker) []string {
		// The exact form: the shell exits at once, leaving the
		// setsid sleep; the command is kept running by a plain sleep.
		return []string{"sh", "-c", "sh -c 'setsid sleep " + mk.Sleep + " &'; echo ready; exec sleep " + mk.Sleep}
	}},
	{name: "double-fork daemon", argv: func(mk marker) []string {
		return []string{"sh", "-c", "sh -c 'setsid sh -c \"sleep " + mk.Sleep + "; :\" </dev/null >/dev/null 2>&1 &'; echo ready; exec sleep " + mk.Sleep}
	}},
	{name: "nohup", argv: func(mk marker) []string {
		return []string{"sh", "-c", "nohup sleep " + mk.Sleep + " >/dev/null 2>&1 & echo ready; wait"}
	}},
	{name: "setsid with a cleared environment", clearsEnv: true, argv: func(mk marker) []string {
		return []string{"sh", "-c", "env -i setsid sleep " + mk.Sleep + " </dev/null >/dev/null 2>&1 & echo ready; wait"}
	}},
}

// orphanEnd is a way to end a command of the orphan matrix.
type orphanEnd struct {
	name string
	// timeoutMs is given to longRunning when not 0.
	timeoutMs int
	// end ends the command (or the session) and waits until the server
	// promises its processes are gone.
	end func(t *testing.T, s *server, h protocol.LongRunningResult)
	// perCommand says the command ends while the session goes on: a
	// descendant only a cgroup attributes is then out of reach until the
	// session ends.
	perCommand bool
}

// signalServer sends sig to the server and waits for it to exit.
func signalServer(sig syscall.Signal) func(t *testing.T, s *server, h protocol.LongRunningResult) {
	return func(t *testing.T, s *server, h protocol.LongRunningResult) {
		if err := s.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		s.wait()
	}
}

// orphanEnds are the ways to end of the orphan matrix.
var orphanEnds = []orphanEnd{
	{name: "cancel", perCommand: true, end: func(t *testing.T, s *server, h protocol.LongRunningResult) {
		var res protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
		if res.Status != "cancelled" {
			t.Errorf("cancel answered status %q", res.Status)
		}
	}},
	{name: "timeout", perCommand: true, timeoutMs: 1500, end: func(t *testing.T, s *server, h protocol.LongRunningResult) {
		if res := s.toolResultOf(h.HandleID); res.Status != "timedOut" {
			t.Errorf("toolResult status %q, want timedOut", res.Status)
		}
	}},
	{name: "stdin EOF", end: func(t *testing.T, s *server, h protocol.LongRunningResult) {
		s.closeStdin()
		s.wait()
	}},
	{name: "shutdown and exit", end: func(t *testing.T, s *server, h protocol.LongRunningResult) {
		s.shutdown()
		// The session's end still sends the handle's toolResult first.
		if res := s.toolResultOf(h.HandleID); res.Status != "cancelled" {
			t.Errorf("toolResult status %q, want cancelled", res.Status)
		}
	}},
	{name: "SIGTERM", end: signalServer(syscall.SIGTERM)},
	{name: "SIGINT", end: signalServer(syscall.SIGINT)},
	{name: "SIGHUP", end: signalServer(syscall.SIGHUP)},
}

// TestOrphanMatrix checks every child of the matrix against every way to
// end: once the server says the command (or the session) has ended, no
// process of it is left, grandchildren included, found by the marker in
// their argv, their ORPHAN_TOKEN and the session's TOOLHOST_COMMAND.
//
// It runs in both ways the server attributes descendants: by cgroup where
// cgroup v2 allows (the default here), and by the marker in their
// environment alone (--no-cgroups). Its PTY column runs every child again
// under a pseudo-terminal (`pty: true`), where the command leads a session
// of its own and the terminal's hangup reaches its foreground group:
// "cgroups/pty/…" and "markers/pty/…".
func TestOrphanMatrix(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name string
		args []string
	}{{"cgroups", nil}, {"markers", []string{"--no-cgroups"}}}
	columns := []struct {
		name string // "" keeps the pipes' cells named as before the PTY column
		pty  bool
	}{{"", false}, {"pty/", true}}
	for _, mode := range modes {
		for _, col := range columns {
			for _, child := range orphanChildren {
				for _, way := range orphanEnds {
					t.Run(mode.name+"/"+col.name+child.name+"/"+way.name, func(t *testing.T) {
						t.Parallel()
						orphanCell(t, append([]string{"--kill-grace", "200ms"}, mode.args...), col.pty, child, way)
					})
				}
			}
		}
	}
}

// orphanCell runs one cell of the matrix, under a PTY when pty is set.
func orphanCell(t *testing.T, args []string, pty bool, child orphanChild, way orphanEnd) {
	s := start(t, options{args: args})
	s.initialize(nil)
	cgroups := !strings.Contains(s.stderr.String(), "no cgroups") && !slices.Contains(args, "--no-cgroups")
	if child.clearsEnv && way.perCommand && !cgroups {
		t.Skip("without cgroups a descendant that clears its environment and leaves the group lives until the session ends")
	}
	mk := newMarker()
	p := map[string]any{"argv": child.argv(mk), "env": mk.env(), "streamOutput": true}
	if way.timeoutMs > 0 {
		p["timeoutMs"] = way.timeoutMs
	}
	stream := protocol.StreamStdout
	if pty {
		p["pty"] = true
		stream = protocol.StreamPty
	}
	h := s.longRun(p)
	s.awaitStreamOnly(h.HandleID, stream, "ready")
	// The session's prefix shows once a process of the command has
	// exec'd: not yet, for a moment, when "ready" comes right before an exec.
	found := awaitScan(t, mk, "a process of the command carrying TOOLHOST_COMMAND", func(ps []procOf) bool { return sessionPrefix(ps) != "" })
	prefix := sessionPrefix(found)
	way.end(t, s, h)
	assertNoneLeft(t, mk, prefix, "after "+way.name)
}

// TestOrphansSIGKILLedServer documents what stays in reach when the server
// is SIGKILLed and can run no code: each command's direct child dies by
// Pdeathsig, at once. Grandchildren are out of Pdeathsig's reach; where
// cgroups are available the next toolhost started in the same cgroup kills
// the dead session's cgroup whole, grandchildren that called setsid
// included. Without cgroups they stay: the test says so and cleans up.
func TestOrphansSIGKILLedServer(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	direct := []marker{newMarker(), newMarker()}
	grand := []marker{newMarker(), newMarker()}
	argvs := [][]string{
		{"sh", "-c", "echo ready; exec sleep " + direct[0].Sleep},
		{"sh", "-c", "trap '' TERM; echo ready; exec sleep " + direct[1].Sleep},
		{"sh", "-c", "sleep " + grand[0].Sleep + " & echo ready; exec sleep " + direct[0].Sleep},
		{"sh", "-c", "setsid sleep " + grand[1].Sleep + " & echo ready; exec sleep " + direct[0].Sleep},
	}
	for _, argv := range argvs {
		h := s.longRun(map[string]any{"argv": argv, "env": map[string]any{"ORPHAN_TOKEN": "direct"}, "streamOutput": true})
		s.awaitOutput(h.HandleID, "ready")
	}
	for _, mk := range append(direct, grand...) {
		awaitProcs(t, mk) // a sleep may still be exec'ing after "ready"
	}
	cgroups := !strings.Contains(s.stderr.String(), "no cgroups")
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.wait()
	for _, mk := range direct {
		awaitGone(t, mk, "", waitLimit)
	}
	if !cgroups {
		for _, mk := range grand {
			left := scanProcs(mk, "")
			t.Logf("without cgroups, %d grandchildren of a SIGKILLed server stay out of reach: %v", len(left), left)
			for _, p := range left {
				killStray(p.PID)
			}
		}
		return
	}
	// The next server in the same cgroup ends the dead session's tree.
	next := start(t, options{})
	next.initialize(nil)
	for _, mk := range grand {
		awaitGone(t, mk, "", waitLimit)
	}
	next.shutdown()
}
