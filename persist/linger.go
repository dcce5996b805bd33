package persist

import (
	"sync"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// lingering is what a session and a shared MCP server have in common: the
// holder keeps each past its last connection for its linger, and ends it
// then unless a connection attaches first. Shutdown, the holder's signal
// or its own end ends it at once. It ends once, whatever ends it first.
type lingering struct {
	h      *holder
	linger time.Duration
	// expiry says, for the log, why the linger's end ends it.
	expiry string
	// finish ends the thing that lingers: it runs once, without holder.mu,
	// on the goroutine of the end that came first, after ending is set.
	finish func(kind, why string)

	// attached, until, timer, ending and kind are guarded by holder.mu.
	//
	// attached are the connections served, each by a token of its own
	// (its conn, or its front's socket); the linger runs while there is
	// none and the thing is not ending.
	attached map[any]bool
	until    time.Time   // when the linger passes; zero while attached
	timer    *time.Timer // the linger; nil while attached
	ending   bool
	kind     string // why it is ending: protocol.SessionEnded or SessionExpired
}

// newLingering returns the lingering of a thing of h that lingers for
// linger, and that finish ends; expiry says why its linger's end ends it.
func newLingering(h *holder, linger time.Duration, expiry string, finish func(kind, why string)) lingering {
	return lingering{h: h, linger: linger, expiry: expiry, finish: finish, attached: map[any]bool{}}
}

// attachLocked attaches the connection by, stopping the linger. With
// alone, by replaces the connections attached (a session is served by one
// connection at a time: a resume takes it from the one before). It
// reports false when the thing is ending: nothing attaches then. The
// caller holds holder.mu.
func (l *lingering) attachLocked(by any, alone bool) bool {
	if l.ending {
		return false
	}
	if alone {
		clear(l.attached)
	}
	l.attached[by] = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.until = time.Time{}
	return true
}

// detachLocked detaches the connection by, and starts the linger when it
// was the last. It reports whether it did: false when by was not attached
// (another connection took over meanwhile), the thing is ending, another
// connection is attached, or the holder is stopping. The caller holds
// holder.mu.
func (l *lingering) detachLocked(by any) bool {
	if !l.attached[by] || l.ending {
		return false
	}
	delete(l.attached, by)
	if len(l.attached) > 0 || l.h.closing {
		return false
	}
	l.lingerLocked()
	return true
}

// lingerLocked starts the linger of a thing that no connection serves:
// unless one attaches first, it ends, expired, when the linger passes. The
// caller holds holder.mu.
func (l *lingering) lingerLocked() {
	h := l.h
	l.until = time.Now().Add(l.linger).UTC()
	var t *time.Timer
	t = time.AfterFunc(l.linger, func() {
		h.mu.Lock()
		// A timer that an attach stopped too late is no longer l.timer.
		expired := l.timer == t && !h.closing && l.takeLocked(protocol.SessionExpired)
		if expired {
			h.work.Add(1) // RunHolder waits for it; nothing is added once closing
		}
		h.mu.Unlock()
		if !expired {
			return
		}
		defer h.work.Done()
		l.finish(protocol.SessionExpired, l.expiry)
	})
	l.timer = t
}

// takeLocked makes the thing ending, for kind, once: no connection
// attaches from then on. It reports whether this call did. The caller
// holds holder.mu.
func (l *lingering) takeLocked(kind string) bool {
	if l.ending {
		return false
	}
	l.ending, l.kind = true, kind
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	return true
}

// end ends the thing, for kind (ended or expired) and why, unless
// something ended it first. It returns once finish has.
func (l *lingering) end(kind, why string) {
	l.h.mu.Lock()
	took := l.takeLocked(kind)
	l.h.mu.Unlock()
	if took {
		l.finish(kind, why)
	}
}

// endEach ends at once every thing that all returns, all called under
// holder.mu, and waits until each has ended.
func (h *holder) endEach(why string, all func() []*lingering) {
	h.mu.Lock()
	ls := all()
	h.mu.Unlock()
	var wg sync.WaitGroup // owns the ends; waited below
	for _, l := range ls {
		wg.Go(func() { l.end(protocol.SessionEnded, why) })
	}
	wg.Wait()
}
