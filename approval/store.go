package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// storeVersion is the version of the grants file this package reads and
// writes. A file of another version is refused, never rewritten.
const storeVersion = 1

// ErrRefused is wrapped by every error about a grants file that is not
// used: damaged, of another version, not a regular file, or open to
// others. Such a file is never read in part, and never overwritten.
var ErrRefused = errors.New("grants file refused")

// Store is the file of Always grants: versioned JSON
// ({"version":1,"grants":[...]}), holding the grants of every root, each
// under its canonical root. It is written whole (a temporary file, fsync,
// rename, fsync of the directory), 0600 in a 0700 directory, and re-read
// whenever its file changed (another toolhost process may have added or
// revoked a grant): its inode, size and mtime are checked before each use.
// Writers, in this process or another, are serialized by an exclusive
// lock (flock) on a lock file beside it, and each write re-reads the file
// under the lock first, so that no grant is lost.
type Store struct {
	path string // absolute; immutable
	lock string // the lock file beside path; immutable

	// write serializes this process's writers (flock alone does that on
	// Unix, not everywhere). It is taken before mu, and held across the
	// lock file and the write; readers never wait for it.
	write sync.Mutex

	mu sync.Mutex // guards the cache below; held only for a stat and a read
	// seen is the file the cache was read from (nil: it was missing);
	// the cache is used while the file has the same inode, size and mtime.
	seen fs.FileInfo
	// grants is the file's content as last read; err is why it was
	// refused instead (then grants is nil).
	grants []Grant
	err    error
}

// DefaultStorePath returns where the grants file lives: under
// $XDG_CONFIG_HOME/toolhost, else $HOME/.config/toolhost, as env (os.Getenv)
// gives them. Relative values are ignored, as the XDG specification asks;
// with neither, it is an error.
func DefaultStorePath(env func(string) string) (string, error) {
	if x := env("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "toolhost", "grants.json"), nil
	}
	if h := env("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "toolhost", "grants.json"), nil
	}
	return "", errors.New("no config directory for the grants file: set XDG_CONFIG_HOME or HOME")
}

// OpenStore opens the grants file at path and reads it. A missing file is
// an empty store, created at the first Add. A file that cannot be used is
// an error wrapping ErrRefused that says why; the caller warns and runs
// without remembered grants.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s := &Store{path: abs, lock: abs + ".lock"}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.loadLocked(false); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the grants file's path.
func (s *Store) Path() string { return s.path }

// Grants returns the grants of root, in the file's order.
func (s *Store) Grants(root string) ([]Grant, error) {
	all, err := s.All()
	if err != nil {
		return nil, err
	}
	var gs []Grant
	for _, g := range all {
		if g.Root == root {
			gs = append(gs, g)
		}
	}
	return gs, nil
}

// All returns the grants of every root, in the file's order.
func (s *Store) All() ([]Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs, err := s.loadLocked(false)
	if err != nil {
		return nil, err
	}
	return append([]Grant(nil), gs...), nil
}

// Add adds g, an Always grant with its ID, Root and CreatedAt, to the
// file, creating the file and its directory when missing. When the file
// already holds a grant of the same Kind, Target and Root, that grant
// stays and nothing is written.
func (s *Store) Add(g Grant) error {
	if err := checkGrant(g); err != nil {
		return fmt.Errorf("cannot add grant: %w", err)
	}
	return s.update(func(gs []Grant) ([]Grant, bool, error) {
		for _, h := range gs {
			switch {
			case h.ID == g.ID:
				return nil, false, fmt.Errorf("cannot add grant %s: its id is taken", g.ID)
			case h.same(g):
				return nil, false, nil
			}
		}
		return append(gs, g), true, nil
	})
}

// Remove removes the grant id from the file; an id the file does not hold
// is an error wrapping ErrUnknown.
func (s *Store) Remove(id string) error {
	return s.update(func(gs []Grant) ([]Grant, bool, error) {
		for i, g := range gs {
			if g.ID == id {
				return append(gs[:i:i], gs[i+1:]...), true, nil
			}
		}
		return nil, false, fmt.Errorf("grant %s: %w", id, ErrUnknown)
	})
}

// update rewrites the file with what change makes of its grants, read
// again under the lock file so that another process's write is never
// lost. change returns the new grants, and whether to write them.
func (s *Store) update(change func([]Grant) ([]Grant, bool, error)) error {
	s.write.Lock()
	defer s.write.Unlock()
	if err := ownDir(filepath.Dir(s.path)); err != nil {
		return err
	}
	lk, err := fsutil.LockFile(s.lock, true)
	if err != nil {
		return fmt.Errorf("cannot lock the grants file: %w", err)
	}
	defer lk.Close()

	s.mu.Lock()
	gs, err := s.loadLocked(true)
	gs = append([]Grant(nil), gs...)
	s.mu.Unlock()
	if err != nil {
		return err // a refused file is never overwritten
	}
	gs, write, err := change(gs)
	if err != nil || !write {
		return err
	}
	data, err := encode(gs)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFile(s.path, data, 0o600, fsutil.SyncFileDir); err != nil {
		return fmt.Errorf("cannot write the grants file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.loadLocked(true) // what was written, and its inode, size and mtime
	return err
}

// loadLocked returns the file's grants, from the cache while the file is
// the one it was read from (force: read it anyway). s.mu is held.
func (s *Store) loadLocked(force bool) ([]Grant, error) {
	fi, err := os.Lstat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.seen, s.grants, s.err = nil, nil, nil
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read the grants file: %w", err)
	}
	if !force && s.seen != nil && unchanged(s.seen, fi) {
		return s.grants, s.err
	}
	s.seen, s.grants, s.err = nil, nil, nil
	fi, gs, err := s.read(fi)
	if err != nil && !errors.Is(err, ErrRefused) {
		return nil, err // not the file's fault: nothing to remember
	}
	s.seen, s.grants, s.err = fi, gs, err
	return gs, err
}

// read reads and parses the file that Lstat described as fi, and returns
// the FileInfo of what it read (the file may have been replaced since).
func (s *Store) read(fi fs.FileInfo) (fs.FileInfo, []Grant, error) {
	if err := checkFile(s.path, fi); err != nil {
		return fi, nil, err
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the grants file: %w", err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the grants file: %w", err)
	}
	if err := checkFile(s.path, fi); err != nil {
		return fi, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the grants file: %w", err)
	}
	gs, err := decode(data)
	if err != nil {
		return fi, nil, fmt.Errorf("%w: %s %v", ErrRefused, s.path, err)
	}
	return fi, gs, nil
}

// unchanged reports whether the file described by now is still the one
// described by was: the same inode, size and mtime. Every write renames a
// new file into place, so a write changes the inode.
func unchanged(was, now fs.FileInfo) bool {
	return os.SameFile(was, now) && was.Size() == now.Size() && was.ModTime().Equal(now.ModTime())
}

// checkFile refuses a grants file that is not a regular file of its own
// (a directory, a symlink, a device), or that others may write.
func checkFile(path string, fi fs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsDir():
		return fmt.Errorf("%w: %s is a directory, not a file", ErrRefused, path)
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink; the grants file must be a regular file", ErrRefused, path)
	case !m.IsRegular():
		return fmt.Errorf("%w: %s is not a regular file (%v)", ErrRefused, path, m.Type())
	case m.Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s has mode %v, which lets others write it", ErrRefused, path, m.Perm())
	}
	return nil
}

// ownDir creates dir 0700 when missing, and refuses a directory others
// may write, where a grant could be planted.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create the grants file's directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrRefused, dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: its directory %s has mode %v, which lets others write it", ErrRefused, dir, fi.Mode().Perm())
	}
	return nil
}

// file is the grants file's content.
type file struct {
	Version int         `json:"version"`
	Grants  []fileGrant `json:"grants"`
}

// fileGrant is one grant in the file; its scope is always Always.
type fileGrant struct {
	ID        string    `json:"id"`
	Kind      Kind      `json:"kind"`
	Target    string    `json:"target"`
	Root      string    `json:"root"`
	CreatedAt time.Time `json:"createdAt"`
}

// encode returns the file holding gs.
func encode(gs []Grant) ([]byte, error) {
	f := file{Version: storeVersion, Grants: make([]fileGrant, 0, len(gs))}
	for _, g := range gs {
		f.Grants = append(f.Grants, fileGrant{ID: g.ID, Kind: g.Kind, Target: g.Target, Root: g.Root, CreatedAt: g.CreatedAt.UTC()})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// decode parses a grants file whole, or not at all: its version first
// (another version is refused as such, whatever else it holds), then
// every field of every grant, strictly. json.Unmarshal refuses anything
// after the object.
func decode(data []byte) ([]Grant, error) {
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("is damaged: %v", err)
	}
	if head.Version == nil {
		return nil, errors.New("is damaged: it has no version")
	}
	if v := strings.TrimSpace(string(head.Version)); v != fmt.Sprint(storeVersion) {
		return nil, fmt.Errorf("has version %s; this toolhost reads version %d only", v, storeVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("is damaged: %v", err)
	}
	gs := make([]Grant, 0, len(f.Grants))
	ids := make(map[string]bool, len(f.Grants))
	for i, fg := range f.Grants {
		g := Grant{ID: fg.ID, Kind: fg.Kind, Target: fg.Target, Scope: Always, Root: fg.Root, CreatedAt: fg.CreatedAt}
		if err := checkGrant(g); err != nil {
			return nil, fmt.Errorf("is damaged: grant %d: %v", i, err)
		}
		if ids[g.ID] {
			return nil, fmt.Errorf("is damaged: grant %d: id %s twice", i, g.ID)
		}
		ids[g.ID] = true
		gs = append(gs, g)
	}
	return gs, nil
}

// checkGrant refuses a grant the file cannot hold: any doubt about one
// grant refuses the file, never only that grant.
func checkGrant(g Grant) error {
	switch {
	case !strings.HasPrefix(g.ID, "g-") || len(g.ID) < 3:
		return fmt.Errorf("bad id %q", g.ID)
	case !g.Kind.valid():
		return fmt.Errorf("bad kind %q", g.Kind)
	case g.Target == "":
		return errors.New("no target")
	case g.Scope != Always:
		return fmt.Errorf("scope %q is not always", g.Scope)
	case g.Root == "":
		return errors.New("no root")
	case g.HandleID != "":
		return errors.New("an always grant has no handle")
	}
	return nil
}
