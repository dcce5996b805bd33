//go:build linux

package hub

import "syscall"

// transportAttr keeps a destination's transport in the server's process
// group (the orphan reaper of package process leaves that group's children
// to os/exec) and kills it if the server dies.
func transportAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
