package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// DiffOptions shape a Diff.
type DiffOptions struct {
	// Path limits the diff to this path (a directory: everything beneath
	// it). When it names a text file on either side, Diff.Patch holds a
	// unified diff of it.
	Path string
	// Max caps the changes listed; 0 means 1000, a negative number no cap.
	Max int
	// Exclude adds patterns (gitignore syntax) to the snapshots' own.
	Exclude []string
	// Skip adds paths, relative to the root, to the snapshots' own: they
	// are neither compared nor shown (a denyRead path, which an older
	// snapshot may hold).
	Skip []string
	// SkipFile, when set, leaves out the root's regular files it names by
	// device and inode, as TakeOptions.SkipFile.
	SkipFile func(dev, ino uint64) bool
}

// Diff is what changed, sorted by path.
type Diff struct {
	Changes   []Change
	Truncated bool   // more than Max changes; the first Max are listed
	Patch     string // see DiffOptions.Path; "" for a binary file
}

// Change is one path that differs. Kind is "added", "modified", "deleted",
// "mode" (only the permission bits changed) or "type" (file, directory and
// symlink turned into one another). Size is the bytes of the file (or the
// length of the symlink's target) after the change, before it for
// "deleted"; 0 for directories.
type Change struct {
	Path string
	Kind string
	Size int64
}

// DefaultMaxChanges is the cap when DiffOptions.Max is 0.
const DefaultMaxChanges = 1000

// patchMax is the size above which a file gets no patch.
const patchMax = 8 << 20

// Diff compares snapshot from with snapshot to, or with the root as it is
// now when to is "". root may be "" (the snapshot's own); otherwise it
// must be the snapshot's root (else ErrOtherRoot). Files the root's stat
// cache knows unchanged are not read.
func (s *Store) Diff(ctx context.Context, from, to string, root string, o DiffOptions) (Diff, error) {
	if err := s.check(); err != nil {
		return Diff{}, err
	}
	mf, err := s.readManifest(from)
	if err != nil {
		return Diff{}, err
	}
	if root == "" {
		root = mf.Root
	}
	if !sameRoot(mf.Root, root) {
		return Diff{}, fmt.Errorf("%w: snapshot %s is of %s, not %s", ErrOtherRoot, from, mf.Root, root)
	}
	var mt *manifest
	if to != "" {
		if mt, err = s.readManifest(to); err != nil {
			return Diff{}, err
		}
		if !sameRoot(mt.Root, mf.Root) {
			return Diff{}, fmt.Errorf("%w: snapshot %s is of %s, snapshot %s of %s", ErrOtherRoot, to, mt.Root, from, mf.Root)
		}
	}
	clean, real, err := s.diffRoot(root, mt == nil)
	if err != nil {
		return Diff{}, err
	}
	f, err := diffFilter(clean, real, mf, mt, o)
	if err != nil {
		return Diff{}, err
	}

	unlock, err := s.lockStore(ctx, false)
	if err != nil {
		return Diff{}, err
	}
	defer unlock()
	d := &differ{s: s, f: f}
	a, err := s.lazyTop(mf)
	if err != nil {
		return Diff{}, err
	}
	var b *node
	if mt != nil {
		if b, err = s.lazyTop(mt); err != nil {
			return Diff{}, err
		}
	} else {
		r, err := os.OpenRoot(clean)
		if err != nil {
			return Diff{}, fmt.Errorf("%w: root %s: %v", ErrInvalid, clean, err)
		}
		defer r.Close()
		if b, d.cache, err = s.scanCached(ctx, r, rootKey(real), f, nil, nil); err != nil {
			return Diff{}, fmt.Errorf("diff: %w", err)
		}
		d.root = r
	}
	if err := d.dir(ctx, a, b); err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	if a.mode != b.mode && f.scope == nil && a.mode != 0 {
		d.add(".", "mode", 0)
	}
	return d.result(o.Max)
}

// diffRoot returns the clean and real paths of a Diff's root: checked
// (checkRoot) when it is compared as it is now, else as named.
func (s *Store) diffRoot(root string, now bool) (clean, real string, err error) {
	if now {
		return s.checkRoot(root)
	}
	clean = filepath.Clean(root)
	real = clean
	if r, err := filepath.EvalSymlinks(clean); err == nil {
		real = r
	}
	return clean, real, nil
}

// diffFilter is what a Diff of mf and mt (nil: the root now) covers:
// o.Path (none: everything), less what either snapshot or o excludes or
// skips.
func diffFilter(clean, real string, mf, mt *manifest, o DiffOptions) (*filter, error) {
	exclude := append([]string{}, mf.Exclude...)
	skips := append([]string{}, mf.Skip...)
	if mt != nil {
		exclude = append(exclude, mt.Exclude...)
		skips = append(skips, mt.Skip...)
	}
	exclude = append(exclude, o.Exclude...)
	skips = append(skips, o.Skip...)
	var scope []string
	if o.Path != "" {
		rels, all, err := cleanPaths(clean, real, []string{o.Path})
		if err != nil {
			return nil, err
		}
		if !all {
			scope = rels
		}
	}
	skip, _, err := cleanPaths(clean, real, skips)
	if err != nil {
		return nil, err
	}
	return &filter{ex: compileIgnore(exclude), skip: skip, scope: scope, skipFile: o.SkipFile}, nil
}

// result is the Diff: the changes sorted by path and capped at max
// (DiffOptions.Max), and the patch of the one file the scope names.
func (d *differ) result(max int) (Diff, error) {
	out := Diff{Changes: d.changes}
	sort.Slice(out.Changes, func(i, j int) bool { return out.Changes[i].Path < out.Changes[j].Path })
	if max == 0 {
		max = DefaultMaxChanges
	}
	if max > 0 && len(out.Changes) > max {
		out.Changes, out.Truncated = out.Changes[:max:max], true
	}
	if out.Changes == nil {
		out.Changes = []Change{}
	}
	if scope := d.f.scope; len(scope) == 1 && (d.patchA != nil || d.patchB != nil) {
		var err error
		if out.Patch, err = d.patch(scope[0]); err != nil {
			return Diff{}, fmt.Errorf("diff: %w", err)
		}
	}
	return out, nil
}

// lazyTop is a snapshot's root, its kids loaded as the diff needs them.
func (s *Store) lazyTop(m *manifest) (*node, error) {
	h, err := m.tree()
	if err != nil {
		return nil, err
	}
	return &node{kind: kindDir, mode: m.Mode, hash: h, hashed: true}, nil
}

type differ struct {
	s       *Store
	f       *filter
	root    *os.Root   // when b is the root now
	cache   *statCache // the root's, then
	changes []Change
	// The file at the scoped path, on each side, for the patch.
	patchA, patchB *node
}

func (d *differ) add(path, kind string, size int64) {
	d.changes = append(d.changes, Change{Path: path, Kind: kind, Size: size})
}

// kids returns a directory's entries, loading a snapshot's on first use
// (scanned directories have theirs already).
func (d *differ) kids(n *node) ([]*node, error) {
	if n == nil {
		return nil, nil
	}
	if n.hashed && !n.loaded {
		if err := d.s.loadKids(n, d.f); err != nil {
			return nil, err
		}
		n.loaded = true
	}
	return n.kids, nil
}

func (d *differ) dir(ctx context.Context, a, b *node) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ka, err := d.kids(a)
	if err != nil {
		return err
	}
	kb, err := d.kids(b)
	if err != nil {
		return err
	}
	return mergeKids(ka, kb, func(x, y *node) error { return d.entry(ctx, x, y) })
}

func sizeOf(n *node) int64 {
	if n.kind == kindDir {
		return 0
	}
	return n.size
}

func (d *differ) entry(ctx context.Context, a, b *node) error {
	if a != nil && a.onWay && a.kind != kindDir {
		a = nil
	}
	if b != nil && b.onWay && b.kind != kindDir {
		b = nil
	}
	if a != nil && a.onWay || b != nil && b.onWay {
		return d.dir(ctx, a, b)
	}
	if a == nil && b == nil {
		return nil
	}
	if len(d.f.scope) == 1 {
		if a != nil && a.rel == d.f.scope[0] && a.kind == kindFile {
			d.patchA = a
		}
		if b != nil && b.rel == d.f.scope[0] && b.kind == kindFile {
			d.patchB = b
		}
	}
	switch {
	case a == nil:
		d.add(b.rel, "added", sizeOf(b))
		if b.kind == kindDir {
			return d.dir(ctx, nil, b)
		}
	case b == nil:
		d.add(a.rel, "deleted", sizeOf(a))
		if a.kind == kindDir {
			return d.dir(ctx, a, nil)
		}
	case a.kind != b.kind:
		d.add(b.rel, "type", sizeOf(b))
		if a.kind == kindDir {
			return d.dir(ctx, a, nil)
		}
		if b.kind == kindDir {
			return d.dir(ctx, nil, b)
		}
	case a.kind == kindDir:
		if a.mode != b.mode {
			d.add(b.rel, "mode", 0)
		}
		if a.hashed && b.hashed && a.hash == b.hash {
			return nil // the same tree
		}
		return d.dir(ctx, a, b)
	case a.kind == kindLink:
		if a.target != b.target {
			d.add(b.rel, "modified", b.size)
		}
	default:
		same, err := d.sameContent(a, b)
		if err != nil {
			return err
		}
		switch {
		case !same:
			d.add(b.rel, "modified", b.size)
		case a.mode != b.mode:
			d.add(b.rel, "mode", b.size)
		}
	}
	return nil
}

// sameContent compares two files: sizes, then hashes (reading a file of
// the root only when its size is the same and the stat cache does not
// know it).
func (d *differ) sameContent(a, b *node) (bool, error) {
	if a.size != b.size {
		return false, nil
	}
	if !b.hashed && d.root != nil {
		if _, err := curHash(d.root, d.cache, b); err != nil {
			return false, err
		}
	}
	return a.hash == b.hash, nil
}

// content reads a file of either side, for the patch; nil when it is over
// patchMax.
func (d *differ) content(n *node, inRoot bool) ([]byte, error) {
	if n == nil {
		return []byte{}, nil
	}
	if n.size > patchMax {
		return nil, nil
	}
	var rd io.Reader
	if inRoot {
		f, _, err := openRootFile(d.root, n.rel)
		if errors.Is(err, fs.ErrNotExist) {
			return []byte{}, nil
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rd = f
	} else {
		br, err := d.s.openBlob(n.hash, n.size, n.rel)
		if err != nil {
			return nil, err
		}
		defer br.Close()
		rd = br
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(rd, patchMax+1)); err != nil {
		return nil, err
	}
	if buf.Len() > patchMax {
		return nil, nil
	}
	return buf.Bytes(), nil
}

func (d *differ) patch(rel string) (string, error) {
	if d.patchA != nil && d.patchB != nil && d.patchA.hashed && d.patchB.hashed && d.patchA.hash == d.patchB.hash {
		return "", nil
	}
	a, err := d.content(d.patchA, false)
	if err != nil || a == nil {
		return "", err
	}
	b, err := d.content(d.patchB, d.root != nil)
	if err != nil || b == nil {
		return "", err
	}
	if isBinary(a) || isBinary(b) {
		return "", nil
	}
	an, bn := "a/"+rel, "b/"+rel
	if d.patchA == nil {
		an = "/dev/null"
	}
	if d.patchB == nil {
		bn = "/dev/null"
	}
	return unifiedDiff(an, bn, a, b), nil
}

// isBinary is git's test: a NUL in the first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}
