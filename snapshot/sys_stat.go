//go:build linux || darwin

package snapshot

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statOf reads the fields the stat cache compares from a FileInfo of Lstat
// or Stat. (statTimes and devNumber are the per-system part: the fields'
// names and types differ.)
func statOf(fi fs.FileInfo) fileStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	mtime, ctime := statTimes(st)
	return fileStat{size: fi.Size(), mtime: mtime.Nano(), ctime: ctime.Nano(), ino: st.Ino, dev: devNumber(st.Dev)}
}

// lstatIn looks at name in the open directory fd with one fstatat, never
// following a symlink: its kind (0 for what is not taken), its 07777 bits
// and the stat the stat cache compares. cname is name with a NUL after it
// (see dirListing), which spares the call a copy of the name where
// fstatatC can.
func lstatIn(dr *os.Root, fd int, name, cname string) (kind byte, bits uint32, st fileStat, err error) {
	var s unix.Stat_t
	for {
		err = fstatatC(fd, cname, &s)
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
	st = fileStat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: s.Ino, dev: devNumber(s.Dev)}
	return kind, uint32(s.Mode) & 0o7777, st, nil
}
