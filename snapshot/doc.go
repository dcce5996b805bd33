// Package snapshot is a content-addressed store of snapshots of workspace
// roots: Take records a root as it is, Restore makes the root what a
// snapshot holds, Diff says what changed between two snapshots or since
// one, Export writes one as a tar, and Drop removes one and collects the
// blobs nothing else needs. It knows nothing of sessions, the protocol or
// the server; those call it. What it costs is measured in BENCHMARKS.md
// (the snapshot figures and their notes) and by the package's benchmarks.
//
// A snapshot holds the regular files, directories and symlinks of a root,
// with their permission bits (and setuid, setgid and sticky). Symlinks are
// recorded as links, whatever they point to, and never followed. ".git"
// (a directory or a worktree's file, at any depth), the Exclude patterns
// (gitignore syntax: *, ?, [...], **, a leading / anchors, a trailing /
// matches directories, ! re-includes, the last match wins, and nothing
// under an excluded directory comes back) and the Skip paths (read roots
// inside the root) are left out, and Restore neither writes nor removes
// them, nor the directories above them: a directory made since the
// snapshot that holds one stays, and only the rest of what it holds goes.
//
// # On disk
//
// The store is one directory (Open makes it 0700), outside every root it
// snapshots (Take refuses a root that holds it or lies inside it):
//
//	store.json            {"version": 2, "generation": g, "bytes": n}
//	lock                  the store's flock
//	packs/<id>.pack       blobs under 256 KiB (file contents and tree
//	                      objects), back to back
//	packs/<id>.idx        that pack's index: each blob's sha256, offset
//	                      and length
//	blobs/ab/cdef...      a larger file's content named by its sha256
//	                      (hex; the first two digits name the directory)
//	snapshots/<id>        one manifest per snapshot
//	roots/<key>/index     the stat cache of one root (key: the first 16
//	                      bytes, in hex, of the sha256 of its real path)
//	roots/<key>/lock      that root's flock
//	tmp/                  large blobs being written (packs are written
//	                      as packs/.tmp-*.pack)
//	trash/                what Restores replaced, until it is removed
//
// Every format says its version, and a reader refuses a version it does
// not know:
//
//   - store.json's "version" (2; a store of version 1, from before packs,
//     is upgraded when opened, so that older builds refuse it rather than
//     miss its packed blobs). "bytes" is the size of the blobs, loose and
//     packed, which Options.MaxBytes caps; "generation" counts the
//     collections.
//   - A pack starts "toolhost-snapshot-pack 1"; its index starts
//     "toolhost-snapshot-packidx 1", then the count and, for each blob, its
//     sha256, offset and length (uvarints), and ends with the sha256 of all
//     that. See pack.go.
//   - A manifest is JSON with "version": 1, and: "id", "label", "root" (as
//     given to Take, cleaned), "createdAt", "tree" (the hex sha256 of the
//     root directory's tree object), "mode" (the root directory's bits),
//     "files", "bytes", "newBytes", "durationNs", "exclude" and "skip" (so
//     that Restore and Diff leave out what Take did). An ID is the time of
//     the Take and 12 random hex digits: 20261125-220601-a1b2c3d4e5f6.
//   - A tree object is one directory: the line "toolhost-snapshot-tree 1",
//     then, for each entry sorted by name (bytewise), a kind byte (f, d or
//     l), the mode, the size (a directory's: the file bytes beneath it) and
//     the name as uvarints and bytes, then the sha256 of the file's content
//     or of the subdirectory's tree object, or the symlink's target. Trees
//     are blobs like any other, so a directory unchanged since the last
//     snapshot costs nothing more, and a one-file change adds that file and
//     the trees of the directories above it.
//   - A stat cache starts "toolhost-snapshot-index 1" (its name on disk is
//     the index, as git's), holds the generation it was written at, then
//     for each regular file its path, size, mtime, ctime, inode, device, a
//     racy flag and its content's sha256, and ends with the sha256 of all
//     that. One that fails its checksum is ignored (every file is read
//     again); it is a cache, never the truth. See statcache.go.
//
// # The stat cache
//
// Like git's index, the stat cache lets a Take (and Diff against the root,
// and Restore's comparisons) skip reading a file whose size, mtime, ctime,
// inode and device are what they were: its hash is the one recorded. A file
// modified in the same timestamp tick as it was read can look unchanged:
// such an entry (its mtime within the racy window of the Take's start, or
// later) is saved marked racy and the file is read again next time. The
// window is 2 s (FAT's granularity) unless some file of the tree has an
// mtime with a fraction of a second, a filesystem with fine timestamps,
// where it is 100 ms, many ticks of the kernel's coarse clock. A
// collection bumps the generation; a Take that finds its stat cache older
// checks that each blob it vouches for is still there, and reads the file
// again where it is not. A Restore records what it wrote and what it read
// and found right.
//
// The store keeps each root's newest stat cache in memory. A Take or
// Restore makes its stat cache after the answer, still holding the root's
// lock (so the next Take or Restore of the root waits for it), and it is
// written to its file within a second, or when the store closes, holding
// the root's lock again. The one in memory is used while its file's stat
// is what it was when this store last read or wrote it. Any stat cache is
// valid, however old: each entry is trusted only for a file whose stat is
// still the one it records. So a crash before the write costs reads, and
// another process's stat cache that replaced the file is read and kept,
// never written over.
//
// # Directory listings
//
// The store also keeps in memory the names of each directory of a root as
// its last whole scan read them, with the directory's stat; the next scan
// does not list again a directory whose stat (inode, device, size, mtime,
// ctime) is unchanged: git's untracked cache, kept in memory only. Adding,
// removing or renaming an entry changes its directory's mtime and ctime,
// and no process can set a ctime; the one guard needed is the stat
// cache's, a change within the same timestamp tick: a listing is kept only
// when its directory's ctime lies outside the racy window of the scan's
// start. Every entry is still looked at with its own fstatat. Listings are
// kept only on local Linux filesystems (ext4, xfs, btrfs, tmpfs, f2fs,
// overlayfs, zfs): a network filesystem's attributes may be cached for
// seconds, and a FUSE one's are what its daemon says; there, and off
// Linux, every scan lists every directory.
//
// # Crash safety
//
// Nothing is visible before it is whole, and nothing is referenced before
// it is durable:
//
//   - A large blob is written to a temporary file (in tmp/, as its hash is
//     known only once it is copied), flushed, then renamed to its name, and
//     the name made durable, before any manifest names it. Small blobs are
//     appended to the Take's temporary packs (one per worker at a time, a
//     new one past 64 MiB), which are flushed, renamed to their names, and
//     only then given their indexes, made durable in turn: a pack's blobs
//     are in the store once its index is. With more than 8 new files or 32
//     MiB the flushes are one syncfs(2) of the store's filesystem for the
//     data and one for the names; with fewer (and off Linux), an fsync of
//     each file and of each directory. A collection (gc.go) removes a temporary
//     pack, a pack without its index and an index without its pack; it
//     removes a pack none of whose blobs is referenced, and rewrites into a
//     new pack (made durable with its index before the old one goes) the
//     referenced blobs of one that holds others.
//   - A manifest and store.json are each written to a temporary file
//     beside their name, fsynced and renamed, and the directory fsynced.
//     A stat cache is written and renamed likewise, but not flushed: it is
//     a cache, checked against its checksum whenever it is read, so one
//     that a crash tore is ignored. So a crash or a full disk mid-Take
//     leaves no half snapshot: its manifest is not there, and the blobs it
//     wrote are either removed by the failed Take (which holds the store's
//     exclusive lock, so no other snapshot can have come to need them) or,
//     after a crash, left for the next collection (Drop), which also
//     removes the temporary files. A failed Take leaves the store as it
//     was, byte for byte, store.json included.
//   - store.json's byte count follows a manifest: a crash between them
//     undercounts until the next collection, which counts again.
//   - Blobs are checked against their hash whenever they are read for a
//     Restore, a Diff's patch or an Export; trees whenever they are read.
//     A blob that is missing, of the wrong size or content is ErrDamaged,
//     naming it and the path it was read for. A Take that finds a blob of
//     the wrong size writes it again; one of the right size with the wrong
//     content is not noticed until it is read.
//
// # Restore
//
// Restore plans first, then applies. It loads the snapshot's trees, scans
// the root, reads the current files the stat cache cannot vouch for whose
// size is the snapshot's, and decides everything: what to remove, which
// directories to make, which files and symlinks to write, which modes to
// set. Then it reads every blob it will write and checks its hash; one
// damaged blob fails the restore with ErrDamaged before anything in the
// root changes. Then it applies: removals, new directories (0700 until the
// end), files (each written to ".snapshot-<random>.tmp" beside it, its mode
// set, then exchanged with whatever is there, renameat2 RENAME_EXCHANGE,
// or renamed over it where there is nothing or the filesystem cannot
// exchange), symlinks (made beside and renamed over), modes of files, and
// last the modes of directories, deepest first. A directory without write
// permission that must change is opened up and set back. Every path goes
// through an os.Root on the root (files are written through an os.Root
// opened, through it, on their directory), so a directory swapped for a
// symlink to outside during the restore makes the operations through it
// fail: nothing outside the root is ever written (TestRestoreSwapRace).
//
// What a removal takes away, and what an exchange took out of a name, is
// moved, by its directory's handle, into the store's trash/ and removed
// there after the Restore returns, by a goroutine Close waits for:
// deleting a file frees its blocks, which on ext4 mounted with discard
// waits for the disk (and ext4 flushes a file renamed over another, which
// an exchange does not ask for); and a directory of many files goes in one
// rename. Where the trash is on another filesystem, or a directory cannot
// move (one without write permission, for a user other than root), it is
// deleted in place. Restored files get the time of the restore as their
// mtime (so make and friends rebuild what depends on them), and are not
// fsynced: a crash mid-restore leaves the root partly restored, and a
// second Restore finishes the work.
//
// # Locks
//
// Takes and Restores of one root are serialized: a lock per root in the
// process, and an flock of roots/<key>/lock so that two processes sharing
// the store are serialized too. The store's lock (an RWMutex in the
// process, an flock of lock across processes) is shared while blobs are
// read (Restore, Diff, Export) and exclusive while they are written (the
// writing half of a Take) or collected (Drop): so Takes of different roots
// write one at a time, and a collection never removes a blob that a Take
// is about to name or a Restore is reading. The lock order is the root's,
// then the store's.
//
// # Copies
//
// Blobs are never hard-linked into a root nor from it: a later in-place
// edit would change the stored content. A file of 256 KiB or more is
// cloned (FICLONE, a reflink sharing its extents, on Linux) where the
// filesystem can, and hashed from the clone; otherwise, and for smaller
// files, it is copied and hashed in one pass, through a 256 KiB buffer, so
// that memory does not grow with a file's size. The first refusal (ext4 answers
// EOPNOTSUPP; two filesystems EXDEV) stops the asking for the rest of the
// Take or Restore. Reading and hashing run on Options.Workers goroutines,
// and so does the scan, a directory at a time.
//
// # What is not covered
//
//   - Ownership, ACLs, extended attributes, mtimes and other times:
//     restored files belong to the server's user and get the restore's time.
//   - Hard links: each name is a file of its own; two names of one file
//     come back as two files (their content is stored once).
//   - Sockets, FIFOs and devices are neither taken nor removed by a
//     restore (unless a directory holding one is removed).
//   - A Take reads files while they may be changing: a file written during
//     it is taken as read, and a directory replaced while it is scanned
//     fails the Take ("try again"). Take a snapshot of a quiet tree.
//   - MaxBytes counts blobs (content and trees), not manifests, stat
//     caches, pack indexes or the filesystem's blocks; and blobs written by
//     a crashed Take count once collected, not before.
//   - A damaged blob of the right size is noticed when it is read, not
//     when a Take reuses it.
//   - Export streams, checking each blob as it goes: a damaged one ends it
//     with ErrDamaged after a partial tar.
//   - Off Linux there are no reflinks and no syncfs (an fsync a blob), and
//     other than on Linux and macOS the stat cache has only size and mtime.
package snapshot
