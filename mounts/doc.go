// Package mounts shows a bucket's objects to confined commands as files
// (issue 36, BRIEF.md Part 4 "Mounts"). The server fetches the objects
// itself, with credentials no command sees, into a cache it owns; the
// caller (package tools) binds the directory Prepare returns at the
// mount's path for a command, and writes a writable mount back when the
// command ends. It knows nothing of JSON-RPC, sessions or sandboxes, and
// nothing of the providers: it reads and writes through an
// objstore.Store, which the caller opens with an Opener of its own.
//
// What lives here: Spec (a mount, from the --mount flag with ParseFlag
// or from the wire) and its checks (ParseURI, Spec.Check, CheckSpecs);
// Secrets (the --secrets file and TOOLHOST_SECRET_<ID>); Open, which
// opens a spec's store with the caller's Opener; and Mount, one mount's
// cache.
//
// # Specs and URIs
//
// A URI is s3://bucket/prefix (kind "s3"), r2://bucket/prefix ("r2"),
// gs://bucket/prefix ("gcs") or az://container/prefix ("azureBlob"),
// taken as written (no percent-decoding). Its prefix is a folder:
// s3://bkt/data lists "data/", so it shows data/… and never data-old/…;
// no prefix lists the whole bucket. A spec's kind must be its URI's;
// "boxStorage" and "providerNative" are refused with ErrUnsupported. A
// mount's name is a file name (the caller may name its cache after it);
// its path is absolute and clean, and CheckSpecs refuses two mounts of one
// name, or a path equal to or inside another mount's.
//
// # Secrets
//
// A spec names its credentials by id. Lookup finds the id in the
// --secrets file first, and only when the file does not have it in the
// environment variable TOOLHOST_SECRET_<ID> (EnvName): the file is the
// server's deliberate configuration, and a variable inherited from the
// environment cannot override it. LoadSecrets refuses a symlink, a file
// the server's user does not own, and one its group or others may read
// or write (mode & 0o077 != 0). Errors name the file, the id, the field
// or the byte offset where JSON went wrong, never a value: encoding/json's
// own messages, which may quote the text, are never passed on.
//
// # The cache
//
// Each mount has a directory of its own (mode 0700, outside every root;
// the caller owns it and keeps other processes out):
//
//	record.json        what was fetched: versioned JSON, written whole
//	                   (temporary file, fsync, rename) and checked when
//	                   read; a corrupt one, or another URI's, starts the
//	                   cache clean
//	staging/           fetches in progress; emptied by New
//	objects/ID         read-only mounts: one file per object version
//	                   (ID hashes key and version), mode 0444
//	views/N/           read-only mounts: one directory per listing, the
//	                   objects hard-linked from objects/ under their paths
//	work/              writable mounts: the working directory
//	work-previous-T/   a working directory New found with no record to
//	                   trust (a corrupt one, or another URI's): kept
//	                   aside, never shown or uploaded, for a person to
//	                   recover
//
// # Consistency
//
// A command sees the objects as the bucket had them when it started:
// Prepare lists the prefix once (one LIST, with each object's version:
// ETag or generation), fetches what changed, eight objects at a time, each
// read at the version listed (an object written in between is a failed
// precondition: Prepare lists again, up to three times), into staging, and
// publishes only when every fetch has come whole. On any error (the
// network dropping mid-fetch, a store refusing) nothing new is shown, the
// caller gets an *Error, and the command is not started.
//
// A read-only mount's Prepare returns a view, a directory that never
// changes once published: commands that started before a change keep
// theirs until Release, and a newer listing gets a new view. An unchanged
// bucket costs one LIST and nothing else: the current view is shown
// again. Objects are streamed to disk through a fixed buffer, never held
// whole. The record of a read-only cache names the boot it was written
// in (Linux's boot_id) and is trusted in that boot only, so nothing is
// synced: a crash of the process loses nothing written, and one of the
// machine starts the cache clean. A writable mount's fetched files are
// synced (syncfs) before the record names them, and the record is
// fsynced, so that after any crash the record never names a part. Where
// the boot has no id, read-only caches are synced the same way.
//
// A writable mount has one working directory. Prepare refreshes the files
// the bucket changed and the directory did not, removes those the bucket
// deleted and the directory did not touch, and keeps every local change.
// A local file the record does not know, where the bucket has an object
// of equal content, is adopted; otherwise it is kept (and is a conflict at
// write-back). Commands sharing a writable mount see each other's
// changes, and it is refreshed only when no command uses it (between a
// Prepare and its Release): a command that starts while another runs sees
// the working directory as it is, and nothing is replaced under a command
// that writes. A WriteBack while another command still writes may upload
// a file it has half written; the write-back after that command ends
// uploads the rest.
//
// # Write-back and conflicts
//
// WriteBack (when a command ends, and on syncMount) compares each file of
// the working directory with the record of what was fetched: its size,
// mtime, ctime and inode, and when only those changed, its SHA-256 (a
// file touched but not changed is not uploaded). A changed file is
// uploaded with Condition{IfMatch: version fetched}, a new one with
// IfNoneMatch, a deleted one deleted with IfMatch. Since some
// S3-compatible stores ignore conditions, each write is preceded by a Head
// whose version must be the one recorded. A 412 or a Head that disagrees
// is a conflict: the bucket's object stays, the local file stays, and
// Result.Conflicts names its path; the conflict stays until the local
// file is removed, after which the next Prepare fetches the bucket's
// object. After each successful write the record holds the new version,
// so the next WriteBack uploads nothing. A local file deleted while the
// bucket changed its object cannot be kept, so that conflict ends with the
// bucket's object fetched again.
//
// # What an object store cannot hold
//
// Object stores hold bytes under keys: no modes, owners, links, special
// files or empty directories.
//
//   - Modes are never stored: a read-only view's files are 0444, a
//     working directory's 0644 and its directories 0755; a chmod is not
//     a change.
//   - A symlink or a special file (fifo, socket, device) in a writable
//     mount is not uploaded, and Result.NotUploaded names it, with why;
//     a symlink or special file where a fetched file was is not a
//     deletion either.
//   - An empty directory is not uploaded and is reported, unless the
//     bucket has it as a directory marker.
//   - A zero-byte key ending in "/" is a directory marker: shown as a
//     directory, never a file.
//
// Keys that cannot be files are skipped, named in State.Skipped, and
// never deleted by a write-back: a key whose path under the prefix has an
// empty ("a//b", "/a"), "." or ".." component, a NUL or a component over
// 255 bytes; a non-empty key ending in "/"; and a key that another key
// makes a directory ("a" beside "a/b": the directory wins).
//
// # Limits
//
// A listing of more than Limits.MaxObjects objects (default 100,000) or
// Limits.MaxBytes bytes (default 2 GiB) is refused with ErrLimit before
// anything is fetched; the listing stops as soon as it passes one.
//
// # Why the objects are fetched, and not served by FUSE
//
// The objects are fetched whole into the cache when a command starts,
// and the command reads plain files through a bind mount: no process or
// thread of the server stands between it and the data, nothing is left
// mounted when the server dies, and reads run at the page cache's speed.
// A lazy mode (go-fuse, serving objects as they are read) was left out
// because the measurements do not call for it (BENCHMARKS.md, "mounts"):
// a mount's files read at 0.93x a plain directory's, a 1 GiB bucket
// (16 objects of 64 MiB) is fetched at 1.14x a plain parallel GET loop
// with the server's RSS at 25 MiB, and an unchanged bucket of 1,000
// objects costs 14 ms at a command's start; go-fuse measured here at
// 0.67 to 0.82x a plain directory without passthrough, and 12 to 17x
// slower on small files. Its case is a bucket larger than
// --mount-max-bytes that a command reads a little of; such a bucket is
// refused today, with the limit named.
package mounts
