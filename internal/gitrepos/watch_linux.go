//go:build linux

package gitrepos

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask is what a directory's watch reports: an entry created,
// deleted or renamed in it, the directory itself deleted, renamed or
// unmounted, and a change of attributes (its own: whether it can be
// read). A file's content is none of the scan's business (a .git file is
// read at every scan, whatever its events), so IN_MODIFY and
// IN_CLOSE_WRITE are not asked for: a build writing files would fill the
// queue with them. It is added through /proc/self/fd/N, the directory's
// own descriptor, so IN_DONT_FOLLOW is not wanted: the magic link names
// the directory opened, which is no symlink.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// maxUserWatches is /proc/sys/fs/inotify/max_user_watches, read once
// (8192, the old default, if it cannot be read).
var maxUserWatches = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 8192
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 8192
	}
	return n
})

// watchCap is the most watches a Cache takes: an eighth of the user's,
// at most 20,000, so that editors and other watchers keep theirs. Tests
// set it lower.
var watchCap = func() int { return min(maxUserWatches()/8, 20_000) }

// watcher is a Cache's inotify instance and what each of its watches
// stands for. Its methods but add and bind are called with no scan's
// workers running (the Cache's lock is held).
type watcher struct {
	fd    int // the inotify instance, -1 when none
	mnt   int // /proc/self/mountinfo, polled for a change of mounts; -1 when none
	limit int // watchCap when it was made, less after an add failed
	buf   []byte

	mu   sync.Mutex       // guards byWD and changed while workers run
	byWD map[int32]*dnode // each watch and the directory it is on (nil until bound)
	// changed says that watches were added or dropped since the last
	// sweep.
	changed bool
	gen     uint32 // the sweep's mark
	lose    bool   // the next drain acts as if an event was lost (tests)
}

// newWatcher makes a watcher, or returns nil when inotify or openat2
// (which opens the directories below one taken unopened) cannot be had.
func newWatcher() *watcher {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	// openat2 is needed to open, without following a symlink anywhere, a
	// directory whose parent was not opened.
	probe, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		_ = unix.Close(fd)
		return nil
	}
	_ = unix.Close(probe)
	mnt, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		mnt = -1
	}
	w := &watcher{fd: fd, mnt: mnt, limit: watchCap(), buf: make([]byte, 64<<10), byWD: make(map[int32]*dnode)}
	w.mountsChanged() // the first poll reports the table as changed
	return w
}

// close releases w's descriptors.
func (w *watcher) close() {
	if w == nil {
		return
	}
	_ = unix.Close(w.fd)
	if w.mnt >= 0 {
		_ = unix.Close(w.mnt)
	}
	for wd, d := range w.byWD {
		if d != nil {
			atomic.StoreInt32(&d.wd, 0)
		}
		delete(w.byWD, wd)
	}
}

// reset drops every watch, by making a new instance: what follows a lost
// event (the queue overflowed, or could not be read), or a change of
// mounts, which raises no event in the directories mounted over. The next
// scan revalidates each directory by its change time, as without watches,
// and watches it again.
func (w *watcher) reset() {
	for wd, d := range w.byWD {
		if d != nil {
			atomic.StoreInt32(&d.wd, 0)
		}
		delete(w.byWD, wd)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	_ = unix.Close(w.fd)
	w.limit = watchCap()
	w.fd = -1
	if err == nil {
		w.fd = fd
	}
	w.changed = false
}

// mountsChanged reports whether the mount table changed since it was
// last asked.
func (w *watcher) mountsChanged() bool {
	if w.mnt < 0 {
		return false
	}
	p := []unix.PollFd{{Fd: int32(w.mnt), Events: unix.POLLPRI}}
	n, err := unix.Poll(p, 0)
	return err != nil || n > 0 && p[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// drain reads the events queued since the last scan, without blocking: a
// directory with an event is marked dirty (to be read again), one deleted,
// renamed or unmounted is marked dead (to be dropped from the cache), and
// a lost event resets w.
func (w *watcher) drain() {
	if w.fd < 0 {
		return
	}
	lost := w.mountsChanged()
	for !lost {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil || n <= 0 {
			lost = true
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				lost = true
				break
			}
			d, ok := w.byWD[ev.Wd]
			if !ok {
				continue // a watch already dropped
			}
			if ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
				w.drop(ev.Wd, d)
				if d != nil {
					d.dead = true
				}
				continue
			}
			if d != nil {
				d.dirty = true
			}
		}
	}
	if lost || w.lose {
		w.lose = false
		w.reset()
	}
}

// drop removes the watch wd, on d.
func (w *watcher) drop(wd int32, d *dnode) {
	delete(w.byWD, wd)
	if d != nil {
		atomic.CompareAndSwapInt32(&d.wd, wd, 0)
	}
	_, _ = unix.InotifyRmWatch(w.fd, uint32(wd)) // gone already if the directory was
	w.changed = true
}

// add watches the directory open as fd, and returns the watch, or 0 when
// w is at its limit or the watch cannot be added (ENOSPC: the user's
// watches are all taken). The watch stands for no directory until bind.
func (w *watcher) add(fd int) int32 {
	// The check and the add are one step under mu: checked apart, the
	// two workers could each take the last watch below the limit.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 || len(w.byWD) >= w.limit {
		return 0
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		// ENOSPC, the user's watches all taken: try no more until the
		// watches are made again.
		w.limit = len(w.byWD)
		return 0
	}
	if prev := w.byWD[int32(wd)]; prev != nil {
		// The same directory by another path (a bind mount): only the
		// last bound has the watch; the other is revalidated by stat.
		atomic.StoreInt32(&prev.wd, 0)
	}
	w.byWD[int32(wd)] = nil
	w.changed = true
	return int32(wd)
}

// bind makes wd the watch of d.
func (w *watcher) bind(wd int32, d *dnode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev := w.byWD[wd]; prev != nil && prev != d {
		atomic.StoreInt32(&prev.wd, 0)
	}
	w.byWD[wd] = d
	atomic.StoreInt32(&d.wd, wd)
}

// full reports whether w can take no more watches.
func (w *watcher) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fd < 0 || len(w.byWD) >= w.limit
}

// sweep drops the watches of the directories no longer in the cache
// (top's tree), when any were added or dropped since the last sweep or
// force says the tree changed.
func (w *watcher) sweep(top *dnode, force bool) {
	if !w.changed && !force {
		return
	}
	w.changed = false
	w.gen++
	var mark func(d *dnode)
	mark = func(d *dnode) {
		d.mark = w.gen
		for _, sb := range d.subs {
			if sb.node != nil && !sb.node.dead {
				mark(sb.node)
			}
		}
	}
	if top != nil && !top.dead {
		mark(top)
	}
	for wd, d := range w.byWD {
		if d == nil || d.mark != w.gen {
			w.drop(wd, d)
		}
	}
	w.changed = false
}
