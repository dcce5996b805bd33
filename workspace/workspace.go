package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Config names the directories a Workspace confines access to.
type Config struct {
	Root         string   // the read-write workspace root (path or file:// URI)
	ReadRoots    []string // extra read-only roots
	ArtifactsDir string   // read-only directory of command output; "" for none
}

// rootKind says what a root may be used for.
type rootKind int

const (
	kindWorkspace rootKind = iota
	kindRead
	kindArtifacts
)

// root is one confined directory.
//
// Invariant: real is absolute, clean and free of symlinks (EvalSymlinks at
// Open), so its lexical parent is its real parent; h was opened on real.
type root struct {
	kind       rootKind
	real       string
	realComps  []string
	given      string // absolute spelling as configured, "" when equal to real
	givenComps []string
	h          *os.Root
}

// Workspace confines reads to its roots and writes to its workspace root.
// Its methods are safe for concurrent use.
type Workspace struct {
	ws        *root
	reads     []*root
	artifacts *root   // nil when there is no artifacts dir
	all       []*root // ws, reads, artifacts

	// writeMu serialises writes so that the expectedSha256 check and the
	// rename of one write are not interleaved with another write of ours.
	writeMu sync.Mutex

	// pol is the policy every resolve asks (SetPolicy); nil for none.
	pol atomic.Pointer[policy]
}

// Open resolves each configured directory to its real path once, checks that
// it is a directory and opens one os.Root for it. A missing root yields an
// error wrapping ErrNotFound, a root that is not a directory one wrapping
// ErrNotRegular. Read roots equal to the workspace root or to each other are
// dropped; an artifacts dir equal to the workspace root is refused.
func Open(cfg Config) (*Workspace, error) {
	w := &Workspace{}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	var err error
	if w.ws, err = openRoot(cfg.Root, kindWorkspace); err != nil {
		return nil, err
	}
	w.all = append(w.all, w.ws)
	for _, rr := range cfg.ReadRoots {
		r, err := openRoot(rr, kindRead)
		if err != nil {
			return nil, err
		}
		if w.findReal(r.real) != nil {
			r.h.Close()
			continue
		}
		w.reads = append(w.reads, r)
		w.all = append(w.all, r)
	}
	if cfg.ArtifactsDir != "" {
		if w.artifacts, err = openRoot(cfg.ArtifactsDir, kindArtifacts); err != nil {
			return nil, err
		}
		w.all = append(w.all, w.artifacts)
		if w.artifacts.real == w.ws.real {
			return nil, newErr("open", cfg.ArtifactsDir, ErrInvalid, "the artifacts dir must not be the workspace root")
		}
	}
	ok = true
	return w, nil
}

// findReal returns the root whose real path is p, or nil.
func (w *Workspace) findReal(p string) *root {
	for _, r := range w.all {
		if r.real == p {
			return r
		}
	}
	return nil
}

// openRoot resolves and opens one configured directory.
func openRoot(given string, kind rootKind) (*root, error) {
	name, perr := checkSpelling("open", given)
	if perr != nil {
		return nil, perr
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, newErr("open", given, ErrInvalid, "cannot make the path absolute: %v", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, newErr("open", given, ErrNotFound, "the directory does not exist")
		}
		return nil, osErr("open", given, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, osErr("open", given, err)
	}
	if !st.IsDir() {
		return nil, newErr("open", given, ErrNotRegular, "%s is not a directory", real)
	}
	h, err := os.OpenRoot(real)
	if err != nil {
		return nil, osErr("open", given, err)
	}
	r := &root{kind: kind, real: real, realComps: splitComps(real), h: h}
	if abs != real {
		r.given, r.givenComps = abs, splitComps(abs)
	}
	return r, nil
}

// Close closes every root handle. Methods called after Close fail.
func (w *Workspace) Close() error {
	var errs []error
	for _, r := range w.all {
		errs = append(errs, r.h.Close())
	}
	return errors.Join(errs...)
}

// Root returns the resolved real path of the workspace root.
func (w *Workspace) Root() string { return w.ws.real }

// ReadRoots returns the resolved real paths of the read roots, in the
// configured order, without the artifacts dir.
func (w *Workspace) ReadRoots() []string {
	out := make([]string, 0, len(w.reads))
	for _, r := range w.reads {
		out = append(out, r.real)
	}
	return out
}

// ArtifactsDir returns the resolved real path of the artifacts dir, or "".
func (w *Workspace) ArtifactsDir() string {
	if w.artifacts == nil {
		return ""
	}
	return w.artifacts.real
}

// Dir resolves p for use as a command's working directory: p is relative to
// the workspace root or absolute inside any root (read roots and the artifacts
// dir included); "" means the workspace root. The directory must exist; it is
// opened through its root and checked with fstat. Dir returns its absolute
// real path. The caller then spawns with that path, so a later swap of a
// component is not guarded against: a working directory is a name, not a
// descriptor.
func (w *Workspace) Dir(p string) (string, error) {
	if p == "" {
		return w.ws.real, nil
	}
	loc, err := w.resolve("dir", p, resolveExisting, accessRead)
	if err != nil {
		return "", err
	}
	f, err := loc.r.h.Open(loc.rel())
	if err != nil {
		return "", osErr("dir", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", osErr("dir", p, err)
	}
	if !st.IsDir() {
		return "", newErr("dir", p, ErrNotRegular, "%s is not a directory", loc.abs())
	}
	return w.realPath(f, loc, st), nil
}

// realPath names an opened file: the kernel's name for the descriptor when it
// lies inside a root, otherwise the resolved name. When st, the descriptor's
// fstat, shows the very file resolve's Lstat saw at the resolved name
// (loc.info), that name is the file's, and the kernel is not asked: its
// answer (a readlink of /proc/self/fd) cost more than the rest of a small
// readFile. st may be nil.
func (w *Workspace) realPath(f *os.File, loc location, st fs.FileInfo) string {
	if st != nil && loc.info != nil && os.SameFile(st, loc.info) {
		return loc.abs()
	}
	if p, ok := fdPath(f); ok {
		if r, _ := w.matchReal(splitComps(p)); r != nil {
			return p
		}
	}
	return loc.abs()
}
