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
	// spares are prepared command directories (see spareSet), at most
	// spareCount, taken by NewCapture; staged says dir/.spares exists
	// (made by the first NewCapture); refilling says the refill goroutine
	// runs; spareSeq names the spares; noSpares says the staging
	// directory could not be made, so spares are off for good.
	spares    []*spareSet
	staged    bool
	refilling bool
	noSpares  bool
	spareSeq  uint64

	// prep owns the refill goroutine; Close and RemoveAll wait for it.
	// Go is only called with mu held and closed unset, so no goroutine
	// joins prep once Close's Wait has begun.
	prep conc.WaitGroup
}

// Spare command directories. Creating a directory and three files costs
// about a millisecond on some file systems, more than forking and waiting
// for a short command, so the next commands' sets are made ahead of need
// under dir/.spares/<n>/ (0700, files 0600 created O_EXCL|O_NOFOLLOW, kept
// open), and NewCapture renames one to dir/<commandID>: a single metadata
// operation, refusing to replace an existing name. Hidden names are the
// package's own: command IDs starting with "." are refused.
const (
	spareDirName = ".spares"
	spareCount   = 2
)

// spareSet is a prepared command directory with its open files.
type spareSet struct {
	dir   string
	files [3]*os.File // stdout.log, stderr.log, output.log
}

// artifactFileNames are the files of a command directory, in spareSet.files
// order.
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

// NewCapture creates dir/<commandID>/ (mode 0700) with stdout.log, stderr.log
// and output.log (mode 0600, created exclusively, never through a symlink),
// and returns the Capture that writes them. The command counts as running
// until Finished is called for it. A commandID containing "/" or "..",
// starting with ".", or already used in this session, is refused.
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
	var (
		c   *Capture
		err error
	)
	if n := len(a.spares); n > 0 {
		sp := a.spares[n-1]
		a.spares[n-1] = nil
		a.spares = a.spares[:n-1]
		if err = renameNoReplace(sp.dir, dir); err != nil {
			sp.discard()
			a.refillLocked()
			return nil, fmt.Errorf("artifacts for %s: %w", commandID, err)
		}
		c = captureOn(a, commandID, dir, o, sp.files)
	} else {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("artifacts for %s: %w", commandID, err)
		}
		if c, err = newCapture(a, commandID, dir, o); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("artifacts for %s: %w", commandID, err)
		}
	}
	a.refillLocked()
	a.entries[commandID] = &artifactEntry{id: commandID, dir: dir, capture: c}
	a.evictLocked("")
	return c, nil
}

// refillLocked starts the refill goroutine unless it runs or is not
// wanted. The first call makes the staging directory; if that fails, no
// spares are made and every capture creates its own directory. a.mu is
// held.
func (a *Artifacts) refillLocked() {
	if a.closed || a.removed || a.noSpares || a.refilling || len(a.spares) >= spareCount {
		return
	}
	if !a.staged {
		// Made once: an existing name (a leftover of a server that died
		// without Close) is not trusted, and spares stay off.
		if err := os.Mkdir(filepath.Join(a.dir, spareDirName), 0o700); err != nil {
			a.logger.Debug("no spare artifact directories: every command creates its own", "err", err)
			a.noSpares = true
			return
		}
		a.staged = true
	}
	a.refilling = true
	a.prep.Go(a.refill)
}

// refill makes spares until there are spareCount or Close is called. Its
// owner is a.prep.
func (a *Artifacts) refill() {
	for {
		a.mu.Lock()
		if a.closed || a.removed || len(a.spares) >= spareCount {
			a.refilling = false
			a.mu.Unlock()
			return
		}
		a.spareSeq++
		dir := filepath.Join(a.dir, spareDirName, strconv.FormatUint(a.spareSeq, 10))
		a.mu.Unlock()

		sp, err := makeSpare(dir)

		a.mu.Lock()
		switch {
		case err != nil:
			// Tried again when the next capture takes the slow path.
			a.refilling = false
			a.mu.Unlock()
			a.logger.Debug("cannot prepare a spare artifact directory", "dir", dir, "err", err)
			return
		case a.closed || a.removed:
			a.refilling = false
			a.mu.Unlock()
			sp.discard()
			return
		}
		a.spares = append(a.spares, sp)
		a.mu.Unlock()
	}
}

// makeSpare creates dir (0700) and the three artifact files in it.
func makeSpare(dir string) (*spareSet, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	sp := &spareSet{dir: dir}
	for i, name := range artifactFileNames {
		f, err := openArtifactFile(filepath.Join(dir, name))
		if err != nil {
			sp.discard()
			return nil, err
		}
		sp.files[i] = f
	}
	return sp, nil
}

// discard closes the spare's files and removes its directory.
func (sp *spareSet) discard() {
	for _, f := range sp.files {
		if f != nil {
			_ = f.Close()
		}
	}
	_ = os.RemoveAll(sp.dir)
}

// openArtifactFile creates one artifact file: exclusively, 0600, refusing to
// follow a symlink.
func openArtifactFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
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
// removes the spares, leaving only the commands' directories; later
// NewCapture calls fail with ErrArtifactsClosed. It is idempotent, and
// RemoveAll calls it.
func (a *Artifacts) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.prep.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, sp := range a.spares {
		sp.discard()
	}
	a.spares = nil
	if a.staged {
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
