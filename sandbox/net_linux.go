//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// unshareNet gives the calling thread, which must be locked to its
// goroutine and never be given back, a network namespace of its own that
// the child it forks inherits, and brings its loopback up: the child can
// talk to itself on 127.0.0.1 (UDP; Landlock still denies TCP) and to
// nothing else. Abstract unix sockets belong to the network namespace, so
// those outside are out of reach too.
func unshareNet() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("network namespace: unshare: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace: loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("network namespace: loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("network namespace: loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("network namespace: loopback up: %w", err)
	}
	return nil
}

// setUserNetNS makes attr clone the child into a new user namespace and a
// new network namespace. The child's uid and gid maps are written by
// writeIDMaps while it is stopped at its exec: os/exec would write them
// from the forking thread, which is confined by then and may not write
// under /proc.
func setUserNetNS(attr *syscall.SysProcAttr) error {
	if attr.UidMappings != nil || attr.GidMappings != nil || attr.Cloneflags&unix.CLONE_NEWUSER != 0 {
		return errors.New("network namespace: the command already asks for a user namespace")
	}
	attr.Cloneflags |= unix.CLONE_NEWUSER | unix.CLONE_NEWNET
	return nil
}

// writeIDMaps maps, in the user namespace of pid, only the server's uid
// and gid, to themselves: the child sees its own ids and keeps no
// capability across its exec. setgroups is denied first, as the kernel
// requires of an unprivileged writer of gid_map.
func writeIDMaps(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []struct{ name, text string }{
		{"setgroups", "deny"},
		{"uid_map", fmt.Sprintf("%d %d 1", os.Geteuid(), os.Geteuid())},
		{"gid_map", fmt.Sprintf("%d %d 1", os.Getegid(), os.Getegid())},
	} {
		if err := os.WriteFile(dir+f.name, []byte(f.text), 0); err != nil {
			return fmt.Errorf("user namespace: %w", err)
		}
	}
	return nil
}

// auditArch is the seccomp architecture of this build, 0 where the filter
// is not written for it.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// netFilter is the seccomp program that cuts a child off the network where
// no network namespace can be made: socket() for AF_INET, AF_INET6 and
// AF_PACKET fails with EACCES, io_uring_setup (which can open sockets
// without socket()) with ENOSYS, and a system call of another architecture
// (x32, or 32-bit compat, whose socketcall the filter does not parse) kills
// the process.
func netFilter() ([]unix.SockFilter, error) {
	prog, err := seccompPrologue()
	if err != nil {
		return nil, err
	}
	prog = append(prog,
		bpfJump(bpfJeq, unix.SYS_IO_URING_SETUP, 0, 1),
		bpfStmt(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)),
		bpfJump(bpfJeq, unix.SYS_SOCKET, 0, 5),
		bpfStmt(bpfLd, seccompArg0),
		bpfJump(bpfJeq, unix.AF_INET, 2, 0),
		bpfJump(bpfJeq, unix.AF_INET6, 1, 0),
		bpfJump(bpfJeq, unix.AF_PACKET, 0, 1),
		bpfStmt(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES)),
		bpfStmt(bpfRet, unix.SECCOMP_RET_ALLOW),
	)
	return prog, nil
}

// installNetFilter installs netFilter on the calling thread only (no
// TSYNC); no_new_privs must be set on it already.
func installNetFilter() error {
	prog, err := netFilter()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(prog)
	return nil
}

// dropCaps removes from the calling thread's bounding set the capabilities
// that would let a root command step around the other layers or harm the
// machine: load modules, reboot, raw I/O, open files by handle past path
// checks, mount, trace, make devices, configure the network, set the clock,
// administer LSMs, BPF and audit, or raise its hard rlimits (RLIMIT_CPU).
// CAP_NET_RAW stays (ping); with the network off the namespace or the
// seccomp filter holds raw sockets in. A child forked by the thread never gains
// them at exec. The thread itself keeps its effective set.
func dropCaps() error {
	for _, c := range []uintptr{
		unix.CAP_SYS_MODULE, unix.CAP_SYS_BOOT, unix.CAP_SYS_RAWIO, unix.CAP_DAC_READ_SEARCH,
		unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_MKNOD, unix.CAP_NET_ADMIN,
		unix.CAP_SYS_TIME, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
		unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYSLOG, unix.CAP_AUDIT_CONTROL,
		unix.CAP_LINUX_IMMUTABLE, unix.CAP_SYS_RESOURCE,
	} {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			return fmt.Errorf("capability bounding set: %w", err)
		}
	}
	return nil
}
