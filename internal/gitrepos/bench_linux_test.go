//go:build linux

package gitrepos

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkStat10k compares the two ways a cached scan could look at each
// directory of the 10,000 again: fstatat relative to its parent, open
// (what the scan does; parents are opened, looked at and closed), or by
// its whole path (no parent opened, but every component resolved, and a
// symlink swapped in for a parent followed).
func BenchmarkStat10k(b *testing.B) {
	root := makeBenchTree(b)
	var st unix.Stat_t
	b.Run("parent", func(b *testing.B) {
		for b.Loop() {
			for i := range 100 {
				fd, err := unix.Openat(unix.AT_FDCWD, fmt.Sprintf("%s/p%03d", root, i), dirFlags, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := unix.Fstat(fd, &st); err != nil {
					b.Fatal(err)
				}
				for j := range 99 {
					if err := unix.Fstatat(fd, fmt.Sprintf("d%02d", j), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
						b.Fatal(err)
					}
				}
				unix.Close(fd)
			}
		}
	})
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			for i := range 100 {
				if err := unix.Fstatat(unix.AT_FDCWD, fmt.Sprintf("%s/p%03d", root, i), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					b.Fatal(err)
				}
				for j := range 99 {
					if err := unix.Fstatat(unix.AT_FDCWD, fmt.Sprintf("%s/p%03d/d%02d", root, i, j), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}
