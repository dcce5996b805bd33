package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
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

// scanRoot walks the root through os.Root, one handle per directory opened
// without following symlinks: the stat of every entry kept by the filter,
// the targets of symlinks, the kids of directories. Nothing is read.
func scanRoot(ctx context.Context, r *os.Root, f *filter) (*node, error) {
	fi, err := r.Stat(".")
	if err != nil {
		return nil, fmt.Errorf("scan root: %w", err)
	}
	top := &node{kind: kindDir, mode: modeBits(fi.Mode()), st: statOf(fi)}
	return top, scanDir(ctx, r, top, f)
}

func scanDir(ctx context.Context, dr *os.Root, n *node, f *filter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := dr.Open(".")
	if err != nil {
		return fmt.Errorf("scan %s: %w", relName(n.rel), err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("scan %s: %w", relName(n.rel), err)
	}
	sort.Strings(names)
	for _, name := range names {
		rel := joinRel(n.rel, name)
		if name == ".git" || f.place(rel) == outOfScope {
			continue
		}
		fi, err := dr.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("scan %s: %w", rel, err)
		}
		k := kindOf(fi.Mode())
		if k == 0 {
			continue // sockets, fifos, devices are not taken
		}
		c := &node{name: name, rel: rel, kind: k, mode: modeBits(fi.Mode()), st: statOf(fi)}
		if !f.keep(c, true) {
			continue
		}
		switch {
		case c.onWay && k != kindDir:
		case k == kindFile:
			c.size = fi.Size()
		case k == kindLink:
			c.mode = 0o777
			t, err := dr.Readlink(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("scan %s: %w", rel, err)
			}
			c.target, c.size = t, int64(len(t))
		case k == kindDir:
			sub, err := dr.OpenRoot(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("scan %s: %w", rel, err)
			}
			sfi, err := sub.Stat(".")
			if err == nil && !os.SameFile(fi, sfi) {
				err = errChanged(rel) // swapped for a symlink since the Lstat
			}
			if err == nil {
				err = scanDir(ctx, sub, c, f)
			}
			sub.Close()
			if err != nil {
				return err
			}
		}
		n.kids = append(n.kids, c)
	}
	return nil
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

// curHash returns the content hash of a scanned file of the root: from the
// index when its stat is unchanged, else by reading it.
func curHash(r *os.Root, idx *index, n *node) (hash32, error) {
	if n.hashed {
		return n.hash, nil
	}
	if h, ok := idx.lookup(n); ok {
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
