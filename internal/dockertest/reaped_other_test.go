//go:build !linux

package dockertest

import "time"

// awaitReaped is Linux only: docker's containers run on Linux.
func awaitReaped(pid int, limit time.Duration) bool { return false }
