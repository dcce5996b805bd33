//go:build linux

package gitrepos

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// maxOpen is how many directory descriptors a scan keeps open before it
// goes depth first, which closes them sooner.
const maxOpen = 256

// node is a directory whose children are still to be opened: its
// descriptor is closed when the last of them has been.
type node struct {
	fd   int
	refs atomic.Int32
}

// item is a directory to read: name in parent, rel from the root. The
// root's item has no parent, and name is its absolute path. With a cache,
// old is what it holds of the directory (nil if nothing), and slot is
// where what the directory holds now goes (nil: it is not cached).
type item struct {
	parent    *node
	name, rel string
	old       *dnode
	slot      **dnode
	// trusted says that old, if it is not dead, is the directory at
	// name: its parent was taken from the cache, unchanged, so that it
	// needs no look if it is watched and had no event.
	trusted bool
	ino     uint64 // d_ino, as its parent's listing read it (0: not read)
}

// scanner is one scan's shared state.
type scanner struct {
	root     string
	opt      Options
	start    time.Time
	deadline time.Time
	open     atomic.Int32 // directory descriptors held by nodes
	// dev is the root's device, the only one whose directories are
	// cached.
	dev uint64
	// rootfd is the root, open for the scan: the directories below one
	// taken from the cache unopened are opened from it, by their path.
	rootfd int
	// w is the cache's inotify instance, nil when none.
	w *watcher
	// watchUntil is when the scan stops adding watches (after watchTime,
	// or a quarter of its time if less), so that a first scan is not cut
	// short by them; the next scans add the rest.
	watchUntil time.Time

	mu         sync.Mutex
	cond       sync.Cond
	queue      []item // breadth first from head, depth first from the tail
	head       int
	busy       int
	done       bool
	truncated  string
	dirs       int
	listed     int
	unreadable int
	gitDirs    int
	repos      []Repo
}

// scan is Scan, with c (nil: no cache).
func scan(root string, opt Options, c *Cache) (Result, error) {
	opt = opt.withDefaults()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{}, &os.PathError{Op: "open", Path: root, Err: err}
	}
	s := &scanner{root: filepath.Clean(root), opt: opt, start: time.Now()}
	s.deadline = s.start.Add(opt.Timeout)
	s.watchUntil = s.start.Add(min(watchTime, opt.Timeout/4))
	s.cond.L = &s.mu
	top := item{name: s.root, rel: "."}
	if c != nil {
		var st unix.Stat_t
		var fs unix.Statfs_t
		if unix.Fstat(fd, &st) == nil && unix.Fstatfs(fd, &fs) == nil && localFS(int64(fs.Type)) {
			if c.root != s.root || c.dev != st.Dev {
				c.root, c.dev, c.top = s.root, st.Dev, nil
			}
			s.dev = st.Dev
			if c.w == nil && !c.closed {
				if c.w = newWatcher(); c.w == nil {
					c.closed = true // none can be had: revalidate by stat
				}
			}
			if c.w != nil {
				c.w.drain()
				s.w = c.w
			}
			if c.top != nil && c.top.dead {
				c.top = nil
			}
			top.old, top.slot = c.top, &c.top
			// The root is opened by its path: it is the directory cached
			// if it is the same one.
			top.trusted = c.top != nil && c.top.ino == st.Ino
		} else {
			c.root, c.top = "", nil
			if c.w != nil {
				c.w.reset()
			}
		}
	}
	s.rootfd = fd
	defer unix.Close(fd)
	s.queue = append(s.queue, top)
	var wg sync.WaitGroup
	for range opt.Workers {
		wg.Go(s.work)
	}
	wg.Wait()
	// A scan cut short leaves directories unopened: release their parents.
	for _, it := range s.queue[s.head:] {
		s.release(it.parent)
	}
	if s.w != nil {
		s.w.sweep(c.top, s.listed > 0 || s.truncated != "")
	}
	slices.SortFunc(s.repos, func(a, b Repo) int {
		return cmp.Or(strings.Compare(a.Dir, b.Dir), strings.Compare(string(a.Kind), string(b.Kind)))
	})
	return Result{Repos: s.repos, Dirs: s.dirs, Listed: s.listed, Truncated: s.truncated, Unreadable: s.unreadable, Duration: time.Since(s.start)}, nil
}

// watchTime is the most of its time a scan spends adding watches: on a
// virtual machine an add costs about as much as reading a small directory
// (the path /proc/self/fd/N is resolved).
const watchTime = 50 * time.Millisecond

// localFS reports whether a filesystem of type magic (statfs's f_type)
// stamps change times from this machine's clock, in nanoseconds, so that
// the cache can trust them: not a network one, whose server has its own
// clock, nor one whose times are coarse.
func localFS(magic int64) bool {
	switch uint32(magic) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC,
		0x2fc12fc1, // zfs
		0xca451a4e: // bcachefs
		return true
	}
	return false
}

// work reads directories until there are none left or a limit is reached.
func (s *scanner) work() {
	buf := make([]byte, 32<<10)
	var children []item
	var found []Repo
	for {
		s.mu.Lock()
		for !s.done && s.head == len(s.queue) && s.busy > 0 {
			s.cond.Wait()
		}
		if s.done || s.head == len(s.queue) {
			s.done = true
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		switch {
		case s.dirs >= s.opt.MaxDirs:
			s.stop(LimitDirs)
			continue
		case time.Now().After(s.deadline):
			s.stop(LimitTime)
			continue
		}
		var it item
		if s.open.Load() >= maxOpen {
			it = s.queue[len(s.queue)-1]
			s.queue = s.queue[:len(s.queue)-1]
		} else {
			it = s.queue[s.head]
			s.queue[s.head] = item{}
			s.head++
		}
		if s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		}
		s.dirs++
		s.busy++
		budget := s.opt.MaxDirs - s.dirs - (len(s.queue) - s.head)
		s.mu.Unlock()

		children, found = children[:0], found[:0]
		st, listed, taken := s.read(it, buf, &children, &found, budget)

		s.mu.Lock()
		s.busy--
		s.dirs += taken
		if listed {
			s.listed++
		}
		switch st {
		case readUnreadable:
			s.unreadable++
		case readTimedOut:
			s.truncated, s.done = cmp.Or(s.truncated, LimitTime), true
		}
		// What could never be read within MaxDirs is not queued at all, so
		// that a directory of a million subdirectories costs no memory.
		if room := s.opt.MaxDirs - s.dirs - (len(s.queue) - s.head); len(children) > room {
			for _, c := range children[max(room, 0):] {
				s.release(c.parent)
			}
			children = children[:max(room, 0)]
			s.truncated = cmp.Or(s.truncated, LimitDirs)
		}
		s.queue = append(s.queue, children...)
		for _, r := range found {
			if s.gitDirs >= s.opt.MaxRepos {
				s.truncated = LimitRepos
				s.done = true
				break
			}
			s.gitDirs++
			s.repos = append(s.repos, r)
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// stop ends the scan because of limit; s.mu is held, and is unlocked.
func (s *scanner) stop(limit string) {
	if s.truncated == "" {
		s.truncated = limit
	}
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// release drops one reference to n, closing it with the last.
func (s *scanner) release(n *node) {
	if n != nil && n.refs.Add(-1) == 0 {
		_ = unix.Close(n.fd)
		s.open.Add(-1)
	}
}

// watching reports whether a watch is to be added for old, a directory
// the cache holds (nil: none): there is an inotify instance, with room,
// the scan has time for it, and old has none yet.
func (s *scanner) watching(old *dnode) bool {
	return s.w != nil && (old == nil || atomic.LoadInt32(&old.wd) == 0) && !s.w.full() && time.Now().Before(s.watchUntil)
}

// clean reports whether d is watched and had no event since it was
// listed or revalidated: what the cache holds of it holds still.
func (s *scanner) clean(d *dnode) bool {
	return atomic.LoadInt32(&d.wd) != 0 && !d.dirty && !d.dead
}

// needsFD reports whether d's directory must be opened however it is
// found: it has a .git file, whose pointer is read at every scan.
func needsFD(d *dnode) bool {
	return d.hasGit && d.gitType == unix.DT_REG
}

// same reports whether st is d's directory.
func (s *scanner) same(d *dnode, st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev == s.dev && st.Ino == d.ino
}

// walk takes d, the directory rel, as the cache holds it (open as fd, or
// -1 when it has no .git file to read), and in turn those below it that
// are clean, with no system call, up to budget of them; it appends the
// others to children, to be opened by their path (their parents are not
// open), and returns how many it took below d.
func (s *scanner) walk(d *dnode, rel string, fd int, children *[]item, found *[]Repo, budget *int) int {
	s.markers(d, fd, rel, found)
	n := 0
	for i := range d.subs {
		sb := &d.subs[i]
		crel := join(rel, sb.name)
		if c := sb.node; c != nil && *budget > 0 && s.clean(c) && !needsFD(c) {
			*budget--
			n += 1 + s.walk(c, crel, -1, children, found, budget)
			continue
		}
		*children = append(*children, item{name: sb.name, rel: crel, old: sb.node, slot: &sb.node, trusted: true})
	}
	return n
}

// holds reports whether st, the directory's as it is now, says that what
// d holds of it holds still: it is the same directory (device, inode), it
// has not changed since (its change time, which any entry added, removed
// or renamed sets, and which no process can set back), and that time was
// already older than its listing by racySlack then, so that no change in
// the same clock tick as the listing can have gone unnoticed (git's
// "racy" rule). A filesystem whose change times are whole seconds is
// never trusted.
func (s *scanner) holds(d *dnode, st *unix.Stat_t) bool {
	c := st.Ctim.Nano()
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Dev == s.dev && st.Ino == d.ino &&
		c == d.ctime && c%1e9 != 0 && c < d.listed-int64(racySlack)
}

// markers appends to found the repositories that d, the directory rel
// (open as fd, or -1 when it has no .git file to read), is.
func (s *scanner) markers(d *dnode, fd int, rel string, found *[]Repo) {
	if !d.hasGit && !d.bare {
		return
	}
	abs := s.root
	if rel != "." {
		abs = s.root + "/" + rel
	}
	if d.hasGit {
		*found = append(*found, s.gitRepo(fd, rel, abs, d.gitType))
	}
	if d.bare {
		*found = append(*found, Repo{Dir: rel, Kind: KindBare, GitDirs: []string{abs}})
	}
}

// adopt makes fd the parent of children[first:], to be closed when the
// last of them has been opened, or closes it now when there are none.
func (s *scanner) adopt(fd int, children []item, first int) {
	k := len(children) - first
	if k == 0 {
		_ = unix.Close(fd)
		return
	}
	nd := &node{fd: fd}
	nd.refs.Store(int32(k))
	s.open.Add(1)
	for i := first; i < len(children); i++ {
		children[i].parent = nd
	}
}

// gitRepo is the repository of the directory rel (abs), open as fd, whose
// .git entry has type typ.
func (s *scanner) gitRepo(fd int, rel, abs string, typ uint8) Repo {
	gitDir := abs + "/.git"
	switch typ {
	case unix.DT_DIR:
		return Repo{Dir: rel, Kind: KindDir, GitDirs: []string{gitDir}}
	case unix.DT_LNK:
		return Repo{Dir: rel, Kind: KindLink, GitDirs: []string{gitDir}}
	}
	r := Repo{Dir: rel, Kind: KindFile}
	if typ != unix.DT_REG {
		return r // a fifo, a socket: no pointer to read
	}
	b := readSmall(fd, ".git")
	dir, ok := parseGitdir(b, abs)
	if !ok {
		return r
	}
	r.GitDirs = append(r.GitDirs, dir)
	if c, ok := parseCommondir(readSmall(unix.AT_FDCWD, dir+"/commondir"), dir); ok {
		r.GitDirs = append(r.GitDirs, c)
	}
	return r
}

// readSmall reads up to maxPointer bytes of the regular file name (relative
// to dirfd), without following a symlink in its last component and without
// blocking on a fifo; nil if it cannot.
func readSmall(dirfd int, name string) []byte {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	b := make([]byte, maxPointer)
	n, err := unix.Read(fd, b)
	if err != nil || n <= 0 {
		return nil
	}
	return b[:n]
}

// lstatType is the d_type of name in dirfd, from fstatat without following
// a symlink, for filesystems whose getdents gives none.
func lstatType(dirfd int, name string) uint8 {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return unix.DT_UNKNOWN
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

// indexNUL returns the index of the first NUL in b, or -1.
func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// isDot reports whether name is "." or "..".
func isDot(name []byte) bool {
	return len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.'
}
