//go:build darwin

package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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

// lstatIn: see sys_linux.go.
func lstatIn(dr *os.Root, fd int, name, cname string) (kind byte, bits uint32, st fileStat, err error) {
	var s unix.Stat_t
	for {
		err = unix.Fstatat(fd, name, &s, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, 0, st, &os.PathError{Op: "fstatat", Path: name, Err: err}
	}
	switch s.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		kind = kindFile
	case unix.S_IFDIR:
		kind = kindDir
	case unix.S_IFLNK:
		kind = kindLink
	}
	st = fileStat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: s.Ino, dev: uint64(uint32(s.Dev))}
	return kind, uint32(s.Mode) & 0o7777, st, nil
}

// platformClone: clonefile(2) works on paths, not descriptors, so macOS
// copies plainly.
func platformClone(dst, src *os.File) error { return errors.ErrUnsupported }
