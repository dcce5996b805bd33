//go:build !linux

package integration

import (
	"errors"
	"syscall"
)

// sshdAttr refuses: without Pdeathsig nothing would end the test's sshd
// when the test binary does.
func sshdAttr() (*syscall.SysProcAttr, error) {
	return nil, errors.New("the sshd fixture needs Linux (Pdeathsig ends it with the test binary)")
}
