//go:build unix && !linux

package process

import (
	"os"
	"syscall"
)

// growPipe leaves the pipe's size alone: only Linux can set it.
func growPipe(*os.File) {}

// sysProcAttr puts the child in a process group of its own, or under a
// terminal (tty) in a session of its own. There is no parent-death signal
// outside Linux.
func sysProcAttr(tty bool) *syscall.SysProcAttr {
	if tty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}
