//go:build darwin

package snapshot

import (
	"errors"
	"os"
	"syscall"
)

// statTimes: darwin names a stat's times ...spec.
func statTimes(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) {
	return st.Mtimespec, st.Ctimespec
}

// devNumber: darwin's dev_t is signed; its bits are the number.
func devNumber(d int32) uint64 { return uint64(uint32(d)) }

// platformClone: clonefile(2) works on paths, not descriptors, so macOS
// copies plainly.
func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }
