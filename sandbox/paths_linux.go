//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// policyFDs are O_PATH descriptors of a policy's directories, by real
// path; the Landlock rules are added through them.
type policyFDs map[string]int

// close closes every descriptor.
func (f policyFDs) close() {
	for _, fd := range f {
		_ = unix.Close(fd)
	}
}

// openPolicy opens every path of p (O_PATH) and returns p with the real
// paths, which bind mounts and the nesting of read roots in writable
// directories are decided on, and the descriptors. One open and one
// readlink of /proc/self/fd per path cost less than resolving symlinks one
// component at a time. Every path must be an existing directory, but
// protected and denied paths, which may be files, and are left out when
// they do not exist, and the sources and targets of binds, which must
// exist, both directories or both regular files.
func openPolicy(p Policy) (Policy, policyFDs, error) {
	if err := p.validate(); err != nil {
		return p, nil, err
	}
	fds := make(policyFDs)
	flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	open := func(path string) (string, error) {
		if path == "" {
			return "", nil
		}
		fd, err := unix.Open(path, flags, 0)
		if err != nil {
			return "", fmt.Errorf("sandbox: %w", &os.PathError{Op: "open", Path: path, Err: err})
		}
		real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil || !strings.HasPrefix(real, "/") || strings.HasSuffix(real, " (deleted)") {
			_ = unix.Close(fd)
			return "", fmt.Errorf("sandbox: %s: cannot tell its real path (%q, %v)", path, real, err)
		}
		if old, ok := fds[real]; ok {
			_ = unix.Close(old)
		}
		fds[real] = fd
		return real, nil
	}
	out := p
	out.Writable, out.ReadRoots, out.Protect, out.DenyRead, out.Binds = nil, nil, nil, nil, nil
	var err error
	for _, d := range []struct{ in, out *string }{{&p.Root, &out.Root}, {&p.TempDir, &out.TempDir}, {&p.CacheDir, &out.CacheDir}} {
		if *d.out, err = open(*d.in); err != nil {
			fds.close()
			return p, nil, err
		}
	}
	for _, list := range []struct{ in, out *[]string }{{&p.Writable, &out.Writable}, {&p.ReadRoots, &out.ReadRoots}} {
		for _, d := range *list.in {
			r, err := open(d)
			if err != nil {
				fds.close()
				return p, nil, err
			}
			*list.out = append(*list.out, r)
		}
	}
	flags = unix.O_PATH | unix.O_CLOEXEC
	for _, list := range []struct{ in, out *[]string }{{&p.Protect, &out.Protect}, {&p.DenyRead, &out.DenyRead}} {
		for _, d := range *list.in {
			r, err := open(d)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue // nothing there to protect or hide
			}
			if err != nil {
				fds.close()
				return p, nil, err
			}
			*list.out = append(*list.out, r)
		}
	}
	for _, b := range p.Binds {
		var rb Bind
		var dir [2]bool
		for i, d := range []struct{ in, out *string }{{&b.Source, &rb.Source}, {&b.Target, &rb.Target}} {
			r, err := open(*d.in)
			if err == nil {
				dir[i], err = kindOf(fds[r])
				if err != nil {
					err = fmt.Errorf("sandbox: bind of %s on %s: %s: %w", b.Source, b.Target, *d.in, err)
				}
			}
			if err != nil {
				fds.close()
				return p, nil, err
			}
			*d.out = r
		}
		if dir[0] != dir[1] {
			fds.close()
			return p, nil, fmt.Errorf("sandbox: bind of %s on %s: one is a directory, the other a file", b.Source, b.Target)
		}
		rb.Writable, rb.Owned = b.Writable, b.Owned
		out.Binds = append(out.Binds, rb)
	}
	return out, fds, nil
}

// kindOf reports whether fd names a directory, and fails unless it names
// a directory or a regular file (what a bind may show).
func kindOf(fd int) (dir bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return true, nil
	case unix.S_IFREG:
		return false, nil
	}
	return false, errors.New("neither a directory nor a regular file")
}

// staticRule is a Landlock rule every confined command gets: "/" to read,
// or a device to use.
type staticRule struct {
	path string
	fd   int
	dir  bool
}

// staticRules opens, once per process, "/" and the devicePaths that exist
// (O_PATH, kept open): they are the same for every command.
var staticRules = sync.OnceValues(func() ([]staticRule, error) {
	var out []staticRule
	for _, p := range append([]string{"/"}, devicePaths...) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if p == "/" {
				return nil, fmt.Errorf("sandbox: %w", &os.PathError{Op: "open", Path: p, Err: err})
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			continue
		}
		out = append(out, staticRule{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return out, nil
})
