package snapshot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
	"github.com/toolhost/toolhost/internal/parallel"
)

// TakeOptions shape a Take.
type TakeOptions struct {
	Label string
	// Exclude holds patterns in gitignore syntax (see compileIgnore); .git
	// is always left out.
	Exclude []string
	// Skip holds paths in the root (read roots inside it) neither taken
	// nor, later, restored.
	Skip []string
	// SkipFile, when set, leaves out the regular files it names by device
	// and inode (the hard links of a file no snapshot may hold).
	SkipFile func(dev, ino uint64) bool
}

// syncBatch is the number of new blobs above which one syncfs replaces an
// fsync per blob (and per blob directory).
const syncBatch = 8

// Take snapshots root (an absolute directory): its regular files,
// directories, symlinks (as links, never followed) and their modes.
// .git and the Exclude patterns are left out, and so are sockets, fifos and
// devices. A file whose stat the root's stat cache knows unchanged is not
// read. Takes and Restores of one root are serialized.
//
// Its steps: scan the root (beside it, load the stat cache); ingest, under
// the store's exclusive lock, the files the stat cache cannot vouch for
// (small blobs into packs, large ones into files of their own) and the
// tree objects, and commit them; write the manifest, which makes the
// snapshot; and, after the answer, write the new stat cache.
func (s *Store) Take(ctx context.Context, root string, o TakeOptions) (Info, error) {
	ph := newPhases()
	if err := s.check(); err != nil {
		return Info{}, err
	}
	clean, real, err := s.checkRoot(root)
	if err != nil {
		return Info{}, err
	}
	skip, _, err := cleanPaths(clean, real, o.Skip)
	if err != nil {
		return Info{}, err
	}
	h, err := s.holdRoot(ctx, clean, real)
	if err != nil {
		return Info{}, err
	}
	defer h.release()
	t := &take{s: s, h: h, ph: ph, clean: clean, o: o, skip: skip}
	f := &filter{ex: compileIgnore(o.Exclude), skip: skip, skipFile: o.SkipFile}
	if err := t.scan(ctx, f); err != nil {
		return Info{}, fmt.Errorf("snapshot %s: %w", clean, err)
	}
	m, err := t.store(ctx)
	if err != nil {
		return Info{}, err
	}
	t.writeStatCacheLater()
	ph.mark("ms")
	s.log.Info("snapshot taken", append([]any{"id", m.ID, "root", clean, "files", m.Files, "bytes", m.Bytes,
		"read", len(t.jobs), "newBytes", m.NewBytes, "blobs", t.newBlobs}, ph.attrs...)...)
	return m.info(), nil
}

// take is one Take, carried from step to step.
type take struct {
	s     *Store
	h     *rootHold
	ph    *phases
	clean string
	o     TakeOptions
	skip  []string

	top      *node      // the scanned tree
	files    []*node    // its regular files
	jobs     []*node    // those to read: the stat cache does not vouch for them
	cache    *statCache // the root's, as loaded
	gen      uint64     // the store's generation the blobs were checked at
	newBlobs int        // loose blobs written
}

// scan scans the root, and takes from the stat cache the hashes of the
// files it knows unchanged: the others are the jobs to read.
func (t *take) scan(ctx context.Context, f *filter) error {
	top, cache, err := t.s.scanCached(ctx, t.h.r, t.h.key, f, t.ph, nil)
	if err != nil {
		return err
	}
	t.top, t.cache = top, cache
	eachFile(top, func(n *node) { t.files = append(t.files, n) })
	for _, n := range t.files {
		if h, ok := cache.lookup(n); ok {
			n.hash, n.hashed, n.fromCache = h, true, true
		} else {
			t.jobs = append(t.jobs, n)
		}
	}
	return nil
}

// store does the writing half of the Take under the store's exclusive
// lock: ingest, commit, then the manifest and what follows it. Until the
// manifest is written, an error undoes every write (tx.abort).
func (t *take) store(ctx context.Context) (*manifest, error) {
	s := t.s
	unlock, err := s.lockStore(ctx, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := s.readState()
	if err != nil {
		return nil, err
	}
	t.gen = st.Generation
	tx, err := s.beginTake(t.h.key, st)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", t.clean, err)
	}
	defer tx.abort() // a no-op once the manifest is written
	if err := t.ingest(ctx, tx); errors.Is(err, errOverCap) {
		return nil, &TooLargeError{Root: t.clean, Max: s.maxBytes, Used: st.Bytes, Need: tx.added.Load(), Largest: largestDirs(t.top)}
	} else if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", t.clean, err)
	}
	t.ph.mark("readMs")
	if err := tx.commit(); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", t.clean, err)
	}
	t.ph.mark("commitMs")
	m, err := t.writeManifest(tx)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: manifest: %w", t.clean, err)
	}
	tx.done = true // the manifest holds the blobs now
	t.newBlobs = len(tx.pending)
	tx.publish(t.h.key, st)
	return m, nil
}

// ingest reads the jobs into the store, and then writes the tree objects.
// After a collection (the stat cache's generation is older than the
// store's), the files whose blob it removed are read too.
//
// Files are read in groups of a directory's, each group through one handle
// on the directory (opened through the root, checked to be the one the
// scan saw), so that opening a file is one openat.
func (t *take) ingest(ctx context.Context, tx *takeTx) error {
	if t.cache.gen != t.gen {
		for _, n := range t.files {
			if n.fromCache && !tx.exists(n.hash, n.size) {
				n.hashed, n.fromCache = false, false
				t.jobs = append(t.jobs, n)
			}
		}
	}
	groups := groupByDir(t.jobs, 64)
	stopFlusher := tx.startFlusher()
	defer stopFlusher()
	r := t.h.r
	err := parallel.For(ctx, t.s.workers, len(groups), func(ctx context.Context, i int) error {
		g := groups[i]
		dr, err := openScannedDir(r, g.dir)
		if errors.Is(err, fs.ErrNotExist) {
			for _, n := range g.files {
				n.gone = true
			}
			return nil
		}
		if err != nil {
			return err
		}
		if dr != r {
			defer dr.Close()
		}
		for _, n := range g.files {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := tx.ingestFile(dr, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.trees(t.top)
}

// writeManifest writes the snapshot's manifest, durably: its blobs are.
func (t *take) writeManifest(tx *takeTx) (*manifest, error) {
	start := t.ph.start
	nFiles, nBytes := countTree(t.top)
	m := &manifest{
		Version: manifestVersion, Label: t.o.Label, Root: t.clean,
		CreatedAt: start.UTC(), Tree: hex.EncodeToString(t.top.hash[:]), Mode: t.top.mode,
		Files: nFiles, Bytes: nBytes, NewBytes: tx.added.Load(),
		Exclude: t.o.Exclude, Skip: t.skip,
	}
	for {
		m.ID = newID(start)
		if _, err := os.Lstat(t.s.manifestPath(m.ID)); errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	m.DurationNS = int64(time.Since(start))
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := writeAtomic(t.s.manifestPath(m.ID), append(data, '\n'), fsutil.SyncFileDir); err != nil {
		return nil, err
	}
	return m, nil
}

// writeStatCacheLater makes the root's new stat cache after the answer,
// the root still held, unless it would be the one loaded: nothing read,
// nothing gone, the same generation (its entries were all unchanged and
// not racy).
func (t *take) writeStatCacheLater() {
	old, files, gen, start := t.cache, t.files, t.gen, t.ph.start
	if len(t.jobs) == 0 && len(files) == len(old.entries) && old.gen == gen {
		return
	}
	path := t.s.statCachePath(t.h.key)
	t.s.later(t.h, func(*os.Root) {
		next := newStatCache(gen, len(files))
		next.record(start, files)
		if !next.equal(old) {
			t.s.putStatCache(path, next)
		}
	})
}

// fileGroup is files of one directory, read through one handle.
type fileGroup struct {
	dir   *node
	files []*node
}

// groupByDir groups files (in tree order, so a directory's are together)
// by their directory, at most max a group.
func groupByDir(files []*node, max int) []fileGroup {
	var out []fileGroup
	for _, n := range files {
		if k := len(out) - 1; k >= 0 && out[k].dir == n.parent && len(out[k].files) < max {
			out[k].files = append(out[k].files, n)
			continue
		}
		out = append(out, fileGroup{dir: n.parent, files: []*node{n}})
	}
	return out
}

func newID(t time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func eachFile(n *node, f func(*node)) {
	for _, k := range n.kids {
		switch k.kind {
		case kindFile:
			f(k)
		case kindDir:
			eachFile(k, f)
		}
	}
}

// largestDirs names the directories of a scanned tree with the most bytes
// beneath them, at the first two levels, largest first (ten at most).
func largestDirs(top *node) []DirSize {
	var out []DirSize
	var size func(n *node, depth int) int64
	size = func(n *node, depth int) int64 {
		var total int64
		for _, k := range n.kids {
			switch k.kind {
			case kindFile:
				total += k.st.size
			case kindDir:
				total += size(k, depth+1)
			}
		}
		if depth >= 1 && depth <= 2 {
			out = append(out, DirSize{Path: n.rel, Bytes: total})
		}
		return total
	}
	rootFiles := int64(0)
	for _, k := range top.kids {
		if k.kind == kindFile {
			rootFiles += k.st.size
		}
	}
	size(top, 0)
	if rootFiles > 0 {
		out = append(out, DirSize{Path: ".", Bytes: rootFiles})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Path < out[j].Path
	})
	if len(out) > 10 {
		out = out[:10]
	}
	return out
}

var errOverCap = errors.New("over the store's cap")

// takeTx is the writing half of a Take, under the store's exclusive lock.
// New blobs are written to tmp/ first; commit makes their data durable,
// renames them into blobs/ and makes the names durable; abort removes the
// temporary files and the blobs this Take created, which nothing else can
// reference yet.
type takeTx struct {
	s        *Store
	used     int64 // the store's size before
	added    atomic.Int64
	tryClone atomic.Bool

	mu       sync.Mutex
	claims   map[hash32]struct{} // blobs there or being written
	pending  []pendingBlob
	created  []string
	shards   map[string]int // blob directories: shardOld, shardNew, or absent
	flushc   chan struct{}  // to the flusher; set and cleared while no blob is claimed
	newShard bool           // one was made: blobs/ must be synced
	done     bool
	// packsFree are the packs no worker is appending to and that have
	// room; packsAll every pack the Take began.
	packsFree, packsAll []*packWriter
	// gen is the store's generation; prevMemos the root's tree memos from
	// its last Take, memos this one's (see memo.go), used by trees alone.
	gen       uint64
	prevMemos treeMemos
	memos     treeMemos
}

// beginTake starts the writing half of a Take of the root whose key is
// key, the store's lock held exclusively and its state st.
func (s *Store) beginTake(key string, st storeState) (*takeTx, error) {
	tx := &takeTx{s: s, used: st.Bytes, claims: map[hash32]struct{}{}, shards: map[string]int{},
		gen: st.Generation, memos: treeMemos{gen: st.Generation, byDir: map[string]treeMemo{}}}
	s.mu.Lock()
	tx.prevMemos = s.memos[key]
	s.mu.Unlock()
	tx.tryClone.Store(true)
	if err := tx.listShards(); err != nil {
		return nil, err
	}
	return tx, nil
}

// publish makes what a Take wrote known once its manifest holds it: the
// packs' blobs to this Store, the trees' memos to the next Take of the
// root (key), and the new bytes to store.json (state st, as read).
func (tx *takeTx) publish(key string, st storeState) {
	s := tx.s
	for _, w := range tx.packsAll {
		s.addPack(w.id, w.entries)
	}
	s.mu.Lock()
	s.memos[key] = tx.memos
	s.mu.Unlock()
	if n := tx.added.Load(); n > 0 {
		st.Bytes += n
		if err := s.writeState(st); err != nil {
			// The snapshot is whole; the next collection counts again.
			s.log.Warn("snapshot store size not recorded", "err", err)
		}
	}
}

// tempBlobPrefix starts the names of blobs and packs being written, in
// tmp/ and packs/ (and, by builds before packs, in a blob's shard
// directory); a collection removes what a crash left.
const tempBlobPrefix = ".tmp-"

type pendingBlob struct {
	tmp  string
	hash hash32
}

// exists reports whether a blob of that size is in the store. A blob of
// another size is damaged and gets written again.
func (tx *takeTx) exists(h hash32, size int64) bool {
	if _, ok := tx.s.packed(h, size); ok {
		return true
	}
	fi, err := os.Lstat(tx.s.blobPath(h))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// claim reports whether the caller must write blob h: it is neither in the
// store nor being written by another worker. It counts the bytes against
// the cap.
func (tx *takeTx) claim(h hash32, size int64) (bool, error) {
	dir := tx.s.shardPath(h)
	tx.mu.Lock()
	_, claimed := tx.claims[h]
	tx.claims[h] = struct{}{}
	// A blob can be there only in a shard that was there when the Take
	// began (no other Take writes while this one holds the store's lock).
	old := tx.shards[dir] == shardOld
	tx.mu.Unlock()
	if claimed {
		return false, nil
	}
	if _, ok := tx.s.packed(h, size); ok {
		return false, nil
	}
	if old && tx.exists(h, size) {
		return false, nil
	}
	added := tx.added.Add(size)
	if tx.used+added > tx.s.maxBytes {
		return false, errOverCap
	}
	if tx.flushc != nil && added/flushChunk != (added-size)/flushChunk {
		select {
		case tx.flushc <- struct{}{}:
		default: // a flush is due already
		}
	}
	return true, nil
}

// flushChunk is how many bytes of new blobs a Take writes between the
// flushes of its flusher.
const flushChunk = 32 << 20

// startFlusher starts, where the system can sync one filesystem, a
// goroutine that flushes the store's each time another flushChunk of new
// blobs is claimed, so that the disk writes while files are still read
// and the flush before the manifest finds little left. The returned stop,
// which the Take calls once no more blobs are claimed (and again, to no
// effect, when it returns), ends it and waits for it.
func (tx *takeTx) startFlusher() (stop func()) {
	if !haveSyncFS {
		return func() {}
	}
	tx.flushc = make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { // owned by the Take, through stop
		defer close(done)
		for range tx.flushc {
			// An error here is the final flush's to report.
			_ = syncPath(tx.tmpDir(), true)
		}
	}()
	return func() {
		if tx.flushc != nil {
			close(tx.flushc)
			<-done
			tx.flushc = nil
		}
	}
}

func (tx *takeTx) addPending(tmp string, h hash32) {
	tx.mu.Lock()
	tx.pending = append(tx.pending, pendingBlob{tmp: tmp, hash: h})
	tx.mu.Unlock()
}

func (tx *takeTx) tmpDir() string { return filepath.Join(tx.s.dir, "tmp") }

// shard returns the directory blob h goes in, made if missing.
func (tx *takeTx) shard(h hash32) (string, error) {
	dir := tx.s.shardPath(h)
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.shards[dir] != shardAbsent {
		return dir, nil
	}
	state := shardNew
	if err := os.Mkdir(dir, 0o700); err == nil {
		tx.newShard = true
	} else if errors.Is(err, fs.ErrExist) {
		state = shardOld
	} else {
		return "", err
	}
	tx.shards[dir] = state
	return dir, nil
}

// The states of a blob directory in a Take.
const (
	shardAbsent = iota // not there when the Take began
	shardOld           // there when the Take began
	shardNew           // made by the Take
)

// listShards records the blob directories there when the Take begins.
func (tx *takeTx) listShards() error {
	ents, err := os.ReadDir(filepath.Join(tx.s.dir, "blobs"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() && len(e.Name()) == 2 {
			tx.shards[filepath.Join(tx.s.dir, "blobs", e.Name())] = shardOld
		}
	}
	return nil
}

// ingestFile reads one file of the root: hashes it and, when its content is
// new, copies it to a temporary blob. A small file is read into memory
// once; a large one is cloned (reflink) where the filesystem can, and
// hashed from the clone, or else copied and hashed in one pass.
func (tx *takeTx) ingestFile(dr *os.Root, n *node) error {
	f, fi, err := openDirFile(dr, n)
	if errors.Is(err, fs.ErrNotExist) {
		n.gone = true // deleted since the scan
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", n.rel, err)
	}
	defer f.Close()
	n.st, n.mode = statOf(fi), modeBits(fi.Mode())
	if fi.Size() < bufSize {
		buf := getBuf()
		defer putBuf(buf)
		k, err := io.ReadFull(f, *buf)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			data := (*buf)[:k]
			h := sha256.Sum256(data)
			n.hash, n.hashed, n.size = h, true, int64(k)
			write, err := tx.claim(h, int64(k))
			if err != nil || !write {
				return err
			}
			return tx.pack(data, h)
		case err != nil:
			return fmt.Errorf("read %s: %w", n.rel, err)
		}
		// It grew past the buffer since the stat: copy it as a large one.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("read %s: %w", n.rel, err)
		}
	}
	return tx.ingestLarge(f, n)
}

// ingestLarge copies the open file f (of n) to a temporary blob in tmp/,
// cloned where the filesystem can, hashing it; the blob is pending for
// commit when its content is new, else removed.
func (tx *takeTx) ingestLarge(f *os.File, n *node) error {
	tmp, err := os.CreateTemp(tx.tmpDir(), tempBlobPrefix+"*")
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var h hash32
	var size int64
	cloned := false
	if tx.tryClone.Load() {
		if err := cloneFile(tmp, f); err == nil {
			cloned = true
		} else {
			if !cloneUnsupported(err) {
				tx.s.log.Debug("snapshot clone failed; copying", "path", n.rel, "err", err)
			}
			tx.tryClone.Store(false)
		}
	}
	if cloned {
		h, size, err = hashReader(io.NewSectionReader(tmp, 0, 1<<62))
		if err != nil {
			return fmt.Errorf("read the clone of %s: %w", n.rel, err)
		}
	} else {
		hw := sha256.New()
		buf := getBuf()
		size, err = io.CopyBuffer(io.MultiWriter(hw, wrapWriter(tmp)), onlyReader{f}, *buf)
		putBuf(buf)
		if err != nil {
			return fmt.Errorf("copy %s: %w", n.rel, err)
		}
		hw.Sum(h[:0])
	}
	n.hash, n.hashed, n.size = h, true, size
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copy %s: %w", n.rel, err)
	}
	write, err := tx.claim(h, size)
	if err != nil || !write {
		return err
	}
	keep = true
	tx.addPending(tmp.Name(), h)
	return nil
}

// trees writes the tree objects, deepest first, and sets each directory's
// hash and size.
func (tx *takeTx) trees(n *node) error {
	var size int64
	for _, k := range n.kids {
		if k.kind == kindDir {
			if err := tx.trees(k); err != nil {
				return err
			}
		}
		if !k.gone && k.kind != kindLink {
			size += k.size
		}
	}
	n.size = size
	fp := tx.s.fingerprint(n.kids)
	if m, ok := tx.prevMemos.byDir[n.rel]; ok && m.fp == fp && tx.prevMemos.gen == tx.gen {
		n.hash, n.hashed = m.hash, true
		tx.memos.byDir[n.rel] = m
		return nil
	}
	if testHookTreeEncoded != nil {
		testHookTreeEncoded(n.rel)
	}
	data := encodeTree(n.kids)
	n.hash, n.hashed = sha256.Sum256(data), true
	tx.memos.byDir[n.rel] = treeMemo{fp: fp, hash: n.hash}
	write, err := tx.claim(n.hash, int64(len(data)))
	if err != nil || !write {
		return err
	}
	return tx.pack(data, n.hash)
}

// pack appends a small blob (the Take has claimed it) to one of the
// Take's packs, a free one or a new one: each is appended to by one worker
// at a time.
func (tx *takeTx) pack(data []byte, h hash32) error {
	tx.mu.Lock()
	var w *packWriter
	if k := len(tx.packsFree); k > 0 {
		w, tx.packsFree = tx.packsFree[k-1], tx.packsFree[:k-1]
	}
	tx.mu.Unlock()
	if w == nil {
		var err error
		if w, err = newPackWriter(tx.s.packsDir()); err != nil {
			return err
		}
		tx.mu.Lock()
		tx.packsAll = append(tx.packsAll, w)
		tx.mu.Unlock()
	}
	err := w.add(h, data)
	if err == nil && w.off < packMax {
		tx.mu.Lock()
		tx.packsFree = append(tx.packsFree, w)
		tx.mu.Unlock()
	}
	return err
}

// commit makes the new blobs durable and visible: their data first (one
// syncfs, or an fsync each when few), then their names (loose blobs
// renamed from their temporary names, packs to theirs and their indexes
// written), then those names. Only then may a manifest name them.
func (tx *takeTx) commit() error {
	if len(tx.pending) == 0 && len(tx.packsAll) == 0 {
		return nil
	}
	var packed int64
	for _, w := range tx.packsAll {
		packed += w.off
	}
	batch := haveSyncFS && (len(tx.pending)+len(tx.packsAll) > syncBatch || packed > flushChunk)
	if batch {
		if err := syncPath(tx.tmpDir(), true); err != nil {
			return err
		}
	} else {
		for _, p := range tx.pending {
			if err := syncPath(p.tmp, false); err != nil {
				return err
			}
		}
		for _, w := range tx.packsAll {
			if err := w.f.Sync(); err != nil {
				return err
			}
		}
	}
	for _, w := range tx.packsAll {
		if err := w.publish(tx.s, !batch); err != nil {
			return err
		}
	}
	touched := map[string]bool{}
	for i, p := range tx.pending {
		final := tx.s.blobPath(p.hash)
		dir, err := tx.shard(p.hash)
		if err != nil {
			return err
		}
		touched[dir] = true
		if err := renameBlob(p.tmp, final); err != nil {
			return err
		}
		tx.created = append(tx.created, final)
		tx.pending[i].tmp = ""
	}
	if batch {
		return syncPath(tx.s.dir, true)
	}
	// The packs' names are durable: publish synced packs/ after the last
	// pack index.
	for dir := range touched {
		if err := fsutil.SyncDir(dir); err != nil {
			return err
		}
	}
	if tx.newShard {
		return fsutil.SyncDir(filepath.Join(tx.s.dir, "blobs"))
	}
	return nil
}

// syncPath fsyncs a file, or with fsWide syncs the filesystem holding it.
func syncPath(p string, fsWide bool) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if fsWide {
		return syncFS(f)
	}
	return f.Sync()
}

// abort undoes an uncommitted Take: its temporary files and the blobs it
// created.
func (tx *takeTx) abort() {
	if tx.done {
		return
	}
	for _, p := range tx.pending {
		if p.tmp != "" {
			os.Remove(p.tmp)
		}
	}
	for _, c := range tx.created {
		os.Remove(c)
	}
	for _, w := range tx.packsAll {
		w.discard(tx.s)
	}
	// Temporary files of the large-file path are removed by ingest itself.
}
