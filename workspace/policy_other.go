//go:build !unix

package workspace

import "io/fs"

// fileID names a file on this machine; without inodes there is none.
type fileID struct{ dev, ino uint64 }

// fileTag is what changes when a directory's entries change.
type fileTag struct{ mtime int64 }

// idOf reports false: this system gives no inode.
func idOf(fs.FileInfo) (fileID, bool) { return fileID{}, false }

// links returns 1: this system gives no link count.
func links(fs.FileInfo) uint64 { return 1 }

// tagOf returns the directory's modification time.
func tagOf(fi fs.FileInfo) fileTag { return fileTag{mtime: fi.ModTime().UnixNano()} }
