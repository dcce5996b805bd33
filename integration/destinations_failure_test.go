package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/internal/sshdtest"
	"github.com/toolhost/toolhost/protocol"
)

// killTransport SIGKILLs the ssh client the server under test runs for
// its one ssh destination, found among its children in /proc.
func killTransport(t testing.TB, s *server) int {
	t.Helper()
	pids := childrenNamed(s.cmd.Process.Pid, "ssh")
	if len(pids) != 1 {
		t.Fatalf("want one ssh child of the server (pid %d), found %v", s.cmd.Process.Pid, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return pids[0]
}

// TestDestinationSSHKilled kills the ssh client of a destination while a
// handle runs there and requests wait on it: the handle ends in exactly
// one toolResult "lost", the requests in flight get -32012 naming the
// destination, destinations {} shows it lost with a reason, the far
// processes end (the far toolhost sees EOF), and the next request
// connects again and runs.
//
// The far toolhost keeps its default --eof-grace (30 s): it sees that
// nothing reads its output any more and ends at once, without waiting for
// the requests in flight that no one could hear answered.
func TestDestinationSSHKilled(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	dst := sshDest(t, d, "far")
	s := startHub(t, []dest{dst})
	s.initialize(nil)

	mk := newMarker()
	h := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo ready; wait"}, "env": mk.env(), "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")
	inFlight := newMarker()
	run := s.request("runCommand", map[string]any{"destination": "far", "argv": []string{"sleep", inFlight.Sleep}, "env": inFlight.env()})
	waiting := s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 600000})
	checkFarSide(t, s, awaitProcs(t, inFlight), true)
	checkFarSide(t, s, awaitScan(t, mk, "the shell and its sleep", atLeast(2)), true)

	killTransport(t, s)
	t0 := time.Now()
	step := func(what string) { t.Logf("%v after the kill: %s", time.Since(t0).Round(time.Millisecond), what) }

	for what, p := range map[string]*client.Pending{"runCommand": run, "wait": waiting} {
		data := wantRPCError(t, what+" in flight", s.answer(p, nil), int(protocol.CodeDestinationUnavailable))
		if data.Destination != "far" {
			t.Errorf("%s in flight: data.destination %q, want far", what, data.Destination)
		}
	}
	step("in-flight requests answered")
	res := s.toolResultOf(h.HandleID)
	step("lost toolResult")
	if res.Status != protocol.StatusLost || res.HandleID != h.HandleID || res.CommandID != h.CommandID || res.Success {
		t.Errorf("toolResult %s for %s/%s (success %v), want lost for %s/%s", res.Status, res.HandleID, res.CommandID, res.Success, h.HandleID, h.CommandID)
	}
	info := destinationNamed(t, s.destinations(), "far")
	if info.State != protocol.DestinationLost || info.Reason == "" {
		t.Errorf("destinations shows far %s, reason %q; want lost with a reason", info.State, info.Reason)
	}
	t.Logf("lost: toolResult stderr %q; destinations reason %q", res.Stderr, info.Reason)
	// The far toolhost saw its stdin end and ended its commands.
	awaitGone(t, mk, "", waitLimit)
	awaitGone(t, inFlight, "", waitLimit)
	step("far processes gone")

	// The next request connects again.
	again := s.run(map[string]any{"destination": "far", "argv": []string{"echo", "back"}})
	if again.Stdout != "back\n" || !again.Success {
		t.Errorf("runCommand after reconnecting: %q (%s)", again.Stdout, again.Status)
	}
	if info := destinationNamed(t, s.destinations(), "far"); info.State != protocol.DestinationReady || info.Reason != "" {
		t.Errorf("destinations after reconnecting shows far %s, reason %q; want ready", info.State, info.Reason)
	}
	s.shutdown()
	if n := s.toolResultCount(h.HandleID); n != 1 {
		t.Errorf("%s: %d toolResults, want exactly 1", h.HandleID, n)
	}
}

// TestDestinationHandleIDsOutliveReconnect loses a destination with a
// handle, connects it again and starts a new handle there: the new handle
// must not take the lost one's id, and requests naming the lost handle
// must not reach the new command. The far toolhost counts its handles
// from h-1 in each session, so the hub has to keep them apart.
func TestDestinationHandleIDsOutliveReconnect(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	s := startHub(t, []dest{sshDest(t, d, "far")})
	s.initialize(nil)
	lost := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "echo ready; exec sleep 300"}, "streamOutput": true})
	s.awaitOutput(lost.HandleID, "ready")
	killTransport(t, s)
	if res := s.toolResultOf(lost.HandleID); res.Status != protocol.StatusLost {
		t.Fatalf("toolResult %s, want lost", res.Status)
	}
	mk := newMarker()
	fresh := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "echo ready; exec sleep " + mk.Sleep}, "env": mk.env(), "streamOutput": true})
	if fresh.HandleID == lost.HandleID || fresh.CommandID == lost.CommandID {
		t.Errorf("after reconnecting, a new command got handle %s command %s: the ids of the lost one, %s %s", fresh.HandleID, fresh.CommandID, lost.HandleID, lost.CommandID)
	}
	s.awaitOutput(fresh.HandleID, "ready")
	awaitProcs(t, mk) // its sleep may still be exec'ing after "ready"
	// A client that still holds the lost handle cancels it.
	_ = s.call("cancel", map[string]any{"handleId": lost.HandleID}, nil)
	if left := scanProcs(mk, ""); len(left) == 0 {
		t.Errorf("cancel of the lost handle %s ended the new command %s", lost.HandleID, fresh.HandleID)
	}
	s.mustCall("cancel", map[string]any{"handleId": fresh.HandleID}, nil)
	assertNoneLeft(t, mk, "", "after cancelling the new command")
	s.shutdown()
}

// TestDestinationFailsToStart names destinations that cannot start — ssh
// to a closed port, a command that does not exist — beside one that
// works: requests to them get -32012 naming them with the reason,
// destinations {} shows them lost, and the session goes on, here and on
// the good destination.
func TestDestinationFailsToStart(t *testing.T) {
	t.Parallel()
	needSSHClient(t)
	port, err := sshdtest.FreePort() // closed again: nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	closed := dest{Name: "down", Argv: append(append([]string{"ssh"}, sshdtest.SSHArgs("/dev/null", port)...), binary, "--root", "/")}
	missing := dest{Name: "missing", Argv: []string{"/nonexistent/toolhost", "--root", "/"}}
	good := localDest(t, "good")
	s := startHub(t, []dest{closed, missing, good})
	s.initialize(nil)

	reasons := map[string]string{"down": "Connection refused", "missing": "no such file"}
	for _, name := range []string{"down", "missing"} {
		e := s.call("runCommand", map[string]any{"destination": name, "argv": []string{"true"}}, nil)
		data := wantRPCError(t, "runCommand on "+name, e, int(protocol.CodeDestinationUnavailable))
		if data.Destination != name || !strings.Contains(e.Message, name) {
			t.Errorf("%s: message %q, data.destination %q: want both to name it", name, e.Message, data.Destination)
		}
		if !strings.Contains(data.Reason, reasons[name]) {
			t.Errorf("%s: data.reason %q, want it to say %q", name, data.Reason, reasons[name])
		}
		t.Logf("%s: %s (reason %q)", name, e.Message, data.Reason)
		info := destinationNamed(t, s.destinations(), name)
		if info.State != protocol.DestinationLost || info.Reason == "" {
			t.Errorf("%s: destinations shows %s, reason %q; want lost with a reason", name, info.State, info.Reason)
		}
		// The session goes on, here and on the destination that works.
		if r := s.run(map[string]any{"argv": []string{"echo", "here"}}); r.Stdout != "here\n" {
			t.Errorf("runCommand here after %s failed: %q", name, r.Stdout)
		}
		if r := s.run(map[string]any{"destination": "good", "argv": []string{"echo", "there"}}); r.Stdout != "there\n" {
			t.Errorf("runCommand on good after %s failed: %q", name, r.Stdout)
		}
	}
	// A second try fails the same way: it tries again, it does not hang.
	e := s.call("longRunning", map[string]any{"destination": "down", "argv": []string{"true"}}, nil)
	wantRPCError(t, "longRunning on down, again", e, int(protocol.CodeDestinationUnavailable))
	s.shutdown()
}

// TestDestinationNarrowing narrows the session with
// initializationOptions.destinations: only those are listed and usable;
// a name outside them, or one the command line does not give, in a
// request is -32602 naming the field; an unknown name in
// initializationOptions fails initialize with -32602 naming it.
func TestDestinationNarrowing(t *testing.T) {
	t.Parallel()
	a, b := localDest(t, "a"), localDest(t, "b")
	s := startHub(t, []dest{a, b})
	ir := s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Destinations: []string{"b"}}})
	want := protocol.DestinationList{{Name: "b", State: protocol.DestinationIdle, Command: b.Argv}}
	if diff := cmp.Diff(want, protocol.DestinationList(ir.Workspace.Destinations)); diff != "" {
		t.Errorf("initialize's workspace.destinations mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, s.destinations()); diff != "" {
		t.Errorf("destinations mismatch (-want +got):\n%s", diff)
	}
	for _, name := range []string{"a", "zzz"} {
		for _, method := range []string{"runCommand", "longRunning"} {
			e := s.call(method, map[string]any{"destination": name, "argv": []string{"true"}}, nil)
			data := wantRPCError(t, method+" on "+name, e, int(protocol.CodeInvalidParams))
			if data.Field != "destination" || !strings.Contains(e.Message, name) {
				t.Errorf("%s on %s: field %q, message %q; want the field destination and the name", method, name, data.Field, e.Message)
			}
		}
		e := s.call("readFile", map[string]any{"destination": name, "path": "x"}, nil)
		if data := wantRPCError(t, "readFile on "+name, e, int(protocol.CodeInvalidParams)); data.Field != "destination" {
			t.Errorf("readFile on %s: field %q, want destination", name, data.Field)
		}
	}
	if r := s.run(map[string]any{"destination": "b", "argv": []string{"pwd"}}); r.Stdout != b.Root+"\n" {
		t.Errorf("runCommand on b: %q, want %q", r.Stdout, b.Root+"\n")
	}
	s.shutdown()

	other := startHub(t, []dest{a, b})
	ctx, cancel := limit()
	defer cancel()
	_, err := other.c.Initialize(ctx, &protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Destinations: []string{"b", "nope"}}})
	e := other.rpcError(err)
	data := wantRPCError(t, "initialize with an unknown destination", e, int(protocol.CodeInvalidParams))
	if data.Field != "initializationOptions.destinations[1]" || !strings.Contains(e.Message, "nope") {
		t.Errorf("initialize: field %q, message %q; want initializationOptions.destinations[1] and the name", data.Field, e.Message)
	}
}

// TestDestinationHandleOfAnotherDestination names, in handle ids, a
// destination outside the session's: -32602, and no request reaches it.
func TestDestinationHandleOfAnotherDestination(t *testing.T) {
	t.Parallel()
	a, b := localDest(t, "a"), localDest(t, "b")
	s := startHub(t, []dest{a, b})
	s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Destinations: []string{"b"}}})
	for _, id := range []string{"a/h-1", "zzz/h-1"} {
		for _, method := range []string{"cancel", "wait", "readOutput", "writeInput", "progress"} {
			e := s.call(method, map[string]any{"handleId": id}, nil)
			if e == nil || (e.Code != protocol.CodeInvalidParams && e.Code != protocol.CodeHandleNotFound) {
				t.Errorf("%s of %s: %v, want -32602 or -32004", method, id, e)
			}
		}
	}
	if info := destinationNamed(t, protocol.DestinationList(s.destinations()), "b"); info.State != protocol.DestinationIdle {
		t.Errorf("b is %s: a request reached a destination", info.State)
	}
	s.shutdown()
}

// TestDestinationRefusalsNameWhatIsWrong checks the words of the -32602
// answers of a narrowed session: a handle id whose prefix names no usable
// destination names the field handleId (the request has no destination
// field), and no answer lists a destination the session was narrowed
// away from as one it gives.
func TestDestinationRefusalsNameWhatIsWrong(t *testing.T) {
	t.Parallel()
	a, b := localDest(t, "a"), localDest(t, "b")
	s := startHub(t, []dest{a, b})
	s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Destinations: []string{"b"}}})
	for _, id := range []string{"a/h-1", "zzz/h-1"} {
		more := map[string]map[string]any{"resize": {"rows": 1, "cols": 1}, "signal": {"signal": "SIGINT"}, "writeInput": {"data": "x"}}
		for _, method := range []string{"cancel", "wait", "readOutput", "writeInput", "resize", "signal", "progress"} {
			params := map[string]any{"handleId": id}
			for k, v := range more[method] {
				params[k] = v
			}
			e := s.call(method, params, nil)
			data := wantRPCError(t, method+" of "+id, e, int(protocol.CodeInvalidParams))
			if data.Field != "handleId" {
				t.Errorf("%s of %s: field %q, want handleId", method, id, data.Field)
			}
			if strings.Contains(e.Message, "a, b") {
				t.Errorf("%s of %s: %q lists a destination the session was narrowed away from", method, id, e.Message)
			}
		}
	}
	e := s.call("runCommand", map[string]any{"destination": "a", "argv": []string{"true"}}, nil)
	if wantRPCError(t, "runCommand on a", e, int(protocol.CodeInvalidParams)); strings.Contains(e.Message, "a, b") {
		t.Errorf("runCommand on a: %q lists a destination the session was narrowed away from", e.Message)
	}
	s.shutdown()
}
