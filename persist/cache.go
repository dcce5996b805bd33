package persist

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// cacheIdle is how long a root's cache is kept, unused, once its root is
// gone.
const cacheIdle = 7 * 24 * time.Hour

// sweepEvery is how often the caches are swept, across processes: a
// sweep reads every cache's marker, and a machine that runs many servers
// (a test suite) has tens of thousands.
const sweepEvery = 24 * time.Hour

// sweepCaches makes at most one sweep of the caches per process.
var sweepCaches sync.Once

// RootCache returns the cache directory of the workspace root root, which
// must be its canonical real path, made 0700 (and its parent, "caches")
// under the state directory if missing and checked as the state directory
// is: this user's, closed to others, not a symlink. Its name is a hash of
// root, so that the commands of one root only, across sessions, share it.
// Beside it, DIR.root names the root and its time says when a session last
// used the cache; the first call of a process then removes, in the
// background and unless another process did within sweepEvery, the caches
// whose root is gone and that no session used for cacheIdle (roots in
// temporary directories come and go).
func (d Dirs) RootCache(root string) (string, error) {
	h := sha256.Sum256([]byte(root))
	parent := filepath.Join(d.State, "caches")
	dir := filepath.Join(parent, hex.EncodeToString(h[:16]))
	for _, p := range []string{parent, dir} {
		if err := ownDir(p); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(dir+".root", []byte(root+"\n"), 0o600); err != nil {
		return "", err
	}
	sweepCaches.Do(func() { go sweepRootCaches(parent, time.Now()) })
	return dir, nil
}

// sweepRootCaches sweeps parent's caches (removeIdleCaches) unless its
// stamp, parent/.swept, says a sweep began within sweepEvery of now; it
// stamps the sweep before it begins, so that the servers that start
// together do not all sweep.
func sweepRootCaches(parent string, now time.Time) {
	stamp := filepath.Join(parent, ".swept")
	if fi, err := os.Lstat(stamp); err == nil && now.Sub(fi.ModTime()) < sweepEvery {
		return
	}
	if err := os.WriteFile(stamp, nil, 0o600); err != nil {
		return
	}
	if err := os.Chtimes(stamp, now, now); err != nil {
		return
	}
	removeIdleCaches(parent, now.Add(-cacheIdle))
}

// removeIdleCaches removes from parent each cache whose DIR.root names a
// root that no longer exists and was last written before idle. It reads
// the directory a batch at a time, so that its memory does not grow with
// the number of caches.
func removeIdleCaches(parent string, idle time.Time) {
	f, err := os.Open(parent)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			removeIfIdle(parent, e, idle)
		}
		if err != nil {
			return
		}
	}
}

// removeIfIdle removes the cache that e, an entry of parent, marks, if its
// root is gone and it was last used before idle.
func removeIfIdle(parent string, e fs.DirEntry, idle time.Time) {
	name, ok := strings.CutSuffix(e.Name(), ".root")
	if !ok || e.Type() != 0 {
		return
	}
	marker := filepath.Join(parent, e.Name())
	fi, err := os.Lstat(marker)
	if err != nil || fi.ModTime().After(idle) {
		return
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		return
	}
	root := strings.TrimSuffix(string(b), "\n")
	if _, err := os.Lstat(root); !filepath.IsAbs(root) || !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if removeCache(filepath.Join(parent, name)) == nil {
		os.Remove(marker)
	}
}

// removeCache removes dir and everything beneath it, making its
// directories writable first: Go's module cache makes them read-only.
func removeCache(dir string) error {
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
