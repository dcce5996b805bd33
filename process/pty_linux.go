//go:build linux

package process

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal of the given size. The master comes back
// non-blocking and in the runtime's poller, so that a read or a write on it
// can be cut short (SetReadDeadline, SetWriteDeadline, Close) and a write
// to a child that does not read parks a goroutine, not a thread; the slave
// is the child's stdin, stdout, stderr and controlling terminal, and the
// caller closes its copy once the child is forked, so that reading the
// master ends (EIO) when the last process holding the terminal is gone.
func openPty(size Winsize) (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	// pty.Open leaves the master blocking (its ioctls go through Fd), so
	// the poller cannot take it: give the poller a non-blocking copy.
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	_ = m.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal master: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := setWinsize(master, size); err != nil {
		_ = master.Close()
		_ = s.Close()
		return nil, nil, err
	}
	return master, s, nil
}

// setWinsize sets the terminal's size through its master; the kernel sends
// SIGWINCH to the terminal's foreground process group when it changes.
func setWinsize(master *os.File, size Winsize) error {
	return control(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)})
	})
}

// foreground returns the terminal's foreground process group
// (tcgetpgrp), which only a process group of the terminal's session can
// be.
func foreground(master *os.File) (int, error) {
	var pgrp int
	err := control(master, func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgrp, err
}

// eofChar returns the terminal's EOF character (VEOF, Ctrl-D unless the
// program inside changed it).
func eofChar(master *os.File) (byte, error) {
	var c byte
	err := control(master, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		c = t.Cc[unix.VEOF]
		return nil
	})
	return c, err
}

// control runs fn on f's descriptor without taking it out of the poller
// (as Fd would).
func control(f *os.File, fn func(fd int) error) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
