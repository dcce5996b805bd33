//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Filesystem rights by Landlock ABI.
const (
	// fsABI1 are the rights of ABI 1.
	fsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// fsRead is what every mode grants on "/": read and execute.
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fsFileOnly are the rights a rule on a file (not a directory) may hold.
	fsFileOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// fsNeverInWritable are withheld from writable directories: device
	// nodes made there would open raw disks or memory to a root command,
	// and no device belongs in a workspace.
	fsNeverInWritable = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// fsDevice is what the usable devices get: read, write, truncate (an
	// O_TRUNC open of /dev/null) and ioctl (a terminal's tcsetattr).
	fsDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// devicePaths stay usable in every mode: the null devices, the controlling
// terminal and the pseudo-terminals (so that a PTY works). Missing ones are
// skipped.
var devicePaths = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// handledFS returns the filesystem rights ABI abi knows, but
// LANDLOCK_ACCESS_FS_RESOLVE_UNIX (ABI 9), which restrictThread handles
// only for a command whose network is confined.
func handledFS(abi int) uint64 {
	r := uint64(fsABI1)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// restrictThread builds the Landlock ruleset of ly with raw syscalls, sets
// no_new_privs and restricts the calling thread, which must be locked to
// its goroutine and never be given back. Other threads of the process are
// not touched (no TSYNC): only children this thread forks inherit the
// domain.
func restrictThread(ly layers) error {
	var attr unix.LandlockRulesetAttr
	if ly.fsHandled {
		attr.Handled_access_fs = handledFS(ly.abi)
		if ly.unixLandlock {
			// Granted beneath the writable directories only: a pathname
			// unix socket elsewhere is out of reach (ABI 9).
			attr.Handled_access_fs |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
		}
	}
	if ly.netTCP {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if ly.scoped {
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	// The struct is larger than older ABIs know; the kernel accepts it as
	// long as the fields it does not know are zero.
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	ruleset := int(r)
	defer unix.Close(ruleset)

	if ly.fsHandled {
		handled := attr.Handled_access_fs
		static, err := staticRules()
		if err != nil {
			return err
		}
		for _, r := range static {
			rights := fsDevice & handled
			switch {
			case r.path == "/" && ly.fsGrantAll:
				rights = handled
			case r.path == "/":
				rights = fsRead & handled
			case ly.fsGrantAll:
				continue // "/" grants it all already
			}
			if err := addRule(ruleset, r.path, r.fd, r.dir, rights); err != nil {
				return err
			}
		}
		if !ly.fsGrantAll {
			for _, w := range ly.writable {
				fd, ok := ly.fds[w]
				if !ok {
					return fmt.Errorf("landlock rule: %s was not opened", w)
				}
				if err := addRule(ruleset, w, fd, true, handled&^fsNeverInWritable); err != nil {
					return err
				}
			}
			// A writable bind's source: a rule on the bind's root,
			// which a path beneath the target reaches first.
			for _, src := range ly.bindRules {
				fd, ok := ly.fds[src]
				if !ok {
					return fmt.Errorf("landlock rule: %s was not opened", src)
				}
				dir, err := kindOf(fd)
				if err != nil {
					return fmt.Errorf("landlock rule: %s: %w", src, err)
				}
				if err := addRule(ruleset, src, fd, dir, handled&^fsNeverInWritable); err != nil {
					return err
				}
			}
		}
	}
	if ly.netTCP && ly.proxyPort != 0 {
		if err := allowProxyConnect(ruleset, ly.proxyPort); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// addRule grants rights beneath the directory fd (or on the file fd, where
// only the file rights apply) of path. A writable path must be a
// directory.
func addRule(ruleset int, path string, fd int, dir bool, rights uint64) error {
	if !dir {
		rights &= fsFileOnly
	}
	if rights == 0 {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
		return &os.PathError{Op: "landlock_add_rule", Path: path, Err: e}
	}
	return nil
}
