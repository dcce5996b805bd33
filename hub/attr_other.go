//go:build !linux

package hub

import "syscall"

// transportAttr has no parent-death signal outside Linux.
func transportAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
