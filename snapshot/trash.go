package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"sync"
)

// trash collects what a Restore replaced. Where the filesystem allows it,
// a Restore swaps each new file in with its old one (an exchange, so the
// name never lacks a file), then moves the old one out of the root, into
// the store's trash/ directory, rather than deleting it where it stands:
// deleting a file frees its blocks, which on ext4 mounted with discard
// waits for the disk, and that is most of the cost of writing a file over
// another. The trash is emptied after the Restore returns, by a goroutine
// of the Store that Close waits for. What a crash leaves there is removed
// by the next Open and by every collection.
type trash struct {
	dir *os.File // the store's trash/; nil: delete in place

	mu    sync.Mutex
	names []string // guarded by mu
}

// openTrash opens the store's trash directory for one Restore; without it
// (it cannot be opened) replaced files are deleted where they stand.
func (s *Store) openTrash() *trash {
	d, err := os.Open(filepath.Join(s.dir, "trash"))
	if err != nil {
		s.log.Debug("snapshot trash unavailable; replaced files are deleted in place", "err", err)
		return &trash{}
	}
	return &trash{dir: d}
}

// trashName is a new name in the trash.
func trashName() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (t *trash) add(name string) {
	t.mu.Lock()
	t.names = append(t.names, name)
	t.mu.Unlock()
}

// empty closes the trash and removes what it holds: in the background,
// by a goroutine Close waits for.
func (s *Store) emptyTrash(t *trash) {
	if t.dir == nil {
		return
	}
	t.dir.Close()
	t.mu.Lock()
	names := t.names
	t.mu.Unlock()
	if len(names) == 0 {
		return
	}
	s.background(func() { s.removeFromTrash(names) })
}

// removeFromTrash removes names from the trash; a directory without write
// permission in them is opened up first.
func (s *Store) removeFromTrash(names []string) {
	r, err := os.OpenRoot(filepath.Join(s.dir, "trash"))
	if err != nil {
		s.log.Warn("snapshot trash not emptied", "err", err)
		return
	}
	defer r.Close()
	for _, n := range names {
		if err := removeAll(r, n); err != nil {
			s.log.Warn("snapshot trash not emptied", "name", n, "err", err)
		}
	}
}

// clearTrash removes everything in the trash: what crashed Restores left,
// and what running ones are about to remove (which then finds it gone).
func (s *Store) clearTrash() {
	ents, err := os.ReadDir(filepath.Join(s.dir, "trash"))
	if err != nil || len(ents) == 0 {
		return
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	s.removeFromTrash(names)
}

// removeToTrash removes rel, through the root r: moved into the trash by
// its parent's handle (one rename, whatever it holds), or, where it cannot
// move there, removed in place.
func removeToTrash(r *os.Root, rel string, tr *trash) error {
	if tr.dir != nil {
		pr, err := r.OpenRoot(dotRel(parentRel(rel)))
		if err != nil {
			return err
		}
		defer pr.Close()
		pd, err := pr.Open(".")
		if err != nil {
			return err
		}
		defer pd.Close()
		t := trashName()
		if err := moveOut(pd, path.Base(rel), tr.dir, t); err == nil {
			tr.add(t)
			return nil
		}
	}
	return removeAll(r, rel)
}
