package workspace

import "golang.org/x/sys/unix"

// bindMount binds src on dst.
func bindMount(src, dst string) error { return unix.Mount(src, dst, "", unix.MS_BIND, "") }

// unmount undoes bindMount.
func unmount(dst string) { unix.Unmount(dst, unix.MNT_DETACH) }
