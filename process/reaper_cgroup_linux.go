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
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	cgroupfs "github.com/toolhost/toolhost/internal/cgroup"
)

// cgroupSession is the session's cgroup v2 directory, under the server's
// own cgroup: <mount>/<own>/toolhost-<pid>-<nonce>. Each command gets a child
// cgroup there, and its processes are forked straight into it
// (CLONE_INTO_CGROUP), so every descendant is attributed to its command
// whatever it does to its session, group or environment. It is optional:
// without a writable cgroup2 hierarchy the package relies on markers.
type cgroupSession struct {
	dir string

	// mu guards the fields below.
	mu sync.Mutex
	// idle are empty cgroups of ended commands, at most maxIdleCgroups,
	// kept open for the next commands: forking into a cgroup that has
	// been used before costs no more than forking without one, while a
	// new cgroup costs a mkdir, an rmdir and more time in clone.
	idle []*cgroup
	// seq names the cgroups made: g1, g2, ...
	seq uint64
}

// maxIdleCgroups bounds the empty cgroups a session keeps for reuse.
const maxIdleCgroups = 16

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
		dir := filepath.Join(parent, fmt.Sprintf("%s%d-%s", sessionPrefix, os.Getpid(), nonce))
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
// which reaches the grandchildren Pdeathsig cannot, and then removed with
// their commands' cgroups. A session whose server pid is alive (or reused)
// is left alone.
func removeStaleSessions(parent string) {
	_, _ = cgroupfs.SweepStale(parent, sessionPrefix)
}

// sessionPrefix starts the name of every session directory, followed by
// the server's pid, a dash and the session's nonce.
const sessionPrefix = "toolhost-"

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

// newGroup returns an empty cgroup for one command: an idle one, or a new
// one.
func (s *cgroupSession) newGroup() (*cgroup, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		g := s.idle[n-1]
		s.idle[n-1] = nil
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return g, nil
	}
	s.seq++
	dir := filepath.Join(s.dir, "g"+strconv.FormatUint(s.seq, 10))
	s.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	g := &cgroup{dir: dir, f: f}
	// Kept open: every command's end looks at it.
	if ev, err := cgroupfs.OpenEvents(dir); err == nil {
		g.events = ev
	}
	return g, nil
}

// release takes back the cgroup of a command that has ended: kept for the
// next command when it is empty, was never killed through cgroup.kill, and
// fewer than maxIdleCgroups are kept; else removed (which fails while
// processes are left in it). empty says the caller has just seen it empty
// (nothing of the command is left, so nothing can join it), which spares
// reading cgroup.events. A killed cgroup is never reused: on this kernel
// (6.18) every process later forked into it with CLONE_INTO_CGROUP is
// SIGKILLed at once, as if the kill were still under way.
func (s *cgroupSession) release(g *cgroup, empty bool) error {
	if !g.killed && (empty || !g.populated()) {
		s.mu.Lock()
		if len(s.idle) < maxIdleCgroups {
			s.idle = append(s.idle, g)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
	}
	return g.remove()
}

// remove deletes the idle cgroups and the session's directory; the cgroups
// of running commands are released by their commands first.
func (s *cgroupSession) remove() error {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, g := range idle {
		_ = g.remove()
	}
	return cgroupfs.Remove(s.dir)
}

// cgroup is one command's cgroup (see release: one command's at a time).
type cgroup struct {
	dir string
	f   *os.File // the directory, for CLONE_INTO_CGROUP; closed by remove
	// events is its cgroup.events, open for populated (nil: read it by
	// name); closed by remove.
	events *cgroupfs.Events
	// killed is set once cgroup.kill was written; only the goroutine that
	// runs the command's kill ladders (its supervisor) touches it.
	killed bool
}

// setFD makes attr fork into the cgroup.
func (g *cgroup) setFD(attr *syscall.SysProcAttr) {
	attr.UseCgroupFD = true
	attr.CgroupFD = int(g.f.Fd())
}

// pids lists the processes in the cgroup.
func (g *cgroup) pids() []int {
	pids, _ := cgroupfs.Procs(g.dir)
	return pids
}

// populated reports whether any process is left in the cgroup.
func (g *cgroup) populated() bool {
	if g.events != nil {
		if p, err := g.events.Populated(); err == nil {
			return p
		}
	}
	p, _ := cgroupfs.Populated(g.dir)
	return p
}

// kill SIGKILLs every process in the cgroup at once, forks included,
// without waiting for them to exit.
func (g *cgroup) kill() {
	g.killed = true
	_ = cgroupfs.SignalKill(g.dir)
}

// remove closes and deletes the (empty) cgroup; it waits a moment for
// processes on their way out.
func (g *cgroup) remove() error {
	_ = g.f.Close()
	if g.events != nil {
		_ = g.events.Close()
	}
	return cgroupfs.Remove(g.dir)
}

// path returns the session's cgroup directory.
func (s *cgroupSession) path() string { return s.dir }
