package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestSlowRequestDoesNotDelayFastOne checks requests run concurrently: a
// fast request sent after a slow one is answered while the slow one still
// runs, and $/cancelRequest then answers the slow one with -32800.
func TestSlowRequestDoesNotDelayFastOne(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing, args: []string{"--debug-methods"}})
		s.initialize(nil)
		slow := s.request("debug/sleep", map[string]any{"ms": 600000})
		cmdSlow := s.request("runCommand", map[string]any{"argv": []string{"sleep", "600"}})
		fast := s.request("progress", map[string]any{})
		if e := s.answer(fast, nil); e != nil {
			t.Fatalf("progress: %v", e)
		}
		for _, p := range []*client.Pending{slow, cmdSlow} {
			select {
			case <-p.Done():
				t.Fatalf("request %v answered before it was cancelled", p.ID())
			default:
			}
		}
		for _, p := range []*client.Pending{slow, cmdSlow} {
			if e := s.cancelRequest(p); e == nil || e.Code != -32800 {
				t.Fatalf("cancelled request %v answered %v, want error -32800", p.ID(), e)
			}
		}
		s.shutdown()
	})
}

// TestCancelRequestWithStringID checks $/cancelRequest finds a request by a
// string id, and that cancelling an unknown or finished id is harmless.
func TestCancelRequestWithStringID(t *testing.T) {
	s := start(t, options{framing: "ndjson", args: []string{"--debug-methods"}})
	s.initialize(nil)
	s.notify("$/cancelRequest", map[string]any{"id": "nobody"})
	s.send([]byte(`{"jsonrpc":"2.0","id":"slow-1","method":"debug/sleep","params":{"ms":600000}}`))
	s.notify("$/cancelRequest", map[string]any{"id": "slow-1"})
	m, _ := s.waitFor(0, "the response to slow-1", func(m msg) bool { return string(m.ID) == `"slow-1"` })
	if m.Error == nil || m.Error.Code != -32800 {
		t.Fatalf("got %s, want error -32800", m.raw)
	}
	var data map[string]any
	json.Unmarshal(wireErrorData(t, m), &data)
	if diff := cmp.Diff(map[string]any{"method": "debug/sleep", "reason": "cancelled by $/cancelRequest"}, data); diff != "" {
		t.Errorf("error data mismatch (-want +got):\n%s", diff)
	}
	s.mustCall("progress", map[string]any{}, nil)
}

// TestHandlerPanicIsInternalErrorAndSessionGoesOn checks a panicking
// handler answers -32603 and the session serves the next request.
func TestHandlerPanicIsInternalErrorAndSessionGoesOn(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing, args: []string{"--debug-methods"}})
		s.initialize(nil)
		p := s.request("debug/panic", map[string]any{})
		err := s.answer(p, nil)
		if err == nil || err.Code != -32603 || !strings.Contains(string(wireErrorData(t, s.response(wireID(p)))), "debug/panic was called") {
			t.Fatalf("debug/panic answered %v, want -32603 naming the panic", err)
		}
		var list map[string]any
		s.mustCall("progress", map[string]any{}, &list)
		s.shutdown()
	})
}

// TestOversizedFramesAreNotAllocated sends a 64 MiB frame, by header and by
// line, to a server that reads at most 1 MiB: it answers -32006 under the
// frame's id, its peak memory does not grow by the frame's size, and the
// next request is served.
func TestOversizedFramesAreNotAllocated(t *testing.T) {
	const size = 64 << 20
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing, plain: true, args: []string{"--max-message-bytes", "1048576"}})
		s.initialize(nil)
		s.mustCall("progress", map[string]any{}, nil)
		before := s.memory("VmHWM")

		head := []byte(`{"jsonrpc":"2.0","id":77,"method":"writeFile","params":{"path":"big","content":"`)
		tailB := []byte(`"}}`)
		pad := size - len(head) - len(tailB)
		written := make(chan error, 1)
		go func() { // owned by the test: it waits on written
			var err error
			if framing == "header" {
				_, err = fmt.Fprintf(s.stdin, "Content-Length: %d\r\n\r\n", size)
			}
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			if err == nil {
				_, err = s.stdin.Write(head)
			}
			for left := pad; err == nil && left > 0; left -= len(chunk) {
				_, err = s.stdin.Write(chunk[:min(left, len(chunk))])
			}
			if err == nil {
				_, err = s.stdin.Write(tailB)
			}
			if err == nil && framing == "ndjson" {
				_, err = s.stdin.Write([]byte("\n"))
			}
			written <- err
		}()
		m := s.response("77")
		if err := <-written; err != nil {
			t.Fatal(err)
		}
		if m.Error == nil || m.Error.Code != -32006 {
			t.Fatalf("oversized frame answered %s, want -32006", m.raw)
		}
		var data protocol.ErrorData
		if m.Error.Data != nil {
			data = *m.Error.Data
		}
		if data.Size != size || data.Limit != 1<<20 {
			t.Errorf("data = %+v, want size %d limit %d", data, size, 1<<20)
		}
		s.mustCall("progress", map[string]any{}, nil)
		if grew := s.memory("VmHWM") - before; grew > 16<<20 {
			t.Errorf("peak memory grew by %d MiB reading a %d MiB frame it refuses", grew>>20, size>>20)
		}
		s.shutdown()
	})
}

// TestStdinClosedWithWorkInFlight closes stdin while a request and a
// handle are in flight: the request's reply is still delivered, the
// handle's toolResult too (cancelled), the process exits 1 and leaves no
// child behind.
func TestStdinClosedWithWorkInFlight(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing, args: []string{"--kill-grace", "200ms"}})
		s.initialize(nil)
		mk := newMarker()
		var h protocol.LongRunningResult
		s.mustCall("longRunning", map[string]any{"argv": []string{"sh", "-c", "sleep 300; echo " + mk.Sleep}, "env": mk.env()}, &h)
		run := s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", "read x; echo got:$x; echo " + mk.Sleep}, "stdin": "hello\n", "env": mk.env()})
		s.closeStdin()
		var res protocol.ToolResult
		if e := s.answer(run, &res); e != nil {
			t.Fatalf("runCommand in flight at EOF answered %v", e)
		}
		if res.Status != "completed" || !strings.HasPrefix(res.Stdout, "got:hello\n") {
			t.Errorf("runCommand in flight at EOF = %+v", res)
		}
		var tr protocol.ToolResult
		s.notification("toolResult", 1, nil, &tr)
		if tr.HandleID != h.HandleID || tr.Status != "cancelled" {
			t.Errorf("toolResult at EOF = %+v, want handle %s cancelled", tr, h.HandleID)
		}
		if code := s.wait(); code != 1 {
			t.Errorf("exit code %d, want 1 (no shutdown)", code)
		}
		assertNoneLeft(t, mk, "", "after the exit")
	})
}

// TestSlowClientDoesNotGrowServerMemory stops reading while the client
// asks for 64 MiB of answers: the server stops reading requests instead of
// queueing them all, its memory stays bounded, and every answer arrives
// once the client reads again.
func TestSlowClientDoesNotGrowServerMemory(t *testing.T) {
	s := start(t, options{framing: "header", plain: true})
	if err := os.WriteFile(filepath.Join(s.root, "block.txt"), bytes.Repeat([]byte("0123456789abcde\n"), 16<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	s.initialize(nil)
	s.mustCall("readFile", map[string]any{"path": "block.txt"}, nil)
	base := s.memory("VmRSS")
	s.pause()
	const n = 256 // 256 answers of 256 KiB
	sent := make(chan []*client.Pending, 1)
	go func() { // owned by the test: it waits on sent
		var ps []*client.Pending
		for i := 0; i < n; i++ {
			ps = append(ps, s.request("readFile", map[string]any{"path": "block.txt"}))
		}
		sent <- ps
	}()
	// While paused, the server can only grow until it stops reading; its
	// outbox holds at most a few MiB. Wait until it has answered into the
	// pipe as far as it can: its memory then stops growing.
	peak := waitMemorySettles(t, s)
	t.Logf("server memory grew by %.1f MiB while the client did not read", float64(peak-base)/(1<<20))
	if grew := peak - base; grew > 48<<20 {
		t.Errorf("server memory grew by %d MiB while the client did not read", grew>>20)
	}
	s.resume()
	for _, p := range <-sent {
		if e := s.answer(p, nil); e != nil {
			t.Fatalf("readFile %v: %v", p.ID(), e)
		}
	}
	s.shutdown()
}

// waitMemorySettles waits until the server's resident memory stops growing
// over several consecutive reads of /proc, and returns the largest seen.
func waitMemorySettles(t *testing.T, s *server) int64 {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	peak, still := int64(0), 0
	for still < 10 {
		select {
		case <-tick.C:
		case <-deadline:
			return peak
		}
		rss := s.memory("VmRSS")
		if rss > peak+256<<10 {
			peak, still = rss, 0
			continue
		}
		still++
	}
	return peak
}

// TestSignalsEndTheSession checks SIGTERM, SIGINT and SIGHUP end the
// session: the exit code is 1 without shutdown, 0 after it, and a running
// handle's toolResult is delivered first.
func TestSignalsEndTheSession(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s := start(t, options{args: []string{"--kill-grace", "200ms"}})
			s.initialize(nil)
			var h protocol.LongRunningResult
			s.mustCall("longRunning", map[string]any{"argv": []string{"sleep", "300"}}, &h)
			s.cmd.Process.Signal(sig)
			var tr protocol.ToolResult
			s.notification("toolResult", 1, nil, &tr)
			if tr.Status != "cancelled" {
				t.Errorf("toolResult status %q, want cancelled", tr.Status)
			}
			if code := s.wait(); code != 1 {
				t.Errorf("exit code %d after %v, want 1", code, sig)
			}
		})
	}
	t.Run("after shutdown", func(t *testing.T) {
		t.Parallel()
		s := start(t, options{})
		s.initialize(nil)
		ctx, cancel := limit()
		defer cancel()
		if err := s.c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		if code := s.wait(); code != 0 {
			t.Errorf("exit code %d after shutdown and SIGTERM, want 0", code)
		}
	})
}

// TestLogsNeverTouchStdout runs a session with debug logs to a file: the
// file fills, stderr stays quiet, and stdout carries only messages (the
// reader fails on anything else).
func TestLogsNeverTouchStdout(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "toolhost.log")
	s := start(t, options{args: []string{"--log-file", logFile, "--log-level", "debug"}})
	s.initialize(nil)
	s.mustCall("runCommand", map[string]any{"argv": []string{"echo", "hi"}}, nil)
	s.shutdown()
	b, err := os.ReadFile(logFile)
	if err != nil || !bytes.Contains(b, []byte("session ending")) {
		t.Errorf("log file = %q, %v; want the session's logs", b, err)
	}
	if got := s.stderr.String(); got != "" {
		t.Errorf("stderr with --log-file = %q, want nothing", got)
	}
}

// TestCommandLine checks --version, --help and bad flags.
func TestCommandLine(t *testing.T) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "toolhost ") {
		t.Errorf("--version = %q, %v", out, err)
	}
	cmd := exec.Command(binary, "--help")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil || len(stdout) != 0 {
		t.Errorf("--help: stdout %q, err %v; want help on stderr only", stdout, err)
	}
	for _, flag := range []string{"-root", "-read-root", "-framing", "-artifacts-dir", "-kill-grace", "-max-processes", "-max-message-bytes", "-log-level", "-log-file", "-version",
		"-sandbox", "-sandbox-default", "-sandbox-network", "-writable", "-limit-memory", "-limit-pids", "-limit-cpu"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("--help does not explain %s", flag)
		}
	}
	for _, args := range [][]string{{"--framing", "xml"}, {"--log-level", "loud"}, {"--no-such-flag"}, {"extra"},
		{"--sandbox", "maybe"}, {"--sandbox-default", "loose"}, {"--sandbox-network", "yes"}, {"--writable", "rel/dir"},
		{"--limit-memory", "lots"}, {"--limit-pids", "-1"}, {"--sandbox", "off", "--limit-pids", "10"}} {
		cmd := exec.Command(binary, args...)
		cmd.Stdin = strings.NewReader("")
		cmd.Stderr = io.Discard
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: err %v, want exit code 2", args, err)
		}
	}
}

// TestInitializeErrors checks a root that is missing or not a directory,
// and a session without any root, get clear initialize errors, and that
// initialize still succeeds afterwards.
func TestInitializeErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	s := start(t, options{noRoot: true})
	cases := []struct {
		params map[string]any
		code   int
	}{
		{map[string]any{}, -32602},
		{map[string]any{"rootPath": filepath.Join(dir, "missing")}, -32003},
		{map[string]any{"rootPath": file}, -32602},
		{map[string]any{"rootUri": "http://example.com/x"}, -32602},
		{map[string]any{"rootPath": "relative/dir"}, -32602},
	}
	for _, c := range cases {
		err := s.call("initialize", c.params, nil)
		if err == nil || err.Code != c.code {
			t.Errorf("initialize %v = %v, want code %d", c.params, err, c.code)
		}
	}
	var res protocol.InitializeResult
	s.mustCall("initialize", map[string]any{"rootUri": "file://" + dir}, &res)
	real, _ := filepath.EvalSymlinks(dir)
	if res.Workspace.Root != real {
		t.Errorf("root = %q, want %q", res.Workspace.Root, real)
	}
}

// TestManyPipelinedRequests sends thousands of requests, single and in
// batches, without waiting for answers: every one is answered exactly
// once. It guards against the library's pooled request contexts being
// misused (deriving from one crashed the process within 200k requests, at
// once on the batch path).
func TestManyPipelinedRequests(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		const singles, batches, perBatch = 4000, 400, 10
		want := map[string]int{}
		go func() { // owned by the test through the answers it waits for
			id := 1000
			for i := 0; i < singles; i++ {
				id++
				s.send([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"progress","params":{}}`, id)))
			}
			for b := 0; b < batches; b++ {
				var parts []string
				for i := 0; i < perBatch; i++ {
					id++
					parts = append(parts, fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d","method":"progress","params":{}}`, id))
				}
				s.send([]byte("[" + strings.Join(parts, ",") + "]"))
			}
		}()
		for id := 1001; id <= 1000+singles; id++ {
			want[fmt.Sprint(id)] = 1
		}
		for id := 1001 + singles; id <= 1000+singles+batches*perBatch; id++ {
			want[fmt.Sprintf(`"b%d"`, id)] = 1
		}
		got := map[string]int{}
		s.waitFor(0, "every answer", func(m msg) bool {
			for _, a := range append([]msg{m}, m.batch...) {
				if a.Method == "" && a.ID != nil && a.Error == nil && a.Result != nil {
					got[string(a.ID)]++
				}
			}
			return len(got) >= len(want)
		})
		delete(got, "1") // initialize
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers per id mismatch (-want +got):\n%s", diff)
		}
		s.shutdown()
	})
}

// TestWarningsReachTheClient checks a warning of the session's work, here
// artifacts evicted over the cap, reaches the client as window/logMessage.
func TestWarningsReachTheClient(t *testing.T) {
	s := start(t, options{args: []string{"--artifacts-cap-bytes", "4096"}})
	s.initialize(nil)
	print := map[string]any{"argv": []string{"head", "-c", "3000", "/dev/zero"}}
	s.mustCall("runCommand", print, nil)
	s.mustCall("runCommand", print, nil)
	var lm protocol.LogMessageParams
	s.notification("window/logMessage", 1, nil, &lm)
	if lm.Type != 2 || !strings.Contains(lm.Message, "evicted command artifacts") || !strings.Contains(lm.Message, "cmd-1") {
		t.Errorf("window/logMessage = %+v, want a warning naming cmd-1's evicted artifacts", lm)
	}
	s.shutdown()
}
