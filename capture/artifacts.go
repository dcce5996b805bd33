package capture

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sourcegraph/conc"
)

// DefaultArtifactsCap is the cap on a session's total artifact bytes when
// NewArtifacts is given 0.
const DefaultArtifactsCap int64 = 1 << 30

// evictCheckEvery is how many bytes a Capture writes to its files between two
// checks of the artifacts cap while its command runs.
const evictCheckEvery = 8 << 20

var (
	// ErrBadCommandID is returned for a command ID that cannot name a
	// directory inside the artifacts directory.
	ErrBadCommandID = errors.New("invalid command id")
	// ErrArtifactsClosed is returned by NewCapture after RemoveAll.
	ErrArtifactsClosed = errors.New("artifacts directory removed")
	// ErrClosed is returned by a Capture's writers after Close.
	ErrClosed = errors.New("capture closed")
)

// Artifacts manages the session's artifacts directory: one subdirectory per
// command holding stdout.log, stderr.log and output.log. It keeps the total
// size under a cap by evicting the directories of finished commands, oldest
// finished first; a running command's files are never evicted. It is safe for
// concurrent use.
type Artifacts struct {
	dir      string // absolute, symlinks resolved; immutable
	capBytes int64  // immutable
	logger   *slog.Logger

	// total is the sum of fileBytes over the Captures in entries: a Capture
	// adds what it writes (addFileBytes), an eviction subtracts what it
	// removes, RemoveAll zeroes it. Updated without mu, so reading it is
	// O(1) however many commands the session ran.
	total atomic.Int64

	// mu guards the fields below. It is a leaf lock: nothing else is locked
	// while it is held (a Capture's file byte count is read atomically), so
	// a Capture may call in while holding its own locks.
	mu        sync.Mutex
	entries   map[string]*artifactEntry // by command ID; evicted ones removed
	finishSeq uint64                    // last finishing order handed out
	removed   bool                      // RemoveAll was called
	// closed is set by Close (and RemoveAll): no spare is made after it.
	closed bool
	// What is prepared ahead of need under dir/.spares (see spareDirName).
	// staged says dir/.spares exists (made by the first NewCapture);
	// noSpares says it could not be made, so spares are off for good.
	// empty is the path of the session's empty file, "" until it is made
	// (or after it ran out of links); dirs are spare command directories,
	// at most spareDirCount, taken by NewCapture; files are spare files, at
	// most spareFileCount, taken by Captures (takeFile). refilling says
	// the refill goroutine runs; spareSeq names what it makes.
	staged    bool
	noSpares  bool
	empty     string
	dirs      []string
	files     []spareFile
	refilling bool
	spareSeq  uint64

	// prep owns the refill goroutine; Close and RemoveAll wait for it.
	// Go is only called with mu held and closed unset, so no goroutine
	// joins prep once Close's Wait has begun.
	prep conc.WaitGroup
}

// Prepared ahead of need. Creating a directory or a file costs much kernel
// time on some file systems (ext4 without a journal scans past every inode
// freed in the last minutes for each new one), more than forking and
// waiting for a short command. So the refill goroutine
// keeps, under dir/.spares/ (0700), each made in dir/.spares/new/ first:
//
//   - new/empty-<n>: the session's empty file (0600), never written. Every name
//     of a command's directory starts as a hard link to it, and a name gets
//     an inode of its own only with its first byte, so a command that
//     prints nothing costs one directory and three links.
//   - d<n>: spare command directories (0700) holding the three names, which
//     NewCapture renames to dir/<commandID>: a single metadata operation,
//     refusing to replace an existing name.
//   - f<n>: spare files (0600, created O_EXCL|O_NOFOLLOW, kept open), which
//     a Capture renames over a name of its directory for that name's first
//     byte.
//
// Hidden names are the package's own: command IDs starting with "." are
// refused.
const (
	spareDirName   = ".spares"
	spareDirCount  = 2
	spareFileCount = 2
	// spareNewName is the directory under .spares where the refill makes
	// the empty file, and each spare before renaming it into .spares:
	// creating an inode holds its parent directory's lock for as long as
	// the allocation takes, and a command's start renames out of .spares.
	spareNewName = "new"
)

// spareFile is a prepared empty file, open for reading and writing.
type spareFile struct {
	path string
	f    *os.File
}

// artifactFileNames are the names in a command's directory.
var artifactFileNames = [3]string{StdoutFile, StderrFile, OutputFile}

// artifactEntry is one command's directory. Its fields are guarded by
// Artifacts.mu.
type artifactEntry struct {
	id      string
	dir     string
	capture *Capture
	// finished is set by Finished; finishSeq orders evictions.
	finished  bool
	finishSeq uint64
}

// NewArtifacts manages the existing directory dir (which the caller created,
// mode 0700). capBytes caps the total bytes of artifact files (0 means
// DefaultArtifactsCap); logger receives eviction warnings (nil discards them).
func NewArtifacts(dir string, capBytes int64, logger *slog.Logger) (*Artifacts, error) {
	if capBytes < 0 {
		return nil, fmt.Errorf("artifacts cap %d: must not be negative", capBytes)
	}
	if capBytes == 0 {
		capBytes = DefaultArtifactsCap
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("artifacts dir: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("artifacts dir: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("artifacts dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("artifacts dir %s: not a directory", real)
	}
	return &Artifacts{
		dir:      real,
		capBytes: capBytes,
		logger:   logger,
		entries:  make(map[string]*artifactEntry),
	}, nil
}

// Dir returns the artifacts directory as an absolute path with symlinks
// resolved.
func (a *Artifacts) Dir() string { return a.dir }

// validateCommandID refuses IDs that could name anything but a new direct
// child of the artifacts directory, and hidden names, which are the
// package's own (the spares' staging directory).
func validateCommandID(id string) error {
	switch {
	case id == "", strings.HasPrefix(id, "."), len(id) > 200,
		strings.ContainsAny(id, "/\\\x00"), strings.Contains(id, ".."):
		return fmt.Errorf("%w: %q", ErrBadCommandID, id)
	}
	return nil
}

// NewCapture creates dir/<commandID>/ (mode 0700) with stdout.log,
// stderr.log and output.log (mode 0600, never through a symlink), and
// returns the Capture that writes them. The command counts as running until
// Finished is called for it. A commandID containing "/" or "..", starting
// with ".", or already used in this session, is refused.
//
// The directory is a spare prepared ahead of need when there is one
// (renamed into place); taking it starts making the next one in the
// background.
func (a *Artifacts) NewCapture(commandID string, o Options) (*Capture, error) {
	if err := validateCommandID(commandID); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.removed || a.closed {
		return nil, ErrArtifactsClosed
	}
	if _, ok := a.entries[commandID]; ok {
		return nil, fmt.Errorf("%w: %q already used", ErrBadCommandID, commandID)
	}
	dir := filepath.Join(a.dir, commandID)
	var c *Capture
	if n := len(a.dirs); n > 0 {
		sp := a.dirs[n-1]
		a.dirs = a.dirs[:n-1]
		if err := renameNoReplace(sp, dir); err != nil {
			_ = os.RemoveAll(sp)
			a.refillLocked()
			return nil, fmt.Errorf("artifacts for %s: %w", commandID, err)
		}
		c = newCapture(a, commandID, dir, o, nil, nil)
	} else {
		stdout, stderr, err := a.makeDirLocked(dir)
		if err != nil {
			a.refillLocked()
			return nil, fmt.Errorf("artifacts for %s: %w", commandID, err)
		}
		c = newCapture(a, commandID, dir, o, stdout, stderr)
	}
	a.refillLocked()
	a.entries[commandID] = &artifactEntry{id: commandID, dir: dir, capture: c}
	a.evictLocked("")
	return c, nil
}

// makeDirLocked creates a command's directory at dir with its three names:
// links to the empty file when there is one, else stdout.log and stderr.log
// (returned open) with output.log a link to stdout.log. a.mu is held.
func (a *Artifacts) makeDirLocked(dir string) (stdout, stderr *os.File, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if a.empty != "" {
		err := linkNames(a.empty, dir)
		if err == nil {
			return nil, nil, nil
		}
		if errors.Is(err, syscall.EMLINK) {
			a.dropEmptyLocked()
		}
	}
	stdout, err = openArtifactFile(filepath.Join(dir, StdoutFile))
	if err == nil {
		err = os.Link(stdout.Name(), filepath.Join(dir, OutputFile))
	}
	if err == nil {
		stderr, err = openArtifactFile(filepath.Join(dir, StderrFile))
	}
	if err != nil {
		if stdout != nil {
			_ = stdout.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// linkNames makes the three names in dir hard links to empty. On failure it
// removes those it made.
func linkNames(empty, dir string) error {
	for i, name := range artifactFileNames {
		if err := os.Link(empty, filepath.Join(dir, name)); err != nil {
			for _, made := range artifactFileNames[:i] {
				_ = os.Remove(filepath.Join(dir, made))
			}
			return err
		}
	}
	return nil
}

// dropEmptyLocked forgets the empty file, which has as many links as the
// file system allows; the refill goroutine makes another. The links made
// keep it. a.mu is held.
func (a *Artifacts) dropEmptyLocked() {
	if a.empty == "" {
		return
	}
	_ = os.Remove(a.empty)
	a.empty = ""
}

// takeFile hands a spare file over to a Capture, which renames it over one
// of its names; ok is false when there is none ready.
func (a *Artifacts) takeFile() (f *os.File, path string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.files)
	if n > 0 {
		sp := a.files[n-1]
		a.files[n-1] = spareFile{}
		a.files = a.files[:n-1]
		f, path, ok = sp.f, sp.path, true
	}
	a.refillLocked()
	return f, path, ok
}

// Kinds of things the refill goroutine makes.
const (
	makeNothing = iota
	makeEmpty
	makeDir
	makeFile
)

// nextSpareLocked says what the refill goroutine should make next. a.mu is
// held.
func (a *Artifacts) nextSpareLocked() int {
	switch {
	case a.closed || a.removed || a.noSpares:
		return makeNothing
	case a.empty == "":
		return makeEmpty
	case len(a.dirs) < spareDirCount:
		return makeDir
	case len(a.files) < spareFileCount:
		return makeFile
	}
	return makeNothing
}

// refillLocked starts the refill goroutine unless it runs or is not
// wanted. The first call makes the staging directory; if that fails, no
// spares are made and every capture creates its own directory and files.
// a.mu is held.
func (a *Artifacts) refillLocked() {
	if a.refilling || a.nextSpareLocked() == makeNothing {
		return
	}
	if !a.staged {
		// Made once: an existing name (a leftover of a server that died
		// without Close) is not trusted, and spares stay off.
		staging := filepath.Join(a.dir, spareDirName)
		err := os.Mkdir(staging, 0o700)
		if err == nil {
			if err = os.Mkdir(filepath.Join(staging, spareNewName), 0o700); err != nil {
				_ = os.Remove(staging)
			}
		}
		if err != nil {
			a.logger.Debug("no spare artifact directories: every command creates its own", "err", err)
			a.noSpares = true
			return
		}
		a.staged = true
	}
	a.refilling = true
	a.prep.Go(a.refill)
}

// refill makes the empty file, spare directories and spare files until
// there are enough or Close is called. Its owner is a.prep.
func (a *Artifacts) refill() {
	for {
		a.mu.Lock()
		what := a.nextSpareLocked()
		if what == makeNothing {
			a.refilling = false
			a.mu.Unlock()
			return
		}
		a.spareSeq++
		name := strconv.FormatUint(a.spareSeq, 10)
		switch what {
		case makeEmpty:
			name = "empty-" + name
		case makeDir:
			name = "d" + name
		case makeFile:
			name = "f" + name
		}
		path := filepath.Join(a.dir, spareDirName, spareNewName, name)
		ready := filepath.Join(a.dir, spareDirName, name)
		empty := a.empty
		a.mu.Unlock()

		var (
			f   *os.File
			err error
		)
		switch what {
		case makeEmpty:
			err = createEmpty(path)
		case makeDir:
			err = makeSpareDir(path, empty)
		case makeFile:
			f, err = openArtifactFile(path)
		}
		if err == nil && what != makeEmpty {
			if err = os.Rename(path, ready); err == nil {
				path = ready
			} else {
				if f != nil {
					_ = f.Close()
				}
				_ = os.RemoveAll(path)
			}
		}

		a.mu.Lock()
		switch {
		case err != nil && what == makeDir && errors.Is(err, syscall.EMLINK):
			if a.empty == empty {
				a.dropEmptyLocked()
			}
			a.mu.Unlock()
			continue
		case err != nil:
			// Tried again when a capture next takes a spare.
			a.refilling = false
			a.mu.Unlock()
			a.logger.Debug("cannot prepare a spare artifact file or directory", "path", path, "err", err)
			return
		case a.closed || a.removed:
			a.refilling = false
			a.mu.Unlock()
			if f != nil {
				_ = f.Close()
			}
			_ = os.RemoveAll(path)
			return
		}
		switch what {
		case makeEmpty:
			a.empty = path
		case makeDir:
			a.dirs = append(a.dirs, path)
		case makeFile:
			a.files = append(a.files, spareFile{path: path, f: f})
		}
		a.mu.Unlock()
	}
}

// createEmpty creates the empty file at path: exclusively, 0600, never
// through a symlink.
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// makeSpareDir creates dir (0700) holding the three names, links to empty.
func makeSpareDir(dir, empty string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := linkNames(empty, dir); err != nil {
		_ = os.Remove(dir)
		return err
	}
	return nil
}

// openArtifactFile creates one artifact file, open for reading (the hash
// reads output.log back) and writing: exclusively, 0600, refusing to follow
// a symlink.
func openArtifactFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
}

// Finished marks the command's files as evictable (its command has ended)
// and, if the total exceeds the cap, evicts the oldest finished commands'
// directories, logging each eviction. A directory whose Capture is still open
// is evicted only once it is closed. Unknown IDs are ignored.
func (a *Artifacts) Finished(commandID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[commandID]
	if !ok || e.finished {
		return
	}
	a.finishSeq++
	e.finished, e.finishSeq = true, a.finishSeq
	// The command finishing now is spared: the result about to reach the
	// client names its files, even when they alone are over the cap. The
	// next capture or finish evicts it first if the cap still demands it.
	a.evictLocked(commandID)
}

// totalBytes returns the bytes currently held in artifact files.
func (a *Artifacts) totalBytes() int64 {
	return a.total.Load()
}

// checkCap evicts if the cap is exceeded; Captures call it as they grow.
func (a *Artifacts) checkCap() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evictLocked("")
}

// captureClosed is called by Capture.Close: a finished command's files may
// now be evicted.
func (a *Artifacts) captureClosed(commandID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.entries[commandID]; ok && e.finished {
		a.evictLocked("")
	}
}

// evictLocked removes finished, closed commands' directories, oldest finished
// first, until the total is within the cap, sparing the command keep ("" for
// none). a.mu must be held.
func (a *Artifacts) evictLocked(keep string) {
	if a.removed {
		return
	}
	total := a.total.Load()
	if total <= a.capBytes {
		return
	}
	var candidates []*artifactEntry
	for _, e := range a.entries {
		if e.finished && e.capture.closed.Load() && e.id != keep {
			candidates = append(candidates, e)
		}
	}
	slices.SortFunc(candidates, func(x, y *artifactEntry) int {
		return cmp.Compare(x.finishSeq, y.finishSeq)
	})
	for _, e := range candidates {
		if total <= a.capBytes {
			return
		}
		n := e.capture.fileBytes.Load()
		if err := os.RemoveAll(e.dir); err != nil {
			a.logger.Warn("cannot evict command artifacts", "commandId", e.id, "dir", e.dir, "err", err)
			continue
		}
		delete(a.entries, e.id)
		total = a.total.Add(-n)
		a.logger.Warn("evicted command artifacts: total over cap",
			"commandId", e.id, "dir", e.dir, "bytes", n, "totalBytes", total, "capBytes", a.capBytes)
	}
}

// Close stops making spares, waits for the goroutine that makes them and
// removes the spares, leaving only the commands' directories (their links
// keep the empty file); later NewCapture calls fail with
// ErrArtifactsClosed. It is idempotent, and RemoveAll calls it.
func (a *Artifacts) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.prep.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.dirs {
		_ = os.RemoveAll(d)
	}
	for _, sp := range a.files {
		_ = sp.f.Close()
		_ = os.Remove(sp.path)
	}
	a.dirs, a.files = nil, nil
	a.dropEmptyLocked()
	if a.staged {
		_ = os.Remove(filepath.Join(a.dir, spareDirName, spareNewName))
		_ = os.Remove(filepath.Join(a.dir, spareDirName))
		a.staged = false
	}
}

// RemoveAll deletes the artifacts directory and everything in it, at session
// end. Call it after every Capture is closed; later NewCapture calls fail with
// ErrArtifactsClosed.
func (a *Artifacts) RemoveAll() error {
	a.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.removed = true
	clear(a.entries)
	a.total.Store(0)
	if err := os.RemoveAll(a.dir); err != nil {
		return fmt.Errorf("remove artifacts: %w", err)
	}
	return nil
}
