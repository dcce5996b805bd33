//go:build !unix

package persist

import "os"

// ownerOf is unknown off Unix.
func ownerOf(fi os.FileInfo) (int, bool) { return 0, false }
