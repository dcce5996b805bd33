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

// sweepCaches makes one sweep of the caches per process.
var sweepCaches sync.Once

// RootCache returns the cache directory of the workspace root root, which
// must be its canonical real path, made 0700 (and its parent, "caches")
// under the state directory if missing and checked as the state directory
// is: this user's, closed to others, not a symlink. Its name is a hash of
// root, so that the commands of one root only, across sessions, share it.
// Beside it, DIR.root names the root and its time says when a session last
// used the cache; the first call of a process then removes, in the
// background, the caches whose root is gone and that no session used for
// cacheIdle (roots in temporary directories come and go).
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
	sweepCaches.Do(func() { go sweepRootCaches(parent, time.Now().Add(-cacheIdle)) })
	return dir, nil
}

// sweepRootCaches removes from parent each cache whose DIR.root names a
// root that no longer exists and was last written before idle.
func sweepRootCaches(parent string, idle time.Time) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".root")
		if !ok || e.Type() != 0 {
			continue
		}
		marker := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(marker)
		if err != nil || fi.ModTime().After(idle) {
			continue
		}
		b, err := os.ReadFile(marker)
		if err != nil {
			continue
		}
		root := strings.TrimSuffix(string(b), "\n")
		if _, err := os.Lstat(root); !filepath.IsAbs(root) || !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if removeCache(filepath.Join(parent, name)) == nil {
			os.Remove(marker)
		}
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
