//go:build !linux

package capture

import "os"

// renameNoReplace renames oldpath to newpath, failing if newpath exists.
func renameNoReplace(oldpath, newpath string) error {
	return renameChecked(oldpath, newpath)
}

// copyPrefix appends the first n bytes of src to dst without moving src's
// offset.
func copyPrefix(dst, src *os.File, n int64) error {
	return copyPrefixRead(dst, src, 0, n)
}
