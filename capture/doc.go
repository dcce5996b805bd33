// Package capture keeps what toolhost's commands print: it writes each
// command's output to artifact files, keeps a bounded inline head and tail
// per stream, and recognises the step markers a child writes on stderr or on
// its events pipe.
//
// Where things are:
//
//	artifacts*.go  Artifacts: the session's artifacts directory, one
//	               directory per command, the spares made ahead of need,
//	               the cap and its evictions
//	capture.go     Capture: one command's stdout, stderr and events writers,
//	               the files' sharing and hashing, and the Output summary
//	               its Close returns
//	headtail.go    the inline head and tail of a stream
//	live.go        the view of a running command's capture: the files'
//	               lengths, the broadcast of new bytes, the time of the
//	               latest write, the inline output so far
//	markers.go     the step-marker syntax
//	tempdir*.go    MkdirTemp, MkdirOwned: private directories named after
//	               their server; SweepTempDirs: removing those of dead servers
//
// A private artifacts directory (no --artifacts-dir) is made by MkdirTemp
// in the temp dir, named toolhost-artifacts-v1-<pid>-<start>-<random>
// after the server that owns it. The session removes it at its end; a
// SIGKILLed server cannot, and the next server's SweepTempDirs removes it
// once that pid is gone (or belongs to a process started at another time).
// The session directory (confined commands' TMPDIRs, and the cache of a
// session that cannot keep one per root in the state directory,
// toolhost-session-…) and the root of unconfined commands' TMPDIRs
// (toolhost-tmp-…) are named and swept the same way (MkdirOwned).
// A directory of a live server, one made with --keep-artifacts (whose name
// records no owner), one the user named, and one of another user are never
// removed.
//
// Whether the owner of such a directory runs is all the package knows of
// processes, and it knows nothing of JSON-RPC: package process pumps a
// child's pipes into a Capture's writers, and callers turn Output and Marker
// into the wire's types.
//
// # The files
//
// Each command has a directory <artifacts>/<commandID> (0700) holding
// stdout.log, stderr.log and output.log (0600, never opened through a
// symlink). What the contract promises of them holds at every moment: all
// three names exist from the command's start; output.log holds stdout, stderr
// and every marker interleaved in arrival order; stdout.log holds stdout and
// stderr.log the plain stderr lines; Output's ByteCount, LineCount and Sha256
// describe output.log. How they are made is chosen for the two costs that
// dominate: creating an inode (much kernel time on some file systems, ext4
// without a journal among them) and writing or hashing every byte of a
// large output twice.
//
//   - A name starts as a hard link to the session's one empty file, which is
//     never written, and gets an inode of its own with its first byte: a
//     spare file made ahead of need, renamed over the name. A command that
//     prints nothing costs its directory (itself a spare, renamed into
//     place) and three links.
//   - stdout.log and output.log are one inode (two hard links) while every
//     byte so far is stdout's, so stdout is written once. With the first
//     byte that is not stdout's (plain stderr, or a marker from either
//     source) they split: output.log keeps the inode, and stdout.log becomes
//     a copy of what it held (copy_file_range), renamed over its name, that
//     stdout goes on writing alone. The copy and the rename happen under the
//     lock every stdout write takes, so no byte falls between them.
//   - The SHA-256 of output.log is not taken on the pump's path. Up to 1 MiB
//     Close reads the file back (from the page cache) and hashes it; past
//     that a goroutine of the Capture follows the file as it grows, and
//     Close waits for it to catch up.
//   - The artifacts cap counts each name by its size, so a byte in shared
//     stdout.log and output.log counts twice, as it did when they were two
//     files; a name linked to the empty file counts nothing.
//
// # Reading a running command's files
//
// A reader (readOutput, in package tools) may read the files at byte
// offsets while the command runs and sees the bytes as they arrive, if it
// opens the name for each read, or reads no further than a length it
// learned before opening (Capture.Lengths; Capture.Changed wakes it when
// they grow):
//
//   - Every name changes inode at its first byte, from the empty file to
//     its own. A descriptor opened before that reads nothing, ever.
//   - From then on output.log and stderr.log keep their inode for the whole
//     run: a descriptor opened after their first byte stays valid.
//   - stdout.log changes inode once more, at the split. A descriptor opened
//     before the split still reads the right first bytes (the new inode
//     starts as a copy of them), but past them it would read output.log's
//     interleaved bytes; opening the name again, or bounding the read by
//     the stdout length known when it was opened, avoids that.
package capture
