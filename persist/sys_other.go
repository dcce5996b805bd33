//go:build !linux

package persist

import (
	"errors"
	"net"
	"os"
)

// Persisted sessions need SCM_RIGHTS, SO_PEERCRED and /proc: Linux only.
const supported = false

var errUnsupported = errors.New("--persist is Linux only")

func sendFrame(c *net.UnixConn, b []byte, fds []int) error { return errUnsupported }
func recvFrame(c *net.UnixConn, want int) ([]byte, []*os.File, error) {
	return nil, nil, errUnsupported
}
func peerUID(c *net.UnixConn) (int, error) { return 0, errUnsupported }
func procStart(pid int) uint64             { return 0 }
func (h holderID) alive() bool             { return false }
func self() holderID                       { return holderID{PID: os.Getpid()} }
func BuildID(version string) string        { return version }

func pollable(f *os.File) (*os.File, func(), error) { return nil, nil, errUnsupported }
