package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestDestinationCancel cancels a command with a grandchild on an ssh
// destination and on the local one: the cancel routes by the handle's
// prefix, and once it answers no process of the tree is left, found on the
// far side by the marker in their argv and environment; one toolResult.
func TestDestinationCancel(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	dests := []dest{sshDest(t, d, "far"), localDest(t, "near")}
	s := startHub(t, dests)
	s.initialize(nil)
	var handles []string
	for _, dst := range dests {
		mk := newMarker()
		h := s.longRun(map[string]any{"destination": dst.Name, "argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo ready; wait"}, "env": mk.env(), "streamOutput": true})
		handles = append(handles, h.HandleID)
		s.awaitOutput(h.HandleID, "ready")
		found := awaitScan(t, mk, dst.Name+": the shell and its sleep on the far side", atLeast(2))
		checkFarSide(t, s, found, dst.Name == "far")

		var res protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
		if res.Status != protocol.StatusCancelled || res.HandleID != h.HandleID || res.CommandID != h.CommandID {
			t.Errorf("%s: cancel answered %s for %s/%s, want cancelled for %s/%s", dst.Name, res.Status, res.HandleID, res.CommandID, h.HandleID, h.CommandID)
		}
		assertNoneLeft(t, mk, "", dst.Name+": once cancel answered")
		if tr := s.toolResultOf(h.HandleID); tr.Status != protocol.StatusCancelled {
			t.Errorf("%s: toolResult %s, want cancelled", dst.Name, tr.Status)
		}
	}
	s.shutdown()
	for _, h := range handles {
		if n := s.toolResultCount(h); n != 1 {
			t.Errorf("%s: %d toolResults, want 1", h, n)
		}
	}
}

// TestDestinationFiles writes and reads files on an ssh destination: they
// land in and come from the far root; paths that escape it ("../x", an
// absolute path outside, the hub's own root among them) are refused by the
// far side's root with -32001, and nothing is written.
func TestDestinationFiles(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	dst := sshDest(t, d, "far")
	s := startHub(t, []dest{dst})
	s.initialize(nil)

	const content = "written on the far side\n"
	var w protocol.WriteFileResult
	s.mustCall("writeFile", map[string]any{"destination": "far", "path": "sub/f.txt", "content": content, "createDirs": true}, &w)
	if got, err := os.ReadFile(filepath.Join(dst.Root, "sub", "f.txt")); err != nil || string(got) != content {
		t.Errorf("the far root's sub/f.txt: %q, %v; want %q", got, err, content)
	}
	if _, err := os.Stat(filepath.Join(s.root, "sub")); err == nil {
		t.Errorf("writeFile with a destination wrote into the hub's own root")
	}
	var r protocol.ReadFileResult
	s.mustCall("readFile", map[string]any{"destination": "far", "path": "sub/f.txt"}, &r)
	if r.Content != content {
		t.Errorf("readFile on far: %q, want %q", r.Content, content)
	}
	// An absolute path inside the far root reads the same file.
	s.mustCall("readFile", map[string]any{"destination": "far", "path": filepath.Join(dst.Root, "sub", "f.txt")}, &r)
	if r.Content != content {
		t.Errorf("readFile on far by its absolute path: %q, want %q", r.Content, content)
	}

	// What lies outside the far root: the hub's root, and a sibling.
	here := filepath.Join(s.root, "here.txt")
	if err := os.WriteFile(here, []byte("the hub's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(dst.Root), "outside-"+filepath.Base(dst.Root)+".txt")
	escapes := []string{"../x", "sub/../../x", here, outside, "/etc/passwd"}
	for _, p := range escapes {
		e := s.call("readFile", map[string]any{"destination": "far", "path": p}, nil)
		if data := wantRPCError(t, "readFile "+p, e, int(protocol.CodePathOutsideWorkspace)); data.Destination != "" {
			t.Errorf("readFile %s: data.destination %q: the far side refused it, the destination was reached", p, data.Destination)
		}
		e = s.call("writeFile", map[string]any{"destination": "far", "path": p, "content": "escaped\n", "createDirs": true}, nil)
		wantRPCError(t, "writeFile "+p, e, int(protocol.CodePathOutsideWorkspace))
	}
	if b, _ := os.ReadFile(here); string(b) != "the hub's file\n" {
		t.Errorf("the hub's file was overwritten: %q", b)
	}
	for _, p := range []string{filepath.Join(filepath.Dir(dst.Root), "x"), outside} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written outside the far root", p)
			os.Remove(p)
		}
	}
	s.shutdown()
}

// TestDestinationArtifacts reads a destination's artifacts back: readFile
// of the "NAME//abs/path" a toolResult gives reads the far file, and
// readOutput of a "NAME/h-N" handle reads its output there; a
// destination's path outside its root and artifacts is refused there.
func TestDestinationArtifacts(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	dests := []dest{sshDest(t, d, "far"), localDest(t, "near")}
	s := startHub(t, dests)
	s.initialize(nil)
	for _, dst := range dests {
		res := s.run(map[string]any{"destination": dst.Name, "argv": []string{"sh", "-c", "echo out on $0; echo err on $0 >&2", dst.Name}})
		want := map[string]string{
			res.Artifacts.StdoutPath: "out on " + dst.Name + "\n",
			res.Artifacts.StderrPath: "err on " + dst.Name + "\n",
		}
		for path, content := range want {
			far, ok := strings.CutPrefix(path, dst.Name+"/")
			if !ok || !strings.HasPrefix(far, "/") {
				t.Fatalf("%s: artifact path %q, want %s//abs/path", dst.Name, path, dst.Name)
			}
			var r protocol.ReadFileResult
			s.mustCall("readFile", map[string]any{"path": path}, &r)
			if r.Content != content {
				t.Errorf("%s: readFile %s: %q, want %q", dst.Name, path, r.Content, content)
			}
			// The far side is this machine: the file is the far toolhost's.
			if b, err := os.ReadFile(far); err != nil || string(b) != content {
				t.Errorf("%s: the far file %s: %q, %v", dst.Name, far, b, err)
			}
		}
		// The prefix only reaches the destination: its root still rules.
		e := s.call("readFile", map[string]any{"path": dst.Name + "//etc/passwd"}, nil)
		wantRPCError(t, "readFile "+dst.Name+"//etc/passwd", e, int(protocol.CodePathOutsideWorkspace))

		h := s.longRun(map[string]any{"destination": dst.Name, "argv": []string{"sh", "-c", "echo line1; echo line2"}})
		if tr := s.toolResultOf(h.HandleID); tr.Status != protocol.StatusCompleted {
			t.Fatalf("%s: %s ended %s", dst.Name, h.HandleID, tr.Status)
		}
		out := s.readOutput(map[string]any{"handleId": h.HandleID, "stream": "stdout"})
		if diff := cmp.Diff("line1\nline2\n", string(bytesOf(t, out))); diff != "" {
			t.Errorf("%s: readOutput of %s mismatch (-want +got):\n%s", dst.Name, h.HandleID, diff)
		}
	}
	s.shutdown()
}

// TestDestinationInteractive drives a command in a terminal on an ssh
// destination: writeInput, resize, wait and signal route by the handle's
// prefix, in wire order, and reach the far command.
func TestDestinationInteractive(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	s := startHub(t, []dest{sshDest(t, d, "far")})
	s.initialize(nil)
	mk := newMarker()
	script := `stty -echo; echo "size $(stty size)"; IFS= read -r a; echo "got:$a"; IFS= read -r b; echo "size $(stty size)"; echo ready; exec sleep ` + mk.Sleep
	h := s.longRun(map[string]any{"destination": "far", "argv": []string{"sh", "-c", script}, "env": mk.env(),
		"pty": map[string]any{"rows": 24, "cols": 80}, "openStdin": true, "streamOutput": true})
	if !strings.HasPrefix(h.HandleID, "far/") {
		t.Fatalf("handle %q, want the prefix far/", h.HandleID)
	}
	s.awaitStream(h.HandleID, protocol.StreamPty, "size 24 80")

	var wr protocol.WriteInputResult
	s.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "hello\n"}, &wr)
	if wr.BytesWritten != 6 {
		t.Errorf("writeInput wrote %d bytes, want 6", wr.BytesWritten)
	}
	s.awaitStream(h.HandleID, protocol.StreamPty, "got:hello")
	// resize then writeInput, sent without waiting: the far command reads
	// the line after its terminal has the new size.
	rz := s.request("resize", map[string]any{"handleId": h.HandleID, "rows": 33, "cols": 99})
	in := s.request("writeInput", map[string]any{"handleId": h.HandleID, "data": "\n"})
	if e := s.answer(rz, nil); e != nil {
		t.Fatalf("resize: %v", e)
	}
	if e := s.answer(in, nil); e != nil {
		t.Fatalf("writeInput: %v", e)
	}
	s.awaitStream(h.HandleID, protocol.StreamPty, "size 33 99\r\nready")
	checkFarSide(t, s, awaitProcs(t, mk), true)

	var snap protocol.ToolResult
	s.mustCall("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 0}, &snap)
	if snap.Status != protocol.StatusRunning || snap.HandleID != h.HandleID {
		t.Errorf("wait with timeoutMs 0: %s for %s, want running for %s", snap.Status, snap.HandleID, h.HandleID)
	}
	waiting := s.request("wait", map[string]any{"handleId": h.HandleID, "timeoutMs": 60000})
	var sig protocol.SignalResult
	s.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "SIGTERM"}, &sig)
	if sig.ProcessGroupID <= 0 {
		t.Errorf("signal answered process group %d", sig.ProcessGroupID)
	}
	var res protocol.ToolResult
	if e := s.answer(waiting, &res); e != nil {
		t.Fatalf("wait: %v", e)
	}
	if res.HandleID != h.HandleID || res.Status == protocol.StatusRunning || res.Signal == nil || *res.Signal != "SIGTERM" {
		t.Errorf("wait answered %s for %s, signal %v; want the end by SIGTERM of %s", res.Status, res.HandleID, res.Signal, h.HandleID)
	}
	assertNoneLeft(t, mk, "", "once wait answered the end")
	// A handle's requests once it ended go there too, and say so.
	e := s.call("writeInput", map[string]any{"handleId": h.HandleID, "data": "late\n"}, nil)
	if e == nil {
		t.Errorf("writeInput to the ended %s succeeded", h.HandleID)
	} else if data := errData(e); data.HandleID != "" && data.HandleID != h.HandleID {
		t.Errorf("writeInput to the ended %s: data.handleId %q, want it prefixed", h.HandleID, data.HandleID)
	}
	s.shutdown()
	if n := s.toolResultCount(h.HandleID); n != 1 {
		t.Errorf("%d toolResults, want 1", n)
	}
}

// TestDestinationCancelRequestAndProgress runs a runCommand with the
// client's workDoneToken on an ssh destination, then cancels the request
// with $/cancelRequest: $/progress reaches the client under its own
// token, begin first and end last; the cancel propagates, the answer is
// -32800 with the partial result's ids prefixed, and by then no process of
// the command is left on the far side.
func TestDestinationCancelRequestAndProgress(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	s := startHub(t, []dest{sshDest(t, d, "far")})
	s.initialize(&protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Window: &protocol.WindowClientCapabilities{WorkDoneProgress: true}}})
	mk := newMarker()
	p := s.request("runCommand", map[string]any{"destination": "far", "workDoneToken": "tok-far", "env": mk.env(),
		"argv": []string{"sh", "-c", `echo "[STEP 0/1] only" >&2; sleep ` + mk.Sleep + ` & wait`}})
	s.waitFor(0, "$/progress begin of tok-far", func(m msg) bool {
		n, err := progNoticeOf(m.Params)
		return m.Method == "$/progress" && err == nil && n.Token == protocol.NewStringToken("tok-far") && n.Value.Kind == "begin"
	})
	checkFarSide(t, s, awaitProcs(t, mk), true)

	e := s.cancelRequest(p)
	data := wantRPCError(t, "runCommand cancelled", e, int(protocol.CodeRequestCancelled))
	assertNoneLeft(t, mk, "", "once the cancelled runCommand answered")
	if data.Partial == nil || !strings.HasPrefix(data.Partial.CommandID, "far/") {
		t.Errorf("the cancelled runCommand's data.partial %+v, want a result with the command id prefixed far/", data.Partial)
	}
	s.waitFor(0, "$/progress end of tok-far", func(m msg) bool {
		n, err := progNoticeOf(m.Params)
		return m.Method == "$/progress" && err == nil && n.Token == protocol.NewStringToken("tok-far") && n.Value.Kind == "end"
	})
	work := progWorkFor(s, protocol.NewStringToken("tok-far"))
	if work[0].Kind != "begin" || work[len(work)-1].Kind != "end" {
		t.Errorf("$/progress of tok-far %+v: want begin first and end last", work)
	}
	s.shutdown()
}
