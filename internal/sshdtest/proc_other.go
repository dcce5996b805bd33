//go:build !linux

package sshdtest

import "syscall"

// EndsWithProcess says that a Server ends with the process that started it
// even when Stop is never called: not outside Linux, which has no
// Pdeathsig; only Stop ends sshd there.
const EndsWithProcess = false

// procAttr has nothing to add outside Linux.
func procAttr() *syscall.SysProcAttr { return nil }
