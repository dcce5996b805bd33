package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestDestinationLoad300Commands starts 100 longRunning commands on each
// of three destinations (two over ssh, one local) at once: each answer
// names a handle of its destination, every handle ends in exactly one
// toolResult with its own output, and the session's end adds none.
func TestDestinationLoad300Commands(t *testing.T) {
	t.Parallel()
	const perDest = 100
	dests := threeDests(t)
	s := startHub(t, dests)
	s.initialize(nil)

	type sent struct {
		dest string
		i    int
		p    *client.Pending
	}
	var all []sent
	for i := range perDest {
		for _, d := range dests {
			p := s.request("longRunning", map[string]any{"destination": d.Name, "argv": []string{"echo", d.Name, itoa(i)}})
			all = append(all, sent{d.Name, i, p})
		}
	}
	handles := make([]string, 0, len(all))
	want := map[string]string{} // handle → its stdout
	for _, r := range all {
		var h protocol.LongRunningResult
		if e := s.answer(r.p, &h); e != nil {
			t.Fatalf("longRunning #%d on %s: %v", r.i, r.dest, e)
		}
		if !strings.HasPrefix(h.HandleID, r.dest+"/h-") {
			t.Errorf("longRunning on %s answered handle %q", r.dest, h.HandleID)
		}
		if _, dup := want[h.HandleID]; dup {
			t.Errorf("handle %s answered twice", h.HandleID)
		}
		want[h.HandleID] = r.dest + " " + itoa(r.i) + "\n"
		handles = append(handles, h.HandleID)
	}
	seen := collectToolResults(s, len(handles))
	checkOnce(t, handles, seen)
	for _, raw := range s.notifications("toolResult") {
		var res protocol.ToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		if w, ok := want[res.HandleID]; !ok || res.Stdout != w || res.Status != protocol.StatusCompleted {
			t.Errorf("toolResult of %s: %s %q, want completed %q", res.HandleID, res.Status, res.Stdout, w)
		}
	}
	s.shutdown()
	checkOnce(t, handles, collectToolResults(s, len(handles)))
}
