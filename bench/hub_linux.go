//go:build linux

package main

import "syscall"

// sshdAttr makes the bench's sshd end if the bench dies before stop.
func sshdAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
