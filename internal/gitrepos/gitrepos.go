// Package gitrepos finds the git repositories under a directory, boundedly,
// so that what git runs or obeys in each of them (its hooks, its config) can
// be protected from a confined command, and what a command wrote there can
// be named after it.
//
// Scan walks the tree from the root, breadth first, with two workers: each
// directory is opened relative to its parent's descriptor (openat with
// O_NOFOLLOW and O_DIRECTORY, so no symlink is followed and no path is
// resolved twice) and read with getdents, whose d_type says which entries
// are directories: there is no stat per entry (only where a filesystem
// gives no type). A parent's descriptor is closed once its last
// subdirectory is open; past 256 held, the scan goes depth first until
// fewer are. A directory is a repository's working tree when it holds an
// entry named .git:
//
//   - a .git directory is the repository's git directory, and is not
//     descended into (git keeps submodules' git directories there, in
//     .git/modules; each is found through its checkout's .git file);
//   - a .git file (a submodule's or a worktree's) names the git directory
//     elsewhere ("gitdir: PATH", relative to the file's directory); that
//     git directory is the repository's, and so is the directory its
//     commondir file names (a worktree's main git directory, which holds
//     the hooks and config the worktree uses). Each is read with
//     O_NOFOLLOW and O_NONBLOCK, at most 4 KiB, and only if it is a
//     regular file;
//   - a .git symlink is taken as the git directory (git follows it), but
//     is not followed here.
//
// A directory holding HEAD, objects and refs (a bare repository, as git
// itself recognises one) is a git directory too; it is still descended
// into, so that such a directory cannot hide repositories beneath it.
//
// The scan is bounded, as Anthropic's sandbox-runtime bounds its search for
// .git directories by depth: by time (Options.Timeout, default
// DefaultTimeout), by the directories it reads (Options.MaxDirs, default
// DefaultMaxDirs) and by the git directories it finds (Options.MaxRepos,
// default DefaultMaxRepos). The time is looked at between getdents calls,
// so a huge directory cannot hold the scan past it, and subdirectories
// that could not be read within MaxDirs are never queued. When a limit
// cuts the scan short, Result.Truncated says which, and the repositories
// it did not reach are not in Result; breadth first, those are the
// deepest. Directories it cannot read (permissions) are counted in
// Result.Unreadable.
//
// A Cache (Cache.Scan) makes the next scan of a root that mostly did not
// change cheap: it keeps, for each directory a scan read whole, its
// identity (device, inode) and change time (ctime, in nanoseconds) as
// fstat gave them just before its entries were read, when that read
// began, and what the entries said (the subdirectories, in order; the
// .git entry and its type; the bare-repository markers). The next scan
// looks at such a directory with one system call, fstatat relative to its
// parent's descriptor without following a symlink (only a directory with
// subdirectories, or with a .git file, is opened, for them), and takes
// what the cache holds when it is the same directory and its change time
// is the same. That is sound because a directory's change time moves
// whenever an entry is added, removed or renamed in it (its modification
// time too, but a process can set that back; the change time it cannot),
// and an entry's type cannot change without that; what a .git file
// names is read again at every scan, since rewriting the file changes
// nothing of its directory. Two things could still fool it, and are kept
// out:
//
//   - a change made in the same clock tick as the listing, which can bear
//     the same change time as one made just before it: a listing is only
//     trusted when the change time was older than the listing's start by
//     50 ms (git's "racy" rule), else the directory is read again;
//   - a clock the change times do not come from: only local filesystems
//     that stamp them in nanoseconds are cached (ext4, XFS, Btrfs, tmpfs,
//     overlayfs, F2FS, ZFS, bcachefs; a change time of whole seconds is
//     never trusted), and only directories on the root's own device.
//
// A directory that changed, or whose identity did (replaced, renamed
// over, a symlink now, which is not followed), is read again; what the
// cache holds of its subdirectories still there is kept only if it is
// the same directory (by the listing's inode numbers), and each is looked
// at in turn; a new one is read whole. The limits apply as without a
// cache (every directory looked at counts in Dirs, Result.Listed counts
// those read), and a scan cut short caches only the directories it read
// whole: what it did not see stays as it was, to be looked at next time.
// The first scan with a cache costs one fstat more a directory. Only
// Linux caches.
//
// On Linux a Cache learns of most changes without even that stat, from
// inotify: each directory it holds gets a watch (IN_CREATE, IN_DELETE,
// IN_MOVED_FROM, IN_MOVED_TO, IN_DELETE_SELF, IN_MOVE_SELF, IN_ATTRIB; not a
// file's writes: a .git file is read at every scan), added through
// /proc/self/fd/N of the descriptor it is read from, before it is read (or,
// for one the cache held before, before the fstat that revalidates it), so
// that every change after that is an event. The kernel queues an event as
// part of the operation, before the system call returns, so every change
// that completed before a scan began is in the queue when the scan drains it
// (without blocking, at its start): a directory with no event since is taken
// as the cache holds it, with no system call, and its watched subdirectories
// with it; one with an event is revalidated by its change time as above (and
// read again if it changed), and one deleted, renamed or unmounted
// (IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_IGNORED) is dropped from the
// cache, to be read whole where its name now leads. A directory below one
// taken without a system call is opened by its path from the root (openat2
// with RESOLVE_NO_SYMLINKS), or looked at with fstatat by its path and taken
// only if it is the same directory. A lost event (the queue overflowed, or
// it could not be read) or a change of the mount table (/proc/self/mountinfo
// polled; a mount raises no event in the directory mounted over) drops every
// watch: that scan revalidates each directory by its change time, and
// watches it again. A Cache takes at most an eighth of the user's watches
// (fs.inotify.max_user_watches, read once), and 20,000, so that editors (VS
// Code watches a workspace's every directory) and other tools keep theirs; a
// scan spends at most 50 ms adding them (the next scans add the rest), and a
// directory without one (past the share, or when the kernel refuses one:
// ENOSPC, EMFILE) is revalidated by its change time as above. Close releases
// the instance.
//
// Written names what changed, since a given time, among the hooks and
// config of a git directory, by change time: a caller scans before a
// command and after it to name what the command wrote where nothing could
// protect it.
//
// The package imports nothing of toolhost.
package gitrepos

import (
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The default limits of a scan. A directory costs three system calls
// (openat, getdents until it returns nothing, close), so the time limit is
// what larger trees reach first (BENCHMARKS.md has the figures), but with
// a Cache an unchanged one costs one, or none when watched; the count of git directories bounds
// the mounts a caller makes of them.
const (
	DefaultTimeout  = 200 * time.Millisecond
	DefaultMaxDirs  = 100_000
	DefaultMaxRepos = 256
)

// Options bounds a scan; zero fields take the defaults.
type Options struct {
	// Timeout is how long the scan may take.
	Timeout time.Duration
	// MaxDirs is how many directories it may read.
	MaxDirs int
	// MaxRepos is how many git directories it may find.
	MaxRepos int
	// Workers is how many directories are read at once; 0 is 2.
	Workers int
}

// withDefaults returns o with its zero fields set.
func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxDirs <= 0 {
		o.MaxDirs = DefaultMaxDirs
	}
	if o.MaxRepos <= 0 {
		o.MaxRepos = DefaultMaxRepos
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	return o
}

// Kind is how a repository's git directory was found.
type Kind string

// The kinds of git directory.
const (
	// KindDir is a .git directory.
	KindDir Kind = "dir"
	// KindFile is a .git file naming the git directory (gitdir:).
	KindFile Kind = "file"
	// KindLink is a .git symlink.
	KindLink Kind = "link"
	// KindBare is a bare repository: the directory is its git directory.
	KindBare Kind = "bare"
)

// Repo is one repository found.
type Repo struct {
	// Dir is the directory that holds .git (or, for a bare repository, the
	// repository itself), relative to the root: "." for the root.
	Dir string
	// Kind says how its git directory was found.
	Kind Kind
	// GitDirs are its git directories, absolute and clean: the .git
	// directory; for a .git file the directory it names and, when that
	// has a commondir file, the common directory too. A .git file whose
	// pointer cannot be read has none.
	GitDirs []string
}

// The limits a scan can reach (Result.Truncated).
const (
	LimitTime  = "time"
	LimitDirs  = "directories"
	LimitRepos = "repositories"
)

// Result is what a scan found.
type Result struct {
	// Repos are the repositories, sorted by Dir.
	Repos []Repo
	// Dirs counts the directories read (with a Cache, looked at).
	Dirs int
	// Listed counts those of Dirs whose entries were read (getdents);
	// with a Cache, the others were found unchanged, by their watch or
	// by one stat each.
	Listed int
	// Truncated names the limit that cut the scan short (LimitTime,
	// LimitDirs or LimitRepos), or "" when it read the whole tree.
	Truncated string
	// Unreadable counts the directories that could not be opened or read
	// (but for those that vanished meanwhile): what lies beneath them was
	// not looked at.
	Unreadable int
	// Duration is how long the scan took.
	Duration time.Duration
}

// GitDirs returns every git directory of the result, sorted, without
// duplicates.
func (r Result) GitDirs() []string {
	var out []string
	for _, rp := range r.Repos {
		out = append(out, rp.GitDirs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxPointer is the most of a .git or commondir file read.
const maxPointer = 4096

// parseGitdir returns the path a .git file names ("gitdir: PATH"),
// resolved against dir, the absolute directory holding the file.
func parseGitdir(b []byte, dir string) (string, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	p, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return "", false
	}
	return resolve(strings.TrimSpace(p), dir)
}

// parseCommondir returns the path a commondir file names, resolved against
// gitDir.
func parseCommondir(b []byte, gitDir string) (string, bool) {
	line, _, _ := strings.Cut(string(b), "\n")
	return resolve(strings.TrimSpace(strings.TrimSuffix(line, "\r")), gitDir)
}

// resolve makes p absolute against dir and cleans it.
func resolve(p, dir string) (string, bool) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), true
}

// join is a path relative to the root, for reports: "." is the root.
func join(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}
