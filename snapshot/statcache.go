package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// The stat cache of a root is git's index under another name (a pack's
// .idx is the other index of the store; see pack.go): for each regular
// file its stat (size, mtime, ctime, inode, device) and its content's hash,
// as of the last Take. A file whose stat is unchanged is not read again.
// Its file is roots/<key>/index, the name it has always had.
//
// Racy files: a file written in the same timestamp tick as it was read may
// have changed after the read without its mtime showing it. An entry whose
// mtime is within the racy window of the Take's start (or later) is saved
// marked racy, and the next Take reads it again whatever its stat. The
// window is racyWindow, FAT's timestamp granularity, unless some file of
// the tree has an mtime with a fraction of a second, which shows a
// filesystem with fine timestamps: then racyWindowFine, which covers the
// tick of the kernel's coarse clock many times over.
//
// Format (the digit in the magic is the version):
//
//	"toolhost-snapshot-index 1\n"
//	uvarint generation (the store's collection generation it was written at)
//	uvarint count
//	count entries, sorted by path:
//	  uvarint len(path), path; varint size, mtime, ctime; uvarint ino, dev;
//	  byte flags (1: racy); 32 bytes sha256
//	32 bytes: sha256 of all of the above
//
// A damaged stat cache, or one of an unknown format or version, is ignored
// (every file is read again).
const statCacheMagic = "toolhost-snapshot-index 1\n"

// racyWindow and racyWindowFine: see above.
var (
	racyWindow     = 2 * time.Second
	racyWindowFine = 100 * time.Millisecond
)

// racyBefore returns the mtime (ns) from which an entry is racy, for files
// read from start on.
func racyBefore(start time.Time, files []*node) int64 {
	w := racyWindow
	for _, n := range files {
		if n.st.mtime%int64(time.Second) != 0 {
			w = racyWindowFine
			break
		}
	}
	return start.Add(-w).UnixNano()
}

type statEntry struct {
	st   fileStat
	hash hash32
	racy bool
}

type statCache struct {
	gen     uint64
	entries map[string]statEntry
}

func newStatCache(gen uint64, size int) *statCache {
	return &statCache{gen: gen, entries: make(map[string]statEntry, size)}
}

// record sets the entries of files (those not gone), read from start on.
func (c *statCache) record(start time.Time, files []*node) {
	racy := racyBefore(start, files)
	for _, n := range files {
		if !n.gone {
			c.entries[n.rel] = statEntry{st: n.st, hash: n.hash, racy: n.st.mtime >= racy}
		}
	}
}

// statCachePath is the file of the stat cache of the root whose key is key.
func (s *Store) statCachePath(key string) string {
	return filepath.Join(s.dir, "roots", key, "index")
}

var errBadStatCache = errors.New("malformed stat cache")

// readStatCache reads the stat cache at path: empty when there is none,
// and (with an error) when it cannot be used.
func readStatCache(path string) (*statCache, error) {
	c := newStatCache(0, 0)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	p, err := checkedBody(data, statCacheMagic, "stat cache")
	if err != nil {
		return c, err
	}
	d := &varints{p: p}
	gen := d.uvarint()
	count := d.uvarint()
	if d.bad || count > uint64(len(d.p)) {
		return c, errBadStatCache
	}
	entries := make(map[string]statEntry, count)
	for range count {
		path, ok := d.bytes()
		if !ok {
			return c, errBadStatCache
		}
		var e statEntry
		e.st.size, e.st.mtime, e.st.ctime = d.varint(), d.varint(), d.varint()
		e.st.ino, e.st.dev = d.uvarint(), d.uvarint()
		if d.bad || len(d.p) < 1+sha256.Size {
			return c, errBadStatCache
		}
		e.racy = d.p[0]&1 != 0
		copy(e.hash[:], d.p[1:])
		d.p = d.p[1+sha256.Size:]
		entries[string(path)] = e
	}
	if len(d.p) != 0 {
		return c, errBadStatCache
	}
	c.gen, c.entries = gen, entries
	return c, nil
}

// varints reads the varints and length-prefixed bytes of the stat cache's
// and a pack index's format from p, which it advances: once one is
// malformed, bad is set and every later read answers 0.
type varints struct {
	p   []byte
	bad bool
}

func (d *varints) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	return d.advance(v, n)
}

func (d *varints) varint() int64 {
	v, n := binary.Varint(d.p)
	return int64(d.advance(uint64(v), n))
}

func (d *varints) advance(v uint64, n int) uint64 {
	if d.bad || n <= 0 {
		d.bad = true
		return 0
	}
	d.p = d.p[n:]
	return v
}

// bytes reads a uvarint length and that many bytes.
func (d *varints) bytes() ([]byte, bool) {
	l := d.uvarint()
	if d.bad || l > uint64(len(d.p)) {
		d.bad = true
		return nil, false
	}
	b := d.p[:l]
	d.p = d.p[l:]
	return b, true
}

// checkedBody returns what lies between a file's magic line and the
// sha256 of both that ends it, once both are checked: the format of the
// stat cache and of a pack's index. what names the file in errors.
func checkedBody(data []byte, magic, what string) ([]byte, error) {
	if len(data) < len(magic)+sha256.Size || !bytes.HasPrefix(data, []byte(magic)) {
		return nil, fmt.Errorf("%s of an unknown format or version", what)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%s does not match its checksum", what)
	}
	return body[len(magic):], nil
}

func (c *statCache) encode() []byte {
	paths := make([]string, 0, len(c.entries))
	for p := range c.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	b.Grow(len(statCacheMagic) + len(paths)*96)
	b.WriteString(statCacheMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { b.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	sv := func(v int64) { b.Write(tmp[:binary.PutVarint(tmp[:], v)]) }
	uv(c.gen)
	uv(uint64(len(paths)))
	for _, p := range paths {
		e := c.entries[p]
		uv(uint64(len(p)))
		b.WriteString(p)
		sv(e.st.size)
		sv(e.st.mtime)
		sv(e.st.ctime)
		uv(e.st.ino)
		uv(e.st.dev)
		var flags byte
		if e.racy {
			flags |= 1
		}
		b.WriteByte(flags)
		b.Write(e.hash[:])
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// equal reports whether two stat caches say the same.
func (c *statCache) equal(o *statCache) bool {
	if c.gen != o.gen || len(c.entries) != len(o.entries) {
		return false
	}
	for p, e := range c.entries {
		if oe, ok := o.entries[p]; !ok || oe != e {
			return false
		}
	}
	return true
}

// lookup returns the hash of a scanned file when the stat cache knows it
// unchanged.
func (c *statCache) lookup(n *node) (hash32, bool) {
	if c == nil {
		return hash32{}, false
	}
	e, ok := c.entries[n.rel]
	if !ok || e.racy || e.st != n.st {
		return hash32{}, false
	}
	return e.hash, true
}

// heldStatCache is the newest stat cache a Store knows of one root: the
// last it read, wrote or made.
type heldStatCache struct {
	key string   // the root's, for its lock
	st  fileStat // the file's when this Store last read or wrote it
	// missing: there was no file then (st is zero).
	missing bool
	c       *statCache
	// dirty: c is newer than the file, and is written by flushStatCaches.
	dirty bool
}

// statCacheDelay is how long a new stat cache waits in memory before it is
// written: writing one (a sort of every path, its encoding and checksum,
// the write) is work that back-to-back Takes and Restores would otherwise
// pay each time, or wait for. Within the delay they find it in memory.
var statCacheDelay = time.Second

// loadStatCache returns the stat cache at path: from memory when its file
// has the stat it had when this Store last read or wrote it, else read
// (and checked) again. A stat cache is never changed once made (a Take or
// Restore makes a new one), so the one held is shared.
//
// Any stat cache this Store or another process made is valid, however
// old: each of its entries says that a file with that very stat had that
// content, and is trusted only for a file whose stat is still the one it
// records (and not racy; see racyBefore). So one made here and not yet
// written is used as long as nobody replaced the file; one that another
// process wrote in its place wins, and one replaced with a file of the very
// same stat would be stale, which costs nothing but reads.
func (s *Store) loadStatCache(path string) (*statCache, error) {
	st, missing, err := statCacheFileStat(path)
	if err != nil {
		return readStatCache(path)
	}
	s.mu.Lock()
	h := s.statCaches[path]
	s.mu.Unlock()
	if h != nil && h.st == st && h.missing == missing {
		return h.c, nil
	}
	c, err := readStatCache(path)
	if err == nil {
		s.mu.Lock()
		s.statCaches[path] = &heldStatCache{key: filepath.Base(filepath.Dir(path)), st: st, missing: missing, c: c}
		s.mu.Unlock()
	}
	return c, err
}

// statCacheFileStat returns the stat of the stat cache's file at path, or
// missing when there is none.
func statCacheFileStat(path string) (st fileStat, missing bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStat{}, true, nil
	}
	if err != nil {
		return fileStat{}, false, err
	}
	return statOf(fi), false, nil
}

// putStatCache makes c the stat cache of the root whose file is path (the
// root's lock held): at once in memory, and in the file within
// statCacheDelay, or when the Store closes.
func (s *Store) putStatCache(path string, c *statCache) {
	s.mu.Lock()
	h := s.statCaches[path]
	if h == nil {
		// Never read here: its file is compared with what it is now.
		h = &heldStatCache{key: filepath.Base(filepath.Dir(path))}
		st, missing, err := statCacheFileStat(path)
		h.st, h.missing = st, missing || err != nil
	}
	s.statCaches[path] = &heldStatCache{key: h.key, st: h.st, missing: h.missing, c: c, dirty: true}
	start := !s.flushing
	s.flushing = true
	s.mu.Unlock()
	if start {
		s.flusher.Add(1)
		go func() { // owned by the Store: Close waits on s.flusher
			defer s.flusher.Done()
			s.flushStatCaches()
		}()
	}
}

// flushStatCaches writes the stat caches made since the last flush,
// statCacheDelay after the first of them, or at once when the Store
// closes. It runs on a goroutine of the Store's (s.flusher), one at a
// time: s.flushing is set while one is due.
func (s *Store) flushStatCaches() {
	t := time.NewTimer(statCacheDelay)
	select {
	case <-t.C:
	case <-s.closing:
		t.Stop()
	}
	s.mu.Lock()
	s.flushing = false
	var due []string
	for path, h := range s.statCaches {
		if h.dirty {
			due = append(due, path)
		}
	}
	s.mu.Unlock()
	// Another process's Take of a root holds its lock: its stat cache
	// waits for that, not forever (it is a cache).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, path := range due {
		s.flushStatCache(ctx, path)
	}
}

// flushStatCache writes the root's stat cache held in memory, if it is
// still newer than its file, holding the root's lock.
func (s *Store) flushStatCache(ctx context.Context, path string) {
	s.mu.Lock()
	h := s.statCaches[path]
	s.mu.Unlock()
	unlock, err := s.lockRoot(ctx, h.key)
	if err != nil {
		s.log.Warn("snapshot stat cache not saved", "path", path, "err", err)
		return
	}
	defer unlock()
	s.mu.Lock()
	h = s.statCaches[path] // the newest, now that no Take or Restore runs
	s.mu.Unlock()
	if !h.dirty {
		return
	}
	if fi, err := os.Stat(path); err == nil && (h.missing || statOf(fi) != h.st) {
		// Another process wrote one meanwhile: both are valid; keep its.
		s.mu.Lock()
		delete(s.statCaches, path)
		s.mu.Unlock()
		return
	}
	if err := writeStatCache(path, h.c); err != nil {
		s.log.Warn("snapshot stat cache not saved", "path", path, "err", err)
		return
	}
	fi, err := os.Stat(path)
	s.mu.Lock()
	if err != nil {
		delete(s.statCaches, path)
	} else {
		s.statCaches[path] = &heldStatCache{key: h.key, st: statOf(fi), c: h.c}
	}
	s.mu.Unlock()
}

// writeStatCache writes the stat cache whole: a temporary file beside it,
// renamed. It is not flushed: the stat cache is a cache whose checksum is
// checked on every load, so one that a crash left empty or torn is
// ignored, and the files are read again. (The entries a Restore writes, of
// files it has not flushed either, are all racy: read again next time,
// whatever a crash did to them.) The root's lock is held, so temporary
// files already there are what an interrupted write left: they go first.
func writeStatCache(path string, c *statCache) error {
	dir, name := filepath.Split(path)
	if old, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*")); len(old) > 0 {
		for _, o := range old {
			os.Remove(o)
		}
	}
	return writeAtomic(path, c.encode(), fsutil.RenameOnly)
}
