package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// persistEnv is where a test's persisted sessions live: its own state
// and runtime directories, so that each test has its own holder.
type persistEnv struct {
	t     testing.TB
	root  string
	state string
	run   string
}

// newPersistEnv makes a test's directories for --persist and stops its
// holder (and checks it exits) at the end.
func newPersistEnv(t testing.TB) *persistEnv {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &persistEnv{t: t, root: root, state: t.TempDir(), run: t.TempDir()}
	for _, d := range []string{p.state, p.run} {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range p.holderLogs() {
				t.Logf("holder log %s:\n%s", l, tail(readFileString(l), 8000))
			}
		}
		p.stopHolders()
	})
	return p
}

// options returns start's options for a persisted session of this env.
func (p *persistEnv) options(args ...string) options {
	return options{root: p.root, args: append(p.flags(), args...), env: p.env()}
}

// flags are the flags of a persisted session of this env.
func (p *persistEnv) flags() []string {
	return []string{"--persist", "--state-dir", p.state, "--linger", "1m"}
}

// env is the server's environment: XDG_RUNTIME_DIR names the test's
// runtime directory.
func (p *persistEnv) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "XDG_RUNTIME_DIR=" + p.run}
}

// holderLogs returns the holders' log files.
func (p *persistEnv) holderLogs() []string {
	l, _ := filepath.Glob(filepath.Join(p.state, "holder-*.log"))
	return l
}

// holderPIDs returns the pids the holders' lock files name, alive.
func (p *persistEnv) holderPIDs() []int {
	locks, _ := filepath.Glob(filepath.Join(p.run, "toolhost", "h-*.lock"))
	var pids []int
	for _, l := range locks {
		pid, err := strconv.Atoi(strings.TrimSpace(readFileString(l)))
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopHolders ends the env's holders with SIGTERM (which ends their
// sessions) and waits until they are gone.
func (p *persistEnv) stopHolders() {
	for _, pid := range p.holderPIDs() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		awaitPidGone(p.t, pid, waitLimit)
	}
}

// awaitPidGone waits until pid has exited: its pidfd becomes readable
// then (a zombie counts as gone).
func awaitPidGone(t testing.TB, pid int, limit time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(limit)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if n == 0 && err == nil {
			t.Errorf("process %d still running after %v", pid, limit)
		}
		return
	}
}

// readFileString reads a file, or says why not.
func readFileString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
