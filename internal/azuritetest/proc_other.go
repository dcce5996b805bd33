//go:build !linux

package azuritetest

import "syscall"

// procAttr puts Azurite in a process group of its own, which Stop
// signals. Outside Linux there is no Pdeathsig: only Stop ends it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
