//go:build linux

package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// Tests of writeInput (issue 13), through the binary: bytes in order
// across requests large and small, the end of input, the errors, and a
// child that does not read.

// echoChunks are the sizes of the writeInput requests that carry the
// echo tests' 1 MiB: small ones, ones around 64 KiB, and large ones.
var echoChunks = []int{1, 3, 4096, 65535, 65536, 65537, 100000, 250000}

// echoInput returns 1 MiB of random bytes (every byte value) cut into
// echoChunks, the last chunk taking the rest.
func echoInput() (all []byte, chunks [][]byte) {
	all = make([]byte, 1<<20)
	r := rand.NewChaCha8([32]byte{13})
	r.Read(all)
	// readOutput keeps back a rune cut at the end of a running command's
	// output; the echo's last byte must not look like one's start.
	all[len(all)-1] = '.'
	rest := all
	for _, n := range echoChunks {
		chunks, rest = append(chunks, rest[:n]), rest[n:]
	}
	return all, append(chunks, rest)
}

// writeChunks sends one writeInput per chunk, base64-encoded, back to
// back without waiting for answers, then checks every answer.
func (s *server) writeChunks(handle string, chunks [][]byte) {
	s.t.Helper()
	var sent []*client.Pending
	for _, c := range chunks {
		sent = append(sent, s.request("writeInput", map[string]any{"handleId": handle, "data": base64.StdEncoding.EncodeToString(c), "encoding": "base64"}))
	}
	for i, p := range sent {
		var r protocol.WriteInputResult
		if e := s.answer(p, &r); e != nil {
			s.t.Fatalf("writeInput %d (%d bytes): %v (data %+v)", i, len(chunks[i]), e, errData(e))
		}
		if r.BytesWritten != int64(len(chunks[i])) {
			s.t.Fatalf("writeInput %d: bytesWritten %d, want %d", i, r.BytesWritten, len(chunks[i]))
		}
	}
}

// sha returns the hex sha256 of b.
func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestPtyCatEchoesOneMiBInOrder writes 1 MiB of random bytes in requests
// of 1 byte to 250 KB, sent back to back, to `cat`, and checks that what
// comes back is the same bytes in the same order: under a PTY in raw mode
// without echo (so the terminal neither echoes nor translates), read back
// with readOutput while cat runs; and through an open stdin, ended with
// eof, in the toolResult's artifact.
func TestPtyCatEchoesOneMiBInOrder(t *testing.T) {
	t.Parallel()
	all, chunks := echoInput()
	t.Run("pty", func(t *testing.T) {
		t.Parallel()
		s := start(t, options{})
		s.initialize(nil)
		h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "stty raw -echo && echo READY && exec cat"}, "pty": true, "streamOutput": true})
		// Bytes written before stty has run would meet a canonical,
		// echoing terminal.
		s.awaitStreamOnly(h.HandleID, protocol.StreamPty, "READY\n")
		s.writeChunks(h.HandleID, chunks)
		const head = "READY\n"
		var got []byte
		next := int64(0)
		wait := int64(30000)
		for len(got) < len(head)+len(all) {
			r := s.readOutput(map[string]any{"handleId": h.HandleID, "stream": "pty", "offset": next, "maxBytes": 1 << 20, "waitMs": wait})
			if r.NextOffset == next {
				t.Fatalf("cat echoed %d of %d bytes, then nothing for %d ms (running %v)", len(got)-len(head), len(all), wait, r.Running)
			}
			got = append(got, bytesOf(t, r)...)
			next = r.NextOffset
		}
		if !bytes.HasPrefix(got, []byte(head)) {
			t.Fatalf("the terminal's output starts %q, want %q", got[:min(len(got), 40)], head)
		}
		got = got[len(head):]
		if sha(got) != sha(all) {
			i := 0
			for i < min(len(got), len(all)) && got[i] == all[i] {
				i++
			}
			t.Fatalf("the echo of %d bytes differs from the input (%d bytes) from byte %d on", len(got), len(all), i)
		}
		var res protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
		if res.Artifacts.ByteCount != int64(len(head)+len(all)) {
			t.Errorf("outputPath holds %d bytes, want %d", res.Artifacts.ByteCount, len(head)+len(all))
		}
		// The streamed notifications carry the same bytes, in order; the
		// bytes they skipped come from the artifact.
		art := progReadFile(t, res.Artifacts.OutputPath)
		streamed, _ := progReassemble(t, progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)), protocol.StreamPty, art)
		if sha(streamed) != sha(art) {
			t.Errorf("the output notifications reassemble into %d bytes that differ from the artifact's %d", len(streamed), len(art))
		}
	})
	t.Run("openStdin", func(t *testing.T) {
		t.Parallel()
		s := start(t, options{})
		s.initialize(nil)
		h := s.longRun(map[string]any{"argv": []string{"cat"}, "openStdin": true})
		s.writeChunks(h.HandleID, chunks)
		var r protocol.WriteInputResult
		s.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "eof": true}, &r)
		if r.BytesWritten != 0 {
			t.Errorf("writeInput of eof alone: bytesWritten %d", r.BytesWritten)
		}
		res := s.toolResultOf(h.HandleID)
		if !res.Success || res.Artifacts.ByteCount != int64(len(all)) || res.Artifacts.Sha256 != sha(all) {
			t.Fatalf("cat of 1 MiB through an open stdin: success %v, %d bytes, sha256 %s; want %d bytes, sha256 %s",
				res.Success, res.Artifacts.ByteCount, res.Artifacts.Sha256, len(all), sha(all))
		}
	})
}

// TestPtyOpenStdinWcCountsWhatWasWritten writes to `wc -c` through an open
// stdin without a PTY, in pieces, text and base64, and ends the input with
// eof: wc counts every byte. Input closed, writeInput answers NotRunning
// with status "running" while the command goes on, and "cancelled" once
// it is cancelled; progress's inputOpen follows.
func TestPtyOpenStdinWcCountsWhatWasWritten(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "wc -c; exec sleep " + mk.Sleep}, "openStdin": true, "streamOutput": true})
	if pr := s.progressOf(h.HandleID); !pr.InputOpen || pr.Pty != nil {
		t.Errorf("progress with an open stdin: inputOpen %v, pty %+v", pr.InputOpen, pr.Pty)
	}
	s.writeInput(h.HandleID, "hello\n")
	s.writeInput(h.HandleID, strings.Repeat("é", 40000)) // 80000 bytes
	bin := make([]byte, 2560)
	for i := range bin {
		bin[i] = byte(i)
	}
	var r protocol.WriteInputResult
	s.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": base64.StdEncoding.EncodeToString(bin), "encoding": "base64", "eof": true}, &r)
	if r.BytesWritten != int64(len(bin)) {
		t.Errorf("writeInput with eof: bytesWritten %d, want %d", r.BytesWritten, len(bin))
	}
	tm := s.newTerm(h.HandleID, protocol.StreamStdout)
	if got := tm.expect("\n"); strings.TrimSpace(got) != "82566" {
		t.Errorf("wc -c printed %q, want 82566", got)
	}
	if pr := s.progressOf(h.HandleID); pr.InputOpen || pr.Status != protocol.StatusRunning {
		t.Errorf("progress after eof: inputOpen %v, status %q", pr.InputOpen, pr.Status)
	}
	e := s.call("writeInput", map[string]any{"handleId": h.HandleID, "data": "more"}, nil)
	if e == nil || e.Code != protocol.CodeNotRunning || errData(e).Status != protocol.StatusRunning || errData(e).HandleID != h.HandleID {
		t.Errorf("writeInput after eof: %v (data %+v), want -32011 with status running", e, errData(e))
	}
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
	e = s.call("writeInput", map[string]any{"handleId": h.HandleID, "data": "more"}, nil)
	if e == nil || e.Code != protocol.CodeNotRunning || errData(e).Status != protocol.StatusCancelled {
		t.Errorf("writeInput after cancel: %v (data %+v), want -32011 with status cancelled", e, errData(e))
	}
}

// TestPtyEOFEndsCatInATerminal checks that eof under a PTY sends the
// terminal's EOF character: a `cat` reading a line at its start ends, and
// the handle completes; writeInput then answers NotRunning with status
// "completed".
func TestPtyEOFEndsCatInATerminal(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"cat"}, "pty": true, "streamOutput": true})
	tm := s.newTerm(h.HandleID, protocol.StreamPty)
	tm.send("abc\r")
	if got := tm.expect("abc\r\nabc\r\n"); got != "abc\r\nabc\r\n" {
		t.Errorf("the terminal showed %q, want the echo then cat's line", got)
	}
	s.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "eof": true}, nil)
	res := s.toolResultOf(h.HandleID)
	if diff := cmp.Diff(ending{Status: "completed", Success: true, ExitCode: ptr(0)}, endingOf(res)); diff != "" {
		t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
	}
	e := s.call("writeInput", map[string]any{"handleId": h.HandleID, "data": "x"}, nil)
	if e == nil || e.Code != protocol.CodeNotRunning || errData(e).Status != protocol.StatusCompleted || errData(e).HandleID != h.HandleID {
		t.Errorf("writeInput after the end: %v (data %+v), want -32011 with status completed", e, errData(e))
	}
}

// TestPtyInputErrors checks the errors of writeInput, resize and signal,
// and of longRunning's pty and openStdin.
func TestPtyInputErrors(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	mk := newMarker()
	plain := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}})
	tty := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "pty": true})
	ended := s.longRun(map[string]any{"argv": []string{"true"}, "pty": true})
	if res := s.toolResultOf(ended.HandleID); !res.Success {
		t.Fatalf("true under a PTY: %+v", res)
	}
	type errCase struct {
		name   string
		method string
		params map[string]any
		code   int
		status protocol.Status
	}
	cases := []errCase{
		{"writeInput to an unknown handle", "writeInput", map[string]any{"handleId": "h-none", "data": "x"}, protocol.CodeHandleNotFound, ""},
		{"resize of an unknown handle", "resize", map[string]any{"handleId": "h-none", "rows": 10, "cols": 10}, protocol.CodeHandleNotFound, ""},
		{"signal to an unknown handle", "signal", map[string]any{"handleId": "h-none", "signal": "SIGINT"}, protocol.CodeHandleNotFound, ""},
		{"writeInput without handleId", "writeInput", map[string]any{"data": "x"}, protocol.CodeInvalidParams, ""},
		{"writeInput to a handle without pty or openStdin", "writeInput", map[string]any{"handleId": plain.HandleID, "data": "x"}, protocol.CodeInvalidParams, ""},
		{"resize of a handle without pty", "resize", map[string]any{"handleId": plain.HandleID, "rows": 10, "cols": 10}, protocol.CodeInvalidParams, ""},
		{"an unknown signal", "signal", map[string]any{"handleId": plain.HandleID, "signal": "SIGBOGUS"}, protocol.CodeInvalidParams, ""},
		{"a signal by number", "signal", map[string]any{"handleId": plain.HandleID, "signal": "9"}, protocol.CodeInvalidParams, ""},
		{"no signal", "signal", map[string]any{"handleId": plain.HandleID}, protocol.CodeInvalidParams, ""},
		{"an unknown encoding", "writeInput", map[string]any{"handleId": tty.HandleID, "data": "x", "encoding": "latin1"}, protocol.CodeInvalidParams, ""},
		{"base64 that does not decode", "writeInput", map[string]any{"handleId": tty.HandleID, "data": "!!!", "encoding": "base64"}, protocol.CodeInvalidParams, ""},
		{"resize to 0 rows", "resize", map[string]any{"handleId": tty.HandleID, "rows": 0, "cols": 10}, protocol.CodeInvalidParams, ""},
		{"resize to 10001 cols", "resize", map[string]any{"handleId": tty.HandleID, "rows": 10, "cols": 10001}, protocol.CodeInvalidParams, ""},
		{"writeInput after the end", "writeInput", map[string]any{"handleId": ended.HandleID, "data": "x"}, protocol.CodeNotRunning, protocol.StatusCompleted},
		{"resize after the end", "resize", map[string]any{"handleId": ended.HandleID, "rows": 10, "cols": 10}, protocol.CodeNotRunning, protocol.StatusCompleted},
		{"signal after the end", "signal", map[string]any{"handleId": ended.HandleID, "signal": "SIGINT"}, protocol.CodeNotRunning, protocol.StatusCompleted},
		{"longRunning with pty and stdin", "longRunning", map[string]any{"argv": []string{"true"}, "pty": true, "stdin": "x"}, protocol.CodeInvalidParams, ""},
		{"longRunning with openStdin and stdin", "longRunning", map[string]any{"argv": []string{"true"}, "openStdin": true, "stdin": "x"}, protocol.CodeInvalidParams, ""},
		{"longRunning with 0 pty rows", "longRunning", map[string]any{"argv": []string{"true"}, "pty": map[string]any{"rows": 0, "cols": 80}}, protocol.CodeInvalidParams, ""},
		{"longRunning with 10001 pty cols", "longRunning", map[string]any{"argv": []string{"true"}, "pty": map[string]any{"rows": 24, "cols": 10001}}, protocol.CodeInvalidParams, ""},
		{"longRunning with a pty of rows alone", "longRunning", map[string]any{"argv": []string{"true"}, "pty": map[string]any{"rows": 24}}, protocol.CodeInvalidParams, ""},
	}
	for _, c := range cases {
		e := s.call(c.method, c.params, nil)
		if e == nil {
			t.Errorf("%s: answered a result, want error %d", c.name, c.code)
			continue
		}
		if e.Code != c.code || errData(e).Status != c.status {
			t.Errorf("%s: error %d %q (data %+v), want %d with status %q", c.name, e.Code, e.Message, errData(e), c.code, c.status)
		}
	}
	// A signal name without "SIG" is accepted and goes to the command's
	// group: SIGWINCH leaves sleep alone.
	var r protocol.SignalResult
	s.mustCall("signal", map[string]any{"handleId": plain.HandleID, "signal": "WINCH"}, &r)
	if r.ProcessGroupID != plain.ProcessGroupID {
		t.Errorf("signal WINCH went to group %d, want %d", r.ProcessGroupID, plain.ProcessGroupID)
	}
	// Under a PTY with no job control inside, the foreground group is the
	// command's own.
	s.mustCall("signal", map[string]any{"handleId": tty.HandleID, "signal": "SIGWINCH"}, &r)
	if r.ProcessGroupID != tty.ProcessGroupID {
		t.Errorf("signal SIGWINCH under a PTY went to group %d, want the command's %d", r.ProcessGroupID, tty.ProcessGroupID)
	}
	for _, h := range []protocol.LongRunningResult{plain, tty} {
		if pr := s.progressOf(h.HandleID); pr.Status != protocol.StatusRunning {
			t.Errorf("%s after the failed requests: %+v", h.HandleID, pr)
		}
	}
	if pr := s.progressOf(plain.HandleID); pr.InputOpen || pr.Pty != nil {
		t.Errorf("progress of a handle without input: inputOpen %v, pty %+v", pr.InputOpen, pr.Pty)
	}
	s.shutdown()
}
