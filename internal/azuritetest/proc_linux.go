//go:build linux

package azuritetest

import "syscall"

// procAttr puts Azurite in a process group of its own, which Stop
// signals, and gives it Pdeathsig, so that it ends with the test process
// even when a cleanup never runs (a test binary killed by its timeout).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
