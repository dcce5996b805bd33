package snapshot

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// Packs. A blob smaller than bufSize (a file a Take reads whole, or a tree
// object) is not written to a file of its own but appended to a pack, as
// restic's repository and git's packs do: a file of its own for each small
// blob, created and renamed, cost most of a first snapshot's CPU (an inode
// allocated and a name added, then moved), and made its flush many small
// writes rather than one long one.
//
// A pack is packs/<id>.pack: packMagic, then the blobs' bytes back to back.
// Its pack index, packs/<id>.idx (not to be confused with a root's stat
// cache, git's index, in statcache.go), is written only once the pack is
// durable and under its name, and is what makes the pack's blobs part of
// the store: packIndexMagic, the count, then for each blob its sha256,
// offset and length (uvarints), and the sha256 of all that. A pack without
// its index (a crash between the two) or an index without its pack is
// removed by the next collection (gc.go), as are temporary packs (".tmp-"
// names). Packs are never changed: a collection removes a pack none of
// whose blobs is referenced, and rewrites into a new pack the referenced
// blobs of one that holds others.
//
// The Store keeps every pack's entries in memory (s.packs), and reads the
// indexes it does not know each time it takes the store's lock: other
// processes add and remove packs only under that lock, held exclusively.
const (
	packMagic      = "toolhost-snapshot-pack 1\n"
	packIndexMagic = "toolhost-snapshot-packidx 1\n"
	// packMax closes a pack to appends: the next blob begins another, so
	// that a collection rewrites at most this much to drop a blob.
	packMax = 64 << 20
)

// packLoc is where a packed blob lies.
type packLoc struct {
	pack      string // id
	off, size int64
}

type packEntry struct {
	h         hash32
	off, size int64
}

func (s *Store) packsDir() string               { return filepath.Join(s.dir, "packs") }
func (s *Store) packPath(id string) string      { return filepath.Join(s.dir, "packs", id+".pack") }
func (s *Store) packIndexPath(id string) string { return filepath.Join(s.dir, "packs", id+".idx") }

func newPackID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// packed returns where blob h lies if it is in a pack and size long (size
// -1: any).
func (s *Store) packed(h hash32, size int64) (packLoc, bool) {
	s.packMu.Lock()
	loc, ok := s.packs[h]
	s.packMu.Unlock()
	return loc, ok && (size < 0 || loc.size == size)
}

// loadPacks reads the indexes of the packs this Store does not know yet,
// and forgets those gone; the store's lock is held. An index that cannot
// be read is left out: its blobs are missing, which a restore that needs
// them reports as damage.
func (s *Store) loadPacks() error {
	ents, err := os.ReadDir(s.packsDir())
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		seen[id] = true
		s.packMu.Lock()
		known := s.packIDs[id] != nil
		s.packMu.Unlock()
		if known {
			continue
		}
		entries, err := readPackIndex(s.packIndexPath(id))
		if err != nil {
			s.log.Warn("snapshot pack index unreadable; its blobs count as missing", "pack", id, "err", err)
			continue
		}
		s.packMu.Lock()
		s.packIDs[id] = entries
		for _, en := range entries {
			s.packs[en.h] = packLoc{pack: id, off: en.off, size: en.size}
		}
		s.packMu.Unlock()
	}
	s.packMu.Lock()
	defer s.packMu.Unlock()
	for id := range s.packIDs {
		if !seen[id] {
			s.forgetPackLocked(id)
		}
	}
	return nil
}

// addPack makes a pack's blobs known; its index is on disk.
func (s *Store) addPack(id string, entries []packEntry) {
	s.packMu.Lock()
	defer s.packMu.Unlock()
	s.packIDs[id] = entries
	for _, en := range entries {
		s.packs[en.h] = packLoc{pack: id, off: en.off, size: en.size}
	}
}

func (s *Store) forgetPackLocked(id string) {
	for _, en := range s.packIDs[id] {
		if loc, ok := s.packs[en.h]; ok && loc.pack == id {
			delete(s.packs, en.h)
		}
	}
	delete(s.packIDs, id)
}

func encodePackIndex(entries []packEntry) []byte {
	b := make([]byte, 0, len(packIndexMagic)+binary.MaxVarintLen64+len(entries)*(sha256.Size+2*binary.MaxVarintLen64)+sha256.Size)
	b = append(b, packIndexMagic...)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, en := range entries {
		b = append(b, en.h[:]...)
		b = binary.AppendUvarint(b, uint64(en.off))
		b = binary.AppendUvarint(b, uint64(en.size))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

var errBadPackIndex = errors.New("malformed pack index")

func readPackIndex(path string) ([]packEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := checkedBody(data, packIndexMagic, "pack index")
	if err != nil {
		return nil, err
	}
	d := &varints{p: p}
	count := d.uvarint()
	if d.bad || count > uint64(len(d.p))/sha256.Size {
		return nil, errBadPackIndex
	}
	entries := make([]packEntry, 0, count)
	for range count {
		if len(d.p) < sha256.Size {
			return nil, errBadPackIndex
		}
		var en packEntry
		copy(en.h[:], d.p)
		d.p = d.p[sha256.Size:]
		off, size := d.uvarint(), d.uvarint()
		if d.bad || off < uint64(len(packMagic)) || off > 1<<62 || size > 1<<62 {
			return nil, errBadPackIndex
		}
		en.off, en.size = int64(off), int64(size)
		entries = append(entries, en)
	}
	if len(d.p) != 0 {
		return nil, errBadPackIndex
	}
	return entries, nil
}

// packWriter appends the blobs of one Take to a new, temporary pack. One
// goroutine uses it at a time (see takeTx.pack).
type packWriter struct {
	f       *os.File // packs/.tmp-*.pack until committed
	off     int64
	entries []packEntry
	id      string // once committed
}

func newPackWriter(dir string) (*packWriter, error) {
	f, err := os.CreateTemp(dir, tempBlobPrefix+"*.pack")
	if err != nil {
		return nil, err
	}
	if _, err := wrapWriter(f).Write([]byte(packMagic)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &packWriter{f: f, off: int64(len(packMagic))}, nil
}

// add appends one blob.
func (w *packWriter) add(h hash32, data []byte) error {
	n, err := wrapWriter(w.f).Write(data)
	if err != nil {
		// What was written of it is past every entry: never read.
		w.off += int64(n)
		return err
	}
	w.entries = append(w.entries, packEntry{h: h, off: w.off, size: int64(len(data))})
	w.off += int64(len(data))
	return nil
}

// publish renames a durable pack to its name and writes its index
// (durably only with sync: else a syncfs after covers it).
func (w *packWriter) publish(s *Store, sync bool) error {
	if err := w.f.Close(); err != nil {
		return err
	}
	id := newPackID()
	if err := os.Rename(w.f.Name(), s.packPath(id)); err != nil {
		return err
	}
	w.id = id
	durability := fsutil.RenameOnly
	if sync {
		durability = fsutil.SyncFileDir
	}
	return writeAtomic(s.packIndexPath(id), encodePackIndex(w.entries), durability)
}

// discard removes what the writer made.
func (w *packWriter) discard(s *Store) {
	w.f.Close()
	os.Remove(w.f.Name())
	if w.id != "" {
		os.Remove(s.packIndexPath(w.id))
		os.Remove(s.packPath(w.id))
	}
}

// packReader is a packed blob's bytes, and its pack file to close.
type packReader struct {
	*io.SectionReader
	f *os.File
}

func (r packReader) Close() error { return r.f.Close() }

// openPacked opens a packed blob's bytes.
func (s *Store) openPacked(h hash32, loc packLoc, forPath string) (io.ReadCloser, error) {
	f, err := os.Open(s.packPath(loc.pack))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, damaged(h, forPath, "missing (its pack is gone)")
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return packReader{io.NewSectionReader(f, loc.off, loc.size), f}, nil
}
