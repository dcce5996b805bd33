//go:build unix && !linux

package process

import (
	"os"
	"syscall"
)

// growPipe leaves the pipe's size alone: only Linux can set it.
func growPipe(*os.File) {}

// sysProcAttr puts the child in a process group of its own. There is no
// parent-death signal outside Linux.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
