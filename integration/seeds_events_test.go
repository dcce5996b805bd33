package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestEventsMixedLines reads a jsonl stdout of JSON objects, other JSON,
// text, blank lines and a last line without a newline: objects become
// events in order, the rest stays plain output, the result counts both,
// and the artifact keeps every byte.
func TestEventsMixedLines(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	script := `printf '{"type":"start","n":1}\nplain text\n\n[1,2]\n  {"type":"tool","args":{"x":[1,2]}}  \r\n{broken\n"str"\n{"type":"end"}'`
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}, "stdoutFormat": "jsonl", "streamOutput": true})
	res := s.toolResultOf(h.HandleID)
	events := progDecodeAll[protocol.EventParams](s, "event", forHandle(h.HandleID))
	var got []string
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
		got = append(got, string(e.Event))
	}
	want := []string{`{"type":"start","n":1}`, `{"type":"tool","args":{"x":[1,2]}}`, `{"type":"end"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&protocol.EventCounts{Count: 3, InvalidLines: 4}, res.Events); diff != "" {
		t.Errorf("result events mismatch (-want +got):\n%s", diff)
	}
	var plain strings.Builder
	for _, o := range progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)) {
		plain.WriteString(o.Data)
	}
	if diff := cmp.Diff("plain text\n[1,2]\n{broken\n\"str\"\n", plain.String()); diff != "" {
		t.Errorf("plain output mismatch (-want +got):\n%s", diff)
	}
	artifact := progReadFile(t, res.Artifacts.StdoutPath)
	wantBytes := "{\"type\":\"start\",\"n\":1}\nplain text\n\n[1,2]\n  {\"type\":\"tool\",\"args\":{\"x\":[1,2]}}  \r\n{broken\n\"str\"\n{\"type\":\"end\"}"
	if string(artifact) != wantBytes {
		t.Errorf("stdout.log = %q, want every byte: %q", artifact, wantBytes)
	}
}

// TestEventsSlowClientSlowsTheChild stops reading while a child prints
// 100,000 JSON lines: the child ends up blocked writing to its stdout (the
// server stopped reading it) with the server's memory bounded, and once the
// client reads again every event arrives, in order.
func TestEventsSlowClientSlowsTheChild(t *testing.T) {
	t.Parallel()
	s := start(t, options{plain: true})
	s.initialize(nil)
	const n = 100000
	pad := strings.Repeat("x", 300)
	script := fmt.Sprintf(`import sys
sys.stdin.readline()
w = sys.stdout.write
for i in range(%d):
    w('{"i":%%d,"pad":"%s"}\n' %% i)
`, n, pad)
	base := s.memory("VmRSS")
	h := s.longRun(map[string]any{"argv": []string{"python3", "-c", script}, "stdoutFormat": "jsonl", "openStdin": true})
	s.pause()
	// The go-ahead; its answer is read once the client reads again.
	goAhead := s.request("writeInput", map[string]any{"handleId": h.HandleID, "data": "go\n"})
	// The child is blocked writing to a full pipe: the kernel says so.
	waitChildBlocked(t, h.PID)
	grown := s.memory("VmRSS") - base
	s.resume()
	if e := s.answer(goAhead, nil); e != nil {
		t.Fatalf("writeInput: %v", e)
	}
	res := s.toolResultOf(h.HandleID)
	if !res.Success || res.Events == nil || res.Events.Count != n {
		t.Fatalf("result %s, events %+v, want %d events", res.Status, res.Events, n)
	}
	events := progDecodeAll[protocol.EventParams](s, "event", forHandle(h.HandleID))
	if len(events) != n {
		t.Fatalf("%d events arrived, want %d", len(events), n)
	}
	for i, e := range events {
		var v struct{ I int }
		if e.Seq != int64(i+1) || json.Unmarshal(e.Event, &v) != nil || v.I != i {
			t.Fatalf("event %d: seq %d, %s", i, e.Seq, e.Event)
		}
	}
	// The data is 31 MB: a server that buffered it would have grown by that.
	if grown > 24<<20 {
		t.Errorf("the server's RSS grew by %d MiB while the client did not read, want it bounded", grown>>20)
	}
	t.Logf("RSS grew by %.1f MiB while paused with the child blocked; %d events after resuming", float64(grown)/(1<<20), len(events))
}

// waitChildBlocked waits until pid sleeps in a pipe write (its wchan), the
// kernel's word that nobody reads what it writes.
func waitChildBlocked(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		if err != nil {
			t.Fatalf("the child %d: %v", pid, err)
		}
		if strings.Contains(string(b), "pipe_write") || strings.Contains(string(b), "pipe_wait") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child %d never blocked writing (wchan %q)", pid, b)
		}
		// The kernel does not notify a state change: look again soon.
		<-time.After(time.Millisecond)
	}
}

// TestEventsOversizeLineIsReportedNotSent prints a JSON line longer than a
// message may be: it is counted and reported, not sent, and the lines
// around it still are.
func TestEventsOversizeLineIsReportedNotSent(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--max-message-bytes", "65536"}})
	s.initialize(nil)
	script := `import sys
sys.stdout.write('{"n":1}\n')
sys.stdout.write('{"big":"' + 'x' * 200000 + '"}\n')
sys.stdout.write('{"n":2}\n')
`
	h := s.longRun(map[string]any{"argv": []string{"python3", "-c", script}, "stdoutFormat": "jsonl"})
	res := s.toolResultOf(h.HandleID)
	if diff := cmp.Diff(&protocol.EventCounts{Count: 2, OversizeLines: 1}, res.Events); diff != "" {
		t.Errorf("result events mismatch (-want +got):\n%s", diff)
	}
	var got []string
	for _, e := range progDecodeAll[protocol.EventParams](s, "event", forHandle(h.HandleID)) {
		got = append(got, string(e.Event))
	}
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":2}`}, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	var warned bool
	for _, raw := range s.notifications("window/logMessage") {
		var m protocol.LogMessageParams
		if json.Unmarshal(raw, &m) == nil && strings.Contains(m.Message, "longer than a message") {
			warned = true
		}
	}
	if !warned {
		t.Error("no window/logMessage reported the oversize line")
	}
	if size := len(progReadFile(t, res.Artifacts.StdoutPath)); size < 200000 {
		t.Errorf("stdout.log holds %d bytes: the oversize line is missing from it", size)
	}
}
