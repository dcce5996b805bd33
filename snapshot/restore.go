package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/internal/parallel"
)

// RestoreOptions shape a Restore.
type RestoreOptions struct {
	// Paths limits the restore to these paths, relative to the root (or
	// absolute inside it); a directory names everything beneath it. None
	// (nil or empty) restores everything.
	Paths []string
	// Exclude adds patterns (gitignore syntax) to the snapshot's own:
	// what they match is neither written nor removed.
	Exclude []string
	// Skip adds paths to the snapshot's own that are never written nor
	// removed (read roots inside the root).
	Skip []string
	// SkipFile, when set, names by device and inode regular files of the
	// root that are neither written nor removed (the hard links of a file
	// no snapshot may hold), as TakeOptions.SkipFile.
	SkipFile func(dev, ino uint64) bool
}

// RestoreResult counts what a Restore did: Written counts the files,
// symlinks and directories made or rewritten and those whose mode was set;
// Removed the entries removed (everything beneath a removed directory
// included).
type RestoreResult struct {
	Written, Removed int
	Duration         time.Duration
}

// testHookBeforeApply runs between a Restore's plan (every blob checked)
// and its first write.
var testHookBeforeApply func()

// Restore makes the root (or the named paths) what snapshot id holds: files
// changed since are rewritten, files made since removed, deleted ones
// brought back, modes and symlinks set as they were, directories (empty
// ones too) made. It plans first and checks every blob it needs against
// its hash before it writes anything (a damaged store is ErrDamaged and the
// root is left as it was). Each file is written to a temporary file beside
// it and renamed over, and every path goes through an os.Root, so a
// directory swapped for a symlink meanwhile cannot carry a write out of the
// root.
//
// Its steps: plan (scan the root while the snapshot's trees and the stat
// cache load, hash the current files that may already be right, decide,
// check the blobs), apply, and, after the answer, record in the stat cache
// what it wrote and read.
func (s *Store) Restore(ctx context.Context, id, root string, o RestoreOptions) (RestoreResult, error) {
	ph := newPhases()
	if err := s.check(); err != nil {
		return RestoreResult{}, err
	}
	m, err := s.readManifest(id)
	if err != nil {
		return RestoreResult{}, err
	}
	clean, real, err := s.checkRoot(root)
	if err != nil {
		return RestoreResult{}, err
	}
	if !sameRoot(m.Root, clean) {
		return RestoreResult{}, fmt.Errorf("%w: snapshot %s is of %s, not %s", ErrOtherRoot, id, m.Root, clean)
	}
	f, err := restoreFilter(m, clean, real, o)
	if err != nil {
		return RestoreResult{}, err
	}
	h, err := s.holdRoot(ctx, clean, real)
	if err != nil {
		return RestoreResult{}, err
	}
	defer h.release()
	unlockStore, err := s.lockStore(ctx, false)
	if err != nil {
		return RestoreResult{}, err
	}
	defer unlockStore()

	p, err := s.planRestore(ctx, m, h, f, ph)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", id, err)
	}
	if testHookBeforeApply != nil {
		testHookBeforeApply()
	}
	applyStart := time.Now()
	res, err := p.apply(ctx, s, h.r)
	res.Duration = time.Since(ph.start)
	if err != nil {
		return res, fmt.Errorf("restore %s: %w", id, err)
	}
	ph.attrs = append(ph.attrs, "applyMs", time.Since(applyStart).Milliseconds(), "ms", res.Duration.Milliseconds())
	path := s.statCachePath(h.key)
	s.later(h, func(r *os.Root) { p.updateStatCache(s, path, r, ph.start) })
	s.log.Info("snapshot restored", append([]any{"id", id, "root", clean, "written", res.Written, "removed", res.Removed,
		"hashed", len(p.read), "blobs", p.checked}, ph.attrs...)...)
	return res, nil
}

// restoreFilter is what a Restore of m into the root (clean and real, as
// checkRoot returns them) covers: o.Paths (none: everything), less what
// the snapshot and o exclude or skip.
func restoreFilter(m *manifest, clean, real string, o RestoreOptions) (*filter, error) {
	scope, all, err := cleanPaths(clean, real, o.Paths)
	if err != nil {
		return nil, err
	}
	if all || len(o.Paths) == 0 {
		scope = nil
	}
	skip, _, err := cleanPaths(clean, real, append(append([]string{}, m.Skip...), o.Skip...))
	if err != nil {
		return nil, err
	}
	ex := compileIgnore(append(append([]string{}, m.Exclude...), o.Exclude...))
	return &filter{ex: ex, skip: skip, scope: scope, skipFile: o.SkipFile}, nil
}

// planRestore decides all that a Restore of m will do to the held root,
// the store's lock held (shared): the snapshot's trees are loaded while
// the root is scanned, the current files that may hold the target's
// content are hashed, the plan is made, and every blob it writes is
// checked.
func (s *Store) planRestore(ctx context.Context, m *manifest, h *rootHold, f *filter, ph *phases) (*plan, error) {
	var target *node
	cur, cache, err := s.scanCached(ctx, h.r, h.key, f, ph, func() (err error) {
		target, err = s.loadTree(ctx, m, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	p := &plan{touched: map[string]bool{}, curDirs: map[string]*node{}, cache: cache}
	if err := p.hashCurrent(ctx, s, h.r, cur, target); err != nil {
		return nil, err
	}
	ph.mark("hashMs")
	p.dir(cur, target)
	if f.scope == nil && cur.mode != target.mode && target.mode != 0 {
		p.dirModes = append(p.dirModes, target)
	}
	if err := p.checkBlobs(ctx, s); err != nil {
		return nil, err
	}
	ph.mark("planMs")
	return p, nil
}

// hashCurrent hashes the current files that may hold the target's content
// (the same path and size): from the stat cache, or else read (p.read).
func (p *plan) hashCurrent(ctx context.Context, s *Store, r *os.Root, cur, target *node) error {
	p.want = map[string]*node{}
	eachFile(target, func(n *node) { p.want[n.rel] = n })
	eachFile(cur, func(n *node) {
		if t := p.want[n.rel]; t != nil && !n.onWay && t.size == n.st.size {
			if h, ok := p.cache.lookup(n); ok {
				n.hash, n.hashed = h, true
			} else {
				p.read = append(p.read, n)
			}
		}
	})
	return parallel.For(ctx, s.workers, len(p.read), func(ctx context.Context, i int) error {
		_, err := curHash(r, nil, p.read[i])
		return err
	})
}

// checkBlobs reads every blob the plan writes and checks it against its
// hash, before anything is written. Small blobs are kept, checked, in
// memory (up to verifiedBudget), to be written from there: read once, not
// twice.
func (p *plan) checkBlobs(ctx context.Context, s *Store) error {
	blobs := map[hash32]*node{}
	for _, t := range p.writes {
		blobs[t.hash] = t
	}
	need := make([]*node, 0, len(blobs))
	for _, t := range blobs {
		need = append(need, t)
	}
	verified := make([][]byte, len(need))
	var budget atomic.Int64
	budget.Store(verifiedBudget)
	err := parallel.For(ctx, s.workers, len(need), func(ctx context.Context, i int) error {
		t := need[i]
		if t.size < bufSize && budget.Add(-t.size) >= 0 {
			data, err := s.readBlob(t.hash, t.size, t.rel)
			verified[i] = data
			return err
		}
		return s.verifyBlob(t.hash, t.size, t.rel)
	})
	if err != nil {
		return err
	}
	p.checked = len(need)
	p.inMemory = map[hash32][]byte{}
	for i, t := range need {
		if verified[i] != nil {
			p.inMemory[t.hash] = verified[i]
		}
	}
	return nil
}

// updateStatCache records in the root's stat cache (its file is path),
// after the answer, what the restore learnt: the stat and hash of the
// files it wrote and of those it read and found right, so that the next
// Take or Restore reads neither again; removed paths leave it. Its
// generation stays: a stat cache older than the last collection is
// checked as before.
func (p *plan) updateStatCache(s *Store, path string, r *os.Root, start time.Time) {
	var seen []*node
	for _, n := range p.read {
		if t := p.want[n.rel]; t != nil && n.hashed && n.hash == t.hash {
			seen = append(seen, n)
		}
	}
	for _, t := range p.writes {
		fi, err := r.Lstat(t.rel)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		seen = append(seen, &node{rel: t.rel, hash: t.hash, st: statOf(fi)})
	}
	if len(seen) == 0 && len(p.removes) == 0 {
		return
	}
	next := newStatCache(p.cache.gen, len(p.cache.entries)+len(seen))
	maps.Copy(next.entries, p.cache.entries)
	var drop func(n *node)
	drop = func(n *node) {
		delete(next.entries, n.rel)
		for _, k := range n.kids {
			drop(k)
		}
	}
	for _, c := range p.removes {
		drop(c)
	}
	next.record(start, seen)
	s.putStatCache(path, next)
}

// plan is what a Restore will do, all decided before the first write.
type plan struct {
	removes  []*node // current entries removed whole
	mkdirs   []*node // directories made (parents first)
	writes   []*node // files written
	links    []*node // symlinks made
	chmods   []*node // files whose mode only is set
	dirModes []*node // directories whose mode is set at the end
	removed  int
	touched  map[string]bool   // directories whose entries change
	curDirs  map[string]*node  // current directories, by rel
	inMemory map[hash32][]byte // checked blobs, by hash
	checked  int               // blobs checked

	// For the stat cache: the root's as loaded, the target's files by
	// path, and the current files read to compare with them.
	cache *statCache
	want  map[string]*node
	read  []*node
}

// verifiedBudget bounds the bytes of checked blobs a Restore keeps in
// memory to write from.
const verifiedBudget = 16 << 20

func parentRel(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

// dir plans one directory: c is the current one, t the target; either may
// be nil.
func (p *plan) dir(c, t *node) {
	if c != nil {
		p.curDirs[c.rel] = c
	}
	mergeKids(kidsOf(c), kidsOf(t), func(x, y *node) error {
		p.entry(x, y)
		return nil
	})
}

func (p *plan) entry(c, t *node) {
	if c != nil && c.onWay || t != nil && t.onWay {
		// An ancestor of a named path: made a directory if the target has
		// one there, never otherwise changed.
		var cd, td *node
		if c != nil && c.kind == kindDir {
			cd = c
		}
		if t != nil && t.kind == kindDir {
			td = t
		}
		if td != nil && cd == nil {
			if c != nil {
				p.remove(c)
			}
			p.mkdir(td)
		}
		p.dir(cd, td)
		return
	}
	switch {
	case t == nil:
		p.remove(c)
	case c == nil:
		p.create(t)
	case c.kind != t.kind:
		if p.remove(c) {
			p.create(t)
		}
	case t.kind == kindDir:
		if c.mode != t.mode {
			p.dirModes = append(p.dirModes, t)
		}
		p.dir(c, t)
	case t.kind == kindFile:
		if c.st.size != t.size || !c.hashed || c.hash != t.hash {
			p.writes = append(p.writes, t)
			p.touched[parentRel(t.rel)] = true
		} else if c.mode != t.mode {
			p.chmods = append(p.chmods, t)
		}
	case t.kind == kindLink:
		if c.target != t.target {
			p.links = append(p.links, t)
			p.touched[parentRel(t.rel)] = true
		}
	}
}

// remove plans the removal of c, whole. A directory that holds, at any
// depth, what the scan left out (a .git, an excluded entry, a read root)
// stays, and only what it holds besides goes: a restore neither writes nor
// removes what it does not see. It reports whether c itself goes.
func (p *plan) remove(c *node) bool {
	if c.kind == kindDir && hidesBeneath(c) {
		p.dir(c, nil)
		return false
	}
	p.removes = append(p.removes, c)
	p.removed += subtreeCount(c)
	p.touched[parentRel(c.rel)] = true
	return true
}

// hidesBeneath reports whether the scan left out an entry of n or of a
// directory beneath it.
func hidesBeneath(n *node) bool {
	if n.hides {
		return true
	}
	for _, k := range n.kids {
		if k.kind == kindDir && hidesBeneath(k) {
			return true
		}
	}
	return false
}

func (p *plan) mkdir(t *node) {
	p.mkdirs = append(p.mkdirs, t)
	p.dirModes = append(p.dirModes, t)
	p.touched[parentRel(t.rel)] = true
}

func (p *plan) create(t *node) {
	switch t.kind {
	case kindDir:
		p.mkdir(t)
		p.dir(nil, t)
	case kindFile:
		p.writes = append(p.writes, t)
		p.touched[parentRel(t.rel)] = true
	case kindLink:
		p.links = append(p.links, t)
		p.touched[parentRel(t.rel)] = true
	}
}

func dotRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// tempName is a name beside rel for a file written before it is renamed.
func tempName(rel string) string {
	var b [8]byte
	rand.Read(b[:])
	return path.Join(path.Dir(rel), ".snapshot-"+hex.EncodeToString(b[:])+".tmp")
}

// apply carries a plan out, every path through the root handle r: the
// directories whose entries change opened up, removals, new directories,
// files, symlinks, the modes of files, and last the modes of directories.
func (p *plan) apply(ctx context.Context, s *Store, r *os.Root) (RestoreResult, error) {
	res := RestoreResult{Removed: p.removed}
	reopened, err := p.openDirs(r)
	if err != nil {
		return res, err
	}
	tr := s.openTrash()
	defer s.emptyTrash(tr)
	for _, c := range p.removes {
		if err := removeToTrash(r, c.rel, tr); err != nil {
			return res, err
		}
	}
	for _, t := range p.mkdirs {
		if err := r.Mkdir(t.rel, 0o700); err != nil {
			return res, err
		}
		res.Written++
	}
	n, err := p.writeFiles(ctx, s, r, tr)
	res.Written += n
	if err != nil {
		return res, err
	}
	for _, t := range p.links {
		tmp := tempName(t.rel)
		if err := r.Symlink(t.target, tmp); err != nil {
			return res, err
		}
		if err := r.Rename(tmp, t.rel); err != nil {
			r.Remove(tmp)
			return res, err
		}
		res.Written++
	}
	for _, t := range p.chmods {
		if err := r.Chmod(t.rel, fileMode(t.mode)); err != nil {
			return res, err
		}
		res.Written++
	}
	n, err = p.setDirModes(r, reopened)
	res.Written += n
	return res, err
}

// dirMode is a directory's mode to set at the end of a Restore.
type dirMode struct {
	rel  string
	mode uint32
}

// openDirs makes the current directories whose entries change writable
// for the while, and returns the modes to set them back to (those whose
// mode the plan sets anyway excepted).
func (p *plan) openDirs(r *os.Root) ([]dirMode, error) {
	set := map[string]bool{}
	for _, t := range p.dirModes {
		set[t.rel] = true
	}
	var back []dirMode
	for rel := range p.touched {
		c := p.curDirs[rel]
		if c == nil || c.mode&0o700 == 0o700 {
			continue
		}
		if err := r.Chmod(dotRel(rel), fileMode(c.mode|0o700)); err != nil {
			return nil, err
		}
		if !set[rel] {
			back = append(back, dirMode{rel, c.mode})
		}
	}
	return back, nil
}

// writeFiles writes the plan's files, and returns how many it wrote. They
// are written in groups by directory, each through a handle on that
// directory opened through r (so confined like r, and pinned to the
// directory it found: a swap of the name afterwards changes nothing).
func (p *plan) writeFiles(ctx context.Context, s *Store, r *os.Root, tr *trash) (int, error) {
	groups := map[string][]*node{}
	var dirs []string
	for _, t := range p.writes {
		d := parentRel(t.rel)
		if groups[d] == nil {
			dirs = append(dirs, d)
		}
		groups[d] = append(groups[d], t)
	}
	var written atomic.Int64
	tryClone := &atomic.Bool{}
	tryClone.Store(true)
	err := parallel.For(ctx, s.workers, len(dirs), func(ctx context.Context, i int) error {
		dr, err := r.OpenRoot(dotRel(dirs[i]))
		if err != nil {
			return err
		}
		defer dr.Close()
		dd, err := dr.Open(".")
		if err != nil {
			return err
		}
		defer dd.Close()
		for _, t := range groups[dirs[i]] {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.writeFile(dr, dd, t, p.inMemory[t.hash], tryClone, tr); err != nil {
				return err
			}
			written.Add(1)
		}
		return nil
	})
	return int(written.Load()), err
}

// setDirModes sets the modes of directories, last and deepest first (so
// that a directory made read-only comes after what is beneath it): those
// the plan sets, and those opened up (reopened) set back. It returns how
// many of the plan's it counts as written: each once, and none of those
// it made (counted then).
func (p *plan) setDirModes(r *os.Root, reopened []dirMode) (int, error) {
	modes := reopened
	counted := map[string]bool{}
	for _, t := range p.dirModes {
		modes = append(modes, dirMode{t.rel, t.mode})
		counted[t.rel] = false
	}
	for _, t := range p.mkdirs {
		counted[t.rel] = true
	}
	depth := func(rel string) int { return strings.Count(rel, "/") + btoi(rel != "") }
	sort.SliceStable(modes, func(i, j int) bool { return depth(modes[i].rel) > depth(modes[j].rel) })
	n := 0
	for _, d := range modes {
		if err := r.Chmod(dotRel(d.rel), fileMode(d.mode)); err != nil {
			return n, err
		}
		if c, ok := counted[d.rel]; ok && !c {
			n++
			counted[d.rel] = true
		}
	}
	return n, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeFile writes one file of the target into its directory dr (whose
// own handle is dd): a temporary file beside it, the blob cloned or copied
// in (checked again as it is read), its mode set, then put in place of
// whatever is there (replaceFile), which goes to the trash tr.
func (s *Store) writeFile(dr *os.Root, dd *os.File, t *node, data []byte, tryClone *atomic.Bool, tr *trash) (err error) {
	var src *blobReader
	if data == nil && t.size > 0 {
		if src, err = s.openBlob(t.hash, t.size, t.rel); err != nil {
			return err
		}
		defer src.Close()
	}
	tmp := tempName(t.name)
	f, err := dr.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			dr.Remove(tmp)
		}
	}()
	switch {
	case data != nil:
		if _, err = wrapWriter(f).Write(data); err != nil {
			return err
		}
	case src != nil:
		cloned := false
		if tryClone.Load() && t.size >= bufSize && src.f != nil {
			if cerr := cloneFile(f, src.f); cerr == nil {
				cloned = true
			} else {
				tryClone.Store(false)
			}
		}
		if !cloned {
			buf := getBuf()
			_, err = io.CopyBuffer(wrapWriter(onlyWriter{f}), src, *buf)
			putBuf(buf)
			if err != nil {
				return err
			}
		}
	}
	if err = f.Chmod(fileMode(t.mode)); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return replaceFile(dr, dd, tmp, t.name, tr)
}

// onlyWriter hides ReadFrom, so that io.CopyBuffer uses the buffer and the
// blobReader's check runs.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// onlyReader hides WriteTo, so that io.CopyBuffer uses the pooled buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// removeAll removes rel and everything beneath it, through the root; a
// directory without write permission is opened up first.
func removeAll(r *os.Root, rel string) error {
	err := r.RemoveAll(rel)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	openUp(r, rel)
	return r.RemoveAll(rel)
}

func openUp(r *os.Root, rel string) {
	fi, err := r.Lstat(rel)
	if err != nil || !fi.IsDir() {
		return
	}
	r.Chmod(rel, 0o700)
	d, err := r.Open(rel)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		openUp(r, rel+"/"+n)
	}
}
