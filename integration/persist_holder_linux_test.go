package integration

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// TestPersistOneHolderWhenFrontsStartTogether: four toolhost --persist
// started at once for one root, none finding a holder, start one holder
// between them (the lock), and each serves its own session through it.
func TestPersistOneHolderWhenFrontsStartTogether(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	const n = 4
	servers := make([]*server, n)
	for i := range servers {
		servers[i] = start(t, p.options())
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() { // owned by the test, which waits for it
			defer wg.Done()
			ids[i] = s.initialize(nil).SessionID
		}()
	}
	wg.Wait()
	if pids := p.holderPIDs(); len(pids) != 1 {
		t.Errorf("%d holders run (%v), want 1", len(pids), pids)
	}
	var l protocol.SessionList
	servers[0].mustCall("sessions", map[string]any{}, &l)
	got := map[string]bool{}
	for _, si := range l {
		got[si.SessionID] = true
	}
	for _, id := range ids {
		if id == "" || !got[id] {
			t.Errorf("session %q is not among the holder's: %+v", id, l)
		}
	}
	for _, s := range servers {
		s.shutdown()
	}
}

// TestPersistRefusesAnOpenStateDir: a state directory others may enter
// is refused at start, with exit code 2 and the reason, and nothing is
// served.
func TestPersistRefusesAnOpenStateDir(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	if err := os.Chmod(p.state, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--persist", "--state-dir", p.state, "--root", p.root)
	cmd.Env = p.env()
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "must be 0700") || strings.Contains(string(out), `"result"`) {
		t.Errorf("an open state directory: %v, output %q; want exit 2 saying it must be 0700, and no answer", err, out)
	}
}
