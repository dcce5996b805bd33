package persist

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// RootCache returns the cache directory of the workspace root root, which
// must be its canonical real path, made 0700 (and its parent, "caches")
// under the state directory if missing and checked as the state directory
// is: this user's, closed to others, not a symlink. Its name is a hash of
// root, so that the commands of one root only, across sessions, share it.
func (d Dirs) RootCache(root string) (string, error) {
	h := sha256.Sum256([]byte(root))
	dir := filepath.Join(d.State, "caches", hex.EncodeToString(h[:16]))
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := ownDir(p); err != nil {
			return "", err
		}
	}
	return dir, nil
}
