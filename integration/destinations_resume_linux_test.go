package integration

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/internal/dockertest"
	"github.com/toolhost/toolhost/protocol"
)

// The tests of a destination whose far toolhost runs with --persist and
// whose transport drops mid-command: the hub runs the destination's
// command again and resumes the far session (--destination-retry).
//
// Each destination's command goes through gateScript, so that the test
// knows when the hub runs it again (a reconnection attempt) and decides
// when that attempt goes on: no sleeps, and nothing left to timing.

// gateScript runs the destination's command behind a gate. Its first run
// (the first connect) execs the command at once. Its n-th later run (the
// n-th attempt to reconnect) first opens the fifo gate.n for reading,
// which blocks until the test opens it for writing (awaitAttempt: then
// the test knows the attempt runs), and reads until the test closes it;
// then it execs the command (mode resume) or fails as an unreachable host
// would (mode fail). A fifo of its own for each run, so that the test's
// next open never meets the reader of the run before.
const gateScript = `dir=$1 mode=$2
shift 2
n=0
while [ -e "$dir/run.$n" ]; do n=$((n+1)); done
: > "$dir/run.$n"
if [ "$n" -gt 0 ]; then
	read -r _ < "$dir/gate.$n" || true
	if [ "$mode" = fail ]; then
		echo "gate: the far side is unreachable now" >&2
		exit 255
	fi
fi
exec "$@"
`

// gateRuns is how many runs after the first a gate has fifos for.
const gateRuns = 8

// gated returns the argv that runs argv behind a new gate in mode, and the
// gate's directory.
func gated(t testing.TB, mode string, argv ...string) (gatedArgv []string, gate string) {
	t.Helper()
	gate = t.TempDir()
	script := filepath.Join(gate, "gate.sh")
	if err := os.WriteFile(script, []byte(gateScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= gateRuns; n++ {
		if err := unix.Mkfifo(filepath.Join(gate, "gate."+strconv.Itoa(n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append([]string{"sh", script, gate, mode}, argv...), gate
}

// awaitAttempt waits until the hub runs the destination's command for the
// n-th time after the first (attempt n of a reconnection: the gate's
// fifo n has a reader) and returns the fifo's write end: closing it lets
// the attempt go on.
func awaitAttempt(t testing.TB, gate string, n int) *os.File {
	t.Helper()
	fifo := filepath.Join(gate, "gate."+strconv.Itoa(n))
	opened := make(chan *os.File, 1)
	go func() { // owned by awaitAttempt: the open returns once a reader comes, or the one below
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			f = nil
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f == nil {
			t.Fatalf("opening the gate %s failed", fifo)
		}
		return f
	case <-time.After(waitLimit):
		// A reader of our own ends the open, and the goroutine with it.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			if f := <-opened; f != nil {
				f.Close()
			}
			r.Close()
		}
		t.Fatalf("the hub did not run the destination's command again (attempt %d) within %v", n, waitLimit)
		return nil
	}
}

// persistArgv is the far toolhost's command line with --persist, its state
// and runtime directories its own (env sets XDG_RUNTIME_DIR, as the far
// side's login would).
func persistArgv(bin, root, state, run, linger string) []string {
	return []string{"env", "XDG_RUNTIME_DIR=" + run, bin, "--persist", "--state-dir", state, "--linger", linger, "--root", root}
}

// farSide is what a resume test does on the far side of a destination.
type farSide struct {
	// root is the far toolhost's root, as the far side names it.
	root string
	// mkfifo makes a fifo at a far path; release writes a line into it.
	mkfifo, release func(t testing.TB, path string)
	// holders returns this machine's pids of the far side's holders.
	holders func(t testing.TB) []int
}

// localFar is a far side on this machine (a local or ssh destination),
// its --persist directories those of p.
func localFar(p *persistEnv) farSide {
	return farSide{
		root: p.root,
		mkfifo: func(t testing.TB, path string) {
			t.Helper()
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		release: func(t testing.TB, path string) {
			t.Helper()
			// The command has it open for reading: this open returns at once.
			if err := os.WriteFile(path, []byte("go\n"), 0); err != nil {
				t.Fatal(err)
			}
		},
		holders: func(testing.TB) []int { return p.holderPIDs() },
	}
}

// resumedRun is what resumeMidCommand compares of a handle once resumed.
type resumedRun struct {
	Status protocol.Status
	Stdout string
	// Results counts the handle's toolResults on the client's side.
	Results int
}

// resumeMidCommand drives a destination whose far toolhost persists its
// session (argv, behind a gate) through a transport killed mid-command
// (kill returns the killed process's pid):
//
//   - h1 reads a line on its stdin and prints it; a wait on it is in
//     flight when the transport dies, and a writeInput is made while the
//     hub reconnects: the wait is sent again on the resumed transport and
//     answers h1's end, the writeInput waits for the reconnection and
//     reaches h1.
//   - h2 waits on a far fifo, released while no transport reaches the far
//     side, and ends there then: its toolResult is made while detached,
//     and comes with the resume (lastSeq).
//
// destinations {} shows "reconnecting" while the attempt runs, then
// "ready", with the same far session id throughout; each handle ends in
// exactly one toolResult, none "lost"; the far side's processes (the
// commands, then its holder once the session is shut down) end.
func resumeMidCommand(t *testing.T, far farSide, argv []string, kill func(s *server) int) {
	gatedArgv, gate := gated(t, "resume", argv...)
	s := startHub(t, []dest{{Name: "far", Argv: gatedArgv, Root: far.root}})
	s.initialize(nil)

	farGate := far.root + "/gate-" + randomTag()
	far.mkfifo(t, farGate)
	mk1, mk2 := newMarker(), newMarker()
	h1 := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", `echo ready; read -r line; echo "got $line"`, "h1", mk1.Sleep},
		"env": mk1.env(), "openStdin": true, "streamOutput": true})
	h2 := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", `echo ready; read -r _ < "$1"; echo gated`, "h2", farGate},
		"env": mk2.env(), "streamOutput": true})
	s.awaitOutput(h1.HandleID, "ready")
	s.awaitOutput(h2.HandleID, "ready")
	before := destinationNamed(t, s.destinations(), "far")
	if before.State != protocol.DestinationReady || before.SessionID == "" {
		t.Fatalf("destinations before the kill: %s, sessionId %q; want ready with the far session's id (the far side runs --persist)", before.State, before.SessionID)
	}
	waiting := s.request("wait", map[string]any{"handleId": h1.HandleID, "timeoutMs": 600000})

	killed := kill(s)
	t0 := time.Now()
	step := func(what string) { t.Logf("%v after the kill: %s", time.Since(t0).Round(time.Millisecond), what) }
	awaitPidGone(t, killed, waitLimit)
	attempt := awaitAttempt(t, gate, 1)
	step("the hub runs the destination's command again")
	mid := destinationNamed(t, s.destinations(), "far")
	if mid.State != protocol.DestinationReconnecting || mid.SessionID != before.SessionID || !strings.Contains(mid.Reason, "attempt 1 of 5") {
		t.Errorf("destinations while reconnecting: %s, sessionId %q, reason %q; want reconnecting, %q, attempt 1 of 5", mid.State, mid.SessionID, mid.Reason, before.SessionID)
	}
	// h2 ends on the far side while nothing reaches it.
	far.release(t, farGate)
	awaitGone(t, mk2, "", waitLimit)
	step("h2 ended on the far side")
	input := s.request("writeInput", map[string]any{"handleId": h1.HandleID, "data": "hello\n"})
	attempt.Close()

	var wi protocol.WriteInputResult
	if e := s.answer(input, &wi); e != nil || wi.BytesWritten != 6 {
		t.Fatalf("writeInput made while reconnecting: %v (data %+v), %d bytes; want 6 written once resumed", e, errData(e), wi.BytesWritten)
	}
	step("writeInput answered")
	var waited protocol.ToolResult
	if e := s.answer(waiting, &waited); e != nil {
		t.Fatalf("the wait in flight across the kill: %v (data %+v); want h1's end", e, errData(e))
	}
	r1, r2 := s.toolResultOf(h1.HandleID), s.toolResultOf(h2.HandleID)
	step("both toolResults")
	after := destinationNamed(t, s.destinations(), "far")
	if after.State != protocol.DestinationReady || after.SessionID != before.SessionID || after.Reason != "" {
		t.Errorf("destinations once resumed: %s, sessionId %q, reason %q; want ready, %q, no reason", after.State, after.SessionID, after.Reason, before.SessionID)
	}
	s.shutdown()

	got := map[string]resumedRun{
		"wait": {Status: waited.Status, Stdout: waited.Stdout, Results: 1},
		"h1":   {Status: r1.Status, Stdout: r1.Stdout, Results: s.toolResultCount(h1.HandleID)},
		"h2":   {Status: r2.Status, Stdout: r2.Stdout, Results: s.toolResultCount(h2.HandleID)},
	}
	want := map[string]resumedRun{
		"wait": {Status: protocol.StatusCompleted, Stdout: "ready\ngot hello\n", Results: 1},
		"h1":   {Status: protocol.StatusCompleted, Stdout: "ready\ngot hello\n", Results: 1},
		"h2":   {Status: protocol.StatusCompleted, Stdout: "ready\ngated\n", Results: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the handles across the resume (-want +got):\n%s", diff)
	}
	for _, p := range s.notifications("toolResult") {
		var r protocol.ToolResult
		if json.Unmarshal(p, &r) == nil && r.Status == protocol.StatusLost {
			t.Errorf("a toolResult said lost: %s", p)
		}
	}
	// The far session was shut down: its holder, idle, exits.
	for _, pid := range far.holders(t) {
		awaitPidGone(t, pid, waitLimit)
	}
	assertNoneLeft(t, mk1, "", "after shutdown")
	step("the far holder gone")
}

// randomTag returns a short random hex string.
func randomTag() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestDestinationSSHResume kills the ssh client of a destination whose
// far toolhost runs --persist, mid-command: the hub starts ssh again and
// resumes the far session; the commands go on, a command that ended while
// the link was down has its one toolResult delivered, and nothing is
// lost (resumeMidCommand).
func TestDestinationSSHResume(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	p := newPersistEnv(t)
	argv := d.Argv(persistArgv(binary, p.root, p.state, p.run, "1m")...)
	resumeMidCommand(t, localFar(p), argv, func(s *server) int { return killTransport(t, s) })
}

// TestDockerDestinationResume is TestDestinationSSHResume through a real
// docker exec (package dockertest): the far toolhost in the container runs
// --persist with its state in the container's /tmp; the docker client is
// killed mid-command, and the hub resumes over a new docker exec.
func TestDockerDestinationResume(t *testing.T) {
	t.Parallel()
	d := dockertest.Start(t)
	c := d.Run(t, d.Image(t, dockertest.BuildToolhost(t, "..")))
	tag := randomTag()
	state, run := "/tmp/state-"+tag, "/tmp/run-"+tag
	far := farSide{
		root:    dockertest.Workspace,
		mkfifo:  func(t testing.TB, path string) { c.Exec(t, "mkfifo", path) },
		release: func(t testing.TB, path string) { c.Exec(t, "sh", "-c", "echo go > "+path) },
		holders: func(t testing.TB) []int {
			var pids []int
			for _, p := range c.Procs(t) {
				if len(p.Argv) > 1 && p.Argv[1] == "holder" && slices.Contains(p.Argv, state) {
					pids = append(pids, p.PID)
				}
			}
			return pids
		},
	}
	argv := c.ExecArgv(persistArgv(dockertest.ToolhostPath, dockertest.Workspace, state, run, "1m")...)
	resumeMidCommand(t, far, argv, func(s *server) int { return c.KillTransport(t, s.cmd.Process.Pid) })
}

// killFront SIGKILLs the far toolhost a local destination runs (the
// front of --persist, the hub's child), and returns its pid.
func killFront(t testing.TB, s *server) int {
	t.Helper()
	pids := childrenNamed(s.cmd.Process.Pid, "toolhost")
	if len(pids) != 1 {
		t.Fatalf("want one toolhost child of the hub (pid %d), found %v", s.cmd.Process.Pid, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pids[0]
}

// TestDestinationResumeUnreachable: the far side persists its session, but
// once the transport drops every attempt to reach it fails (the gate
// fails each later run), with --destination-retry 2: destinations {} shows
// each attempt, then the handle ends in exactly one toolResult "lost",
// the wait in flight answers -32012, and the destination is lost with the
// reason. The far session was never told: it lingers there with its
// command until the far side ends it.
func TestDestinationResumeUnreachable(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	argv, gate := gated(t, "fail", persistArgv(binary, p.root, p.state, p.run, "1m")...)
	s := startHub(t, []dest{{Name: "far", Argv: argv, Root: p.root}}, "--destination-retry", "2")
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "echo ready; exec sleep " + mk.Sleep}, "env": mk.env(), "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")
	awaitProcs(t, mk) // its sleep may still be exec'ing after "ready"
	waiting := s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 600000})

	awaitPidGone(t, killFront(t, s), waitLimit)
	for n := 1; n <= 2; n++ {
		attempt := awaitAttempt(t, gate, n)
		info := destinationNamed(t, s.destinations(), "far")
		if want := "attempt " + strconv.Itoa(n) + " of 2"; info.State != protocol.DestinationReconnecting || !strings.Contains(info.Reason, want) {
			t.Errorf("destinations during attempt %d: %s, reason %q; want reconnecting, %q", n, info.State, info.Reason, want)
		}
		attempt.Close()
	}
	data := wantRPCError(t, "the wait in flight", s.answer(waiting, nil), int(protocol.CodeDestinationUnavailable))
	res := s.toolResultOf(h.HandleID)
	if res.Status != protocol.StatusLost || !strings.Contains(res.Stderr, "unreachable") {
		t.Errorf("toolResult %s, stderr %q; want lost, saying the far side stayed unreachable", res.Status, res.Stderr)
	}
	info := destinationNamed(t, s.destinations(), "far")
	if info.State != protocol.DestinationLost || !strings.Contains(info.Reason, "2 attempts") {
		t.Errorf("destinations after the retries: %s, reason %q; want lost after 2 attempts", info.State, info.Reason)
	}
	t.Logf("wait: %s; toolResult stderr %q", data.Reason, res.Stderr)
	if len(scanProcs(mk, "")) == 0 {
		t.Errorf("the far command is gone: the far session should linger with it, since nothing reached it")
	}
	s.shutdown()
	if n := s.toolResultCount(h.HandleID); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h.HandleID, n)
	}
	p.stopHolders() // ends the far session, and its command
	assertNoneLeft(t, mk, "", "once the far holder ended")
}

// TestDestinationResumeSessionGone: the far session is gone by the time
// the hub reconnects (its --linger, 0 here, passed: the far side ended its
// command): the far toolhost answers -32030, and the handle ends "lost" at
// once, without the other attempts.
func TestDestinationResumeSessionGone(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	argv, gate := gated(t, "resume", persistArgv(binary, p.root, p.state, p.run, "0s")...)
	s := startHub(t, []dest{{Name: "far", Argv: argv, Root: p.root}})
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "echo ready; exec sleep " + mk.Sleep}, "env": mk.env(), "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")

	awaitPidGone(t, killFront(t, s), waitLimit)
	attempt := awaitAttempt(t, gate, 1)
	awaitGone(t, mk, "", waitLimit) // the far session expired, and its command with it
	attempt.Close()
	res := s.toolResultOf(h.HandleID)
	info := destinationNamed(t, s.destinations(), "far")
	if res.Status != protocol.StatusLost || !strings.Contains(res.Stderr, "is gone") || info.State != protocol.DestinationLost || !strings.Contains(info.Reason, "expired") {
		t.Errorf("toolResult %s (stderr %q), destinations %s (reason %q); want lost, the far session gone (expired)", res.Status, res.Stderr, info.State, info.Reason)
	}
	s.shutdown()
	if n := s.toolResultCount(h.HandleID); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h.HandleID, n)
	}
}
