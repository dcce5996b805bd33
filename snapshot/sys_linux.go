//go:build linux

package snapshot

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statOf reads the fields the index compares from a FileInfo of Lstat or
// Stat.
func statOf(fi fs.FileInfo) fileStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return fileStat{
		size:  fi.Size(),
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
		ino:   st.Ino,
		dev:   uint64(st.Dev),
	}
}

// lstatIn looks at name in the open directory d with one fstatat, never
// following a symlink: its kind (0 for what is not taken), its 07777 bits
// and the stat the index compares.
func lstatIn(dr *os.Root, d *os.File, name string) (kind byte, bits uint32, st fileStat, err error) {
	var s unix.Stat_t
	for {
		err = unix.Fstatat(int(d.Fd()), name, &s, unix.AT_SYMLINK_NOFOLLOW)
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
	st = fileStat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: s.Ino, dev: uint64(s.Dev)}
	return kind, s.Mode & 0o7777, st, nil
}

// platformClone is FICLONE: dst shares src's extents (a reflink). Filesystems
// without reflinks answer EOPNOTSUPP (ext4), EXDEV across filesystems, or
// EINVAL.
func platformClone(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}

// startWriteback asks the kernel to start writing f's dirty pages now,
// without waiting, so that the flush before the manifest finds less to do.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// syncFS flushes the whole filesystem holding f (syncfs(2)): one call in
// place of an fsync per blob. It returns writeback errors since Linux 5.8.
func syncFS(f *os.File) error {
	return unix.Syncfs(int(f.Fd()))
}

const haveSyncFS = true

// direntBufSize is the buffer of one getdents64: a directory of a few
// hundred entries in one call. A scan worker keeps one: os's Readdirnames
// allocates an 8 KiB buffer for every directory it opens, and listing 100
// directories of 100 entries with it took 24 ms on these machines, 13 with
// this.
const direntBufSize = 64 << 10

// readNames lists the open directory d (without . and ..), reading into
// buf.
func readNames(d *os.File, buf []byte) ([]string, error) {
	fd := int(d.Fd())
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: d.Name(), Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
