package integration

import (
	"testing"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// collectToolResults waits for n toolResult notifications and returns how
// many arrived per handle (after the wait, so duplicates show).
func collectToolResults(s *server, n int) map[string]int {
	s.t.Helper()
	s.notification("toolResult", n, nil, nil)
	seen := map[string]int{}
	for _, p := range s.notifications("toolResult") {
		seen[idsOf(p).HandleID]++
	}
	return seen
}

// checkOnce fails the test unless every handle has exactly one toolResult.
func checkOnce(t *testing.T, handles []string, seen map[string]int) {
	t.Helper()
	bad := 0
	for _, h := range handles {
		if seen[h] != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("handle %s: %d toolResults, want 1", h, seen[h])
			}
		}
	}
	if len(seen) != len(handles) {
		t.Errorf("toolResults for %d handles, want %d", len(seen), len(handles))
	}
	if bad > 5 {
		t.Errorf("... %d handles in all without exactly one toolResult", bad)
	}
}

// TestLoad500Handles starts 500 concurrent longRunning handles and cancels
// them all: 500 toolResults, each exactly once, nothing left running; the
// finished handles kept queryable are bounded.
func TestLoad500Handles(t *testing.T) {
	t.Parallel()
	const n = 500
	s := start(t, options{args: []string{"--max-processes", "600", "--kill-grace", "2s"}})
	s.initialize(nil)
	mk := newMarker()
	starts := make([]*client.Pending, n)
	for i := range starts {
		starts[i] = s.request("longRunning", map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env()})
	}
	handles := make([]string, n)
	for i, p := range starts {
		var h protocol.LongRunningResult
		if e := s.answer(p, &h); e != nil {
			t.Fatalf("longRunning #%d: %v", i, e)
		}
		handles[i] = h.HandleID
	}
	var all protocol.ProgressList
	s.mustCall("progress", map[string]any{}, &all)
	running := 0
	for _, p := range all.Handles {
		if p.Status == "running" {
			running++
		}
	}
	if running != n {
		t.Errorf("progress lists %d running handles, want %d", running, n)
	}
	cancels := make([]*client.Pending, n)
	for i, h := range handles {
		cancels[i] = s.request("cancel", map[string]any{"handleId": h})
	}
	for i, p := range cancels {
		var r protocol.ToolResult
		if e := s.answer(p, &r); e != nil {
			t.Fatalf("cancel %s: %v", handles[i], e)
		}
		if r.HandleID != handles[i] || r.Status != "cancelled" {
			t.Errorf("cancel %s answered %s %s", handles[i], r.HandleID, r.Status)
		}
	}
	assertNoneLeft(t, mk, "", "after 500 cancels answered")
	checkOnce(t, handles, collectToolResults(s, n))

	// Finished handles stay queryable, a bounded number of the latest. The
	// 500 cancels run at once, so which handle finished last is the order
	// of their toolResults, not of their starts.
	results := s.notifications("toolResult")
	first, last := idsOf(results[0]).HandleID, idsOf(results[len(results)-1]).HandleID
	if e := s.call("progress", map[string]any{"handleId": last}, nil); e != nil {
		t.Errorf("progress of the latest finished handle: %v", e)
	}
	if e := s.call("cancel", map[string]any{"handleId": last}, nil); e != nil {
		t.Errorf("cancel of the latest finished handle: %v", e)
	}
	for _, method := range []string{"progress", "cancel"} {
		if e := s.call(method, map[string]any{"handleId": first}, nil); e == nil || e.Code != -32004 {
			t.Errorf("%s of the oldest of %d finished handles: %v, want -32004 (the recent ones kept are bounded)", method, n, e)
		}
	}
	s.mustCall("progress", map[string]any{}, &all)
	if kept := len(all.Handles); kept >= n || kept == 0 {
		t.Errorf("progress lists %d finished handles of %d: want a bound", kept, n)
	}
	s.shutdown()
	checkOnce(t, handles, collectToolResults(s, n))
}

// TestSlowClientGetsEveryToolResult stops reading while 100 handles are
// cancelled and 3 more stream output without pause, then reads again: all
// 100 toolResults arrive, each once, and the server's memory stays bounded
// meanwhile.
func TestSlowClientGetsEveryToolResult(t *testing.T) {
	t.Parallel()
	const n = 100
	s := start(t, options{args: []string{"--max-processes", "200"}})
	s.initialize(nil)
	mk := newMarker()
	handles := make([]string, n)
	for i := range handles {
		handles[i] = s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "env": mk.env()}).HandleID
	}
	chatty := newMarker()
	var noisy []string
	for range 3 {
		noisy = append(noisy, s.longRun(map[string]any{"argv": []string{"sh", "-c", "exec yes " + chatty.Sleep}, "env": chatty.env(), "streamOutput": true}).HandleID)
	}
	s.awaitOutput(noisy[2], chatty.Sleep)
	base := s.memory("VmRSS")

	s.pause()
	t.Cleanup(s.resume) // a failure while paused must not block the harness's cleanup
	from := s.count()
	cancels := make([]*client.Pending, n)
	for i, h := range handles {
		cancels[i] = s.request("cancel", map[string]any{"handleId": h})
	}
	// The sleeps end while nothing is read; watch the server's memory
	// while they do and for a while after.
	var peak int64
	tick := time.NewTicker(20 * time.Millisecond)
	deadline := time.NewTimer(waitLimit)
	settle := 0
	for settle < 25 {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("the cancelled handles did not end while the client was paused: %v", scanProcs(mk, ""))
		}
		peak = max(peak, s.memory("VmRSS"))
		if len(scanProcs(mk, "")) == 0 {
			settle++
		}
	}
	tick.Stop()
	deadline.Stop()
	// The reader may finish the one frame it was reading when paused.
	if got := s.count(); got > from+1 {
		t.Fatalf("the client read %d messages while paused", got-from)
	}
	growth := peak - base
	t.Logf("server RSS %d MiB before the pause, peak %d MiB while paused", base>>20, peak>>20)
	if growth > 64<<20 {
		t.Errorf("server RSS grew by %d MiB while the client was paused", growth>>20)
	}
	s.resume()
	for i, p := range cancels {
		if e := s.answer(p, nil); e != nil {
			t.Errorf("cancel %s: %v", handles[i], e)
		}
	}
	for _, h := range noisy {
		s.mustCall("cancel", map[string]any{"handleId": h}, nil)
	}
	all := append(append([]string(nil), handles...), noisy...)
	checkOnce(t, all, collectToolResults(s, len(all)))
	s.shutdown()
	checkOnce(t, all, collectToolResults(s, len(all)))
	assertNoneLeft(t, chatty, "", "after shutdown")
}
