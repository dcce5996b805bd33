//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// Helpers of the interactive-command tests (issue 13): a terminal that
// follows one handle's output notifications and types into it with
// writeInput, and waits on processes seen through /proc.

// term follows the streamed output of one handle, as an `expect` script
// does: expect waits for a string in the output not yet consumed, send
// types through writeInput. It reads the messages the harness records, in
// wire order; the test goroutine that made it is its only user.
type term struct {
	s      *server
	handle string
	stream protocol.Stream
	next   int    // index in s.msgs of the next message to look at
	seq    int64  // seq of the last output notification taken
	out    []byte // output taken but not yet consumed by expect
	all    []byte // every byte taken, for failure messages
}

// newTerm follows handle's output notifications of stream.
func (s *server) newTerm(handle string, stream protocol.Stream) *term {
	return &term{s: s, handle: handle, stream: stream}
}

// expect waits until the output not yet consumed contains text, consumes
// it up to the end of text and returns what it consumed. It fails the test
// if the handle's toolResult comes first, or if an output notification of
// the handle is on another stream or out of seq.
func (tm *term) expect(text string) string {
	tm.s.t.Helper()
	if i := bytes.Index(tm.out, []byte(text)); i >= 0 {
		return tm.consume(i + len(text))
	}
	ended := false
	var bad string
	_, at := tm.s.waitFor(tm.next, fmt.Sprintf("%q in the output of %s", text, tm.handle), func(m msg) bool {
		switch m.Method {
		case protocol.NotifyToolResult:
			ended = idsOf(m.Params).HandleID == tm.handle
			return ended
		case protocol.NotifyOutput:
		default:
			return false
		}
		var o protocol.OutputParams
		if err := json.Unmarshal(m.Params, &o); err != nil || o.HandleID != tm.handle {
			return false
		}
		if o.Stream != tm.stream {
			bad = fmt.Sprintf("output on stream %q, want only %q: %s", o.Stream, tm.stream, m.Params)
			return true
		}
		if o.Seq != tm.seq+1 {
			bad = fmt.Sprintf("output seq %d after %d", o.Seq, tm.seq)
			return true
		}
		tm.seq = o.Seq
		b, err := decodeOutput(o)
		if err != nil {
			bad = err.Error()
			return true
		}
		tm.out = append(tm.out, b...)
		tm.all = append(tm.all, b...)
		return bytes.Contains(tm.out, []byte(text))
	})
	tm.next = at + 1
	if bad != "" {
		tm.s.t.Fatalf("%s: %s", tm.handle, bad)
	}
	if ended {
		tm.s.t.Fatalf("%s ended before printing %q; its output: %q", tm.handle, text, tm.all)
	}
	return tm.consume(bytes.Index(tm.out, []byte(text)) + len(text))
}

// consume takes n bytes off the unconsumed output.
func (tm *term) consume(n int) string {
	got := string(tm.out[:n])
	tm.out = tm.out[n:]
	return got
}

// send types data into the handle with writeInput and checks that every
// byte was taken.
func (tm *term) send(data string) {
	tm.s.t.Helper()
	tm.s.writeInput(tm.handle, data)
}

// writeInput writes data (as UTF-8 text) to a handle's input and checks
// that every byte was taken.
func (s *server) writeInput(handle, data string) {
	s.t.Helper()
	var r protocol.WriteInputResult
	s.mustCall("writeInput", map[string]any{"handleId": handle, "data": data}, &r)
	if r.BytesWritten != int64(len(data)) {
		s.t.Fatalf("writeInput of %d bytes answered bytesWritten %d", len(data), r.BytesWritten)
	}
}

// progressOf answers progress for one handle.
func (s *server) progressOf(handle string) protocol.Progress {
	s.t.Helper()
	var p protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": handle}, &p)
	return p
}

// ptyProcStat is what a test reads of a process in /proc/<pid>/stat.
type ptyProcStat struct {
	State byte // R, S, D, T, t, Z, …
	PPID  int
	PGID  int
	SID   int
}

// readStat reads /proc/<pid>/stat; ok is false once the process is gone
// (a zombie still reads, with state Z).
func readStat(pid int) (ptyProcStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ptyProcStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ptyProcStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return ptyProcStat{}, false
	}
	st := ptyProcStat{State: f[0][0]}
	st.PPID, _ = strconv.Atoi(f[1])
	st.PGID, _ = strconv.Atoi(f[2])
	st.SID, _ = strconv.Atoi(f[3])
	return st, true
}

// groupMembers returns the live (not zombie) processes of process group
// pgid with their states.
func groupMembers(pgid int) map[int]byte {
	ents, _ := os.ReadDir("/proc")
	out := map[int]byte{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.PGID == pgid && st.State != 'Z' {
			out[pid] = st.State
		}
	}
	return out
}

// awaitProcOf waits until a process whose argv holds mk.Sleep runs (has
// exec'd) and returns it.
func awaitProcOf(t testing.TB, mk marker) procOf {
	t.Helper()
	only := marker{Sleep: mk.Sleep} // by argv alone: the shell that starts it shares the environment
	var found []procOf
	pollUntil(t, func() string { return "no process runs " + mk.Sleep }, func() bool {
		found = scanProcs(only, "")
		return len(found) > 0
	})
	return found[0]
}

// ptyShell starts an interactive `sh -i` under a PTY of size rows×cols,
// streaming its output, and waits for its first prompt. It returns the
// handle and a term following it.
func (s *server) ptyShell(rows, cols int) (protocol.LongRunningResult, *term) {
	s.t.Helper()
	h := s.longRun(map[string]any{"argv": []string{"sh", "-i"}, "pty": map[string]any{"rows": rows, "cols": cols}, "streamOutput": true, "env": map[string]any{"PS1": ptyPrompt}})
	tm := s.newTerm(h.HandleID, protocol.StreamPty)
	tm.expect(ptyPrompt)
	return h, tm
}

// ptyPrompt is the prompt of the tests' interactive shells: text that no
// typed command echoes.
const ptyPrompt = "pty-prompt$ "
