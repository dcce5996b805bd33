//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// mountPoints are the mount points masks hold for bind targets (by real
// path): the inode numbers, in the masks' tmpfs, of the empty directories
// or files made there. A bind target in a denied directory is opened
// through the mask, not on the machine, and checked to be one of them.
type mountPoints map[string][]uint64

// beneath are the openat2 resolve flags of a path opened beneath a
// directory of the namespace: no symlink, no way out.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// rel returns path relative to dir, which holds it ("" for dir itself).
func rel(dir, path string) string {
	if path == dir {
		return ""
	}
	return strings.TrimPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// cloneTree clones the file or directory path names, checked against the
// policy's descriptor want (reopen), with every mount beneath it.
func cloneTree(path string, want int) (int, unix.Stat_t, error) {
	fd, st, err := reopen(path, want)
	if err != nil {
		return -1, st, err
	}
	defer unix.Close(fd)
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return -1, st, fmt.Errorf("%s: open_tree: %w", path, err)
	}
	return tree, st, nil
}

// maskHolding masks the denied directory hm.path, which holds directories
// the command uses or bind targets: each held directory is cloned as it
// is now (with its binds, and the masks beneath it), the mask is made
// with the path down to each held directory and target (directories of
// the mode and owner of those they stand for, and at a target an empty
// directory or file like it), mounted over the denied directory, and
// each clone is mounted at its own path on it. The inode of each target's
// mount point goes to points. So the command sees, in the denied
// directory, the path down to what it uses and nothing else.
func (s *scratch) maskHolding(hm holdingMask, fds map[string]int, points mountPoints) error {
	want, ok := fds[hm.path]
	if !ok {
		return errors.New("it was not opened")
	}
	fd, st, err := reopen(hm.path, want)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && len(hm.dirs) > 0 {
		return errors.New("a file holds directories")
	}
	clones := make([]int, 0, len(hm.dirs))
	defer func() {
		for _, c := range clones {
			_ = unix.Close(c)
		}
	}()
	for _, h := range hm.dirs {
		w, ok := fds[h]
		if !ok {
			return fmt.Errorf("%s was not opened", h)
		}
		tree, _, err := cloneTree(h, w)
		if err != nil {
			return err
		}
		clones = append(clones, tree)
	}
	name, err := s.entry(st)
	if err != nil {
		return err
	}
	for _, h := range hm.dirs {
		if _, err := s.makePath(name, fd, rel(hm.path, h), true); err != nil {
			return fmt.Errorf("the path down to %s: %w", h, err)
		}
	}
	for _, t := range hm.targets {
		w, ok := fds[t]
		if !ok {
			return fmt.Errorf("%s was not opened", t)
		}
		dir, err := kindOf(w)
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		ino, err := s.makePath(name, fd, rel(hm.path, t), dir)
		if err != nil {
			return fmt.Errorf("the path down to %s: %w", t, err)
		}
		points[t] = append(points[t], ino)
	}
	tree, err := s.mount(name, fd)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	for i, h := range hm.dirs {
		at, err := unix.Openat2(tree, rel(hm.path, h), &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: beneath | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			return fmt.Errorf("%s on the mask: open: %w", h, err)
		}
		err = unix.MoveMount(clones[i], "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		_ = unix.Close(at)
		if err != nil {
			return fmt.Errorf("%s on the mask: move_mount: %w", h, err)
		}
	}
	return nil
}

// makePath makes in the tmpfs the path p beneath its entry name, each
// directory of the mode and owner of the one at the same path beneath
// host (the denied directory, looked at without following a symlink; 0755
// and the server's where there is none), and the last a directory if dir,
// else an empty regular file. It returns the last one's inode number; p
// "" is the entry itself.
func (s *scratch) makePath(name string, host int, p string, dir bool) (uint64, error) {
	path := name
	if p != "" {
		parts := strings.Split(p, "/")
		for i, part := range parts {
			if part == "" || part == "." || part == ".." {
				return 0, fmt.Errorf("%q is not a clean relative path", p)
			}
			path += "/" + part
			var st unix.Stat_t
			if err := unix.Fstatat(host, strings.Join(parts[:i+1], "/"), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				st = unix.Stat_t{Mode: unix.S_IFDIR | 0o755, Uid: uint32(unix.Geteuid()), Gid: uint32(unix.Getegid())}
			}
			last := i == len(parts)-1
			st.Mode = st.Mode&0o7777 | unix.S_IFDIR
			if last && !dir {
				st.Mode = st.Mode&0o7777 | unix.S_IFREG
			}
			err := s.make(path, st)
			if errors.Is(err, unix.EEXIST) && !last {
				continue // on the path down to another one
			}
			if err != nil {
				return 0, err
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(s.mnt, path, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// cloneProtects clones, read-only with every mount beneath, each
// protected path a writable bind's target holds, as the other binds left
// it, to be mounted again on top of the bind; by real path. The clones
// are returned even with an error, for the caller to close.
func cloneProtects(ly layers) (map[string]int, error) {
	kept := make(map[string]int)
	for _, b := range ly.sources {
		for _, pp := range b.protects {
			if _, ok := kept[pp]; ok {
				continue
			}
			want, ok := ly.fds[pp]
			if !ok {
				return kept, fmt.Errorf("%s was not opened", pp)
			}
			tree, _, err := cloneTree(pp, want)
			if err != nil {
				return kept, err
			}
			kept[pp] = tree
			if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return kept, fmt.Errorf("%s: mount_setattr: %w", pp, err)
			}
		}
	}
	return kept, nil
}

// applySources makes the policy's binds (ly.sources). Every source is
// cloned first, with every mount beneath it (the masks of denied paths,
// the read-only binds), as the masks and binds before left it: a bind
// never shows another bind. A read-only clone is made read-only with
// every mount in it; a writable one has its top mount read-write (the
// mounts beneath stay as they were). Each clone is then mounted on its
// target: opened without following a symlink and checked to be the
// policy's (or, in a denied directory, the mount point its mask holds,
// points; sc is the masks' tmpfs), of the source's kind. In a writable
// bind, the protected paths and read roots are then kept read-only
// (keepReadOnly; kept are the clones of the target's protected paths, by
// path).
func applySources(ly layers, sc *scratch, points mountPoints, kept map[string]int) error {
	clones := make([]int, 0, len(ly.sources))
	defer func() {
		for _, c := range clones {
			_ = unix.Close(c)
		}
	}()
	dirs := make([]bool, 0, len(ly.sources))
	for _, b := range ly.sources {
		want, ok := ly.fds[b.source]
		if !ok {
			return fmt.Errorf("bind source %s was not opened", b.source)
		}
		tree, st, err := cloneTree(b.source, want)
		if err != nil {
			return fmt.Errorf("bind source: %w", err)
		}
		clones = append(clones, tree)
		dirs = append(dirs, st.Mode&unix.S_IFMT == unix.S_IFDIR)
		attr, flags := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}, unix.AT_RECURSIVE
		if b.writable {
			attr, flags = &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}, 0
		}
		if err := unix.MountSetattr(tree, "", uint(unix.AT_EMPTY_PATH|flags), attr); err != nil {
			return fmt.Errorf("bind source %s: mount_setattr: %w", b.source, err)
		}
	}
	for i, b := range ly.sources {
		fd, err := openTarget(b.target, ly.fds, sc, points)
		if err != nil {
			return fmt.Errorf("bind target: %w", err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err == nil && (st.Mode&unix.S_IFMT == unix.S_IFDIR) != dirs[i] {
			err = errors.New("not of its source's kind")
		}
		if err == nil {
			err = unix.MoveMount(clones[i], "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bind of %s on %s: %w", b.source, b.target, err)
		}
		if err := keepReadOnly(clones[i], b, ly.fds, kept); err != nil {
			return err
		}
	}
	return nil
}

// openTarget opens the bind target path without following a symlink, and
// checks that it is the policy's (fds) or, where a mask holds it, the
// mount point the mask holds (points, in sc's tmpfs).
func openTarget(path string, fds map[string]int, sc *scratch, points mountPoints) (int, error) {
	inos, held := points[path]
	if !held {
		want, ok := fds[path]
		if !ok {
			return -1, fmt.Errorf("%s was not opened", path)
		}
		fd, _, err := reopen(path, want)
		return fd, err
	}
	fd, st, err := reopen(path, -1)
	if err != nil {
		return -1, err
	}
	if sc == nil || st.Dev != sc.dev || !slices.Contains(inos, st.Ino) {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("%s is not the mount point its mask holds", path)
	}
	return fd, nil
}

// keepReadOnly keeps read-only, in the writable bind b whose clone tree
// is attached at its target, the protected paths and read roots beneath
// its source (b.keep: each is opened in the bind, checked to be the
// policy's, fds, and bound read-only on itself with every mount beneath)
// and the protected paths beneath its target (b.protects: the read-only
// clone of each, kept, is mounted at the same path in the bind, on top).
// The directories between are pinned first, in the bind, so that they
// stay writable and cannot be renamed or removed. The source must hold
// each path, of the same kind; otherwise the start fails rather than
// leave it writable.
func keepReadOnly(tree int, b sourceBind, fds map[string]int, kept map[string]int) error {
	type item struct {
		path, rel string
		clone     int // -1: bind it on itself
	}
	var items []item
	for _, x := range b.keep {
		items = append(items, item{x, rel(b.source, x), -1})
	}
	for _, pp := range b.protects {
		items = append(items, item{pp, rel(b.target, pp), kept[pp]})
	}
	// Shallow first, so that a deeper one lands on the one above it, and
	// at one path a protected path of the target on top.
	slices.SortStableFunc(items, func(a, b item) int {
		if c := strings.Compare(a.rel, b.rel); c != 0 {
			return c
		}
		return a.clone - b.clone
	})
	pinned := make(map[string]bool)
	for _, it := range items {
		pinned[it.rel] = true // mounted on itself: no pin
	}
	for _, it := range items {
		fail := func(err error) error {
			return fmt.Errorf("%s in the writable bind on %s: %w", it.path, b.target, err)
		}
		var between []string
		for dir := filepath.Dir(it.rel); dir != "."; dir = filepath.Dir(dir) {
			between = append(between, dir)
		}
		slices.Reverse(between) // shallow first
		for _, dir := range between {
			if pinned[dir] {
				continue
			}
			pinned[dir] = true
			fd, err := unix.Openat2(tree, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
			if err != nil {
				return fail(fmt.Errorf("no directory %s there: %w", dir, err))
			}
			err = bindSelf(fd, nil, 0)
			_ = unix.Close(fd)
			if err != nil {
				return fail(fmt.Errorf("pin %s: %w", dir, err))
			}
		}
		at, err := unix.Openat2(tree, it.rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
		if err != nil {
			return fail(fmt.Errorf("nothing at %s there to keep it on: %w", it.rel, err))
		}
		err = keepAt(at, it.path, it.clone, fds)
		_ = unix.Close(at)
		if err != nil {
			return fail(err)
		}
	}
	return nil
}

// keepAt makes the file at names, in a writable bind, read-only: with
// clone -1, at must be path's file (fds) and is bound read-only on itself
// with every mount beneath; else clone, path's read-only clone, is
// mounted on it, which must be of its kind.
func keepAt(at int, path string, clone int, fds map[string]int) error {
	var st, was unix.Stat_t
	if err := unix.Fstat(at, &st); err != nil {
		return err
	}
	if clone < 0 {
		want, ok := fds[path]
		if !ok {
			return errors.New("it was not opened")
		}
		if err := unix.Fstat(want, &was); err != nil {
			return err
		}
		if st.Dev != was.Dev || st.Ino != was.Ino {
			return errors.New("it changed since the policy was opened")
		}
		return bindSelf(at, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}, unix.AT_RECURSIVE)
	}
	if err := unix.Fstat(clone, &was); err != nil {
		return err
	}
	if (st.Mode&unix.S_IFMT == unix.S_IFDIR) != (was.Mode&unix.S_IFMT == unix.S_IFDIR) {
		return errors.New("what the source holds there is not of its kind")
	}
	return unix.MoveMount(clone, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
