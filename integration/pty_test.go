//go:build linux

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// Tests of commands under a pseudo-terminal (issue 13), through the
// binary: what the command sees, an interactive shell typed into with
// writeInput, Ctrl-C and signals to the terminal's foreground job, resize,
// a full-screen program, and the end of a tree that ignores SIGHUP.

// TestPtyIsATerminal checks that under a PTY stdin, stdout and stderr are
// a terminal and TERM is xterm-256color unless the request sets it; that
// the output is one stream whose artifacts are stdoutPath = outputPath and
// no stderrPath; and that without a PTY, with or without openStdin, none of
// the three is a terminal.
func TestPtyIsATerminal(t *testing.T) {
	t.Parallel()
	py := sbPython(t)
	s := start(t, options{})
	s.initialize(nil)
	code := `import os, sys; print(sys.stdin.isatty(), sys.stdout.isatty(), sys.stderr.isatty()); print(os.environ.get("TERM"))`
	cases := []struct {
		name   string
		params map[string]any
		// want is the whole stdout, or only its first line when tty is
		// false (TERM is then whatever the environment says).
		want string
		tty  bool
	}{
		{"pty", map[string]any{"pty": true}, "True True True\r\nxterm-256color\r\n", true},
		{"pty with TERM set", map[string]any{"pty": map[string]any{"rows": 5, "cols": 20}, "env": map[string]any{"TERM": "dumb"}}, "True True True\r\ndumb\r\n", true},
		{"openStdin", map[string]any{"openStdin": true}, "False False False\n", false},
		{"neither", map[string]any{}, "False False False\n", false},
	}
	for _, c := range cases {
		p := map[string]any{"argv": []string{py, "-c", code}}
		for k, v := range c.params {
			p[k] = v
		}
		h := s.longRun(p)
		res := s.toolResultOf(h.HandleID)
		if !res.Success {
			t.Errorf("%s: %+v", c.name, res)
			continue
		}
		got := res.Stdout
		if !c.tty {
			got, _, _ = strings.Cut(got, "\n")
			got += "\n"
		}
		if got != c.want {
			t.Errorf("%s: stdout %q, want %q", c.name, got, c.want)
		}
		if c.tty {
			// One stream: stdoutPath and outputPath hold the same bytes,
			// stderrPath is empty, and so is the inline stderr.
			a := res.Artifacts
			files := map[string]string{"stdoutPath": a.StdoutPath, "outputPath": a.OutputPath, "stderrPath": a.StderrPath}
			want := map[string]string{"stdoutPath": c.want, "outputPath": c.want, "stderrPath": ""}
			got := map[string]string{}
			for k, path := range files {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("%s: %s: %v", c.name, k, err)
				}
				got[k] = string(b)
			}
			if diff := cmp.Diff(want, got); diff != "" || res.Stderr != "" {
				t.Errorf("%s: a PTY's artifacts, stderr %q, mismatch (-want +got):\n%s", c.name, res.Stderr, diff)
			}
		}
	}
}

// TestPtyInteractiveShell types `echo hi` into an interactive `sh -i`
// under a PTY, sees the answer and the next prompt, checks what progress
// says of the handle's terminal, and ends the shell with `exit`.
func TestPtyInteractiveShell(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	h, tm := s.ptyShell(24, 80)
	pr := s.progressOf(h.HandleID)
	if diff := cmp.Diff(&protocol.PtySize{Rows: 24, Cols: 80}, pr.Pty); diff != "" || !pr.InputOpen || pr.Status != protocol.StatusRunning {
		t.Errorf("progress of a PTY shell: %+v; pty mismatch (-want +got):\n%s", pr, diff)
	}
	tm.send("echo hi\r")
	if got := tm.expect("\nhi\r\n"); got != "echo hi\r\nhi\r\n" {
		t.Errorf("the terminal showed %q, want the echoed line then the answer", got)
	}
	tm.expect(ptyPrompt)
	tm.send("exit 3\r")
	res := s.toolResultOf(h.HandleID)
	if diff := cmp.Diff(ending{Status: "completed", ExitCode: ptr(3)}, endingOf(res)); diff != "" {
		t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
	}
}

// TestPtyReadPromptAnsweredByWriteInput answers a `read` prompt through
// writeInput and checks the whole terminal output, echo included, in the
// toolResult, and that every output notification of the handle is on the
// "pty" stream.
func TestPtyReadPromptAnsweredByWriteInput(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", `printf "name? "; read n; echo "hello $n"`}, "pty": true, "streamOutput": true})
	tm := s.newTerm(h.HandleID, protocol.StreamPty)
	tm.expect("name? ")
	tm.send("toolhost\r")
	tm.expect("hello toolhost\r\n")
	res := s.toolResultOf(h.HandleID)
	if diff := cmp.Diff(ending{Status: "completed", Success: true, ExitCode: ptr(0)}, endingOf(res)); diff != "" {
		t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
	}
	if want := "name? toolhost\r\nhello toolhost\r\n"; res.Stdout != want || res.Stderr != "" {
		t.Errorf("toolResult stdout %q stderr %q, want stdout %q", res.Stdout, res.Stderr, want)
	}
	for _, o := range progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)) {
		if o.Stream != protocol.StreamPty {
			t.Errorf("output notification on stream %q under a PTY: %+v", o.Stream, o)
		}
	}
}

// TestPtyCtrlCInterruptsTheForegroundJob runs `sleep` in an interactive
// shell under a PTY and interrupts it, with Ctrl-C typed through
// writeInput (the line discipline signals) and with the signal method:
// the sleep is gone, the shell prompts again and answers, and the handle
// keeps running.
func TestPtyCtrlCInterruptsTheForegroundJob(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name      string
		interrupt func(s *server, tm *term, job int)
	}{
		{"writeInput ctrl-c", func(s *server, tm *term, job int) { tm.send("\x03") }},
		{"signal SIGINT", func(s *server, tm *term, job int) {
			var r protocol.SignalResult
			s.mustCall("signal", map[string]any{"handleId": tm.handle, "signal": "SIGINT"}, &r)
			if r.ProcessGroupID != job {
				s.t.Errorf("SIGINT went to process group %d, want the foreground job's %d", r.ProcessGroupID, job)
			}
		}},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, options{})
			s.initialize(nil)
			h, tm := s.ptyShell(24, 80)
			mk := newMarker()
			tm.send("sleep " + mk.Sleep + "\r")
			sleep := awaitProcOf(t, mk)
			st, _ := readStat(sleep.PID)
			if st.PGID == h.ProcessGroupID {
				t.Fatalf("the shell ran sleep in its own process group %d: no job control", st.PGID)
			}
			way.interrupt(s, tm, st.PGID)
			tm.expect(ptyPrompt)
			awaitGone(t, marker{Sleep: mk.Sleep}, "", waitLimit)
			tm.send("echo $((6*7))\r")
			tm.expect("42\r\n")
			if pr := s.progressOf(h.HandleID); pr.Status != protocol.StatusRunning || !pr.InputOpen {
				t.Errorf("the shell's handle after the interrupt: %+v", pr)
			}
			var res protocol.ToolResult
			s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
			if res.Status != protocol.StatusCancelled {
				t.Errorf("cancel: %+v", res)
			}
		})
	}
}

// counterScript prints "n 1", "n 2", … every 10 ms, forever, in one
// process: a shell loop forks, and a shell stopped while it waits for a
// vfork'd child to exec stays in state D.
const counterScript = `import itertools, time
for i in itertools.count(1):
    print("n", i, flush=True)
    time.sleep(0.01)
`

// lastCount returns the highest "n N" in out.
func lastCount(out string) int {
	last := 0
	for _, m := range regexp.MustCompile(`n (\d+)\r?\n`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		last = max(last, n)
	}
	return last
}

// awaitGroupState waits until process group pgid has members and every one
// is stopped (stopped true) or none is (stopped false).
func awaitGroupState(t testing.TB, pgid int, stopped bool) {
	t.Helper()
	var members map[int]byte
	pollUntil(t, func() string { return fmt.Sprintf("group %d stopped=%v: states %v", pgid, stopped, members) }, func() bool {
		members = groupMembers(pgid)
		if len(members) == 0 {
			return false
		}
		for _, st := range members {
			if (st == 'T') != stopped {
				return false
			}
		}
		return true
	})
}

// TestPtySIGTSTPThenSIGCONT stops a counting child with signal SIGTSTP
// (every process of its group in state T) and lets it go on.
//
// Under a PTY the child is a job of an interactive shell: a command that
// leads its terminal's session is in an orphaned process group, where the
// kernel discards SIGTSTP (POSIX; a job-control shell's jobs are not
// orphaned). Once the job stops the shell takes the terminal back, so a
// SIGCONT then reaches the shell's group, the foreground one, and `fg`
// continues the job. Without a PTY, SIGCONT goes to the command's group.
func TestPtySIGTSTPThenSIGCONT(t *testing.T) {
	t.Parallel()
	t.Run("openStdin", func(t *testing.T) {
		t.Parallel()
		py := sbPython(t)
		s := start(t, options{})
		s.initialize(nil)
		progWriteFile(t, s.root, "counter.py", []byte(counterScript))
		h := s.longRun(map[string]any{"argv": []string{py, "counter.py"}, "openStdin": true, "streamOutput": true})
		tm := s.newTerm(h.HandleID, protocol.StreamStdout)
		tm.expect("n 3\n")
		var r protocol.SignalResult
		s.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "SIGTSTP"}, &r)
		if r.ProcessGroupID != h.ProcessGroupID {
			t.Errorf("SIGTSTP went to group %d, want the command's %d", r.ProcessGroupID, h.ProcessGroupID)
		}
		awaitGroupState(t, h.ProcessGroupID, true)
		stoppedAt := lastCount(string(s.readAll(h.HandleID, "output")))
		s.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "CONT"}, &r)
		awaitGroupState(t, h.ProcessGroupID, false)
		tm.expect(fmt.Sprintf("n %d\n", stoppedAt+5))
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
	})
	t.Run("pty job", func(t *testing.T) {
		t.Parallel()
		py := sbPython(t)
		s := start(t, options{})
		s.initialize(nil)
		progWriteFile(t, s.root, "counter.py", []byte(counterScript))
		h, tm := s.ptyShell(24, 80)
		tm.send(py + " counter.py\r")
		tm.expect("n 3\r\n")
		var r protocol.SignalResult
		s.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "SIGTSTP"}, &r)
		job := r.ProcessGroupID
		if job == h.ProcessGroupID || job <= 0 {
			t.Fatalf("SIGTSTP went to group %d, want the foreground job's, not the shell's %d", job, h.ProcessGroupID)
		}
		awaitGroupState(t, job, true)
		tm.expect(ptyPrompt)
		stoppedAt := lastCount(string(s.readAll(h.HandleID, "pty")))
		s.mustCall("signal", map[string]any{"handleId": h.HandleID, "signal": "SIGCONT"}, &r)
		if r.ProcessGroupID != h.ProcessGroupID {
			t.Errorf("SIGCONT after the job stopped went to group %d, want the shell's %d, the terminal's foreground", r.ProcessGroupID, h.ProcessGroupID)
		}
		tm.send("fg\r")
		awaitGroupState(t, job, false)
		tm.expect(fmt.Sprintf("n %d\r\n", stoppedAt+5))
		tm.send("\x03")
		tm.expect(ptyPrompt)
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
	})
}

// readAll reads a handle's whole artifact of stream so far with
// readOutput.
func (s *server) readAll(handle, stream string) []byte {
	s.t.Helper()
	var all []byte
	next := int64(0)
	for {
		r := s.readOutput(map[string]any{"handleId": handle, "stream": stream, "offset": next, "maxBytes": 1 << 20})
		all = append(all, bytesOf(s.t, r)...)
		if r.NextOffset == next || r.NextOffset >= r.TotalBytes {
			return all
		}
		next = r.NextOffset
	}
}

// TestPtyResize checks that resize reaches the terminal: `stty size` in a
// shell sees it, progress reports it, and a program waiting for SIGWINCH
// gets it and reads the new size.
func TestPtyResize(t *testing.T) {
	t.Parallel()
	t.Run("stty size", func(t *testing.T) {
		t.Parallel()
		s := start(t, options{})
		s.initialize(nil)
		h, tm := s.ptyShell(24, 80)
		tm.send("stty size\r")
		tm.expect("24 80\r\n")
		tm.expect(ptyPrompt)
		s.mustCall("resize", map[string]any{"handleId": h.HandleID, "rows": 33, "cols": 111}, nil)
		if diff := cmp.Diff(&protocol.PtySize{Rows: 33, Cols: 111}, s.progressOf(h.HandleID).Pty); diff != "" {
			t.Errorf("progress's pty after resize mismatch (-want +got):\n%s", diff)
		}
		tm.send("stty size\r")
		tm.expect("33 111\r\n")
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
	})
	t.Run("SIGWINCH", func(t *testing.T) {
		t.Parallel()
		py := sbPython(t)
		s := start(t, options{})
		s.initialize(nil)
		code := `import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])
print("ready", flush=True)
signal.sigwait([signal.SIGWINCH])
size = os.get_terminal_size(0)
print("winch", size.lines, size.columns, flush=True)`
		h := s.longRun(map[string]any{"argv": []string{py, "-c", code}, "pty": map[string]any{"rows": 10, "cols": 40}, "streamOutput": true})
		tm := s.newTerm(h.HandleID, protocol.StreamPty)
		tm.expect("ready\r\n")
		s.mustCall("resize", map[string]any{"handleId": h.HandleID, "rows": 50, "cols": 200}, nil)
		tm.expect("winch 50 200\r\n")
		if res := s.toolResultOf(h.HandleID); !res.Success {
			t.Errorf("toolResult: %+v", res)
		}
	})
}

// TestPtyCancelEndsChildrenThatIgnoreSIGHUP checks that cancel ends a
// tree under a PTY that ignores SIGHUP (which the terminal's hangup sends),
// and one that ignores SIGTERM too, with a background grandchild: once
// cancel answers, no process of it is left.
func TestPtyCancelEndsChildrenThatIgnoreSIGHUP(t *testing.T) {
	t.Parallel()
	for _, traps := range []string{"HUP", "HUP TERM"} {
		t.Run(traps, func(t *testing.T) {
			t.Parallel()
			s := start(t, options{})
			s.initialize(nil)
			mk := newMarker()
			h := s.longRun(map[string]any{
				"argv": []string{"sh", "-c", "trap '' " + traps + "; sleep " + mk.Sleep + " & echo ready; wait; sleep " + mk.Sleep},
				"pty":  true, "env": mk.env(), "streamOutput": true,
			})
			s.awaitStreamOnly(h.HandleID, protocol.StreamPty, "ready")
			found := awaitScan(t, mk, "the shell and its sleep", atLeast(2))
			var res protocol.ToolResult
			s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
			if res.Status != protocol.StatusCancelled {
				t.Errorf("cancel: %+v", res)
			}
			assertNoneLeft(t, mk, sessionPrefix(found), "after cancel")
		})
	}
}

// TestPtyFullScreenProgram drives `less` on a file of the workspace with
// keys: a search, G to the end, q to quit; the handle then completes with
// exit code 0.
func TestPtyFullScreenProgram(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("less"); err != nil {
		t.Skip("no less on this machine")
	}
	s := start(t, options{})
	s.initialize(nil)
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&b, "line %04d", i)
		if i == 500 {
			b.WriteString(" the needle")
		}
		b.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(s.root, "lines.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h := s.longRun(map[string]any{
		"argv": []string{"less", "lines.txt"},
		"pty":  map[string]any{"rows": 24, "cols": 80}, "streamOutput": true,
		"env": map[string]any{"TERM": "xterm-256color", "LESSHISTFILE": "-"},
	})
	tm := s.newTerm(h.HandleID, protocol.StreamPty)
	tm.expect("line 0001")
	tm.expect("line 0023")
	tm.send("/needle\r")
	tm.expect("line 0500")
	tm.send("G")
	tm.expect("line 1000")
	tm.send("q")
	res := s.toolResultOf(h.HandleID)
	if diff := cmp.Diff(ending{Status: "completed", Success: true, ExitCode: ptr(0)}, endingOf(res)); diff != "" {
		t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
	}
}

// TestPtyFirstOutputIsOnThePtyStream starts 100 commands under a PTY at
// once, each printing at its start, and checks that every output
// notification of each, the very first included, is on the "pty" stream
// and that each handle's output is whole: a command's first bytes can
// reach the server before it has finished starting the command.
func TestPtyFirstOutputIsOnThePtyStream(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--max-processes", "200"}})
	s.initialize(nil)
	var sent []*client.Pending
	for range 100 {
		sent = append(sent, s.request("longRunning", map[string]any{"argv": []string{"echo", "first"}, "pty": true, "streamOutput": true}))
	}
	for i, p := range sent {
		var h protocol.LongRunningResult
		if e := s.answer(p, &h); e != nil {
			t.Fatalf("longRunning %d: %v", i, e)
		}
		res := s.toolResultOf(h.HandleID)
		var got []byte
		for _, o := range progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)) {
			if o.Stream != protocol.StreamPty {
				t.Errorf("%s: output on stream %q under a PTY: %+v", h.HandleID, o.Stream, o)
			}
			b, err := decodeOutput(o)
			if err != nil {
				t.Fatalf("%s: %v", h.HandleID, err)
			}
			got = append(got, b...)
		}
		if string(got) != "first\r\n" || res.Stdout != "first\r\n" {
			t.Errorf("%s: streamed %q, toolResult stdout %q; want %q", h.HandleID, got, res.Stdout, "first\r\n")
		}
	}
}

// TestPtyRecipeSteps runs a recipe under a PTY whose middle step asks for
// none: the first and last steps have a terminal of the request's size
// (the last sees it with `stty size`), the middle one pipes, and each
// step's output streams as its own kind.
func TestPtyRecipeSteps(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	h := s.longRun(map[string]any{
		"pty": map[string]any{"rows": 7, "cols": 9}, "streamOutput": true,
		"steps": []map[string]any{
			{"name": "tty", "argv": []string{"sh", "-c", "test -t 0 && test -t 1 && test -t 2 && echo tty-yes"}},
			{"name": "pipes", "argv": []string{"sh", "-c", "test -t 1 || echo tty-no"}, "pty": false},
			{"name": "size", "argv": []string{"stty", "size"}},
		},
	})
	res := s.toolResultOf(h.HandleID)
	if !res.Success {
		t.Fatalf("toolResult: %+v", res)
	}
	type piece struct {
		Stream protocol.Stream
		Data   string
	}
	var got []piece
	for _, o := range progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)) {
		b, err := decodeOutput(o)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got); n > 0 && got[n-1].Stream == o.Stream {
			got[n-1].Data += string(b)
		} else {
			got = append(got, piece{o.Stream, string(b)})
		}
	}
	want := []piece{{protocol.StreamPty, "tty-yes\r\n"}, {protocol.StreamStdout, "tty-no\n"}, {protocol.StreamPty, "7 9\r\n"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed output mismatch (-want +got):\n%s", diff)
	}
}
