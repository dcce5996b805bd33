//go:build darwin

package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

func statOf(fi fs.FileInfo) fileStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return fileStat{
		size:  fi.Size(),
		mtime: st.Mtimespec.Nano(),
		ctime: st.Ctimespec.Nano(),
		ino:   st.Ino,
		dev:   uint64(uint32(st.Dev)),
	}
}

// platformClone: clonefile(2) works on paths, not descriptors, so macOS
// copies plainly.
func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }

func startWriteback(f *os.File) {}

func syncFS(f *os.File) error { return errors.ErrUnsupported }

const haveSyncFS = false
