package process

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// execTable records the pids this package started through os/exec whose
// Wait has not returned yet. The orphan reaper never waits for them, so it
// never steals a wait from os/exec. It is package-wide because every
// Manager in the process shares the same children.
var execTable = struct {
	// gate is read-locked by a spawner from before the fork until the new
	// pid is in pids, and write-locked by the reaper while it scans and
	// reaps: a child that exits at once cannot be reaped before it is
	// recorded.
	gate sync.RWMutex
	// mu guards pids.
	mu   sync.Mutex
	pids map[int]struct{}
}{pids: make(map[int]struct{})}

// execAdd records pid; the caller holds execTable.gate for reading.
func execAdd(pid int) {
	execTable.mu.Lock()
	execTable.pids[pid] = struct{}{}
	execTable.mu.Unlock()
}

// execRemove forgets pid once its Wait has returned.
func execRemove(pid int) {
	execTable.mu.Lock()
	delete(execTable.pids, pid)
	execTable.mu.Unlock()
}

// isExec reports whether os/exec owns pid.
func isExec(pid int) bool {
	execTable.mu.Lock()
	_, ok := execTable.pids[pid]
	execTable.mu.Unlock()
	return ok
}

// orphanRoots lists the server's children that os/exec does not own and
// that are not in the server's own process group: processes re-parented to
// the server as subreaper. Children that other code in the server started
// without a group of their own share the server's group and are left
// alone; children other code starts with Setpgid are not distinguishable
// and would be treated as orphans (the package assumes it is the server's
// only spawner of process groups).
func orphanRoots() []int {
	self := os.Getpid()
	own := syscall.Getpgrp()
	var out []int
	for _, pid := range childrenOf(self) {
		if isExec(pid) {
			continue
		}
		pi, err := readStat(pid)
		if err != nil || pi.ppid != self || pi.pgid == own {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// reapOrphans waits for the zombies among orphanRoots. It runs on SIGCHLD,
// after each os/exec Wait of this package, and after each kill.
//
// The fast path peeks (waitid WNOWAIT) at one waitable child at a time:
// none means nothing to do; an orphan is reaped and the next one peeked.
// A child os/exec owns ends the pass: its waiter reaps it and then kicks
// the reaper again (kickReaper). A zombie of other code in the server
// would hide the rest from the peek, so then /proc is scanned instead.
func reapOrphans() {
	if !procSupported {
		return
	}
	execTable.gate.Lock()
	defer execTable.gate.Unlock()
	own := syscall.Getpgrp()
	for {
		pid, ok := peekZombie()
		if !ok || isExec(pid) {
			return
		}
		pi, err := readStat(pid)
		if err != nil {
			return
		}
		if pi.pgid == own {
			scanAndReap()
			return
		}
		reapZombie(pid)
	}
}

// scanAndReap reaps every zombie among orphanRoots; the caller holds
// execTable.gate.
func scanAndReap() {
	for _, pid := range orphanRoots() {
		if pi, err := readStat(pid); err == nil && pi.state == 'Z' {
			reapZombie(pid)
		}
	}
}

// reapKick asks a reaper loop for a pass; buffered, so kicks coalesce.
var reapKick = make(chan struct{}, 1)

// kickReaper asks for a reaping pass without waiting for it.
func kickReaper() {
	select {
	case reapKick <- struct{}{}:
	default:
	}
}

// reaperLoop reaps orphans on every SIGCHLD until stop is closed. Its owner
// is the Manager's wg; Shutdown closes stop and waits.
func reaperLoop(stop <-chan struct{}) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	for {
		select {
		case <-stop:
			reapOrphans()
			return
		case <-ch:
			reapOrphans()
		case <-reapKick:
			reapOrphans()
		}
	}
}
