//go:build unix

package gitrepos

import "syscall"

// mkfifo makes a fifo at p.
func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
