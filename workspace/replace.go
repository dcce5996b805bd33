package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// Replacer rewrites one file, whole and atomically, as often as it is
// asked: a command's progress file. Each Replace writes a temporary file
// (O_EXCL, mode 0600) in the file's directory and renames it over the
// file, through an os.Root held on that directory, so a reader sees one
// whole version or the next, never a part, and no write ever goes through
// a symlink: rename(2) replaces the directory entry, whatever it is.
type Replacer struct {
	path string // the file's absolute path
	base string

	mu  sync.Mutex // guards dir
	dir *os.Root   // nil once closed
}

// OpenReplacer prepares a Replacer for path under the workspace root
// (relative to it, absolute, or a file:// URI), creating missing parent
// directories (mode 0755). A path inside a read root or the artifacts
// directory is ErrReadOnly; one that resolves outside the roots,
// through ".." or a symlink, is ErrOutside; a file that is itself a
// symlink (inside the roots) is ErrInvalid, since it is never written
// through one.
func (w *Workspace) OpenReplacer(p string) (*Replacer, error) {
	const op = "progress file"
	name, perr := checkSpelling(op, p)
	if perr != nil {
		return nil, perr
	}
	dirName, base := path.Split(name)
	if base == "" || base == "." || base == ".." {
		return nil, newErr(op, p, ErrNotRegular, "%q names a directory", p)
	}
	if dirName == "" {
		dirName = "."
	}
	loc, err := w.resolve(op, dirName, resolveCreate, accessWrite)
	if pe := (*PathError)(nil); errors.As(err, &pe) && errors.Is(err, ErrPolicy) {
		pe.Path = p // the file asked for, not its directory
	}
	if err != nil {
		return nil, err
	}
	// The file itself, by name: a protected file in a writable directory.
	pol := w.pol.Load()
	if r := pol.byName(append(splitComps(loc.abs()), base), accessWrite); r != nil {
		return nil, refuse(op, p, joinAbs(loc.r.realComps, loc.comps, []string{base}), r)
	}
	file := location{r: loc.r, comps: append(slices.Clone(loc.comps), base), missing: loc.missing + 1}
	if r := pol.inGitDir(file); r != nil {
		return nil, refuse(op, p, file.abs(), r)
	}
	switch loc.r.kind {
	case kindArtifacts:
		return nil, newErr(op, p, ErrReadOnly, "%s is inside the artifacts directory %s, which is read-only", loc.abs(), loc.r.real)
	case kindRead:
		return nil, newErr(op, p, ErrReadOnly, "%s is inside the read-only root %s", loc.abs(), loc.r.real)
	}
	if loc.missing > 0 {
		if err := loc.r.h.MkdirAll(loc.rel(), 0o755); err != nil {
			return nil, osErr(op, p, err)
		}
	}
	dir, err := loc.r.h.OpenRoot(loc.rel())
	if err != nil {
		return nil, osErr(op, p, err)
	}
	fi, err := dir.Lstat(base)
	if err == nil {
		// And by id: another name of a protected file.
		if r := w.pol.Load().byID(fi, accessWrite); r != nil {
			dir.Close()
			return nil, refuse(op, p, joinAbs(loc.r.realComps, loc.comps, []string{base}), r)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		dir.Close()
		return nil, osErr(op, p, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		dir.Close()
		// One that leads out is refused as an escape, as everywhere.
		if _, rerr := w.resolve(op, name, resolveCreate, accessWrite); rerr != nil {
			return nil, rerr
		}
		return nil, newErr(op, p, ErrInvalid, "%s is a symlink: a progress file is never written through one; give the file's own path", joinAbs(loc.r.realComps, loc.comps, []string{base}))
	case !fi.Mode().IsRegular():
		dir.Close()
		return nil, newErr(op, p, ErrNotRegular, "%s is %s", joinAbs(loc.r.realComps, loc.comps, []string{base}), describeMode(fi.Mode()))
	}
	return &Replacer{path: joinAbs(loc.r.realComps, loc.comps, []string{base}), base: base, dir: dir}, nil
}

// NewReplacer prepares a Replacer for the file base in the directory dir,
// which must exist: for a file the server itself keeps (beside the
// artifacts), outside any root.
func NewReplacer(dir, base string) (*Replacer, error) {
	if base == "" || strings.ContainsRune(base, '/') || base == "." || base == ".." {
		return nil, fmt.Errorf("replacer: bad file name %q", base)
	}
	h, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Replacer{path: path.Join(dir, base), base: base, dir: h}, nil
}

// Path returns the file's absolute path.
func (r *Replacer) Path() string { return r.path }

// Replace makes data the file's whole content, atomically.
func (r *Replacer) Replace(data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == nil {
		return fmt.Errorf("replace %s: %w", r.path, os.ErrClosed)
	}
	tmp, err := writeTemp(r.dir, data, 0o600)
	if err != nil {
		return fmt.Errorf("replace %s: %w", r.path, bareErr(err))
	}
	if err := r.dir.Rename(tmp, r.base); err != nil {
		r.dir.Remove(tmp)
		return fmt.Errorf("replace %s: %w", r.path, bareErr(err))
	}
	return nil
}

// Close releases the directory; later Replaces fail.
func (r *Replacer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == nil {
		return nil
	}
	err := r.dir.Close()
	r.dir = nil
	return err
}
