//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// replaceFile renames the written file tmp over name, in the directory dr.
func replaceFile(dr *os.Root, dd *os.File, tmp, name string, tr *trash) error {
	return dr.Rename(tmp, name)
}

// moveOut cannot rename across directory handles here: the caller removes
// in place.
func moveOut(dir *os.File, name string, dest *os.File, to string) error {
	return errors.ErrUnsupported
}
