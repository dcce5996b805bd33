//go:build unix

package mounts

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path for reading, refusing a symlink in its last
// component (one swapped in after LoadSecrets's Lstat).
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// checkOwner refuses a file that the server's user does not own.
func checkOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot tell its owner")
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not by the server's user (uid %d)", st.Uid, uid)
	}
	return nil
}
