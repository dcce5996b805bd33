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
// costs one system call for each directory that did not change. A Cache
// is used by one scan at a time (others wait), and belongs to one root: a
// scan of another root empties it first. The zero value is an empty
// Cache; a nil *Cache caches nothing. Only Linux caches; elsewhere Scan
// ignores it.
type Cache struct {
	mu   sync.Mutex
	root string
	top  *dnode // the root's
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
