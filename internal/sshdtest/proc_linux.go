//go:build linux

package sshdtest

import "syscall"

// EndsWithProcess says that a Server ends with the process that started it,
// whichever way that process ends, even when Stop is never called: on Linux
// sshd gets SIGTERM when the thread that forked it ends (Pdeathsig).
const EndsWithProcess = true

// procAttr gives sshd Pdeathsig.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
