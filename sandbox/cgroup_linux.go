//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/internal/cgroup"
)

// group is one cgroup that carries limits for one command: a v1 group of
// the pids or memory hierarchy, or a v2 group with both controllers.
type group struct {
	version int
	// ctrls are the controllers whose limits this group carries.
	ctrls []string
	dir   string
	// own: made by this package, killed and removed by finish; a v2 group
	// of the caller is only written to.
	own bool
}

// groupSeq numbers the groups this process makes.
var groupSeq atomic.Uint64

// groupPrefix starts the name of every group this package makes, followed
// by the server's pid and a sequence number.
const groupPrefix = "toolhost-sandbox-"

// staleOnce removes, once per parent directory, the groups of servers that
// died without finishing their commands.
var staleOnce sync.Map // parent dir -> *sync.Once

// newGroup makes a group under parent for ctrls, with the limits of l.
func newGroup(version int, parent string, ctrls []string, l Limits) (*group, error) {
	once, _ := staleOnce.LoadOrStore(parent, new(sync.Once))
	once.(*sync.Once).Do(func() { removeStaleGroups(parent) })
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%d", groupPrefix, os.Getpid(), groupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	g := &group{version: version, ctrls: ctrls, dir: dir, own: true}
	if err := g.setLimits(l); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return g, nil
}

// callerGroup wraps the caller's v2 group dir, whose controllers are
// enabled from parent (where they are delegated) down to dir's parent.
func callerGroup(parent, dir string, ctrls []string, l Limits) (*group, error) {
	rel, err := filepath.Rel(parent, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("cgroup: %s is not beneath %s, where the controllers are delegated", dir, parent)
	}
	enable := "+" + strings.Join(ctrls, " +")
	at := parent
	for _, part := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		if part == "." {
			break
		}
		at = filepath.Join(at, part)
		if err := os.WriteFile(filepath.Join(at, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return nil, fmt.Errorf("cgroup: enabling %s in %s: %w", ctrls, at, err)
		}
	}
	g := &group{version: 2, ctrls: ctrls, dir: dir}
	if err := g.setLimits(l); err != nil {
		return nil, err
	}
	return g, nil
}

// has reports whether the group carries controller ctrl.
func (g *group) has(ctrl string) bool {
	for _, c := range g.ctrls {
		if c == ctrl {
			return true
		}
	}
	return false
}

// write writes value to the group's file name.
func (g *group) write(name, value string) error {
	if err := os.WriteFile(filepath.Join(g.dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// setLimits writes the limits of l the group carries.
func (g *group) setLimits(l Limits) error {
	if g.has("pids") {
		if err := g.write("pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	if g.has("memory") {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		if g.version == 1 {
			if err := g.write("memory.limit_in_bytes", v); err != nil {
				return err
			}
			// Without swap accounting the file is missing: nothing to
			// escape into.
			if _, err := os.Stat(filepath.Join(g.dir, "memory.memsw.limit_in_bytes")); err == nil {
				if err := g.write("memory.memsw.limit_in_bytes", v); err != nil {
					return err
				}
			}
		} else {
			if err := g.write("memory.max", v); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(g.dir, "memory.swap.max")); err == nil {
				if err := g.write("memory.swap.max", "0"); err != nil {
					return err
				}
			}
			// An OOM kill takes the whole group, not just its largest
			// process.
			if err := g.write("memory.oom.group", "1"); err != nil {
				return err
			}
		}
	}
	return nil
}

// joined is a v1 group the forking thread joined, with the tasks file of
// the group's parent, where the server's threads are, opened before the
// thread was confined: it could no longer open files under /sys then.
type joined struct {
	g    *group
	orig *os.File
}

// join moves the calling thread into the v1 group (threads move one by
// one there; a child forked by the thread starts in its groups). In a pids
// group the thread counts: with the exact limit there, the thread and the
// child's tree together never exceed it, and once the thread has left the
// tree may use it all. It must run before the thread is confined.
func (g *group) join() (*joined, error) {
	orig, err := os.OpenFile(filepath.Join(filepath.Dir(g.dir), "tasks"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if err := g.write("tasks", strconv.Itoa(unix.Gettid())); err != nil {
		_ = orig.Close()
		return nil, err
	}
	return &joined{g: g, orig: orig}, nil
}

// leave moves the calling thread back among the server's threads.
func (j *joined) leave() error {
	defer j.close()
	if _, err := j.orig.WriteString(strconv.Itoa(unix.Gettid())); err != nil {
		return fmt.Errorf("cgroup: leaving %s: %w", j.g.dir, err)
	}
	return nil
}

// close closes the parent's tasks file.
func (j *joined) close() { _ = j.orig.Close() }

// add moves process pid, stopped at its exec, into the v1 group.
func (g *group) add(pid int) error {
	return g.write("cgroup.procs", strconv.Itoa(pid))
}

// readKeyed parses a flat keyed file ("key value" lines).
func readKeyed(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// hit reports whether the group's counters show limit kind hit: an OOM
// kill for memory, a refused fork for pids.
func (g *group) hit(kind Limit) bool {
	switch kind {
	case LimitMemory:
		name := "memory.events"
		if g.version == 1 {
			name = "memory.oom_control"
		}
		kv, err := readKeyed(filepath.Join(g.dir, name))
		return err == nil && (kv["oom_kill"] > 0 || kv["oom_group_kill"] > 0)
	case LimitPids:
		kv, err := readKeyed(filepath.Join(g.dir, "pids.events"))
		return err == nil && kv["max"] > 0
	}
	return false
}

// exceeded returns the limit the group saw hit, memory first, or "".
func (g *group) exceeded() Limit {
	for _, k := range []Limit{LimitMemory, LimitPids} {
		if g.has(string(k)) && g.hit(k) {
			return k
		}
	}
	return ""
}

// kill ends every process in the group and waits until it is empty (see
// cgroup.Kill: a v2 group is killed whole at once by cgroup.kill where the
// kernel has it, the processes of a v1 group one by one). A v1 pids group
// first gets pids.max 0, so that no process forks while the others are
// killed.
func (g *group) kill() error {
	if g.version == 1 && g.has("pids") {
		_ = g.write("pids.max", "0")
	}
	return cgroup.Kill(g.dir)
}

// remove deletes the group if this package made it; it must be empty.
func (g *group) remove() error {
	if !g.own {
		return nil
	}
	return cgroup.Remove(g.dir)
}

// removeStaleGroups kills and removes the groups under parent whose server
// (the pid in the name) is gone.
func removeStaleGroups(parent string) {
	_, _ = cgroup.SweepStale(parent, groupPrefix)
}

// watch is a source of limit events of one group: an inotify watch of an
// events file, or (v1 memory) an eventfd registered for OOM notifications.
// A nil f means the kernel gives no notification (v1 pids.events): the
// counters are then looked at every pollEvery.
type watch struct {
	f    *os.File
	kind Limit
	g    *group
	// certain: every notification is a hit. The v1 OOM eventfd fires when
	// the group enters OOM, which may be before oom_kill is counted; an
	// events file is modified for other reasons too.
	certain bool
}

// pollEvery is how often a limit without notifications is looked at while
// the command runs. The limit itself holds meanwhile; only the kill of the
// command that hit it waits.
const pollEvery = 50 * time.Millisecond

// watches opens the event sources of the group. The files are
// non-blocking, so a Read parks its goroutine in the runtime's poller and
// Close wakes it.
func (g *group) watches() ([]watch, error) {
	var out []watch
	fail := func(err error) ([]watch, error) {
		for _, w := range out {
			if w.f != nil {
				_ = w.f.Close()
			}
		}
		return nil, err
	}
	if g.has("memory") {
		var (
			f   *os.File
			err error
		)
		if g.version == 1 {
			f, err = g.oomEventFD()
		} else {
			f, err = inotifyFile(filepath.Join(g.dir, "memory.events"))
		}
		if err != nil {
			return fail(err)
		}
		out = append(out, watch{f: f, kind: LimitMemory, g: g, certain: g.version == 1})
	}
	if g.has("pids") {
		// Linux notifies changes of pids.events on v2 only.
		w := watch{kind: LimitPids, g: g}
		if g.version == 2 {
			f, err := inotifyFile(filepath.Join(g.dir, "pids.events"))
			if err != nil {
				return fail(err)
			}
			w.f = f
		}
		out = append(out, w)
	}
	return out, nil
}

// inotifyFile watches path for modifications (the kernel notifies when an
// events file changes).
func inotifyFile(path string) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("cgroup events: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("cgroup events: %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), "inotify:"+path), nil
}

// oomEventFD registers an eventfd for the v1 group's OOM notifications
// (cgroup.event_control with memory.oom_control).
func (g *group) oomEventFD() (*os.File, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("cgroup events: %w", err)
	}
	ctl, err := os.Open(filepath.Join(g.dir, "memory.oom_control"))
	if err != nil {
		_ = unix.Close(efd)
		return nil, fmt.Errorf("cgroup events: %w", err)
	}
	defer ctl.Close()
	if err := g.write("cgroup.event_control", fmt.Sprintf("%d %d", efd, ctl.Fd())); err != nil {
		_ = unix.Close(efd)
		return nil, err
	}
	return os.NewFile(uintptr(efd), "eventfd:"+g.dir), nil
}
