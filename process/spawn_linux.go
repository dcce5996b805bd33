//go:build linux

package process

import "syscall"

// sysProcAttr puts the child in a process group of its own, led by itself,
// and asks the kernel to SIGKILL it if its parent dies.
//
// Pdeathsig fires when the OS *thread* that forked the child exits, not the
// process. Go's runtime never retires an ordinary thread, but it does end
// the thread of a goroutine that exits while it holds runtime.LockOSThread.
// Children are therefore always forked from a fresh goroutine (see
// forkOnFreshGoroutine), which never holds such a lock; never fork from a
// goroutine that locks its thread and then exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
