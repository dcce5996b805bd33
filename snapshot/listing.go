package snapshot

import (
	"context"
	"os"
	"sort"
	"time"
)

// A dirListing is the names of one directory as a scan read them, kept in
// memory for the next scan of the same root: a directory whose stat is
// still the one recorded is not listed again (the untracked cache's idea in
// git). Creating, removing or renaming an entry changes its directory's
// mtime and ctime; a chmod or chown of the directory changes its ctime; and
// no process can set a ctime. So an unchanged stat (inode, device, size,
// mtime, ctime) means unchanged names, given one guard: a change made in
// the same timestamp tick as the stat was taken would leave the stat as it
// was. A listing is therefore kept only when the directory's ctime lies
// outside the racy window of the scan's start, as the stat cache's entries
// (see statcache.go): then any later change carries a later ctime.
//
// The cache saves a directory's getdents, the sort of its names and their
// paths; every entry is still looked at with its own fstatat. It is kept
// only on the local filesystems keepsListings names: a network
// filesystem's attributes may be cached for seconds.
type dirListing struct {
	st     fileStat // the directory's, taken before it was listed
	names  []string // sorted
	rels   []string // rels[i] = joinRel(dir, names[i])
	cnames []string // names[i] and a NUL (names[i] is a prefix of it), for fstatat
}

// dirListings are a root's listings, by directory path (slash, from the
// root; "" for the root). A dirListings map is never changed once
// published.
type dirListings map[string]*dirListing

// newDirListing makes the listing of the directory at rel, whose stat is
// st, from its sorted names (names is kept, its strings replaced by the
// same names, prefixes of cnames').
func newDirListing(st fileStat, rel string, names []string) *dirListing {
	l := &dirListing{st: st, names: names, rels: make([]string, len(names)), cnames: make([]string, len(names))}
	for i, name := range names {
		l.rels[i] = joinRel(rel, name)
		l.cnames[i] = name + "\x00"
		l.names[i] = l.cnames[i][:len(name)]
	}
	return l
}

// listable reports whether a directory listed from start on, whose stat
// (taken before it was listed) is st, may be kept.
func listable(st fileStat, start time.Time) bool {
	w := racyWindow
	if st.ctime%int64(time.Second) != 0 {
		w = racyWindowFine
	}
	return st.ctime < start.Add(-w).UnixNano()
}

// list returns the listing of the directory d at rel, whose stat is st:
// the previous scan's when st is unchanged, else read with buf. It records
// the listing for the next scan.
func (q *scanQueue) list(rel string, st fileStat, d *os.File, buf []byte) (*dirListing, error) {
	if l := q.prev[rel]; l != nil && l.st == st {
		q.record(rel, l)
		return l, nil
	}
	names, err := readNames(d, buf)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	l := newDirListing(st, rel, names)
	if listable(st, q.start) {
		q.record(rel, l)
	}
	return l, nil
}

func (q *scanQueue) record(rel string, l *dirListing) {
	q.mu.Lock()
	q.next[rel] = l
	q.mu.Unlock()
}

// scan scans the root r (whose key is key) with scanRoot, using the
// listings the last whole scan of it kept, on a filesystem that keeps
// listings true (keepsListings). A whole scan (no scope) keeps its own in
// their place; directories it did not list are dropped.
func (s *Store) scan(ctx context.Context, r *os.Root, key string, f *filter) (*node, error) {
	if !keepsListings(r.Name()) {
		top, _, err := scanRoot(ctx, r, f, s.workers, nil)
		return top, err
	}
	s.mu.Lock()
	prev := s.listings[key]
	s.mu.Unlock()
	top, next, err := scanRoot(ctx, r, f, s.workers, prev)
	if err == nil && f.scope == nil {
		s.mu.Lock()
		s.listings[key] = next
		s.mu.Unlock()
	}
	return top, err
}
