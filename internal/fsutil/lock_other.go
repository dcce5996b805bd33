//go:build !unix

package fsutil

import "os"

// Lock does nothing where flock(2) is missing: the callers that need a
// lock between processes (a persisted session) are Unix-only.
func Lock(f *os.File, exclusive, wait bool) error { return nil }
