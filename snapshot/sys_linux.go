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

// lstatIn looks at name in the open directory fd with one fstatat, never
// following a symlink: its kind (0 for what is not taken), its 07777 bits
// and the stat the index compares. cname is name with a NUL after it (see
// dirListing), which spares the call a copy of the name.
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
	st = fileStat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: s.Ino, dev: uint64(s.Dev)}
	return kind, s.Mode & 0o7777, st, nil
}

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
// there, which a blob's name never is), 5% of a first snapshot's CPU.
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
