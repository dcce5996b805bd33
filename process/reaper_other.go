//go:build unix && !linux

package process

import (
	"errors"

	"golang.org/x/sys/unix"
)

// errNoSubreaper says the platform has no child subreaper.
var errNoSubreaper = errors.New("child subreaper is not supported on this platform")

// setChildSubreaper is unsupported here: orphans go to init, and only
// process groups are killed.
func setChildSubreaper() error { return errNoSubreaper }

// childrenOf is unsupported without /proc.
func childrenOf(pid int) []int { return nil }

// subtree is unsupported without /proc.
func subtree(pid int, out []int) []int { return out }

// procInfo is what the platform says about a process.
type procInfo struct {
	state           byte
	ppid, pgid, sid int
}

// readStat is unsupported without /proc.
func readStat(pid int) (procInfo, error) { return procInfo{}, errors.ErrUnsupported }

// procGone reports whether pid no longer exists; zombies count as alive.
func procGone(pid int) bool {
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// procMarker is unsupported without /proc.
func procMarker(pid int) string { return "" }

// scanMarkers is unsupported without /proc.
func scanMarkers(match func(string) bool) []int { return nil }

// procSupported reports whether /proc can attribute and walk processes.
const procSupported = false

// peekZombie is not needed where reaping is unsupported.
func peekZombie() (int, bool) { return 0, false }

// reapZombie collects pid if it is a zombie child, without blocking.
func reapZombie(pid int) {
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
}
