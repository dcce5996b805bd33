package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/google/go-cmp/cmp/cmpopts"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// ignoreSeq compares ToolResults without seq, which only the toolResult
// notification carries.
var ignoreSeq = cmpopts.IgnoreFields(protocol.ToolResult{}, "Seq")

// errData returns an error answer's data (the zero value if it has none).
func errData(e *protocol.Error) protocol.ErrorData {
	if e == nil || e.Data == nil {
		return protocol.ErrorData{}
	}
	return *e.Data
}

// run calls runCommand and fails the test on an error response.
func (s *server) run(params map[string]any) protocol.ToolResult {
	s.t.Helper()
	var res protocol.ToolResult
	s.mustCall("runCommand", params, &res)
	return res
}

// longRun calls longRunning and fails the test on an error response or an
// answer without a handle.
func (s *server) longRun(params map[string]any) protocol.LongRunningResult {
	s.t.Helper()
	var h protocol.LongRunningResult
	s.mustCall("longRunning", params, &h)
	if h.HandleID == "" {
		s.t.Fatalf("longRunning answered no handleId")
	}
	return h
}

// toolResultOf waits for the toolResult of handle and decodes it.
func (s *server) toolResultOf(handle string) protocol.ToolResult {
	s.t.Helper()
	var res protocol.ToolResult
	s.notification("toolResult", 1, forHandle(handle), &res)
	return res
}

// awaitOutput waits until the handle's streamed stdout has contained text.
func (s *server) awaitOutput(handle, text string) {
	s.t.Helper()
	var seen strings.Builder
	s.waitFor(0, fmt.Sprintf("output %q of %s", text, handle), func(m msg) bool {
		var o protocol.OutputParams
		if m.Method != "output" || json.Unmarshal(m.Params, &o) != nil || o.HandleID != handle || o.Stream != protocol.StreamStdout {
			return false
		}
		seen.WriteString(o.Data)
		return strings.Contains(seen.String(), text)
	})
}

// ids are the ids a notification's params name.
type ids struct {
	HandleID  string `json:"handleId"`
	CommandID string `json:"commandId"`
}

// idsOf returns the ids a notification's params name.
func idsOf(p json.RawMessage) ids {
	var v ids
	_ = json.Unmarshal(p, &v)
	return v
}

// forHandle matches notification params that name handleID.
func forHandle(handleID string) func(json.RawMessage) bool {
	return func(p json.RawMessage) bool { return idsOf(p).HandleID == handleID }
}

// forCommand matches notification params that name commandID.
func forCommand(commandID string) func(json.RawMessage) bool {
	return func(p json.RawMessage) bool { return idsOf(p).CommandID == commandID }
}

// ptr returns a pointer to v, for expected exit codes and signals.
func ptr[T any](v T) *T { return &v }

// tokenSeq makes tokens unique within the test binary; the random part
// makes them unique across concurrent test binaries.
var (
	tokenSeq  atomic.Int64
	tokenSalt = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
)

// marker is a unique tag for the processes of one test: a sleep duration
// that no other process uses (so it shows in argv) and the value of the
// ORPHAN_TOKEN variable its requests set (so it shows in the environment of
// every descendant that keeps its environment).
type marker struct {
	// Sleep is a duration in seconds for sleep(1), unique to the marker:
	// 300.<digits>.
	Sleep string
	// Token is the ORPHAN_TOKEN value.
	Token string
}

// newMarker returns a fresh marker.
func newMarker() marker {
	n := tokenSeq.Add(1)
	salt, _ := strconv.ParseUint(tokenSalt, 16, 64)
	return marker{
		Sleep: fmt.Sprintf("300.%d%06d", salt%100000, n),
		Token: fmt.Sprintf("orphan-%s-%d", tokenSalt, n),
	}
}

// env returns the request env that tags a command's processes.
func (mk marker) env() map[string]any { return map[string]any{"ORPHAN_TOKEN": mk.Token} }

// procOf is a live process found by a scan.
type procOf struct {
	PID     int
	Cmdline string
	Marker  string // its TOOLHOST_COMMAND
}

func (p procOf) String() string {
	return fmt.Sprintf("pid %d %q (TOOLHOST_COMMAND=%q)", p.PID, p.Cmdline, p.Marker)
}

// scanProcs lists the live processes (zombies excluded) whose argv holds
// mk.Sleep, whose environment holds ORPHAN_TOKEN=mk.Token, or whose
// TOOLHOST_COMMAND starts with sessionPrefix (when not empty).
func scanProcs(mk marker, sessionPrefix string) []procOf {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	tokenKV := []byte("ORPHAN_TOKEN=" + mk.Token)
	var out []procOf
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + e.Name()
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		environ, _ := os.ReadFile(dir + "/environ")
		var tcmd string
		hit := false
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, tokenKV) {
				hit = true
			}
			if v, ok := bytes.CutPrefix(kv, []byte("TOOLHOST_COMMAND=")); ok {
				tcmd = string(v)
				if sessionPrefix != "" && strings.HasPrefix(tcmd, sessionPrefix) {
					hit = true
				}
			}
		}
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == mk.Sleep || bytes.Contains(a, []byte(mk.Sleep)) {
				hit = true
			}
		}
		if hit {
			out = append(out, procOf{PID: pid, Cmdline: strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "), Marker: tcmd})
		}
	}
	return out
}

// sessionPrefix returns "<nonce>/" of the TOOLHOST_COMMAND markers of the
// processes found, or "".
func sessionPrefix(ps []procOf) string {
	for _, p := range ps {
		if nonce, _, ok := strings.Cut(p.Marker, "/"); ok {
			return nonce + "/"
		}
	}
	return ""
}

// awaitGone waits until no process of mk (or of the session prefix) is
// left, polling /proc, and fails the test with what is left after limit.
func awaitGone(t testing.TB, mk marker, prefix string, limit time.Duration) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		left := scanProcs(mk, prefix)
		if len(left) == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Errorf("%d processes of the session still run after %v:", len(left), limit)
			for _, p := range left {
				t.Errorf("  %v", p)
				killStray(p.PID)
			}
			return
		}
	}
}

// assertNoneLeft fails the test if any process of mk (or of the session
// prefix) runs now: for points where the server promises they are gone.
func assertNoneLeft(t testing.TB, mk marker, prefix, when string) {
	t.Helper()
	left := scanProcs(mk, prefix)
	if len(left) == 0 {
		return
	}
	t.Errorf("%s: %d processes of the session still run:", when, len(left))
	for _, p := range left {
		t.Errorf("  %v", p)
	}
	// A failure must not leave processes behind for the next tests.
	for _, p := range left {
		killStray(p.PID)
	}
}

// killStray SIGKILLs a process a failed test left behind.
func killStray(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
