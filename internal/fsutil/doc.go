// Package fsutil holds the file helpers that toolhost's state on disk
// shares: a write that leaves a name whole or untouched, and an advisory
// lock between processes. The journal, the snapshot store, the export of
// a snapshot and the per-root caches use them, so that each format's
// durability is argued once, here.
//
// It imports nothing of toolhost, and knows nothing of what it writes.
package fsutil
