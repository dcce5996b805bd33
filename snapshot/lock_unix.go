//go:build unix

package snapshot

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// flock locks f (shared or exclusive); with nonblock it fails at once with
// errWouldBlock when another holder is there.
func flock(f *os.File, exclusive, nonblock bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if nonblock {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return errWouldBlock
		}
		return err
	}
}
