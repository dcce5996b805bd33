//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// applyMountNS gives the calling thread, which must be locked to its
// goroutine and never be given back, a mount namespace of its own that the
// child it forks inherits. Mounts are made slaves (nothing propagates back
// to the server's namespace). With ly.roRoot every mount is then made
// read-only, which covers what Landlock does not: metadata changes (chmod,
// chown, utimensat, setxattr) outside the writable directories. The binds
// follow in order (see bindKind): writable directories read-write (only
// their top mount: submounts stay read-only), pins, read roots and
// protected paths read-only with everything beneath (even inside a
// writable directory), denied paths masked; with ly.maskDevices every
// block device under /dev is masked too; then the denied directories that
// hold directories the command uses or bind targets are masked, deepest
// first, with those directories mounted again on the masks (ly.holding,
// binds_linux.go); with ly.procfs a /proc of the thread's PID namespace
// for children replaces /proc; the policy's binds are made
// (ly.sources, binds_linux.go), each source cloned with every mask and
// read-only bind beneath it; and with ly.tmp the command's temporary
// directory replaces /tmp (tmp_linux.go), carrying the binds in it.
// Landlock, applied afterwards, forbids the child to undo any of it.
//
// Each path is opened again in the new namespace without following a
// symlink (openat2 RESOLVE_NO_SYMLINKS), checked to be the file the
// policy's descriptor (ly.fds, opened by openPolicy) names, and mounted
// over through that descriptor (open_tree, move_mount): a symlink or a
// directory swapped in meanwhile fails the start instead of redirecting
// a mount.
func applyMountNS(ly layers) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("mount namespace: unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("mount namespace: make-rslave: %w", err)
	}
	if ly.roRoot {
		if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("mount namespace: read-only /: %w", err)
		}
	}
	var sc *scratch
	defer func() { sc.close() }()
	for _, b := range ly.binds {
		want, ok := ly.fds[b.path]
		if !ok && b.kind != bindPin {
			return fmt.Errorf("mount namespace: %s was not opened", b.path)
		}
		if !ok {
			want = -1
		}
		fd, st, err := reopen(b.path, want)
		if err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
		switch b.kind {
		case bindWritable:
			err = bindSelf(fd, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}, 0)
		case bindPin:
			err = bindSelf(fd, nil, 0)
		case bindReadOnly:
			err = bindSelf(fd, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}, unix.AT_RECURSIVE)
		case bindMask:
			if sc == nil {
				sc, err = newScratch()
			}
			if err == nil {
				err = sc.mask(fd, st)
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("mount namespace: %s: %w", b.path, err)
		}
	}
	if ly.maskDevices || len(ly.holding) > 0 {
		if sc == nil {
			var err error
			if sc, err = newScratch(); err != nil {
				return fmt.Errorf("mount namespace: %w", err)
			}
		}
	}
	if ly.maskDevices {
		if err := maskBlockDevices(sc); err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
	}
	// The protected paths a writable bind's target holds, cloned before
	// the masks that hold them.
	kept, err := cloneProtects(ly)
	defer func() {
		for _, fd := range kept {
			_ = unix.Close(fd)
		}
	}()
	if err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	points := make(mountPoints)
	for _, hm := range ly.holding {
		if err := sc.maskHolding(hm, ly.fds, points); err != nil {
			return fmt.Errorf("mount namespace: %s: %w", hm.path, err)
		}
	}
	if ly.procfs {
		// Before the binds: a source that holds /proc shows this one.
		if err := mountProc(ly.roRoot); err != nil {
			return fmt.Errorf("mount namespace: /proc: %w", err)
		}
	}
	if len(ly.sources) > 0 {
		if err := applySources(ly, sc, points, kept); err != nil {
			return fmt.Errorf("mount namespace: %w", err)
		}
	}
	if ly.tmp != nil {
		if err := ly.tmp.mount(ly.fds); err != nil {
			return fmt.Errorf("mount namespace: private /tmp: %w", err)
		}
	}
	return nil
}

// reopen opens path (O_PATH) without following any symlink and, when want
// is a descriptor, checks that both name the same file. It returns the
// descriptor, which the caller closes, and what it names.
func reopen(path string, want int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: the identity check below still holds.
		fd, err = unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if want < 0 {
		return fd, st, nil
	}
	var was unix.Stat_t
	if err := unix.Fstat(want, &was); err != nil {
		_ = unix.Close(fd)
		return -1, st, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Dev != was.Dev || st.Ino != was.Ino {
		_ = unix.Close(fd)
		return -1, st, fmt.Errorf("%s changed since the policy was opened", path)
	}
	return fd, st, nil
}

// bindSelf binds the file fd names on itself with everything beneath it,
// and first changes the new mounts' attributes by attr (all of them with
// flags AT_RECURSIVE, else the top one) when attr is not nil.
func bindSelf(fd int, attr *unix.MountAttr, flags int) error {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if attr != nil {
		if err := unix.MountSetattr(tree, "", uint(unix.AT_EMPTY_PATH|flags), attr); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// maskAttr are the attributes of every mask: read-only, and nothing on it
// runs or opens a device.
const maskAttr = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// scratch is a detached tmpfs of one command's mount namespace that holds
// the empty directories and files masks are cloned from: one entry per
// mask, with the mode and owner of the file it hides, so that stat shows
// an empty directory or file of the same mode and owner. Nothing reaches
// the tmpfs but the read-only clones.
type scratch struct {
	mnt int    // the detached mount; closed by close
	n   int    // entries made so far
	dev uint64 // the tmpfs's device number
}

// newScratch makes the tmpfs.
func newScratch() (*scratch, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("masks: fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, o := range [][2]string{{"size", "4k"}, {"mode", "0755"}} {
		if err := unix.FsconfigSetString(fs, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("masks: tmpfs %s: %w", o[0], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("masks: tmpfs: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("masks: fsmount: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(mnt, &st); err != nil {
		_ = unix.Close(mnt)
		return nil, fmt.Errorf("masks: stat: %w", err)
	}
	return &scratch{mnt: mnt, dev: st.Dev}, nil
}

// close closes the detached mount; the clones keep the tmpfs alive. A nil
// scratch has nothing to close.
func (s *scratch) close() {
	if s != nil {
		_ = unix.Close(s.mnt)
	}
}

// mask mounts over the file fd names (described by st) an empty read-only
// directory, if it is one, else an empty regular file.
func (s *scratch) mask(fd int, st unix.Stat_t) error {
	name, err := s.entry(st)
	if err != nil {
		return err
	}
	tree, err := s.mount(name, fd)
	if err != nil {
		return err
	}
	_ = unix.Close(tree)
	return nil
}

// entry makes the next entry of the tmpfs: an empty directory if st
// describes one, else an empty regular file, with st's mode and owner. It
// returns its name.
func (s *scratch) entry(st unix.Stat_t) (string, error) {
	s.n++
	name := "m" + strconv.Itoa(s.n)
	if err := s.make(name, st); err != nil {
		return "", fmt.Errorf("mask: %w", err)
	}
	return name, nil
}

// make makes path in the tmpfs: an empty directory if st describes one,
// else an empty regular file, with st's mode and owner.
func (s *scratch) make(path string, st unix.Stat_t) error {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := unix.Mkdirat(s.mnt, path, 0o700); err != nil {
			return err
		}
	} else {
		f, err := unix.Openat(s.mnt, path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		_ = unix.Close(f)
	}
	// Without privileges over the owner (no such server makes a mount
	// namespace today) the entry keeps the server's.
	if err := unix.Fchownat(s.mnt, path, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("chown: %w", err)
	}
	if err := unix.Fchmodat(s.mnt, path, st.Mode&0o7777, 0); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return nil
}

// mount clones the entry name of the tmpfs, makes the clone read-only
// (maskAttr) and mounts it over the file fd names. It returns the clone,
// attached there, which the caller closes.
func (s *scratch) mount(name string, fd int) (int, error) {
	tree, err := unix.OpenTree(s.mnt, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("mask: open_tree: %w", err)
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: maskAttr}); err != nil {
		_ = unix.Close(tree)
		return -1, fmt.Errorf("mask: mount_setattr: %w", err)
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		_ = unix.Close(tree)
		return -1, fmt.Errorf("mask: move_mount: %w", err)
	}
	return tree, nil
}

// maskBlockDevices masks every block device directly under /dev (disks,
// partitions, loop and zram devices; the names under /dev/disk and
// /dev/mapper are symlinks to them) that holds any byte the command could
// read: root reads a disk raw, and a denied file's bytes with it. The
// calling thread tries to open each for reading first: one it cannot open
// (a device cgroup or its mode forbids it), the command, with the same
// user, cgroups and fewer capabilities, cannot either, and an empty one
// (an unbound loop device) holds nothing; both are left alone, sparing a
// mount each.
func maskBlockDevices(sc *scratch) error {
	ents, err := os.ReadDir("/dev")
	if err != nil {
		return fmt.Errorf("block devices: %w", err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeDevice == 0 || e.Type()&os.ModeCharDevice != 0 {
			continue
		}
		path := "/dev/" + e.Name()
		if !readableDevice(path) {
			continue
		}
		fd, st, err := reopen(path, -1)
		if err != nil {
			return fmt.Errorf("block devices: %w", err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			err = sc.mask(fd, st)
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("block device %s: %w", path, err)
		}
	}
	return nil
}

// readableDevice reports whether the block device at path opens for
// reading (without waiting for a medium) and holds any byte.
func readableDevice(path string) bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		return true // no size to tell: mask it
	}
	return size > 0
}

// procAttr are the attributes of a command's /proc, read-only as well when
// every other mount is.
const procAttr = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// mountProc mounts over /proc a procfs of the calling thread's PID
// namespace for children, which must have its init already: processes
// outside it have no entry there. The thread itself is outside that
// namespace, so it must need /proc no more. A procfs mounted the usual way
// shows the mounter's own PID namespace; fsconfig's pidns option (Linux
// 6.18) names another.
func mountProc(readOnly bool) error {
	ns, err := unix.Open("/proc/thread-self/ns/pid_for_children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the PID namespace: %w", err)
	}
	defer unix.Close(ns)
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen proc: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetFd(fs, "pidns", ns); err != nil {
		return fmt.Errorf("fsconfig pidns: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("fsconfig create: %w", err)
	}
	attr := procAttr
	if readOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, "/proc", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}
