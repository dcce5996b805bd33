//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// What the store does without Linux's calls: no syncfs, no raw getdents,
// no FS_TOPDIR_FL, no rename without a look first, no directory listings
// kept (see sys_linux.go for each).

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

// keepsListings: every scan lists every directory here.
func keepsListings(dir string) bool { return false }
