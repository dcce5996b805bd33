//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A confined command gets a PID namespace of its own: the forking thread
// unshares CLONE_NEWPID, so that every child it forks afterwards is born
// in the new namespace, and forks first a tiny init, the namespace's pid
// 1, then the command, pid 2.
//
// The command is no pid 1, so everything about it stays as it was: it is
// the server's child (os/exec waits for it and sees the signal it died
// of), the kernel delivers it every signal (to a pid 1 it drops those the
// process has no handler for, even SIGTERM from the server), it leads its
// process group or its terminal's session, and the server signals its
// groups and reads its /proc entries with the pids of its own namespace.
// What pid 1 must do, the init does: the orphans of the namespace are
// re-parented to it (a subreaper outside the namespace is not looked for),
// and it ignores SIGCHLD, so the kernel reaps them as they exit; a zombie
// would keep a process group alive in the eyes of the kill ladder.
//
// When the init dies the kernel SIGKILLs everything left in the namespace
// and only then lets the init be reaped: Finish kills it and waits, so
// nothing of the command outlives Finish, not even a process that left
// its groups, cleared its environment and escaped every cgroup. The init
// dies by Pdeathsig too, when the forking thread exits, so the tree of a
// SIGKILLed server ends as well.
//
// The init is no Go program: initCode, about 120 bytes of machine code
// (pidns_init_<arch>.go, amd64 and arm64) in a static ELF file, sets its name, makes itself non-dumpable (no
// ptrace, no /proc/1/mem, whatever the command's capabilities), ignores
// SIGCHLD and waits for signals forever. It is written once per process
// to a sealed memfd and executed through /proc/self/fd. A re-executed
// server would cost a whole Go runtime's start and a few megabytes per
// command (see doc.go).

// initName is the init's argv[0] and its name in ps.
const initName = "toolhost-init"

// initELF returns the init as a static ELF executable for this
// architecture (initCode, loaded at 0x400000), or nil where there is
// none.
func initELF() []byte {
	if initCode == nil {
		return nil
	}
	const (
		ehSize   = 64
		phSize   = 56
		loadAddr = 0x400000
	)
	size := ehSize + phSize + len(initCode)
	b := make([]byte, size)
	le := binary.LittleEndian
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // 64-bit, little-endian, ELF version 1
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], initMachine)
	le.PutUint32(b[20:], 1)                      // EV_CURRENT
	le.PutUint64(b[24:], loadAddr+ehSize+phSize) // entry: the code
	le.PutUint64(b[32:], ehSize)                 // program headers
	le.PutUint16(b[52:], ehSize)
	le.PutUint16(b[54:], phSize)
	le.PutUint16(b[56:], 1) // one program header
	ph := b[ehSize:]
	le.PutUint32(ph[0:], 1)         // PT_LOAD
	le.PutUint32(ph[4:], 4|1)       // PF_R|PF_X
	le.PutUint64(ph[16:], loadAddr) // p_vaddr, with p_offset 0
	le.PutUint64(ph[24:], loadAddr)
	le.PutUint64(ph[32:], uint64(size))
	le.PutUint64(ph[40:], uint64(size))
	le.PutUint64(ph[48:], 0x10000) // aligned for 4, 16 and 64 KiB pages
	copy(b[ehSize+phSize:], initCode)
	return b
}

// initExe writes the init to a memfd once per process, seals it, and
// returns a path to execute it by (/proc/self/fd/N of a read-only
// descriptor kept open for good: a writable one would make exec fail with
// ETXTBSY).
var initExe = sync.OnceValues(func() (string, error) {
	prog := initELF()
	if prog == nil {
		return "", fmt.Errorf("no init program for this architecture")
	}
	fd, err := unix.MemfdCreate(initName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Before Linux 6.3 there is no MFD_EXEC: every memfd is executable.
		fd, err = unix.MemfdCreate(initName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return "", fmt.Errorf("memfd for the init: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, prog); err != nil {
		return "", fmt.Errorf("writing the init: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return "", fmt.Errorf("sealing the init: %w", err)
	}
	ro, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("reopening the init: %w", err)
	}
	return "/proc/self/fd/" + strconv.Itoa(ro), nil
})

// pidfdChecked makes the os package check, once, that pidfds work: it
// does so by forking a child that exits at once, at the first use of a
// pidfd in the process. Were that first use the init's start, that child
// would become the new namespace's pid 1 and its exit would end the
// namespace before the init is born (fork then fails with ENOMEM).
var pidfdChecked = sync.OnceFunc(func() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Release()
	}
})

// startPIDNS gives the calling thread, which must be locked to its
// goroutine and never be given back, a PID namespace for its children, and
// starts its init there, before anything else is forked into it. The
// init gets no descriptor (os.StartProcess closes 0, 1 and 2 in it, the
// init the others) and an empty environment; it dies by SIGKILL when the
// thread exits (Go's fork then also sends the init SIGKILL itself, seeing
// getppid() 0, which the kernel ignores: pid 1 is immune to signals from
// its own namespace).
func startPIDNS() (*os.Process, error) {
	exe, err := initExe()
	if err != nil {
		return nil, fmt.Errorf("pid namespace: %w", err)
	}
	pidfdChecked()
	if err := unix.Unshare(unix.CLONE_NEWPID); err != nil {
		return nil, fmt.Errorf("pid namespace: unshare: %w", err)
	}
	p, err := os.StartProcess(exe, []string{initName}, &os.ProcAttr{
		Dir: "/",
		Env: []string{},
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return nil, fmt.Errorf("pid namespace: starting its init: %w", err)
	}
	return p, nil
}

// clearPdeathsig clears the parent-death signal a command in a PID
// namespace would ask for: Go's fork checks that the parent still lives by
// comparing getppid() with the parent's pid, and in the namespace
// getppid() is 0, so the child would kill itself at once. The init's
// Pdeathsig (SIGKILL) ends the whole namespace when the forking thread
// exits, the command included, which is what a Pdeathsig of SIGKILL did.
func clearPdeathsig(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = 0
}

// nsKillWait bounds how long endPIDNS waits for the processes of a
// namespace to die of SIGKILL (a process in uninterruptible sleep dies only
// when it wakes), as the kill ladder of package process does.
const nsKillWait = 5 * time.Second

// endPIDNS kills the init of a PID namespace, whereupon the kernel
// SIGKILLs every process left in it, and waits for it, which returns once
// they are all gone. The command, a child of the server, must have been
// waited for: until then the namespace, and so the init, cannot end. If
// the namespace outlives nsKillWait, its init is left unreaped (the
// server's exit hands it to the system's init) and the error says so.
func endPIDNS(init *os.Process) error {
	// The init is an unreaped child: its pid is still its own.
	pidfd, err := unix.PidfdOpen(init.Pid, 0)
	if err != nil {
		return fmt.Errorf("pid namespace: its init: %w", err)
	}
	defer unix.Close(pidfd)
	if err := init.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pid namespace: killing its init: %w", err)
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(nsKillWait)
	for {
		left := time.Until(deadline).Milliseconds()
		if left <= 0 {
			return fmt.Errorf("pid namespace: processes survived SIGKILL for %v; its init is left unreaped", nsKillWait)
		}
		n, err := unix.Poll(fds, int(left))
		if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pid namespace: waiting for its init: %w", err)
		}
		break
	}
	if _, err := init.Wait(); err != nil {
		return fmt.Errorf("pid namespace: waiting for its init: %w", err)
	}
	return nil
}

// probePIDNS does on the calling (throwaway) thread what a command's PID
// namespace needs: the namespace and its init and, with mountNS, a /proc
// of it in a mount namespace. It reports each piece's error.
func probePIDNS(mountNS bool) (pidns, proc error) {
	init, err := startPIDNS()
	if err != nil {
		return err, err
	}
	defer func() {
		if err := endPIDNS(init); err != nil && pidns == nil {
			pidns, proc = err, err
		}
	}()
	if !mountNS {
		return nil, errors.New("no mount namespace")
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return nil, fmt.Errorf("make-rslave: %w", err)
	}
	return nil, mountProc(true)
}

// probeMasks does on the calling (throwaway) thread what a mask needs: a
// detached tmpfs and a clone of one of its entries mounted over a
// directory (the temporary directory, in a mount namespace of the
// thread's own).
func probeMasks() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make-rslave: %w", err)
	}
	fd, err := unix.Open(os.TempDir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	sc, err := newScratch()
	if err != nil {
		return err
	}
	defer sc.close()
	return sc.mask(fd, st)
}
