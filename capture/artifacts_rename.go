package capture

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// renameChecked renames oldpath to newpath after checking that newpath does
// not exist. The check and the rename are two steps; it is used only inside
// the artifacts directory, which only the server writes, with Artifacts.mu
// held.
func renameChecked(oldpath, newpath string) error {
	if _, err := os.Lstat(newpath); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = fs.ErrExist
		}
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fmt.Errorf("target: %w", err)}
	}
	return os.Rename(oldpath, newpath)
}

// copyPrefixRead appends bytes [from, n) of src to dst through a buffer,
// without moving src's offset.
func copyPrefixRead(dst, src *os.File, from, n int64) error {
	w, err := io.Copy(dst, io.NewSectionReader(src, from, n-from))
	if err == nil && w < n-from {
		err = io.ErrUnexpectedEOF
	}
	return err
}
