//go:build !linux

package process

import (
	"fmt"
	"os"
)

// openPty is Linux only here.
func openPty(Winsize) (master, slave *os.File, err error) {
	return nil, nil, fmt.Errorf("pseudo-terminals: %w", ErrUnsupported)
}

func setWinsize(*os.File, Winsize) error { return ErrUnsupported }
func foreground(*os.File) (int, error)   { return 0, ErrUnsupported }
func eofChar(*os.File) (byte, error)     { return 0, ErrUnsupported }
