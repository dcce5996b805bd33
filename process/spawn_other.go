//go:build unix && !linux

package process

import "syscall"

// sysProcAttr puts the child in a process group of its own. There is no
// parent-death signal outside Linux.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
