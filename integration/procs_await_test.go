package integration

import (
	"fmt"
	"testing"
	"time"
)

// A scan of /proc right after a command prints "ready" may miss what runs:
// a process in the middle of an exec (`echo ready; exec sleep …`) shows
// neither its argv nor its environment for a moment, and a background
// child a shell forked before it printed (`sleep … & echo ready`) may not
// have exec'd yet. Tests that need processes visible wait for them with
// the helpers here.

// pollUntil checks cond every 5 ms until it holds, and fails the test with
// what() after waitLimit. It is for states only /proc shows, such as a
// process appearing or being stopped: there is no event to wait on.
func pollUntil(t testing.TB, what func() string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("still not after %v: %s", waitLimit, what())
		}
	}
}

// awaitScan scans /proc for the processes of mk until ok holds of what it
// found, and returns them; after waitLimit it fails the test, saying want
// and what the last scan found.
func awaitScan(t testing.TB, mk marker, want string, ok func([]procOf) bool) []procOf {
	t.Helper()
	var found []procOf
	pollUntil(t, func() string { return fmt.Sprintf("want %s, found %v", want, found) }, func() bool {
		found = scanProcs(mk, "")
		return ok(found)
	})
	return found
}

// atLeast says a scan found n processes or more.
func atLeast(n int) func([]procOf) bool {
	return func(ps []procOf) bool { return len(ps) >= n }
}
