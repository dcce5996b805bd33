//go:build linux

package sandbox

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// The classic BPF instructions and seccomp_data offsets the seccomp filters
// (netFilter, unixFilter) are written with.
const (
	bpfLd  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfAnd = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfJeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRet = unix.BPF_RET | unix.BPF_K

	seccompNr   = 0  // seccomp_data.nr
	seccompArch = 4  // seccomp_data.arch
	seccompArg0 = 16 // low 32 bits of seccomp_data.args[0] (little endian)
	seccompArg1 = 24 // low 32 bits of seccomp_data.args[1]
)

// bpfStmt is a BPF statement.
func bpfStmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

// bpfJump is a BPF jump: jt instructions ahead when the test holds, else jf.
func bpfJump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// seccompPrologue is how every filter begins: a system call of another
// architecture (x32, or 32-bit compat, whose calls the filters do not
// parse) kills the process, and the system call number is loaded.
func seccompPrologue() ([]unix.SockFilter, error) {
	arch := auditArch()
	if arch == 0 {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	prog := []unix.SockFilter{
		bpfStmt(bpfLd, seccompArch),
		bpfJump(bpfJeq, arch, 1, 0),
		bpfStmt(bpfRet, unix.SECCOMP_RET_KILL_PROCESS),
		bpfStmt(bpfLd, seccompNr),
	}
	if runtime.GOARCH == "amd64" {
		const x32Bit = 0x40000000
		prog = append(prog,
			bpfJump(bpfJge, x32Bit, 0, 1),
			bpfStmt(bpfRet, unix.SECCOMP_RET_KILL_PROCESS))
	}
	return prog, nil
}
