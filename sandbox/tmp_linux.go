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
// a mount elsewhere. fds are the policy's descriptors, by real path. A
// carried bind target is checked to show its source, and a file's is
// mounted on an empty file made for it.
func (t *tmpPlan) mount(fds map[string]int) error {
	var clones []int
	defer func() {
		for _, c := range clones {
			_ = unix.Close(c)
		}
	}()
	clone := func(path string) (int, bool, error) {
		shows := path
		if s, ok := t.binds[path]; ok {
			shows = s
		}
		want, ok := fds[shows]
		if !ok {
			return -1, false, fmt.Errorf("%s was not opened", shows)
		}
		tree, st, err := cloneTree(path, want)
		if err != nil {
			return -1, false, err
		}
		clones = append(clones, tree)
		return tree, st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
	}
	src, _, err := clone(t.src)
	if err != nil {
		return err
	}
	carried := make([]int, len(t.carry))
	dirs := make([]bool, len(t.carry))
	for i, d := range t.carry {
		if carried[i], dirs[i], err = clone(d); err != nil {
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
		mk := mkdirBeneath
		if !dirs[i] {
			mk = mkfileBeneath
		}
		at, err := mk(tmp, strings.TrimPrefix(d, hostTmp+"/"))
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

// mkfileBeneath makes each directory of rel's parent beneath the
// directory dir names that is missing (mkdirBeneath), and an empty regular
// file at rel if there is none, and opens it (O_PATH), following no
// symlink and never leaving dir: the mount point of a file.
func mkfileBeneath(dir int, rel string) (int, error) {
	parent, name := dir, rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		var err error
		if parent, err = mkdirBeneath(dir, rel[:i]); err != nil {
			return -1, err
		}
		defer unix.Close(parent)
		name = rel[i+1:]
	}
	if name == "" || name == "." || name == ".." {
		return -1, fmt.Errorf("%q is not a clean relative path", rel)
	}
	f, err := unix.Openat2(parent, name, &unix.OpenHow{
		Flags:   unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: beneath,
	})
	if err == nil {
		_ = unix.Close(f)
	} else if !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("create %s: %w", name, err)
	}
	at, err := unix.Openat2(parent, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(at, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(at)
		return -1, fmt.Errorf("%s is not a regular file (%v)", name, err)
	}
	return at, nil
}
