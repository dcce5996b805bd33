//go:build linux

package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// applyMountNS gives the calling thread, which must be locked to its
// goroutine and never be given back, a mount namespace of its own that the
// child it forks inherits. Mounts are made slaves (nothing propagates back
// to the server's namespace). With ly.roRoot every mount is then made
// read-only, which covers what Landlock does not: metadata changes (chmod,
// chown, utimensat, setxattr) outside the writable directories. Each bind
// then mounts a path onto itself, read-write (a writable directory; only
// its top mount, submounts stay read-only) or read-only with everything
// beneath (a read root, even inside a writable directory). Landlock, applied
// afterwards, forbids the child to undo any of it.
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
	for _, b := range ly.binds {
		if err := unix.Mount(b.path, b.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount namespace: bind %s: %w", b.path, err)
		}
		var err error
		if b.readOnly {
			err = unix.MountSetattr(unix.AT_FDCWD, b.path, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		} else {
			err = unix.MountSetattr(unix.AT_FDCWD, b.path, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
		}
		if err != nil {
			return fmt.Errorf("mount namespace: remount %s: %w", b.path, err)
		}
	}
	return nil
}
