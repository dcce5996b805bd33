//go:build unix

package rpc

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readerGone reports whether w is a pipe or socket whose reading end is
// closed: the kernel says so (POLLERR or POLLHUP). A client whose transport
// died (an ssh connection killed) has closed both ends; nothing written
// can reach it, so requests in flight need no grace to be answered.
func readerGone(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = sc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			gone = fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		}
	})
	return gone
}
