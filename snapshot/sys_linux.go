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
