package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tempDirPrefix starts the name of every private artifacts directory that
// MkdirTemp makes.
const tempDirPrefix = "toolhost-" + KindArtifacts + "-"

// The kinds of private directories a server makes in the temporary
// directory, each named after its owner (see ownerForm) and swept by
// SweepTempDirs once that owner is dead.
const (
	// KindArtifacts holds the artifacts of a session (MkdirTemp).
	KindArtifacts = "artifacts"
	// KindSession holds a session's cache and its confined commands'
	// temporary directories (package tools).
	KindSession = "session"
	// KindTmp holds the temporary directories of a session's unconfined
	// commands (package process).
	KindTmp = "tmp"
)

// kinds are the kinds SweepTempDirs knows.
var kinds = []string{KindArtifacts, KindSession, KindTmp}

// The name of a private artifacts directory records its owner:
//
//	toolhost-artifacts-v1-<pid>-<start>-<random>
//
// v1 is the version of the form; pid is the server that made it; start is
// when that process started, in clock ticks after boot (Linux:
// /proc/<pid>/stat, field 22; 0 where it is not known), so that a process
// given the same pid later is not taken for the owner; random is
// os.MkdirTemp's. The name is given by the mkdir itself, so no directory
// is ever seen without its record, and nothing is added inside the
// directory, which holds only what Artifacts makes. A name of another
// form (a directory made with --keep-artifacts, or by an older server) or
// of another version is never swept.
const ownerForm = "v1"

// keepFile, in a private artifacts directory, keeps it from every sweep
// whatever its name says (see KeepDir).
const keepFile = ".toolhost-keep"

// owner is who made a private artifacts directory, read from its name.
type owner struct {
	PID   int
	Start uint64
}

// parseOwner reads the owner in the name of a private artifacts directory,
// and says whether the name has the owner form of ownerForm.
func parseOwner(name string) (owner, bool) {
	var rest string
	ok := false
	for _, k := range kinds {
		if rest, ok = strings.CutPrefix(name, "toolhost-"+k+"-"); ok {
			break
		}
	}
	if !ok {
		return owner{}, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 || f[0] != ownerForm || f[3] == "" {
		return owner{}, false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 || strconv.Itoa(pid) != f[1] {
		return owner{}, false
	}
	start, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil || strconv.FormatUint(start, 10) != f[2] {
		return owner{}, false
	}
	return owner{PID: pid, Start: start}, true
}

// MkdirTemp makes a private artifacts directory (mode 0700) in parent (""
// means os.TempDir()), named after this process (see ownerForm). A server
// that dies without removing it (a SIGKILLed one runs no code) leaves it
// behind, and SweepTempDirs, run by the next server, removes it. With keep
// (--keep-artifacts) the directory is to outlive its session: its name
// records no owner, and no sweep ever removes it.
func MkdirTemp(parent string, keep bool) (string, error) {
	if keep {
		return os.MkdirTemp(parent, tempDirPrefix)
	}
	return MkdirOwned(parent, KindArtifacts)
}

// MkdirOwned makes a private directory of kind (mode 0700) in parent (""
// means os.TempDir()), named after this process (see ownerForm), which
// SweepTempDirs removes once this process is dead.
func MkdirOwned(parent, kind string) (string, error) {
	pid := os.Getpid()
	start, _ := processStart(pid) // 0: the pid alone decides
	return os.MkdirTemp(parent, fmt.Sprintf("toolhost-%s-%s-%d-%d-", kind, ownerForm, pid, start))
}

// SweepTempDirs removes from parent ("" means os.TempDir()) the private
// directories (artifacts, session, tmp) of servers that died without removing them, and
// returns the ones it removed. A directory is removed only when all of
// these hold: its name records an owner (see ownerForm); it is a
// directory, not a symlink, owned by this process's user; it holds no
// keepFile; and the owner is dead: its pid is gone, or was given to a
// process that started at another time. So a directory of a live server,
// one made with --keep-artifacts, one named by the user (--artifacts-dir;
// see KeepDir), and one made by someone else are never removed. It logs
// each removal to logger (nil discards), and once it is done, how many it
// removed.
func SweepTempDirs(parent string, logger *slog.Logger) []string {
	if parent == "" {
		parent = os.TempDir()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		logger.Warn("cannot sweep the directories of dead servers", "dir", parent, "err", err)
		return nil
	}
	var removed []string
	for _, e := range ents {
		o, ok := parseOwner(e.Name())
		if !ok || !e.IsDir() { // e.IsDir is false for a symlink
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || !ownedByMe(fi) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, keepFile)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if ownerAlive(o.PID, o.Start) {
			continue
		}
		// RemoveAll follows no symlink. One cut short (this server
		// killed) leaves the name, and the next sweep goes on.
		if err := os.RemoveAll(dir); err != nil {
			logger.Warn("cannot remove the directory of a dead server", "dir", dir, "pid", o.PID, "err", err)
			continue
		}
		logger.Info("removed the directory of a dead server", "dir", dir, "pid", o.PID)
		removed = append(removed, dir)
	}
	logger.Debug("swept the directories of dead servers", "dir", parent, "removed", len(removed))
	return removed
}

// KeepDir keeps dir, an artifacts directory the user named, from every
// sweep: if dir is, or is inside, a private artifacts directory of parent
// ("" means os.TempDir()) whose name records an owner (one a server made,
// named again by the user), a keepFile is made in that directory. Any
// other directory is never swept anyway, and is left as it is.
func KeepDir(parent, dir string) error {
	if parent == "" {
		parent = os.TempDir()
	}
	top, ok := topIn(parent, dir)
	if !ok {
		return nil
	}
	if _, ok := parseOwner(filepath.Base(top)); !ok {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(top, keepFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keeping %s: %w", top, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keeping %s: %w", top, err)
	}
	return nil
}

// topIn returns the entry of parent that dir is or is inside, comparing
// real paths where they resolve, and whether there is one.
func topIn(parent, dir string) (string, bool) {
	real := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return p
	}
	parent, dir = real(parent), real(dir)
	rel, err := filepath.Rel(parent, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return filepath.Join(parent, first), true
}
