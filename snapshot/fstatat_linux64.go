//go:build linux && (amd64 || arm64 || riscv64)

package snapshot

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fstatatC is fstatat(2) of cname (a name with a NUL after it) in the
// directory fd, not following a symlink: unix.Fstatat without the copy of
// the name it makes to end it with a NUL, one allocation for each entry of
// a scan.
func fstatatC(fd int, cname string, s *unix.Stat_t) error {
	_, _, e := syscall.Syscall6(unix.SYS_NEWFSTATAT, uintptr(fd), uintptr(unsafe.Pointer(unsafe.StringData(cname))),
		uintptr(unsafe.Pointer(s)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
