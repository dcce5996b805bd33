//go:build !linux && !darwin

package snapshot

import (
	"errors"
	"io/fs"
	"os"
)

// statOf has size and mtime only here: the stat cache then trusts those
// two.
func statOf(fi fs.FileInfo) fileStat {
	return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// lstatIn: see sys_stat.go; here through the root handle.
func lstatIn(dr *os.Root, fd int, name, cname string) (kind byte, bits uint32, st fileStat, err error) {
	fi, err := dr.Lstat(name)
	if err != nil {
		return 0, 0, st, err
	}
	return kindOf(fi.Mode()), modeBits(fi.Mode()), statOf(fi), nil
}

func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }
