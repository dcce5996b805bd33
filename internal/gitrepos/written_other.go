//go:build !linux

package gitrepos

import (
	"os"
	"time"
)

// changeTime is fi's modification time: the portable approximation of a
// change time.
func changeTime(fi os.FileInfo) time.Time { return fi.ModTime() }

// openDir opens the directory p.
func openDir(p string) (*os.File, error) { return os.Open(p) }
