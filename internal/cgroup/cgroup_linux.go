//go:build linux

package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSurvivors is returned by Kill and WaitEmpty when processes are still
// in a cgroup after the bounded wait.
var ErrSurvivors = errors.New("cgroup: processes survived SIGKILL")

// Kill and WaitEmpty look whether a cgroup is empty up to waitPolls+1
// times; the pause between two looks starts at firstPause and doubles
// (about 2 s in all). Remove tries rmdir up to removePolls+1 times on the
// same schedule (about 130 ms in all): it only waits for processes that
// are already on their way out.
const (
	waitPolls   = 12
	removePolls = 8
	firstPause  = 500 * time.Microsecond
)

// Procs returns the processes listed in the cgroup.procs of the cgroup
// dir: on v2 those in dir itself, not in its children.
func Procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Populated reports whether any process is left in the v2 cgroup dir or
// beneath it, from its cgroup.events. A v1 cgroup has no such file: the
// error says so.
func Populated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("cgroup: %w", err)
	}
	return populatedIn(b), nil
}

// populatedIn reports whether the text of a cgroup.events says populated.
func populatedIn(b []byte) bool {
	return bytes.Contains(b, []byte("populated 1"))
}

// Events is the cgroup.events file of a v2 cgroup, kept open: a read at
// offset 0 renders the file anew, so a look costs one pread rather than
// an open and a read, many times dearer. Its methods may be called
// concurrently until Close.
type Events struct {
	f *os.File // immutable; closed by Close
}

// OpenEvents opens the cgroup.events of the v2 cgroup dir.
func OpenEvents(dir string) (*Events, error) {
	f, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return &Events{f: f}, nil
}

// Populated reports whether any process is left in the cgroup or beneath
// it.
func (e *Events) Populated() (bool, error) {
	var buf [256]byte
	n, err := e.f.ReadAt(buf[:], 0)
	if n > 0 {
		return populatedIn(buf[:n]), nil // err is io.EOF: the file is short
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return false, fmt.Errorf("cgroup: reading %s: %w", e.f.Name(), err)
}

// Close closes the file.
func (e *Events) Close() error { return e.f.Close() }

// SignalKill writes cgroup.kill of the v2 cgroup dir: the kernel SIGKILLs
// every process in dir and beneath it at once, forks under way included.
// It does not wait for them to exit. A v1 cgroup, or a kernel before 5.14,
// has no cgroup.kill: the error says so (the file is never created).
func SignalKill(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.kill"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	_, err = f.WriteString("1")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// Kill ends every process in the cgroup dir and waits, a bounded time,
// until it is empty (a process leaves its cgroup only when it has exited).
// Where dir has cgroup.kill (v2) one write ends dir and its subtree at
// once. Elsewhere (v1) each process listed in dir's cgroup.procs gets
// SIGKILL, and the list is read and signalled again at each look, so a
// process forked meanwhile is caught; a caller that can stop forks first
// (a v1 pids.max of 0) should. The calling process is never signalled nor
// counted: a thread of the server may sit in a v1 group for a moment. It
// returns an error wrapping ErrSurvivors if processes are left.
func Kill(dir string) error {
	if SignalKill(dir) == nil {
		return waitEmpty(dir, func() {})
	}
	return waitEmpty(dir, func() {
		pids, _ := Procs(dir)
		for _, p := range others(pids) {
			_ = unix.Kill(p, unix.SIGKILL)
		}
	})
}

// WaitEmpty waits, a bounded time, until the cgroup dir is empty (see
// Empty), signalling nothing; after SignalKill, say. It returns an error
// wrapping ErrSurvivors if processes are left.
func WaitEmpty(dir string) error {
	return waitEmpty(dir, func() {})
}

// waitEmpty calls kill and looks again, with doubling pauses, until dir
// is empty.
func waitEmpty(dir string, kill func()) error {
	pause := firstPause
	for range waitPolls {
		kill()
		if Empty(dir) {
			return nil
		}
		time.Sleep(pause)
		pause *= 2
	}
	if Empty(dir) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrSurvivors, dir)
}

// Empty reports whether no process is left in the cgroup dir: on v2 in dir
// or beneath it (cgroup.events), on v1 in dir itself (cgroup.procs), the
// calling process not counted. A cgroup that cannot be read counts as
// empty.
func Empty(dir string) bool {
	if p, err := Populated(dir); err == nil {
		return !p
	}
	pids, _ := Procs(dir)
	return len(others(pids)) == 0
}

// others returns pids without the calling process.
func others(pids []int) []int {
	self := os.Getpid()
	out := pids[:0]
	for _, p := range pids {
		if p != self {
			out = append(out, p)
		}
	}
	return out
}

// Remove deletes the cgroup dir, which must have no children. While it
// still holds processes (rmdir answers EBUSY) it tries again for a moment:
// after Kill a process may still be on its way out (a v2 cgroup.procs
// hides an exited leader whose other threads are still exiting).
func Remove(dir string) error {
	pause := firstPause
	for i := 0; ; i++ {
		err := rmdir(dir)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || i == removePolls {
			return fmt.Errorf("cgroup: %w", &os.PathError{Op: "rmdir", Path: dir, Err: err})
		}
		time.Sleep(pause)
		pause *= 2
	}
}

// rmdir removes the directory dir, again if a signal interrupts it.
func rmdir(dir string) error {
	for {
		err := unix.Rmdir(dir)
		if err != unix.EINTR {
			return err
		}
	}
}
