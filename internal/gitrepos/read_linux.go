//go:build linux

package gitrepos

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
// and the repository it is (if any) to found; it says whether it read the
// directory's entries, rather than taking them from the cache.
//
// With a cache, a directory is opened only when it has subdirectories (or
// a .git file to read), and one without is looked at with one fstatat
// relative to its parent: what the cache holds of either is taken when
// holds says so, else the directory is read and what it holds replaces
// it there.
//
// Its steps, in order, each of which may end it: takeClean (watched, no
// event: no system call), takeLeaf (no subdirectory: one fstatat),
// openDir, identify (its watch and identity, before its entries), the
// cache's copy taken again with the directory open (walk, revalidate),
// and last list, whose entries store puts in the cache.
func (s *scanner) read(it item, buf []byte, children *[]item, found *[]Repo, budget int) (readState, bool, int) {
	old := it.old
	if old != nil && old.dead {
		old = nil // deleted, renamed or unmounted: not what is there now
	}
	if n, ok := s.takeClean(it, old, children, found, &budget); ok {
		return readDone, false, n
	}
	if s.takeLeaf(it, old, found) {
		return readDone, false, 0
	}
	var began int64
	if it.slot != nil {
		began = time.Now().UnixNano()
	}
	fd, err := s.openDir(it)
	if err != nil {
		if it.slot != nil {
			*it.slot = nil
		}
		// Gone, or no longer a directory (a symlink now): nothing to read.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return readDone, false, 0
		}
		return readUnreadable, false, 0
	}
	st, wd, keep := s.identify(it, old, fd)
	first := len(*children)
	if keep && old != nil && old.ino == st.Ino && s.clean(old) {
		// Watched, no event: as it was; it has a .git file to read.
		n := s.walk(old, it.rel, fd, children, found, &budget)
		_ = unix.Close(fd)
		return readDone, false, n
	}
	if keep && old != nil && s.holds(old, &st) {
		s.revalidate(it, old, fd, wd, children, found)
		return readDone, false, 0
	}
	if it.slot != nil {
		*it.slot = nil // until it has been read whole
	}
	d := &dnode{gitType: unix.DT_UNKNOWN}
	if state := s.list(fd, buf, it.rel, d, children); state != readDone {
		_ = unix.Close(fd)
		*children = (*children)[:first]
		return state, true, 0
	}
	s.markers(d, fd, it.rel, found)
	if keep {
		s.store(it, old, d, &st, began, wd, (*children)[first:])
	}
	s.adopt(fd, *children, first)
	return readDone, true, 0
}

// takeClean takes old, what the cache holds of the directory of it (nil:
// nothing, or dead), with no read and at most one fstatat, when old is
// watched, had no event since its listing, has no .git file to read, and
// is the directory at the item's name: the item's parent was taken from
// the cache (it.trusted), or was read again and fstatat says so. It
// returns how many directories below old walk took, and whether it took
// old; if it did, the item's parent is released.
func (s *scanner) takeClean(it item, old *dnode, children *[]item, found *[]Repo, budget *int) (int, bool) {
	if old == nil || !s.clean(old) || needsFD(old) {
		return 0, false
	}
	// Watched since before its listing, and no event since.
	if it.trusted {
		s.release(it.parent)
		return s.walk(old, it.rel, -1, children, found, budget), true
	}
	// Its parent was read again: is it the same directory?
	var st unix.Stat_t
	if it.parent != nil && unix.Fstatat(it.parent.fd, it.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && s.same(old, &st) {
		s.release(it.parent)
		return s.walk(old, it.rel, -1, children, found, budget), true
	}
	return 0, false
}

// takeLeaf settles with one fstatat the directory of it when what the
// cache holds of it, old (nil: nothing, or dead), has no subdirectory and
// no .git file to read, and no watch is to be added for it: it takes old
// when holds says so, and drops it when the directory is gone or is no
// longer one. It reports whether it settled it (then the item's parent
// is released); if not, the directory is to be read.
func (s *scanner) takeLeaf(it item, old *dnode, found *[]Repo) bool {
	if old == nil || len(old.subs) != 0 || needsFD(old) || s.watching(old) {
		return false
	}
	// No watch to add: one look, relative to its parent if it is
	// open, else by its path from the root (whose components are
	// directories the cache holds, unchanged: what it finds is taken
	// only if it is the same directory).
	dirfd, name := s.rootfd, it.rel
	if it.parent != nil {
		dirfd, name = it.parent.fd, it.name
	}
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && s.holds(old, &st):
		s.release(it.parent)
		old.dirty = false
		s.markers(old, -1, it.rel, found)
		return true
	case err == unix.ENOENT || err == unix.ENOTDIR || err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
		// Gone, or no longer a directory, as read would find.
		s.release(it.parent)
		*it.slot = nil
		return true
	}
	// Changed, or not to be trusted yet: read it.
	return false
}

// openDir opens the directory of it, never through a symlink below the
// root: relative to its parent when that is open (which it releases),
// the root itself by its name, else by its path from the root.
func (s *scanner) openDir(it item) (int, error) {
	switch {
	case it.parent != nil:
		fd, err := unix.Openat(it.parent.fd, it.name, dirFlags, 0)
		s.release(it.parent)
		return fd, err
	case it.rel == ".":
		return unix.Open(it.name, dirFlags&^unix.O_NOFOLLOW, 0)
	}
	// Below a directory taken unopened: by its path, following no
	// symlink anywhere in it.
	var fd int
	var err error
	how := unix.OpenHow{Flags: dirFlags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
	for range 8 {
		if fd, err = unix.Openat2(s.rootfd, it.rel, &how); err != unix.EAGAIN && err != unix.EINTR {
			break
		}
	}
	if errors.Is(err, unix.EXDEV) {
		err = unix.ENOENT // no longer beneath the root: not there
	}
	return fd, err
}

// identify reads the identity and change time of fd, the directory of it,
// before its entries are read: a change made after this bears a later
// time (holds). With inotify, the watch is added first (unless the
// directory has one already), so that a change after it is an event. It
// returns them, the watch that is to stand for the directory (0: none),
// and whether what is read of it is to be kept in the cache (keep: it has
// a slot there, and is on the root's device).
func (s *scanner) identify(it item, old *dnode, fd int) (st unix.Stat_t, wd int32, keep bool) {
	if it.slot != nil && s.watching(old) && (old == nil || atomic.LoadInt32(&old.wd) == 0) {
		wd = s.w.add(fd) // before the fstat
	}
	keep = it.slot != nil && unix.Fstat(fd, &st) == nil && st.Dev == s.dev
	if keep && wd == 0 && old != nil && atomic.LoadInt32(&old.wd) != 0 {
		if old.ino == st.Ino {
			wd = atomic.LoadInt32(&old.wd) // its watch, since before
		} else if s.watching(nil) {
			if wd = s.w.add(fd); wd != 0 && unix.Fstat(fd, &st) != nil {
				keep = false
			}
		}
	}
	if !keep {
		wd = 0 // an unbound watch is dropped by the sweep
	}
	return st, wd, keep
}

// revalidate takes old, what the cache holds of the directory of it, open
// as fd, which holds has said is as it was: the directory's watch, if
// new, is bound to it, its subdirectories are appended to children from
// it without a read (each trusted), its repositories to found, and fd
// becomes their parent.
func (s *scanner) revalidate(it item, old *dnode, fd int, wd int32, children *[]item, found *[]Repo) {
	first := len(*children)
	old.dirty = false
	if wd != 0 && atomic.LoadInt32(&old.wd) != wd {
		s.w.bind(wd, old)
	}
	for i := range old.subs {
		sb := &old.subs[i]
		*children = append(*children, item{name: sb.name, rel: join(it.rel, sb.name), old: sb.node, slot: &sb.node, trusted: true})
	}
	s.markers(old, fd, it.rel, found)
	s.adopt(fd, *children, first)
}

// list reads the entries of fd, the directory rel, with getdents into
// buf: it appends the subdirectories to children (none opened) and notes
// in d its .git entry and whether it is a bare repository. It returns
// readUnreadable when getdents fails and readTimedOut when the scan's
// time runs out within it; then what it appended is not all there is,
// and the caller drops it.
func (s *scanner) list(fd int, buf []byte, rel string, d *dnode, children *[]item) readState {
	var head, obj, refs bool
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return readUnreadable
		}
		if n <= 0 {
			break
		}
		if time.Now().After(s.deadline) {
			// A huge directory: what it holds is not all known.
			return readTimedOut
		}
		for off := 0; off < n; {
			// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
			// d_type u8, d_name (NUL-terminated).
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			dino := *(*uint64)(unsafe.Pointer(&buf[off]))
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
				d.hasGit, d.gitType = true, typ
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
				*children = append(*children, item{name: name, rel: join(rel, name), ino: dino})
			}
		}
	}
	d.bare = head && obj && refs
	return readDone
}

// store puts d in the cache at it.slot, in place of old (nil: nothing,
// or dead): d is the directory of it, whose identity and change time were
// st, listed whole from began, with kids its subdirectories as list
// appended them. Each of kids is given its place in d, and what the cache
// holds of it (keepSubs); wd, if any, is bound to d.
func (s *scanner) store(it item, old, d *dnode, st *unix.Stat_t, began int64, wd int32, kids []item) {
	d.ino, d.ctime, d.listed = st.Ino, st.Ctim.Nano(), began
	d.subs = make([]dsub, len(kids))
	for i := range kids {
		d.subs[i].name = kids[i].name
	}
	if old != nil && old.ino == st.Ino {
		keepSubs(d, old, kids)
	}
	for i := range kids {
		kids[i].old, kids[i].slot = d.subs[i].node, &d.subs[i].node
	}
	*it.slot = d
	if wd != 0 {
		s.w.bind(wd, d)
	}
}

// keepSubs gives each of d's subdirectories, kids, what old, the
// directory d was before it was read again, holds of it, if it is the
// directory it was by the listing's inode number: each is looked at in
// turn (not trusted), and one that is not looked at (a scan cut short) is
// still the directory it holds when its parent is taken from the cache
// next time. Names that come in the order old has them cost no map.
func keepSubs(d, old *dnode, kids []item) {
	var prev map[string]*dnode
	j := 0
	for i := range kids {
		if j < len(old.subs) && old.subs[j].name == kids[i].name {
			if n := old.subs[j].node; n != nil && n.ino == kids[i].ino {
				d.subs[i].node = n
			}
			j++
			continue
		}
		if prev == nil {
			prev = make(map[string]*dnode, len(old.subs))
			for _, sb := range old.subs {
				prev[sb.name] = sb.node
			}
		}
		if n := prev[kids[i].name]; n != nil && n.ino == kids[i].ino {
			d.subs[i].node = n
		}
	}
}
