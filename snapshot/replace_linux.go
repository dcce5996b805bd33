//go:build linux

package snapshot

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// replaceFile puts the written file tmp in place of name, both in the
// directory dr (whose own handle is dd): the two names are exchanged
// (renameat2 RENAME_EXCHANGE), so that name is never missing, and the old
// file, now at tmp, goes to the trash. Where there is nothing to exchange
// with, or the filesystem cannot, it is a plain rename. Both names are
// single components in a directory opened through the root: nothing
// outside it is reached, and a symlink swapped in at name is itself
// moved, never followed.
func replaceFile(dr *os.Root, dd *os.File, tmp, name string, tr *trash) error {
	fd := int(dd.Fd())
	err := unix.Renameat2(fd, tmp, fd, name, unix.RENAME_EXCHANGE)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return dr.Rename(tmp, name)
	case err != nil:
		return &os.LinkError{Op: "exchange", Old: tmp, New: name, Err: err}
	}
	if tr.dir != nil {
		t := trashName()
		if err := moveOut(dd, tmp, tr.dir, t); err == nil {
			tr.add(t)
			return nil
		}
	}
	// No trash, or another filesystem's: delete it here.
	if err := dr.RemoveAll(tmp); err != nil {
		return err
	}
	return nil
}

// moveOut renames name, in the directory dir, to to in the directory
// dest: single components each, so nothing but those two directories'
// entries is reached.
func moveOut(dir *os.File, name string, dest *os.File, to string) error {
	return unix.Renameat(int(dir.Fd()), name, int(dest.Fd()), to)
}
