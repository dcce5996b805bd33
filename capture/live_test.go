package capture

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCaptureLiveViewFollowsWrites checks what a reader of a running
// capture sees: the lengths of each file after each write (across the
// split of stdout.log and output.log), the broadcast closed by each write
// batch and by Close, and the inline output so far.
func TestCaptureLiveViewFollowsWrites(t *testing.T) {
	c, _ := newTestCapture(t, 64)
	if diff := cmp.Diff(Lengths{}, c.Lengths()); diff != "" {
		t.Errorf("lengths before any write mismatch (-want +got):\n%s", diff)
	}
	changed := c.Changed()
	select {
	case <-changed:
		t.Fatal("the broadcast closed before any write")
	default:
	}
	mustWrite(t, c.Stdout(), "out\n")
	<-changed // a write batch wakes the readers
	if diff := cmp.Diff(Lengths{Stdout: 4, Output: 4}, c.Lengths()); diff != "" {
		t.Errorf("lengths after stdout mismatch (-want +got):\n%s", diff)
	}
	changed = c.Changed()
	mustWrite(t, c.Stderr(), "err\n")
	<-changed
	mustWrite(t, c.Stdout(), "more\n")
	if diff := cmp.Diff(Lengths{Stdout: 9, Stderr: 4, Output: 13}, c.Lengths()); diff != "" {
		t.Errorf("lengths after the split mismatch (-want +got):\n%s", diff)
	}
	snap := c.Snapshot()
	if snap.Stdout != "out\nmore\n" || snap.Stderr != "err\n" || snap.ByteCount != 13 || snap.LineCount != 3 || snap.Sha256 != "" {
		t.Errorf("snapshot: %+v", snap)
	}
	if readFile(t, snap.StdoutPath) != "out\nmore\n" || readFile(t, snap.OutputPath) != "out\nerr\nmore\n" {
		t.Errorf("files: stdout %q, output %q", readFile(t, snap.StdoutPath), readFile(t, snap.OutputPath))
	}
	if c.Idle() < 0 {
		t.Errorf("idle %v", c.Idle())
	}
	changed = c.Changed()
	out, err := c.Close()
	if err != nil {
		t.Fatal(err)
	}
	<-changed // Close wakes the readers
	<-c.Changed()
	if !c.Closed() || c.Snapshot() != out {
		t.Errorf("after Close: closed %v, snapshot %+v, output %+v", c.Closed(), c.Snapshot(), out)
	}
}
