//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// setEnv points cmd's TMPDIR at /tmp where it names the temporary
// directory, given (the policy's spelling) or real; cmd's environment is
// left as it is otherwise.
func (t *tmpPlan) setEnv(cmd *exec.Cmd, given string) {
	env := cmd.Environ()
	if out := privateTmpEnv(env, filepath.Clean(given), t.src); len(out) > 0 && &out[0] != &env[0] {
		cmd.Env = out
	}
}

// mount makes t in the calling thread's mount namespace, after every other
// bind (applyMountNS): it clones, with every mount beneath them, the
// directories to carry and the temporary directory, mounts the latter's
// clone on /tmp, then mounts each carried clone at its own path in the
// new /tmp, on a directory made there for it. /tmp and each directory
// made are opened without following any symlink, beneath the new /tmp
// (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a symlink a previous
// step of the command left in its /tmp fails the start instead of taking
// a mount elsewhere. fds are the policy's descriptors, by real path.
func (t *tmpPlan) mount(fds map[string]int) error {
	var clones []int
	defer func() {
		for _, c := range clones {
			_ = unix.Close(c)
		}
	}()
	clone := func(path string) (int, error) {
		want, ok := fds[path]
		if !ok {
			return -1, fmt.Errorf("%s was not opened", path)
		}
		fd, _, err := reopen(path, want)
		if err != nil {
			return -1, err
		}
		defer unix.Close(fd)
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		if err != nil {
			return -1, fmt.Errorf("%s: open_tree: %w", path, err)
		}
		clones = append(clones, tree)
		return tree, nil
	}
	src, err := clone(t.src)
	if err != nil {
		return err
	}
	carried := make([]int, len(t.carry))
	for i, d := range t.carry {
		if carried[i], err = clone(d); err != nil {
			return err
		}
	}
	tmp, st, err := reopen(hostTmp, -1)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		_ = unix.Close(tmp)
		return fmt.Errorf("%s is not a directory", hostTmp)
	}
	err = unix.MoveMount(src, "", tmp, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	_ = unix.Close(tmp)
	if err != nil {
		return fmt.Errorf("%s on %s: move_mount: %w", t.src, hostTmp, err)
	}
	if len(t.carry) == 0 {
		return nil
	}
	// The descriptor above names the host's /tmp, now beneath: open the
	// new one.
	if tmp, _, err = reopen(hostTmp, -1); err != nil {
		return err
	}
	defer unix.Close(tmp)
	for i, d := range t.carry {
		at, err := mkdirBeneath(tmp, strings.TrimPrefix(d, hostTmp+"/"))
		if err != nil {
			return fmt.Errorf("%s in the private %s: %w", d, hostTmp, err)
		}
		err = unix.MoveMount(carried[i], "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		_ = unix.Close(at)
		if err != nil {
			return fmt.Errorf("%s in the private %s: move_mount: %w", d, hostTmp, err)
		}
	}
	return nil
}

// mkdirBeneath makes each directory of rel beneath the directory dir names
// that is missing (mode 0700), and opens the last one (O_PATH), following
// no symlink and never leaving dir.
func mkdirBeneath(dir int, rel string) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	at := dir
	for _, name := range strings.Split(rel, "/") {
		if name == "" || name == "." || name == ".." {
			return -1, fmt.Errorf("%q is not a clean relative path", rel)
		}
		if err := unix.Mkdirat(at, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			if at != dir {
				_ = unix.Close(at)
			}
			return -1, fmt.Errorf("mkdir %s: %w", name, err)
		}
		next, err := unix.Openat2(at, name, how)
		if at != dir {
			_ = unix.Close(at)
		}
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", name, err)
		}
		at = next
	}
	return at, nil
}
