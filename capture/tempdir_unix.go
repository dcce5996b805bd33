//go:build unix

package capture

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether fi belongs to this process's effective user.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int64(st.Uid) == int64(os.Geteuid())
}

// ownerAlive reports whether the process that wrote an owner record still
// runs: pid exists and, where start is known (not 0) and the process's
// start time can be read, started at start. A pid given to another
// process since is dead; a zombie, or a process whose start time cannot be
// read, counts as alive.
func ownerAlive(pid int, start uint64) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	if start == 0 {
		return true
	}
	now, err := processStart(pid)
	return err != nil || now == 0 || now == start
}
