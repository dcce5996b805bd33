//go:build unix

package persist

import (
	"os"
	"syscall"
)

// ownerOf returns the uid owning fi's file.
func ownerOf(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
