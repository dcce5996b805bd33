package capture

import (
	"errors"
	"fmt"
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
