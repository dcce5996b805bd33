//go:build linux

package rpc

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writeRoom returns, for w a pipe, a function that reports whether n more
// bytes fit in it without a write blocking: its capacity less what is
// unread (FIONREAD) and a page of slack (a pipe keeps bytes in pages). Nil
// for anything else. The capacity is read once: nothing here resizes the
// pipe.
func writeRoom(w io.Writer) func(n int) bool {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	size, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil || size <= 0 {
		return nil
	}
	return func(n int) bool {
		unread, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
		return err == nil && size-unread-os.Getpagesize() >= n
	}
}
