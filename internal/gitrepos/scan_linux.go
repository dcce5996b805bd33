//go:build linux

package gitrepos

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
// root's item has no parent, and name is its absolute path.
type item struct {
	parent    *node
	name, rel string
}

// scanner is one scan's shared state.
type scanner struct {
	root     string
	opt      Options
	start    time.Time
	deadline time.Time
	open     atomic.Int32 // directory descriptors held by nodes

	mu         sync.Mutex
	cond       sync.Cond
	queue      []item // breadth first from head, depth first from the tail
	head       int
	busy       int
	done       bool
	truncated  string
	dirs       int
	unreadable int
	gitDirs    int
	repos      []Repo
}

// Scan finds the git repositories under root (an absolute directory, which
// may be given through symlinks), within opt's limits. It fails only when
// root cannot be opened as a directory.
func Scan(root string, opt Options) (Result, error) {
	opt = opt.withDefaults()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{}, &os.PathError{Op: "open", Path: root, Err: err}
	}
	_ = unix.Close(fd)
	s := &scanner{root: filepath.Clean(root), opt: opt, start: time.Now()}
	s.deadline = s.start.Add(opt.Timeout)
	s.cond.L = &s.mu
	s.queue = append(s.queue, item{name: s.root, rel: "."})
	var wg sync.WaitGroup
	for range opt.Workers {
		wg.Go(s.work)
	}
	wg.Wait()
	// A scan cut short leaves directories unopened: release their parents.
	for _, it := range s.queue[s.head:] {
		s.release(it.parent)
	}
	slices.SortFunc(s.repos, func(a, b Repo) int { return strings.Compare(a.Dir, b.Dir) })
	return Result{Repos: s.repos, Dirs: s.dirs, Truncated: s.truncated, Unreadable: s.unreadable, Duration: time.Since(s.start)}, nil
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
		s.mu.Unlock()

		children, found = children[:0], found[:0]
		st := s.read(it, buf, &children, &found)

		s.mu.Lock()
		s.busy--
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

// The flags a directory is opened with: never through a symlink.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// How a directory's read ended.
type readState int

const (
	readDone       readState = iota
	readUnreadable           // it was there and could not be read
	readTimedOut             // the scan's time ran out within it
)

// read reads the directory of it, appending its subdirectories to children
// and the repository it is (if any) to found.
func (s *scanner) read(it item, buf []byte, children *[]item, found *[]Repo) readState {
	var fd int
	var err error
	if it.parent == nil {
		fd, err = unix.Open(it.name, dirFlags&^unix.O_NOFOLLOW, 0)
	} else {
		fd, err = unix.Openat(it.parent.fd, it.name, dirFlags, 0)
		s.release(it.parent)
	}
	if err != nil {
		// Gone, or no longer a directory (a symlink now): nothing to read.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return readDone
		}
		return readUnreadable
	}
	var (
		gitType                 uint8 = unix.DT_UNKNOWN
		hasGit, head, obj, refs bool
		first                   = len(*children)
	)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			_ = unix.Close(fd)
			*children = (*children)[:first]
			return readUnreadable
		}
		if n <= 0 {
			break
		}
		if time.Now().After(s.deadline) {
			// A huge directory: what it holds is not all known.
			_ = unix.Close(fd)
			*children = (*children)[:first]
			return readTimedOut
		}
		for off := 0; off < n; {
			// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
			// d_type u8, d_name (NUL-terminated).
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			typ := buf[off+18]
			nameb := buf[off+19 : off+reclen]
			if i := indexNUL(nameb); i >= 0 {
				nameb = nameb[:i]
			}
			off += reclen
			if isDot(nameb) {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				typ = lstatType(fd, string(nameb))
			}
			switch string(nameb) {
			case ".git":
				hasGit, gitType = true, typ
				continue // never descended into
			case "HEAD":
				head = typ != unix.DT_DIR
			case "objects":
				obj = typ == unix.DT_DIR
			case "refs":
				refs = typ == unix.DT_DIR
			}
			if typ == unix.DT_DIR {
				name := string(nameb)
				*children = append(*children, item{name: name, rel: join(it.rel, name)})
			}
		}
	}
	abs := s.root
	if it.rel != "." {
		abs = s.root + "/" + it.rel
	}
	if hasGit {
		*found = append(*found, s.gitRepo(fd, it.rel, abs, gitType))
	}
	if head && obj && refs {
		*found = append(*found, Repo{Dir: it.rel, Kind: KindBare, GitDirs: []string{abs}})
	}
	if k := len(*children) - first; k > 0 {
		nd := &node{fd: fd}
		nd.refs.Store(int32(k))
		s.open.Add(1)
		for i := first; i < len(*children); i++ {
			(*children)[i].parent = nd
		}
	} else {
		_ = unix.Close(fd)
	}
	return readDone
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
