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

// childPipe returns a pipe's end for this process (ours) and the child's
// (theirs); when childReads, the child reads and this process writes.
func childPipe(childReads bool) (ours, theirs *os.File, err error) {
	r, w, err := os.Pipe()
	if childReads {
		return w, r, err
	}
	return r, w, err
}
