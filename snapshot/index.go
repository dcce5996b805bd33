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
)

// The index of a root, like git's: for each regular file its stat (size,
// mtime, ctime, inode, device) and its content's hash, as of the last Take.
// A file whose stat is unchanged is not read again.
//
// Racy files: a file written in the same timestamp tick as it was read may
// have changed after the read without its mtime showing it. An entry whose
// mtime is within the racy window of the Take's start (or later) is saved
// marked racy, and the next Take reads it again whatever its stat. The
// window is racyWindow (2 s, FAT's granularity) unless some file of the
// tree has an mtime with a fraction of a second, which shows a filesystem
// with fine timestamps: then racyWindowFine, which covers the kernel's
// coarse clock (a tick, 1 to 10 ms) many times over.
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
// A damaged or unknown index is ignored (every file is read again).
const indexMagic = "toolhost-snapshot-index 1\n"

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

type indexEntry struct {
	st   fileStat
	hash hash32
	racy bool
}

type index struct {
	gen     uint64
	entries map[string]indexEntry
}

func loadIndex(path string) (*index, error) {
	idx := &index{entries: map[string]indexEntry{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return idx, err
	}
	p, err := checkedBody(data, indexMagic, "index")
	if err != nil {
		return idx, err
	}
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			bad = true
			return 0
		}
		p = p[n:]
		return v
	}
	sv := func() int64 {
		v, n := binary.Varint(p)
		if n <= 0 {
			bad = true
			return 0
		}
		p = p[n:]
		return v
	}
	gen := uv()
	count := uv()
	if bad || count > uint64(len(p)) {
		return idx, errors.New("malformed index")
	}
	entries := make(map[string]indexEntry, count)
	for range count {
		l := uv()
		if bad || l > uint64(len(p)) {
			return idx, errors.New("malformed index")
		}
		path := string(p[:l])
		p = p[l:]
		var e indexEntry
		e.st.size, e.st.mtime, e.st.ctime = sv(), sv(), sv()
		e.st.ino, e.st.dev = uv(), uv()
		if bad || len(p) < 1+sha256.Size {
			return idx, errors.New("malformed index")
		}
		e.racy = p[0]&1 != 0
		copy(e.hash[:], p[1:])
		p = p[1+sha256.Size:]
		entries[path] = e
	}
	if len(p) != 0 {
		return idx, errors.New("malformed index")
	}
	idx.gen, idx.entries = gen, entries
	return idx, nil
}

// checkedBody returns what lies between a file's magic line and the
// sha256 of both that ends it, once both are checked: the format of the
// index and of a pack's index. what names the file in errors.
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

func (idx *index) encode() []byte {
	paths := make([]string, 0, len(idx.entries))
	for p := range idx.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	b.Grow(len(indexMagic) + len(paths)*96)
	b.WriteString(indexMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { b.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	sv := func(v int64) { b.Write(tmp[:binary.PutVarint(tmp[:], v)]) }
	uv(idx.gen)
	uv(uint64(len(paths)))
	for _, p := range paths {
		e := idx.entries[p]
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

// equal reports whether two indexes say the same.
func (idx *index) equal(o *index) bool {
	if idx.gen != o.gen || len(idx.entries) != len(o.entries) {
		return false
	}
	for p, e := range idx.entries {
		if oe, ok := o.entries[p]; !ok || oe != e {
			return false
		}
	}
	return true
}

// lookup returns the hash of a scanned file when the index knows it
// unchanged.
func (idx *index) lookup(n *node) (hash32, bool) {
	if idx == nil {
		return hash32{}, false
	}
	e, ok := idx.entries[n.rel]
	if !ok || e.racy || e.st != n.st {
		return hash32{}, false
	}
	return e.hash, true
}

// cachedIndex is the newest index a Store knows of one root: the last it
// read, wrote or made.
type cachedIndex struct {
	key string   // the root's, for its lock
	st  fileStat // the index file's when this Store last read or wrote it
	// missing: there was no index file then (st is zero).
	missing bool
	idx     *index
	// dirty: idx is newer than the file, and is written by flushIndexes.
	dirty bool
}

// indexDelay is how long a new index waits in memory before it is written:
// writing one (a sort of every path, its encoding and checksum, the write)
// takes about 7 ms for 10,000 files, which back-to-back Takes and Restores
// then paid each time, or waited for. Within the delay they find it in
// memory.
var indexDelay = time.Second

// loadIndex returns the index at path: from memory when its file has the
// stat it had when this Store last read or wrote it, else read (and
// checked) again. An index is never changed once made (a Take or Restore
// makes a new one), so the cached one is shared.
//
// Any index this Store or another process made is a valid cache, however
// old: each of its entries says that a file with that very stat had that
// content, and is trusted only for a file whose stat is still the one it
// records (and not racy; see racyBefore). So an index made here and not yet
// written is used as long as nobody replaced the file; one that another
// process wrote in its place wins, and one replaced with a file of the very
// same stat would be stale, which costs nothing but reads.
func (s *Store) loadIndex(path string) (*index, error) {
	st, missing, err := indexFileStat(path)
	if err != nil {
		return loadIndex(path)
	}
	s.mu.Lock()
	c := s.indexes[path]
	s.mu.Unlock()
	if c != nil && c.st == st && c.missing == missing {
		return c.idx, nil
	}
	idx, err := loadIndex(path)
	if err == nil {
		s.mu.Lock()
		s.indexes[path] = &cachedIndex{key: filepath.Base(filepath.Dir(path)), st: st, missing: missing, idx: idx}
		s.mu.Unlock()
	}
	return idx, err
}

// indexFileStat returns the stat of the index file at path, or missing
// when there is none.
func indexFileStat(path string) (st fileStat, missing bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStat{}, true, nil
	}
	if err != nil {
		return fileStat{}, false, err
	}
	return statOf(fi), false, nil
}

// putIndex makes idx the index of the root whose index file is path (the
// root's lock held): at once in memory, and in the file within indexDelay,
// or when the Store closes.
func (s *Store) putIndex(path string, idx *index) {
	s.mu.Lock()
	c := s.indexes[path]
	if c == nil {
		// Never read here: its file is compared with what it is now.
		c = &cachedIndex{key: filepath.Base(filepath.Dir(path))}
		st, missing, err := indexFileStat(path)
		c.st, c.missing = st, missing || err != nil
	}
	s.indexes[path] = &cachedIndex{key: c.key, st: c.st, missing: c.missing, idx: idx, dirty: true}
	start := !s.flushing
	s.flushing = true
	s.mu.Unlock()
	if start {
		s.flusher.Add(1)
		go func() { // owned by the Store: Close waits on s.flusher
			defer s.flusher.Done()
			s.flushIndexes()
		}()
	}
}

// flushIndexes writes the indexes made since the last flush, indexDelay
// after the first of them, or at once when the Store closes. It runs on a
// goroutine of the Store's (s.flusher), one at a time: s.flushing is set
// while one is due.
func (s *Store) flushIndexes() {
	t := time.NewTimer(indexDelay)
	select {
	case <-t.C:
	case <-s.closing:
		t.Stop()
	}
	s.mu.Lock()
	s.flushing = false
	var due []string
	for path, c := range s.indexes {
		if c.dirty {
			due = append(due, path)
		}
	}
	s.mu.Unlock()
	// Another process's Take of a root holds its lock: its index waits
	// for that, not forever (it is a cache).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, path := range due {
		s.flushIndex(ctx, path)
	}
}

// flushIndex writes the root's index kept in memory, if it is still newer
// than its file, holding the root's lock.
func (s *Store) flushIndex(ctx context.Context, path string) {
	s.mu.Lock()
	c := s.indexes[path]
	s.mu.Unlock()
	unlock, err := s.lockRoot(ctx, c.key)
	if err != nil {
		s.log.Warn("snapshot index not saved", "path", path, "err", err)
		return
	}
	defer unlock()
	s.mu.Lock()
	c = s.indexes[path] // the newest, now that no Take or Restore runs
	s.mu.Unlock()
	if !c.dirty {
		return
	}
	if fi, err := os.Stat(path); err == nil && (c.missing || statOf(fi) != c.st) {
		// Another process wrote one meanwhile: both are valid; keep its.
		s.mu.Lock()
		delete(s.indexes, path)
		s.mu.Unlock()
		return
	}
	if err := saveIndex(path, c.idx); err != nil {
		s.log.Warn("snapshot index not saved", "path", path, "err", err)
		return
	}
	fi, err := os.Stat(path)
	s.mu.Lock()
	if err != nil {
		delete(s.indexes, path)
	} else {
		s.indexes[path] = &cachedIndex{key: c.key, st: statOf(fi), idx: c.idx}
	}
	s.mu.Unlock()
}

// saveIndex writes the index whole: a temporary file beside it, renamed.
// It is not flushed: the index is a cache whose checksum is checked on
// every load, so one that a crash left empty or torn is ignored, and the
// files are read again. (The entries a Restore writes, of files it has not
// flushed either, are all racy: read again next time, whatever a crash did
// to them.) The root's lock is held, so temporary files already there are
// what an interrupted write left: they go first.
func saveIndex(path string, idx *index) error {
	dir, name := filepath.Split(path)
	if old, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*")); len(old) > 0 {
		for _, o := range old {
			os.Remove(o)
		}
	}
	return writeAtomic(filepath.Clean(dir), name, idx.encode(), replaceOnly)
}
