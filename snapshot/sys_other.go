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

func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }

func startWriteback(f *os.File) {}

func syncFS(f *os.File) error { return errors.ErrUnsupported }

const haveSyncFS = false
