package integration

import (
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// TestPersistFrontWithoutARootServesAsStdio: under --persist, a first
// message that names no root (here a request before initialize) is
// served by the front alone, the way a session on stdio is: a SIGTERM
// ends the session, so its running command is cancelled and its
// toolResult delivered before the process exits 1, and no holder starts.
func TestPersistFrontWithoutARootServesAsStdio(t *testing.T) {
	p := newPersistEnv(t)
	o := p.options("--kill-grace", "200ms")
	o.noRoot = true
	s := start(t, o)
	if err := s.call("sessions", map[string]any{}, nil); err == nil {
		t.Fatal("sessions before initialize succeeded")
	}
	root := "file://" + p.root
	s.initialize(&protocol.InitializeParams{RootURI: &root})
	var h protocol.LongRunningResult
	s.mustCall("longRunning", map[string]any{"argv": []string{"sleep", "300"}}, &h)
	s.cmd.Process.Signal(syscall.SIGTERM)
	var tr protocol.ToolResult
	s.notification("toolResult", 1, nil, &tr)
	if tr.Status != "cancelled" {
		t.Errorf("toolResult status %q, want cancelled", tr.Status)
	}
	if code := s.wait(); code != 1 {
		t.Errorf("exit code %d after SIGTERM, want 1", code)
	}
	if pids := p.holderPIDs(); len(pids) != 0 {
		t.Errorf("holders %v started for a session served alone", pids)
	}
}
