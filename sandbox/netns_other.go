//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
)

// NetNS is a network namespace entered by a thread of the server; there
// are none off Linux.
type NetNS struct{}

// EnterNetNS fails off Linux: there are no network namespaces.
func EnterNetNS(*os.File) (*NetNS, error) {
	return nil, errors.New("network namespace: not available on " + runtime.GOOS)
}

// Dial fails: there is no namespace to dial in.
func (*NetNS) Dial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("network namespace: not available on " + runtime.GOOS)
}

// Close does nothing.
func (*NetNS) Close() error { return nil }
