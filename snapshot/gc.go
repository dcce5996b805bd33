package snapshot

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// Garbage collection, kept apart from what writes the store as restic
// keeps prune apart from backup: Drop removes a snapshot's manifest, then
// collects. A collection marks every blob that a manifest's trees reach,
// then removes the loose blobs not marked, removes the packs none of whose
// blobs is marked and rewrites those holding some, and removes what
// interrupted writes left (temporary blobs, packs and manifests, a pack
// without its index or an index without its pack, the trash). It holds the
// store's lock exclusively, so no Take is writing and no Restore reading,
// and bumps the store's generation, so that a stat cache written before it
// checks that the blobs it vouches for are still there.

// Drop removes a snapshot, then collects the blobs no remaining manifest
// references. The snapshot is gone once Drop returns, even with an error
// from the collection (a damaged manifest or tree stops it, so that nothing
// still referenced is removed; the error wraps ErrDamaged).
func (s *Store) Drop(id string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !validID(id) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	unlock, err := s.lockStore(context.Background(), true)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(s.manifestPath(id)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	} else if err != nil {
		return fmt.Errorf("drop snapshot %s: %w", id, err)
	}
	if err := fsutil.SyncDir(filepath.Join(s.dir, "snapshots")); err != nil {
		return fmt.Errorf("drop snapshot %s: %w", id, err)
	}
	if err := s.collectLocked(); err != nil {
		return fmt.Errorf("snapshot %s dropped, but its blobs were not collected: %w", id, err)
	}
	return nil
}

// collectLocked removes every blob no manifest references, and what
// interrupted Takes left in tmp/; the store lock is held exclusively. It
// marks first and removes nothing if any manifest or tree cannot be read.
func (s *Store) collectLocked() error {
	start := time.Now()
	ids, err := s.manifestIDs()
	if err != nil {
		return err
	}
	marked := map[hash32]struct{}{}
	for _, id := range ids {
		m, err := s.readManifest(id)
		if err != nil {
			return err
		}
		h, err := m.tree()
		if err != nil {
			return err
		}
		if err := s.markTree(h, m.ID, marked); err != nil {
			return err
		}
	}
	st, err := s.readState()
	if err != nil {
		return err
	}
	// Leftovers of interrupted writes: no Take is writing now.
	for _, d := range []string{"tmp", "snapshots"} {
		ents, err := os.ReadDir(filepath.Join(s.dir, d))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if d == "tmp" || strings.HasPrefix(e.Name(), ".") {
				os.RemoveAll(filepath.Join(s.dir, d, e.Name()))
			}
		}
	}
	s.clearTrash()
	var kept, removed int64
	var n int
	err = s.eachBlob(func(h hash32, path string, size int64) error {
		if _, ok := marked[h]; ok {
			kept += size
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed += size
		n++
		return nil
	})
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	pk, pn, premoved, err := s.collectPacks(marked)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	kept, n, removed = kept+pk, n+pn, removed+premoved
	st.Generation++
	st.Bytes = kept
	if err := s.writeState(st); err != nil {
		return err
	}
	s.log.Info("snapshot store collected", "blobs", n, "bytes", removed, "kept", kept, "ms", time.Since(start).Milliseconds())
	return nil
}

// markTree marks a tree and everything beneath it.
func (s *Store) markTree(h hash32, id string, marked map[hash32]struct{}) error {
	if _, ok := marked[h]; ok {
		return nil
	}
	data, err := s.readBlob(h, -1, "tree of snapshot "+id)
	if err != nil {
		return err
	}
	kids, err := decodeTree(data, "")
	if err != nil {
		return damaged(h, "tree of snapshot "+id, err.Error())
	}
	marked[h] = struct{}{}
	for _, k := range kids {
		switch k.kind {
		case kindFile:
			marked[k.hash] = struct{}{}
		case kindDir:
			if err := s.markTree(k.hash, id, marked); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectPacks removes the packs none of whose blobs is marked, rewrites
// the others that hold unmarked blobs, and removes what crashed writes
// left; the store's lock is held exclusively. It returns the bytes of the
// blobs kept in packs, and the count and bytes of those dropped (a pack's
// own header and index are not counted, as MaxBytes counts blobs).
func (s *Store) collectPacks(marked map[hash32]struct{}) (kept int64, n int, removed int64, err error) {
	dir := s.packsDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, 0, err
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tempBlobPrefix):
			os.Remove(filepath.Join(dir, name))
		case strings.HasSuffix(name, ".pack") && !have[strings.TrimSuffix(name, ".pack")+".idx"],
			strings.HasSuffix(name, ".idx") && !have[strings.TrimSuffix(name, ".idx")+".pack"]:
			os.Remove(filepath.Join(dir, name))
		}
	}
	if err := s.loadPacks(); err != nil {
		return 0, 0, 0, err
	}
	s.packMu.Lock()
	packs := make(map[string][]packEntry, len(s.packIDs))
	for id, entries := range s.packIDs {
		packs[id] = entries
	}
	s.packMu.Unlock()
	for id, entries := range packs {
		var live []packEntry
		var dead int64
		for _, en := range entries {
			if _, ok := marked[en.h]; ok {
				live = append(live, en)
			} else {
				dead += en.size
				n++
			}
		}
		removed += dead
		var liveBytes int64
		for _, en := range live {
			liveBytes += en.size
		}
		kept += liveBytes
		switch {
		case len(live) == len(entries):
			continue
		case len(live) > 0:
			if err := s.repack(id, live); err != nil {
				return 0, 0, 0, fmt.Errorf("rewrite pack %s: %w", id, err)
			}
		}
		// The index first: a pack without one is nothing.
		if err := os.Remove(s.packIndexPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, 0, err
		}
		os.Remove(s.packPath(id))
		s.packMu.Lock()
		s.forgetPackLocked(id)
		s.packMu.Unlock()
	}
	// Repacked blobs were added under their new pack; forgetting the old
	// one may have dropped them: know them again.
	if err := s.reloadPacks(); err != nil {
		return 0, 0, 0, err
	}
	return kept, n, removed, fsutil.SyncDir(dir)
}

// reloadPacks forgets every pack and reads the indexes again.
func (s *Store) reloadPacks() error {
	s.packMu.Lock()
	s.packs, s.packIDs = map[hash32]packLoc{}, map[string][]packEntry{}
	s.packMu.Unlock()
	return s.loadPacks()
}

// repack copies the live blobs of pack id into a new pack, made durable
// with its index. The bytes are copied as they are: a damaged blob stays
// damaged, and is reported when it is read.
func (s *Store) repack(id string, live []packEntry) error {
	src, err := os.Open(s.packPath(id))
	if err != nil {
		return err
	}
	defer src.Close()
	w, err := newPackWriter(s.packsDir())
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			w.discard(s)
		}
	}()
	for _, en := range live {
		data := make([]byte, en.size)
		if _, err := src.ReadAt(data, en.off); errors.Is(err, io.EOF) {
			// A pack cut short: the blob is damaged, and stays missing
			// (reported when read) rather than stopping the collection.
			s.log.Warn("snapshot blob cut short in its pack; left out of the rewrite", "pack", id, "blob", hex.EncodeToString(en.h[:]))
			continue
		} else if err != nil {
			return err
		}
		if err := w.add(en.h, data); err != nil {
			return err
		}
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.publish(s, true); err != nil {
		return err
	}
	s.addPack(w.id, w.entries)
	ok = true
	return nil
}
