//go:build unix

package workspace

import (
	"os"
	"syscall"
)

// openReadFlags opens without blocking, so a FIFO that became the target
// between the Lstat and the open can never hang the caller; the fstat that
// follows refuses it.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK
