//go:build linux

package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestPortOpenedLateAndClosedWhileRunning: a command that runs quietly
// for several scans (the server then looks only at whether any socket of
// its namespace started or stopped listening) and only then listens gets
// its portOpened; when it stops listening and goes on running, it gets its
// portClosed, before any toolResult.
func TestPortOpenedLateAndClosedWhileRunning(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	script := `import socket, sys, time
print("quiet", flush=True)
time.sleep(1.5)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
s.listen()
print("listening on", s.getsockname()[1], flush=True)
sys.stdin.readline()
s.close()
print("closed", flush=True)
sys.stdin.read()
`
	h := s.longRun(map[string]any{"argv": []string{"python3", "-c", script}, "streamOutput": true, "openStdin": true})
	port := s.awaitPrintedPort(h.HandleID)
	var opened protocol.PortOpenedParams
	s.notification("portOpened", 1, forHandle(h.HandleID), &opened)
	if diff := cmp.Diff(protocol.PortOpenedParams{HandleID: h.HandleID, Port: port, Address: "127.0.0.1", PID: h.PID}, opened); diff != "" {
		t.Errorf("portOpened mismatch (-want +got):\n%s", diff)
	}
	s.writeInput(h.HandleID, "\n")
	s.awaitOutput(h.HandleID, "closed")
	var closed protocol.PortClosedParams
	s.notification("portClosed", 1, forHandle(h.HandleID), &closed)
	if diff := cmp.Diff(protocol.PortClosedParams{HandleID: h.HandleID, Port: port, Address: "127.0.0.1"}, closed); diff != "" {
		t.Errorf("portClosed mismatch (-want +got):\n%s", diff)
	}
	var snap protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &snap)
	if snap.Status != protocol.StatusRunning || len(snap.Ports) != 0 {
		t.Errorf("after the close, progress says status %q, ports %+v; want running, none", snap.Status, snap.Ports)
	}
	if n := len(progDecodeAll[protocol.ToolResult](s, "toolResult", forHandle(h.HandleID))); n != 0 {
		t.Errorf("a toolResult before the command ended")
	}
	var res protocol.ToolResult
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
}
