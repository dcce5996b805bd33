//go:build !linux && !darwin

package snapshot

import (
	"errors"
	"io/fs"
	"os"
)

// statOf has size and mtime only here: the index then trusts those two.
func statOf(fi fs.FileInfo) fileStat {
	return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// lstatIn: see sys_linux.go; here through the root handle.
func lstatIn(dr *os.Root, fd int, name, cname string) (kind byte, bits uint32, st fileStat, err error) {
	fi, err := dr.Lstat(name)
	if err != nil {
		return 0, 0, st, err
	}
	return kindOf(fi.Mode()), modeBits(fi.Mode()), statOf(fi), nil
}

func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }

func syncFS(f *os.File) error { return errors.ErrUnsupported }

const haveSyncFS = false

// direntBufSize: readNames uses no buffer of its own here.
const direntBufSize = 0

// readNames lists the open directory d (without . and ..).
func readNames(d *os.File, buf []byte) ([]string, error) {
	return d.Readdirnames(-1)
}

// spreadSubdirs does nothing here.
func spreadSubdirs(dir string) {}

// renameBlob renames a written blob to its name.
func renameBlob(from, to string) error { return os.Rename(from, to) }

// keepsListings: see sys_linux.go; elsewhere every scan lists every
// directory.
func keepsListings(dir string) bool { return false }
