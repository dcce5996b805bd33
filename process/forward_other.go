//go:build !linux

package process

import (
	"errors"
	"runtime"

	"github.com/toolhost/toolhost/sandbox"
)

// enterNetNS fails: there are no network namespaces here.
func enterNetNS(int, string) (*sandbox.NetNS, error) {
	return nil, errors.New("port forward: no network namespaces on " + runtime.GOOS)
}
