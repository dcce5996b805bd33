//go:build (linux && !(amd64 || arm64 || riscv64)) || darwin

package snapshot

import "golang.org/x/sys/unix"

// fstatatC: see fstatat_linux64.go; here unix.Fstatat of the name.
func fstatatC(fd int, cname string, s *unix.Stat_t) error {
	return unix.Fstatat(fd, cname[:len(cname)-1], s, unix.AT_SYMLINK_NOFOLLOW)
}
