package persist

import (
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// ended is what a lingering's finish was called with.
type ended struct{ kind, why string }

// newTestLingering returns a lingering of a holder of its own, and the
// channel its finish reports on.
func newTestLingering(linger time.Duration) (*holder, *lingering, chan ended) {
	h := &holder{}
	got := make(chan ended, 4)
	l := newLingering(h, linger, "expired for the test", func(kind, why string) { got <- ended{kind, why} })
	return h, &l, got
}

// TestLingeringAloneTakesOver checks that a session's connection (alone)
// replaces the one before: that one's detach then starts no linger, the
// new one's does.
func TestLingeringAloneTakesOver(t *testing.T) {
	h, l, got := newTestLingering(time.Millisecond)
	h.mu.Lock()
	l.attachLocked("a", true)
	l.attachLocked("b", true)
	if l.detachLocked("a") {
		t.Error("the detach of a connection taken over started the linger")
	}
	if !l.detachLocked("b") {
		t.Error("the detach of the connection serving it started no linger")
	}
	if l.until.IsZero() {
		t.Error("a lingering thing has no until")
	}
	h.mu.Unlock()
	if e := <-got; e != (ended{protocol.SessionExpired, "expired for the test"}) {
		t.Errorf("finish(%q, %q), want expired", e.kind, e.why)
	}
}

// TestLingeringCountsConnections checks that a shared server's
// connections each count: the linger starts at the last one's detach, and
// an attach meanwhile stops it.
func TestLingeringCountsConnections(t *testing.T) {
	h, l, got := newTestLingering(time.Hour)
	h.mu.Lock()
	l.attachLocked("a", false)
	l.attachLocked("b", false)
	if l.detachLocked("a") || l.timer != nil {
		t.Error("the linger started with a connection attached")
	}
	if !l.detachLocked("b") || l.timer == nil {
		t.Fatal("the last connection's detach started no linger")
	}
	if !l.attachLocked("c", false) || l.timer != nil || !l.until.IsZero() {
		t.Error("an attach did not stop the linger")
	}
	if l.detachLocked("b") {
		t.Error("a connection detached twice started the linger")
	}
	h.mu.Unlock()
	l.end(protocol.SessionEnded, "shutdown")
	l.end(protocol.SessionEnded, "again")
	if e := <-got; e != (ended{protocol.SessionEnded, "shutdown"}) {
		t.Errorf("finish(%q, %q), want the first end's", e.kind, e.why)
	}
	if len(got) != 0 {
		t.Errorf("finish ran %d more times", len(got))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.attachLocked("d", false) {
		t.Error("a connection attached to a thing that ended")
	}
}
