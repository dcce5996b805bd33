//go:build linux

package capture

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldpath to newpath, failing if newpath exists,
// in one renameat2(RENAME_NOREPLACE). A file system without the flag gets
// renameChecked.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return renameChecked(oldpath, newpath)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// copyPrefix appends the first n bytes of src to dst, in the kernel where
// it can (copy_file_range), without moving src's offset.
func copyPrefix(dst, src *os.File, n int64) error {
	sc, err := src.SyscallConn()
	if err != nil {
		return err
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	var (
		off  int64
		cerr error
	)
	ctlErr := sc.Control(func(sfd uintptr) {
		if err := dc.Control(func(dfd uintptr) {
			for off < n {
				k, err := unix.CopyFileRange(int(sfd), &off, int(dfd), nil, int(n-off), 0)
				switch {
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					cerr = err
					return
				case k == 0:
					cerr = io.ErrUnexpectedEOF
					return
				}
			}
		}); err != nil {
			cerr = err
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	if cerr == nil {
		return nil
	}
	if errors.Is(cerr, unix.ENOSYS) || errors.Is(cerr, unix.EXDEV) || errors.Is(cerr, unix.EINVAL) || errors.Is(cerr, unix.EOPNOTSUPP) {
		return copyPrefixRead(dst, src, off, n)
	}
	return cerr
}
