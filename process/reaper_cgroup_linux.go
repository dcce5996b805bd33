//go:build linux

package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupSession is the session's cgroup v2 directory, under the server's
// own cgroup: <mount>/<own>/toolhost-<pid>-<nonce>. Each command gets a child
// cgroup there, and its processes are forked straight into it
// (CLONE_INTO_CGROUP), so every descendant is attributed to its command
// whatever it does to its session, group or environment. It is optional:
// without a writable cgroup2 hierarchy the package relies on markers.
type cgroupSession struct {
	dir string
}

// cgroupMounts are where a cgroup2 hierarchy may be: the hybrid layout's
// unified mount, then the pure v2 mount.
var cgroupMounts = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}

// newCgroupSession makes the session's cgroup directory, or says why not.
func newCgroupSession(nonce string) (*cgroupSession, error) {
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	for _, mnt := range cgroupMounts {
		var st unix.Statfs_t
		if unix.Statfs(mnt, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		parent := filepath.Join(mnt, own)
		removeStaleSessions(parent)
		dir := filepath.Join(parent, fmt.Sprintf("toolhost-%d-%s", os.Getpid(), nonce))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("cgroup.kill: %w", err)
		}
		return &cgroupSession{dir: dir}, nil
	}
	return nil, errors.New("no cgroup2 hierarchy mounted")
}

// removeStaleSessions ends what servers which died without Shutdown (a
// SIGKILLed server runs no code) left in parent: their session cgroups
// (toolhost-<pid>-<nonce>, pid gone) are killed whole through cgroup.kill,
// which reaches the grandchildren Pdeathsig cannot, and then removed. A
// session whose server pid is alive (or reused) is left alone.
func removeStaleSessions(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "toolhost-*-*"))
	for _, d := range dirs {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), "toolhost-"), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		stale := &cgroup{dir: d}
		if stale.populated() {
			stale.kill()
			for range staleKillPolls {
				if !stale.populated() {
					break
				}
				time.Sleep(killPoll)
			}
		}
		subs, _ := os.ReadDir(d)
		for _, s := range subs {
			if s.IsDir() {
				_ = os.Remove(filepath.Join(d, s.Name()))
			}
		}
		_ = os.Remove(d)
	}
}

// staleKillPolls bounds how many killPoll periods removeStaleSessions waits
// for a stale session's cgroup to empty after cgroup.kill.
const staleKillPolls = 100

// ownCgroup returns the server's cgroup2 path from /proc/self/cgroup.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup2 entry in /proc/self/cgroup")
}

// newGroup makes the cgroup of one command.
func (s *cgroupSession) newGroup(id string) (*cgroup, error) {
	dir := filepath.Join(s.dir, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &cgroup{dir: dir, f: f}, nil
}

// remove deletes the session's directory; its command cgroups are removed
// by their commands.
func (s *cgroupSession) remove() error {
	return os.Remove(s.dir)
}

// cgroup is one command's cgroup.
type cgroup struct {
	dir string
	f   *os.File // the directory, for CLONE_INTO_CGROUP; closed by remove
}

// setFD makes attr fork into the cgroup.
func (g *cgroup) setFD(attr *syscall.SysProcAttr) {
	attr.UseCgroupFD = true
	attr.CgroupFD = int(g.f.Fd())
}

// pids lists the processes in the cgroup.
func (g *cgroup) pids() []int {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// populated reports whether any process is left in the cgroup.
func (g *cgroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// kill SIGKILLs every process in the cgroup at once, forks included.
func (g *cgroup) kill() {
	_ = os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove closes and deletes the (empty) cgroup.
func (g *cgroup) remove() error {
	_ = g.f.Close()
	return os.Remove(g.dir)
}
