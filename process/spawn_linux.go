//go:build linux

package process

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeSize is what growPipe asks for: a child printing fast writes this
// much before it waits for a pump. Beyond /proc/sys/fs/pipe-max-size (1 MiB
// by default) the kernel refuses, and the pipe keeps its 64 KiB.
const pipeSize = 1 << 20

// growPipe enlarges the pipe of r to pipeSize where the kernel allows it.
func growPipe(r *os.File) {
	if sc, err := r.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}

// sysProcAttr puts the child in a process group of its own, led by itself,
// and asks the kernel to SIGKILL it if its parent dies. Under a terminal
// (tty) the child leads a new session instead, and so a new group, with
// its stdin (fd 0, the terminal's slave) as its controlling terminal:
// Setpgid would fail on a session leader, so it is not set.
//
// Pdeathsig fires when the OS *thread* that forked the child exits, not the
// process. Go's runtime never retires an ordinary thread, but it does end
// the thread of a goroutine that exits while it holds runtime.LockOSThread.
// Children are therefore always forked from a fresh goroutine (see
// forkOnFreshGoroutine), which never holds such a lock; never fork from a
// goroutine that locks its thread and then exits.
func sysProcAttr(tty bool) *syscall.SysProcAttr {
	if tty {
		return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// childPipe returns a pipe whose end in this process (ours) is
// non-blocking and in the runtime's poller, and whose other end (theirs),
// for a child, is blocking and not: os.Pipe puts both ends in the poller
// and os/exec then puts the child's end back into blocking mode, five
// system calls more per pipe, three pipes per command, before its fork.
// When childReads, the child reads and this process writes.
func childPipe(childReads bool) (ours, theirs *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	o, t := fds[0], fds[1]
	if childReads {
		o, t = t, o
	}
	if _, err := unix.FcntlInt(uintptr(t), unix.F_SETFL, 0); err != nil { // blocking again
		_ = unix.Close(o)
		_ = unix.Close(t)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	// NewFile puts a non-blocking descriptor in the poller, and leaves a
	// blocking one out of it.
	return os.NewFile(uintptr(o), "|ours"), os.NewFile(uintptr(t), "|theirs"), nil
}
