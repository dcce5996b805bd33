package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Where a path lies with respect to a filter's scope.
const (
	outOfScope = iota
	onWay      // an ancestor of a scoped path: walked, never changed
	inScope
)

// filter says which entries of a tree count: neither .git, nor excluded,
// nor under a skipped path, and within the scope (nil: everything).
type filter struct {
	ex    *matcher
	skip  []string
	scope []string
	// skipFile, when set, leaves out the regular files it names by device
	// and inode, wherever they are: the hard links of a denied file.
	skipFile func(dev, ino uint64) bool
}

func (f *filter) place(rel string) int {
	for _, s := range f.skip {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return outOfScope
		}
	}
	if f.scope == nil {
		return inScope
	}
	way := false
	for _, s := range f.scope {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return inScope
		}
		if strings.HasPrefix(s, rel+"/") {
			way = true
		}
	}
	if way {
		return onWay
	}
	return outOfScope
}

// keep applies the filter to an entry of kind k at rel, and marks the
// ancestors of scoped paths. Entries on the way that are not directories
// are kept only with keepWayFiles (a restore must remove them to make the
// directory).
func (f *filter) keep(n *node, keepWayFiles bool) bool {
	if n.name == ".git" {
		return false
	}
	p := f.place(n.rel)
	if p == outOfScope || f.ex.match(n.rel, n.kind == kindDir) {
		return false
	}
	if p == onWay {
		n.onWay = true
		return n.kind == kindDir || keepWayFiles
	}
	return true
}

// testHookRead is called with the path of every file of a root opened for
// reading (Take, Diff against the root, Restore's comparisons).
var testHookRead func(rel string)

func errChanged(rel string) error {
	return fmt.Errorf("%s changed while it was read; try again", rel)
}

// scanRoot walks the root through os.Root: the stat of every entry kept by
// the filter, the targets of symlinks, the kids of directories. Nothing is
// read. Directories are scanned by up to workers goroutines; each is opened
// through the root handle and checked to be the directory its parent's
// Lstat saw (not a symlink swapped in since), and every entry in it is
// looked at with one fstatat on that directory, never following a symlink.
// A directory whose stat is unchanged since prev listed it is not listed
// again (see listing.go); next holds the listings to keep from this scan.
func scanRoot(ctx context.Context, r *os.Root, f *filter, workers int, prev dirListings) (top *node, next dirListings, err error) {
	start := time.Now()
	fi, err := r.Stat(".")
	if err != nil {
		return nil, nil, fmt.Errorf("scan root: %w", err)
	}
	top = &node{kind: kindDir, mode: modeBits(fi.Mode()), st: statOf(fi)}
	q := &scanQueue{ctx: ctx, r: r, f: f, start: start, prev: prev, next: dirListings{}}
	q.cond = sync.NewCond(&q.mu)
	q.push(scanTask{n: top})
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.work()
		}()
	}
	wg.Wait()
	if q.err != nil {
		return nil, nil, q.err
	}
	dropGone(top)
	return top, q.next, nil
}

type scanTask struct {
	n *node // n.st is the directory's stat, from its parent's scan
}

// scanQueue holds the directories left to scan: a stack, so that the
// tree is walked about depth first and few are pending at once.
type scanQueue struct {
	ctx   context.Context
	r     *os.Root
	f     *filter
	start time.Time
	prev  dirListings // read only

	mu      sync.Mutex
	cond    *sync.Cond
	tasks   []scanTask
	pending int // tasks queued or being scanned
	err     error
	next    dirListings
}

func (q *scanQueue) push(t scanTask) {
	q.mu.Lock()
	q.tasks = append(q.tasks, t)
	q.pending++
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *scanQueue) work() {
	buf := make([]byte, direntBufSize) // this worker's, for readNames
	for {
		q.mu.Lock()
		for len(q.tasks) == 0 && q.pending > 0 {
			q.cond.Wait()
		}
		if q.pending == 0 {
			q.mu.Unlock()
			q.cond.Broadcast()
			return
		}
		t := q.tasks[len(q.tasks)-1]
		q.tasks = q.tasks[:len(q.tasks)-1]
		failed := q.err != nil
		q.mu.Unlock()
		var err error
		if !failed {
			err = q.scan(t, buf)
		}
		q.mu.Lock()
		if err != nil && q.err == nil {
			q.err = err
		}
		q.pending--
		done := q.pending == 0
		q.mu.Unlock()
		if done {
			q.cond.Broadcast()
		}
	}
}

// scan lists one directory and queues its subdirectories.
func (q *scanQueue) scan(t scanTask, buf []byte) error {
	if err := q.ctx.Err(); err != nil {
		return err
	}
	n := t.n
	dr := q.r
	dirSt := n.st
	if n.rel != "" {
		var err error
		if dr, err = q.r.OpenRoot(n.rel); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				n.gone = true // removed since its parent was scanned
				return nil
			}
			return fmt.Errorf("scan %s: %w", n.rel, err)
		}
		defer dr.Close()
		sfi, err := dr.Stat(".")
		if err != nil {
			return fmt.Errorf("scan %s: %w", n.rel, err)
		}
		if dirSt = statOf(sfi); dirSt.ino != n.st.ino || dirSt.dev != n.st.dev {
			return errChanged(n.rel) // swapped since the parent's look
		}
	}
	d, err := dr.Open(".")
	if err != nil {
		return fmt.Errorf("scan %s: %w", relName(n.rel), err)
	}
	defer d.Close()
	l, err := q.list(n.rel, dirSt, d, buf)
	if err != nil {
		return fmt.Errorf("scan %s: %w", relName(n.rel), err)
	}
	f := q.f
	names, fd := l.names, int(d.Fd())
	kids := make([]*node, 0, len(names))
	// The kids' nodes are allocated together: one allocation a directory,
	// not one an entry. The slice is never appended past its capacity, so
	// the pointers into it stay put.
	nodes := make([]node, 0, len(names))
	var subdirs []scanTask
	for i, name := range names {
		rel := l.rels[i]
		if name == ".git" || f.place(rel) == outOfScope {
			n.hides = true
			continue
		}
		k, bits, st, err := lstatIn(dr, fd, name, l.cnames[i])
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("scan %s: %w", rel, err)
		}
		if k == 0 {
			continue // sockets, fifos, devices are not taken
		}
		if k == kindFile && f.skipFile != nil && f.skipFile(st.dev, st.ino) {
			n.hides = true
			continue
		}
		nodes = append(nodes, node{name: name, rel: rel, kind: k, mode: bits, st: st, parent: n})
		c := &nodes[len(nodes)-1]
		if !f.keep(c, true) {
			n.hides = true
			continue
		}
		switch {
		case c.onWay && k != kindDir:
		case k == kindFile:
			c.size = st.size
		case k == kindLink:
			c.mode = 0o777
			target, err := dr.Readlink(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("scan %s: %w", rel, err)
			}
			c.target, c.size = target, int64(len(target))
		case k == kindDir:
			subdirs = append(subdirs, scanTask{n: c})
		}
		kids = append(kids, c)
	}
	n.kids = kids
	// Pushed in reverse, so that the stack pops them in order.
	for i := len(subdirs) - 1; i >= 0; i-- {
		q.push(subdirs[i])
	}
	return nil
}

// dropGone removes the directories that vanished during the scan.
func dropGone(n *node) {
	kids := n.kids[:0]
	for _, k := range n.kids {
		if k.kind == kindDir {
			if k.gone {
				continue
			}
			dropGone(k)
		}
		kids = append(kids, k)
	}
	n.kids = kids
}

func relName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// openRootFile opens a regular file of a scanned tree for reading, through
// the root handle, never blocking on a FIFO swapped in.
func openRootFile(r *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	if testHookRead != nil {
		testHookRead(rel)
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errChanged(rel)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// openScannedDir opens a scanned directory through r, checked to be the
// directory the scan saw; r itself for the root.
func openScannedDir(r *os.Root, d *node) (*os.Root, error) {
	if d.rel == "" {
		return r, nil
	}
	dr, err := r.OpenRoot(d.rel)
	if err != nil {
		return nil, err
	}
	fi, err := dr.Stat(".")
	if err == nil && statOf(fi).ino != d.st.ino {
		err = errChanged(d.rel)
	}
	if err != nil {
		dr.Close()
		return nil, err
	}
	return dr, nil
}

// openDirFile opens a scanned file by its name in its directory's handle.
func openDirFile(dr *os.Root, n *node) (*os.File, fs.FileInfo, error) {
	if testHookRead != nil {
		testHookRead(n.rel)
	}
	f, err := dr.OpenFile(n.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errChanged(n.rel)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// curHash returns the content hash of a scanned file of the root: from the
// stat cache c when it knows the stat unchanged, else by reading the file.
func curHash(r *os.Root, c *statCache, n *node) (hash32, error) {
	if n.hashed {
		return n.hash, nil
	}
	if h, ok := c.lookup(n); ok {
		n.hash, n.hashed = h, true
		return h, nil
	}
	f, _, err := openRootFile(r, n.rel)
	if err != nil {
		return hash32{}, fmt.Errorf("read %s: %w", n.rel, err)
	}
	defer f.Close()
	h, size, err := hashReader(f)
	if err != nil {
		return hash32{}, fmt.Errorf("read %s: %w", n.rel, err)
	}
	n.hash, n.hashed, n.size = h, true, size
	return h, nil
}

// cleanPaths turns paths given for a root into clean slash paths relative
// to it. An absolute path must lie inside the root (as given or as its real
// path); any ".." component, or an absolute path elsewhere, is
// ErrOutsideRoot. A path naming the root itself returns all=true.
func cleanPaths(root, real string, paths []string) (rels []string, all bool, err error) {
	for _, p := range paths {
		if strings.IndexByte(p, 0) >= 0 || p == "" {
			return nil, false, fmt.Errorf("%w: path %q", ErrInvalid, p)
		}
		q := p
		if filepath.IsAbs(q) {
			switch {
			case within(root, filepath.Clean(q)):
				q = strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(q), root), "/")
			case within(real, filepath.Clean(q)):
				q = strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(q), real), "/")
			default:
				return nil, false, fmt.Errorf("%w: %q is not inside %s", ErrOutsideRoot, p, root)
			}
		}
		q = filepath.ToSlash(q)
		for _, c := range strings.Split(q, "/") {
			if c == ".." {
				return nil, false, fmt.Errorf("%w: %q climbs out with \"..\"", ErrOutsideRoot, p)
			}
		}
		q = path.Clean(q)
		if q == "." || q == "" {
			all = true
			continue
		}
		rels = append(rels, q)
	}
	return rels, all, nil
}
