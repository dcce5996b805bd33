//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A command whose network is confined must not reach a pathname unix
// socket outside its writable directories either: a Docker socket is root
// on the machine, an ssh-agent signs as the user, and a network namespace
// does not hide filesystem sockets.
//
// Landlock ABI 9 has a right for it, LANDLOCK_ACCESS_FS_RESOLVE_UNIX
// (1 << 16): once handled, connect(2) and sendmsg(2) to a pathname socket
// succeed only beneath a directory whose rule grants it (the writable
// ones, here) or to a server of the same Landlock domain. Older kernels get
// unixFilter instead, which refuses to make such a socket at all.

// unixFilter is the seccomp program that keeps a command from unix sockets
// on kernels without Landlock ABI 9: socket(AF_UNIX, ...) fails with
// EACCES, and so does socketpair(AF_UNIX, SOCK_DGRAM, ...), whose sockets
// would sendto(2) any pathname address; other socketpairs, which have no
// address, still work (pipes of Node, Python and the like).
// io_uring_setup, whose IORING_OP_SOCKET and IORING_OP_CONNECT would step
// around the filter, fails with ENOSYS, and a system call of another
// architecture (x32, or a 32-bit compat socketcall the filter does not
// parse) kills the process. It is stacked on any other filter of the
// thread: the kernel runs them all and the strictest answer wins, so the
// order of installation does not matter.
func unixFilter() ([]unix.SockFilter, error) {
	prog, err := seccompPrologue()
	if err != nil {
		return nil, err
	}
	const (
		// sockTypeMask is SOCK_TYPE_MASK: the type without SOCK_NONBLOCK
		// and SOCK_CLOEXEC.
		sockTypeMask = 0xf
	)
	refuse := bpfStmt(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	allow := bpfStmt(bpfRet, unix.SECCOMP_RET_ALLOW)
	prog = append(prog,
		bpfJump(bpfJeq, unix.SYS_IO_URING_SETUP, 0, 1),
		bpfStmt(bpfRet, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)),
		// socket(AF_UNIX, ...): refused.
		bpfJump(bpfJeq, unix.SYS_SOCKET, 0, 4),
		bpfStmt(bpfLd, seccompArg0),
		bpfJump(bpfJeq, unix.AF_UNIX, 0, 1),
		refuse,
		allow,
		// socketpair(AF_UNIX, SOCK_DGRAM, ...): refused.
		bpfJump(bpfJeq, unix.SYS_SOCKETPAIR, 0, 6),
		bpfStmt(bpfLd, seccompArg0),
		bpfJump(bpfJeq, unix.AF_UNIX, 0, 4),
		bpfStmt(bpfLd, seccompArg1),
		bpfStmt(bpfAnd, sockTypeMask),
		bpfJump(bpfJeq, unix.SOCK_DGRAM, 0, 1),
		refuse,
		allow,
	)
	return prog, nil
}

// installUnixFilter sets no_new_privs and installs unixFilter on the
// calling thread only (no TSYNC), which must be locked to its goroutine
// and never be given back. The thread makes no unix socket afterwards:
// it forks and waits for the command, nothing else.
func installUnixFilter() error {
	prog, err := unixFilter()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(prog)
	return nil
}
