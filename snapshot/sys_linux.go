//go:build linux

package snapshot

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statTimes: Linux names a stat's times Mtim and Ctim.
func statTimes(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) {
	return st.Mtim, st.Ctim
}

// devNumber: Linux's dev_t is unsigned, 32 or 64 bits by architecture.
func devNumber[T uint32 | uint64](d T) uint64 { return uint64(d) }

// platformClone is FICLONE: dst shares src's extents (a reflink). Filesystems
// without reflinks answer EOPNOTSUPP (ext4), EXDEV across filesystems, or
// EINVAL.
func platformClone(dst, src *os.File) error {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
}

// syncFS flushes the whole filesystem holding f (syncfs(2)): one call in
// place of an fsync per blob. It returns writeback errors since Linux 5.8.
func syncFS(f *os.File) error {
	return unix.Syncfs(int(f.Fd()))
}

const haveSyncFS = true

// direntBufSize is the buffer of one getdents64: a directory of a few
// hundred entries in one call. A scan worker keeps one: os's Readdirnames
// allocates a buffer for every directory it opens, which made listing a
// tree's directories markedly slower.
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

// fsTopDir is FS_TOPDIR_FL (linux/fs.h), "top of directory hierarchies":
// ext4 places the subdirectories of a directory so marked apart, each in
// a block group with room, as it places the filesystem root's.
const fsTopDir = 0x00020000

// spreadSubdirs marks dir so that the filesystem spreads the directories
// made in it (the store's blob shards) over the disk rather than packing
// them beside dir, where the last store removed left its inodes: on ext4
// without a journal, creating a file scans past every inode of its block
// group freed in the last minute, which made a first snapshot taken just
// after a removal spend most of its time there. Best effort: a filesystem
// without the flag ignores it.
func spreadSubdirs(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopDir != 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|fsTopDir)
}

// renameBlob renames a written blob to its name: rename(2) itself, without
// the Lstat of the new name os.Rename makes first (to refuse a directory
// there, which a blob's name never is), a visible part of a first
// snapshot's CPU.
func renameBlob(from, to string) error {
	if err := unix.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// keepsListings reports whether the filesystem holding dir is one whose
// directories' mtime and ctime change with every entry made, removed or
// renamed, as seen by this machine at once: the local filesystems listed
// here. A network filesystem's attributes may be cached for seconds (NFS,
// SMB), and a FUSE one's are what its daemon says, so their directories
// are listed every scan (see dirListing).
func keepsListings(dir string) bool {
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil {
		return false
	}
	switch uint32(s.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.F2FS_SUPER_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, 0x2fc12fc1: // the last: ZFS
		return true
	}
	return false
}
