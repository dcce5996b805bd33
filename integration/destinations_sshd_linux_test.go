//go:build linux

package integration

import "syscall"

// sshdAttr makes the test's sshd end with the thread that forked it: with
// the test binary (see runSSHD).
func sshdAttr() (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}, nil
}
