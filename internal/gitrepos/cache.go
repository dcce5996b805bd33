package gitrepos

import (
	"sync"
	"time"
)

// racySlack is how much older than the start of its listing a directory's
// change time must be for the listing to be trusted by the next scan: the
// kernel stamps change times from a clock that lags the one read here by
// up to a tick (4 ms at HZ=250, 10 ms at HZ=100), so a change made just
// after a listing can bear the same time as one made just before it.
const racySlack = 50 * time.Millisecond

// Cache keeps what scans of one root saw, so that the next scan of it
// costs nothing for each directory that did not change and has an
// inotify watch, and one system call for one without. A Cache is used by
// one scan at a time (others wait), and belongs to one root: a scan of
// another root empties it first. The zero value is an empty Cache; a nil
// *Cache caches nothing. A Cache that scanned holds an inotify instance
// until Close. Only Linux caches; elsewhere Scan ignores it.
type Cache struct {
	mu   sync.Mutex
	root string
	top  *dnode // the root's
	dev  uint64 // the root's device, when top was read
	// w is the cache's inotify instance (Linux), made by its first scan;
	// nil when none could be made (closed: none is tried again), or after
	// Close.
	w      *watcher
	closed bool
}

// Close releases c's inotify instance and watches. A closed Cache still
// scans, revalidating each directory by its change time.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w.close()
	c.w, c.closed = nil, true
	return nil
}

// dnode is a directory a scan listed whole: its identity and change time
// as they were just before its entries were read, when that read began,
// and what the entries said.
type dnode struct {
	ino    uint64
	ctime  int64 // ns
	listed int64 // ns, when the listing began
	// subs are its subdirectories (not .git), in the order they were
	// read, each with what the cache holds of it, if anything.
	subs    []dsub
	hasGit  bool  // it holds an entry named .git
	gitType uint8 // of that entry, as getdents's d_type
	bare    bool  // it holds a HEAD that is no directory, objects/ and refs/

	// wd is its inotify watch (0: none), added before its listing or its
	// revalidation, so that every change since is an event on it. Set by
	// the worker that reads it (or, to 0, by one that gives the watch to
	// the same directory by another path), read by others: through sync/atomic.
	wd int32
	// dirty (an event came on its watch) and dead (it was deleted,
	// renamed or unmounted: what the cache holds is no longer at its
	// name) are set by the drain of the queue before a scan's workers
	// start; dirty is cleared by the worker that reads it again.
	dirty, dead bool
	mark        uint32 // the watcher's sweep's
}

// dsub is a subdirectory of a dnode.
type dsub struct {
	name string
	node *dnode // nil until it is listed whole
}

// Scan finds the git repositories under root (an absolute directory, which
// may be given through symlinks), within opt's limits. It fails only when
// root cannot be opened as a directory.
func Scan(root string, opt Options) (Result, error) {
	return (*Cache)(nil).Scan(root, opt)
}

// Scan is the package's Scan, but it takes what c holds of root's
// directories, where they did not change, instead of reading them again,
// and keeps in c what it read. It finds what Scan would.
func (c *Cache) Scan(root string, opt Options) (Result, error) {
	if c == nil {
		return scan(root, opt, nil)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return scan(root, opt, c)
}
