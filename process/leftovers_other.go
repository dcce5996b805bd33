//go:build !linux

package process

import "errors"

// KillLeftovers is Linux only: elsewhere there is no /proc to find a dead
// session's processes in.
func KillLeftovers(l Leftovers) (int, error) {
	return 0, errors.ErrUnsupported
}
