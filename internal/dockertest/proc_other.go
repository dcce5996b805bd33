//go:build !linux

package dockertest

import "syscall"

// procAttr has nothing to add outside Linux, where Start skips anyway.
func procAttr() *syscall.SysProcAttr { return nil }
