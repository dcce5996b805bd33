package fsutil

import (
	"errors"
	"os"
)

// ErrLocked says another process holds a lock that was asked for without
// waiting.
var ErrLocked = errors.New("locked by another process")

// LockFile opens path (creating it 0600) and takes its exclusive lock,
// waiting for it when wait; without wait, ErrLocked says another process
// holds it. The lock is held until the returned file is closed.
func LockFile(path string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := Lock(f, true, wait); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
