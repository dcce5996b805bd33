//go:build linux

package dockertest

import "syscall"

// procAttr gives dockerd Pdeathsig: it gets SIGTERM, and stops its
// containers and containerd, when the thread that started it ends, which
// is when the test binary does if no cleanup stopped it first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
