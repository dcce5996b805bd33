//go:build unix

package workspace

import (
	"io/fs"
	"syscall"
)

// fileID names a file on this machine: its device and inode.
type fileID struct{ dev, ino uint64 }

// fileTag is what changes when a directory's entries change.
type fileTag struct {
	id    fileID
	mtime int64 // nanoseconds
}

// idOf returns fi's device and inode.
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true //nolint:unconvert // Dev is 32 bits on some systems
}

// links returns fi's count of hard links (1 when unknown).
func links(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink) //nolint:unconvert // Nlink is 16 bits on some systems
}

// tagOf returns what tells that a directory changed.
func tagOf(fi fs.FileInfo) fileTag {
	id, _ := idOf(fi)
	return fileTag{id: id, mtime: fi.ModTime().UnixNano()}
}
