package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// AbsentSha256 is the ExpectedSha256 value meaning "the file must not exist
// yet" (64 zeros, as git's zero object id means "no such ref"). It is also
// the Actual value of a conflict when the file does not exist. To require an
// existing empty file, use the sha256 of empty content (e3b0c442…b855).
const AbsentSha256 = "0000000000000000000000000000000000000000000000000000000000000000"

// WriteOptions describes a WriteFile.
type WriteOptions struct {
	Path       string // relative to the workspace root, absolute, or a file:// URI
	Content    string
	Encoding   string // "utf-8" (default, also "") or "base64"
	CreateDirs bool   // create missing parent directories (mode 0755)
	// ExpectedSha256 is a hex sha256 the current content must have: "" does
	// not check, AbsentSha256 requires that the file does not exist.
	ExpectedSha256 string
}

// WriteResult describes a completed write.
type WriteResult struct {
	Path   string // absolute real path of the written file
	Size   int64
	Sha256 string // hex sha256 of the new content
}

// WriteFile atomically replaces (or creates) a regular file under the
// workspace root.
//
// A path inside a read root or the artifacts dir is refused with ErrReadOnly.
// A path that is an in-root symlink writes the file the symlink leads to (the
// link stays); a symlink, dangling or not, that leads outside the roots is
// refused with ErrOutside, and one that leads into a read root with
// ErrReadOnly.
//
// The write goes through an os.Root opened on the parent directory: a
// temporary file is created there with O_EXCL, written, fsynced, given the
// old file's permission bits (0644 for a new file), renamed over the target
// and the directory fsynced, so a reader sees the old or the new content,
// never a part. Owner and extended attributes are not kept, and other hard
// links to the old file keep the old content.
func (w *Workspace) WriteFile(o WriteOptions) (*WriteResult, error) {
	const op = "write"
	data, err := decodeContent(o)
	if err != nil {
		return nil, err
	}
	expected := strings.ToLower(o.ExpectedSha256)
	if expected != "" {
		if b, err := hex.DecodeString(expected); err != nil || len(b) != sha256.Size {
			e := newErr(op, o.Path, ErrInvalid, "expectedSha256 must be 64 hex digits, not %q", o.ExpectedSha256)
			e.Field = "expectedSha256"
			return nil, e
		}
	}

	loc, err := w.resolve(op, o.Path, resolveCreate, accessWrite)
	if err != nil {
		return nil, err
	}
	switch {
	case loc.r.kind == kindArtifacts:
		return nil, newErr(op, o.Path, ErrReadOnly, "%s is inside the artifacts directory %s, which is read-only", loc.abs(), loc.r.real)
	case loc.r.kind == kindRead:
		return nil, newErr(op, o.Path, ErrReadOnly, "%s is inside the read-only root %s", loc.abs(), loc.r.real)
	case len(loc.comps) == 0 || loc.dirSyntax:
		return nil, newErr(op, o.Path, ErrNotRegular, "%s names a directory", loc.abs())
	case loc.missing > 1 && !o.CreateDirs:
		parent := location{r: loc.r, comps: loc.comps[:len(loc.comps)-1]}
		return nil, newErr(op, o.Path, ErrNotFound, "the parent directory %s does not exist; set createDirs to create it", parent.abs())
	}
	parent := location{r: loc.r, comps: loc.comps[:len(loc.comps)-1]}
	base := loc.comps[len(loc.comps)-1]
	if loc.missing > 1 {
		if err := loc.r.h.MkdirAll(parent.rel(), 0o755); err != nil {
			return nil, osErr(op, o.Path, err)
		}
	}

	w.writeMu.Lock()
	defer w.writeMu.Unlock()

	dir, err := loc.r.h.OpenRoot(parent.rel())
	if err != nil {
		return nil, osErr(op, o.Path, err)
	}
	defer dir.Close()
	dirf, err := dir.Open(".")
	if err != nil {
		return nil, osErr(op, o.Path, err)
	}
	defer dirf.Close()
	if err := w.checkParent(op, o.Path, dirf, parent); err != nil {
		return nil, err
	}
	mode, err := checkTarget(op, o.Path, loc, dir, base, expected)
	if err != nil {
		return nil, err
	}

	tmp, err := writeTemp(dir, data, mode)
	if err != nil {
		return nil, osErr(op, o.Path, fmt.Errorf("cannot write a temporary file in %s: %w", parent.abs(), bareErr(err)))
	}
	// rename(2) replaces a directory entry and never follows a symlink at the
	// destination, so the write cannot leave dir whatever appeared at base.
	if err := dir.Rename(tmp, base); err != nil {
		dir.Remove(tmp)
		return nil, osErr(op, o.Path, fmt.Errorf("cannot rename the temporary file over %s: %w", loc.abs(), bareErr(err)))
	}
	if err := dirf.Sync(); err != nil {
		return nil, osErr(op, o.Path, err)
	}
	sum := sha256.Sum256(data)
	return &WriteResult{Path: loc.abs(), Size: int64(len(data)), Sha256: hex.EncodeToString(sum[:])}, nil
}

// checkParent makes sure that dirf, the parent directory WriteFile opened
// by name, is still the directory resolve named (parent), and that the
// policy does not protect it.
func (w *Workspace) checkParent(op, path string, dirf *os.File, parent location) error {
	// The parent was opened by name; make sure it is the directory resolve
	// named, so a swap cannot steer the write into a nested read-only root.
	if p, ok := fdPath(dirf); ok && p != parent.abs() {
		return newErr(op, path, ErrConflict, "the parent directory changed while writing (now %s); nothing was written", p)
	}
	// And that no rename put a protected directory at that name since.
	if pol := w.pol.Load(); pol != nil {
		st, err := dirf.Stat()
		if err != nil {
			return osErr(op, path, err)
		}
		if r := pol.byID(st, accessWrite); r != nil {
			return refuse(op, path, parent.abs(), r)
		}
	}
	return nil
}

// checkTarget looks at base in dir, the file loc WriteFile replaces: it
// must be absent or a regular file (not a symlink), and hold what
// expected says ("" does not check). It returns the mode the new file
// gets: the old one's permissions, or 0644 for a new file.
func checkTarget(op, path string, loc location, dir *os.Root, base, expected string) (fs.FileMode, error) {
	mode := fs.FileMode(0o644)
	fi, err := dir.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if expected != "" && expected != AbsentSha256 {
			e := newErr(op, path, ErrConflict, "the file does not exist, but expectedSha256 is %s", expected)
			e.Expected, e.Actual = expected, AbsentSha256
			return 0, e
		}
	case err != nil:
		return 0, osErr(op, path, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return 0, newErr(op, path, ErrConflict, "%s became a symlink while writing; nothing was written", loc.abs())
	case !fi.Mode().IsRegular():
		return 0, newErr(op, path, ErrNotRegular, "%s is %s", loc.abs(), describeMode(fi.Mode()))
	default:
		mode = fi.Mode().Perm()
		if expected != "" {
			actual, err := hashFile(dir, base)
			if err != nil {
				return 0, osErr(op, path, err)
			}
			if actual != expected {
				reason := "the file changed: its sha256 is not expectedSha256; read it again"
				if expected == AbsentSha256 {
					reason = "the file already exists, but expectedSha256 says it must not"
				}
				e := newErr(op, path, ErrConflict, "%s", reason)
				e.Expected, e.Actual = expected, actual
				return 0, e
			}
		}
	}
	return mode, nil
}

// decodeContent returns the bytes o asks to write.
func decodeContent(o WriteOptions) ([]byte, error) {
	switch strings.ToLower(o.Encoding) {
	case "", "utf-8", "utf8":
		return []byte(o.Content), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(o.Content)
		if err != nil {
			e := newErr("write", o.Path, ErrInvalid, "content is not valid base64: %v", err)
			e.Field = "content"
			return nil, e
		}
		return b, nil
	}
	e := newErr("write", o.Path, ErrInvalid, "unknown encoding %q: use \"utf-8\" or \"base64\"", o.Encoding)
	e.Field = "encoding"
	return nil, e
}

// bareErr returns the error inside a *fs.PathError or *os.LinkError, so that
// a reason names the user's file rather than a temporary name.
func bareErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// hashFile returns the hex sha256 of the regular file name in dir.
func hashFile(dir *os.Root, name string) (string, error) {
	f, err := dir.OpenFile(name, openReadFlags, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", &fs.PathError{Op: "open", Path: name, Err: errors.New("not a regular file")}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// tempPrefix starts the names of WriteFile's temporary files.
const tempPrefix = ".toolhost-write-"

// writeTemp creates a new temporary file in dir with O_EXCL, writes data,
// sets mode and fsyncs it. It returns its name; on error nothing is left.
func writeTemp(dir *os.Root, data []byte, mode fs.FileMode) (string, error) {
	var f *os.File
	var name string
	for range 10 {
		name = tempPrefix + rand.Text() + ".tmp"
		var err error
		f, err = dir.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	if f == nil {
		return "", &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode) // exact bits, whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		dir.Remove(name)
		return "", err
	}
	return name, nil
}
