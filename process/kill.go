package process

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Timings of the kill ladder that are not configurable.
const (
	// killPoll is how often a ladder looks whether the tree is gone, once
	// the first looks (killFirstPoll, doubling) have found it still there.
	killPoll = 10 * time.Millisecond
	// killFirstPoll is the ladder's first wait after a signal: most trees
	// end within a millisecond or two of TERM or KILL, so the waits start
	// short and double up to killPoll.
	killFirstPoll = time.Millisecond
	// rescanEvery is how many polls pass between walks for new descendants
	// during the grace.
	rescanEvery = 5
	// killWait bounds how long a ladder waits for SIGKILLed processes to
	// go (a process in uninterruptible sleep dies only when it wakes).
	killWait = 5 * time.Second
)

// signalGroup sends sig to process group pgid, ignoring groups that are gone.
func signalGroup(pgid int, sig unix.Signal) {
	if pgid > 1 {
		_ = unix.Kill(-pgid, sig)
	}
}

// signalPid sends sig to pid, ignoring processes that are gone.
func signalPid(pid int, sig unix.Signal) {
	if pid > 1 {
		_ = unix.Kill(pid, sig)
	}
}

// groupAlive reports whether process group pgid has members (zombies
// included: they leave the group when they are reaped).
func groupAlive(pgid int) bool {
	err := unix.Kill(-pgid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// killTarget is what a ladder kills: process groups, and the pids that find
// returns on each call (descendants that left the groups). find is called
// again during the ladder, so processes forked meanwhile are caught.
type killTarget struct {
	groups func() []int
	find   func() []int
	// cg, if not nil, holds every process of the target: it is alive while
	// populated, and SIGKILL goes to it whole through cgroup.kill.
	cg *cgroup
	// exited, if not nil, receives a value when one of the target's main
	// processes has been waited for: the ladder looks at once instead of
	// at its next poll.
	exited <-chan struct{}
}

// backoff is a ladder's poll timer: its waits start at killFirstPoll and
// double up to killPoll.
type backoff struct {
	t    *time.Timer
	next time.Duration
}

func newBackoff() *backoff {
	return &backoff{t: time.NewTimer(killFirstPoll), next: 2 * killFirstPoll}
}

// C fires when the current wait is over.
func (b *backoff) C() <-chan time.Time { return b.t.C }

// again starts the next wait (the timer has fired, or a wake-up cut the
// wait short: Reset discards a pending fire since Go 1.23).
func (b *backoff) again() {
	b.t.Reset(b.next)
	b.next = min(2*b.next, killPoll)
}

// restart starts the waits over from killFirstPoll, as after a new signal.
func (b *backoff) restart() {
	b.next = killFirstPoll
	b.again()
}

func (b *backoff) stop() { b.t.Stop() }

// alive reports whether anything of t runs, given the latest pids.
func (t killTarget) alive(pids []int) bool {
	if t.cg != nil && t.cg.populated() {
		return true
	}
	for _, g := range t.groups() {
		if groupAlive(g) {
			return true
		}
	}
	for _, p := range pids {
		if !procGone(p) {
			return true
		}
	}
	return false
}

// send signals every group and pid of t.
func (t killTarget) send(pids []int, sig unix.Signal) {
	for _, g := range t.groups() {
		signalGroup(g, sig)
		if sig == unix.SIGTERM {
			// A stopped process acts on TERM only once continued.
			signalGroup(g, unix.SIGCONT)
		}
	}
	for _, p := range pids {
		signalPid(p, sig)
		if sig == unix.SIGTERM {
			signalPid(p, unix.SIGCONT)
		}
	}
}

// killLadder ends t: with term, SIGTERM to everything, then up to grace for
// it to go (cut short when urgent is closed); then SIGKILL to whatever is
// left, repeated until it is gone or killWait passes. It looks whether the
// tree is gone after 1, 2, 4 and 8 ms, then every killPoll, and at once
// when t.exited says a main process ended. It reaps re-parented
// zombies as it goes and reports whether everything is gone.
func killLadder(t killTarget, grace time.Duration, term bool, urgent <-chan struct{}) bool {
	reapOrphans()
	if t.cg != nil && !t.alive(nil) {
		// The cgroup holds every process of the target: empty, and no
		// group left, is gone, without listing anything.
		return true
	}
	pids := t.find()
	if !t.alive(pids) {
		return true
	}
	poll := newBackoff()
	defer poll.stop()
	if term && grace > 0 {
		t.send(pids, unix.SIGTERM)
		deadline := time.NewTimer(grace)
		defer deadline.Stop()
		for n := 1; ; n++ {
			select {
			case <-poll.C():
			case <-t.exited:
			case <-deadline.C:
				goto kill
			case <-urgent:
				goto kill
			}
			poll.again()
			reapOrphans()
			if n%rescanEvery == 0 {
				fresh := t.find()
				t.send(newPids(fresh, pids), unix.SIGTERM)
				pids = fresh
			}
			if !t.alive(pids) {
				return true
			}
		}
	}
kill:
	limit := time.NewTimer(killWait)
	defer limit.Stop()
	poll.restart()
	for {
		if t.cg != nil {
			t.cg.kill()
		}
		pids = t.find()
		t.send(pids, unix.SIGKILL)
		reapOrphans()
		if !t.alive(pids) {
			return true
		}
		select {
		case <-poll.C():
		case <-t.exited:
		case <-limit.C:
			return false
		}
		poll.again()
	}
}

// newPids returns the pids in fresh that are not in old.
func newPids(fresh, old []int) []int {
	seen := make(map[int]bool, len(old))
	for _, p := range old {
		seen[p] = true
	}
	var out []int
	for _, p := range fresh {
		if !seen[p] {
			out = append(out, p)
		}
	}
	return out
}

// signalName names sig the way users know it ("SIGKILL"), or "signal N".
func signalName(sig unix.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "signal " + sig.String()
}
