//go:build !linux

package main

import "syscall"

// sshdAttr has no Pdeathsig outside Linux: only stop ends the bench's sshd.
func sshdAttr() *syscall.SysProcAttr { return nil }
