package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"syscall"
)

// maxSymlinks bounds the symlinks followed while resolving one path, as
// Linux's MAXSYMLINKS does.
const maxSymlinks = 40

// resolveMode says whether missing components are an error.
type resolveMode int

const (
	// resolveExisting requires every component to exist.
	resolveExisting resolveMode = iota
	// resolveCreate lets trailing components be missing (the caller decides
	// whether it may create them).
	resolveCreate
)

// location is a resolved path: a root and the components below it.
//
// Invariant: r.real joined with comps is the real path; the first
// len(comps)-missing components exist and none of them is a symlink, and
// comps holds no "." or "..". r is the most specific root containing it.
type location struct {
	r         *root
	comps     []string
	missing   int  // trailing components that do not exist yet
	dirSyntax bool // the path ended in "/", "." or "..", so it names a directory
	// info is what Lstat through the root said of the last component, when
	// it was the last thing resolve looked at (nil otherwise): the caller
	// need not ask again.
	info fs.FileInfo
}

// rel returns the name of loc relative to its root, "." for the root itself.
func (l location) rel() string {
	if len(l.comps) == 0 {
		return "."
	}
	return strings.Join(l.comps, "/")
}

// abs returns the absolute real path of loc.
func (l location) abs() string { return joinAbs(l.r.realComps, l.comps) }

// joinAbs joins absolute components, returning "/" for none.
func joinAbs(parts ...[]string) string {
	var b strings.Builder
	for _, p := range parts {
		for _, c := range p {
			b.WriteByte('/')
			b.WriteString(c)
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// splitComps splits a slash-separated path into components, dropping empty
// and "." components; a trailing slash or "/." is kept as a final "." so that
// "file/" can be told from "file". ".." is kept: only resolve may interpret it.
func splitComps(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c == "" || c == "." {
			continue
		}
		out = append(out, c)
	}
	if len(out) > 0 && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.")) {
		out = append(out, ".")
	}
	return out
}

// hasPrefixComps reports whether comps starts with prefix, component by
// component, which is what keeps "/a/root2" out of "/a/root".
func hasPrefixComps(comps, prefix []string) bool {
	return len(comps) >= len(prefix) && slices.Equal(comps[:len(prefix)], prefix)
}

// matchSpelled finds the most specific root that an absolute path, as
// written, starts with: by its real path or by the spelling it was configured
// with. It returns a fresh slice of the remaining components, or a nil root.
func (w *Workspace) matchSpelled(comps []string) (*root, []string) {
	var best *root
	n := -1
	for _, r := range w.all {
		spellings := [][]string{r.realComps}
		if r.given != "" {
			spellings = append(spellings, r.givenComps)
		}
		for _, pre := range spellings {
			if hasPrefixComps(comps, pre) && len(pre) > n {
				best, n = r, len(pre)
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, slices.Clone(comps[n:])
}

// matchReal finds the most specific root whose real path contains the real
// path comps. It returns a fresh slice of the remaining components.
func (w *Workspace) matchReal(comps []string) (*root, []string) {
	var best *root
	for _, r := range w.all {
		if hasPrefixComps(comps, r.realComps) && (best == nil || len(r.realComps) > len(best.realComps)) {
			best = r
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, slices.Clone(comps[len(best.realComps):])
}

// checkSpelling refuses what no root can contain whatever the filesystem
// holds, and turns a file:// URI into a path.
func checkSpelling(op, p string) (string, *PathError) {
	if p == "" {
		return "", newErr(op, p, ErrInvalid, "the path is empty")
	}
	name := p
	if len(p) >= 5 && strings.EqualFold(p[:5], "file:") {
		var perr *PathError
		if name, perr = parseFileURI(op, p); perr != nil {
			return "", perr
		}
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", newErr(op, p, ErrOutside, "the path contains a NUL byte")
	}
	if len(name) >= pathMax {
		return "", newErr(op, p, ErrOutside, "the path is %d bytes long, at or over PATH_MAX (%d)", len(name), pathMax)
	}
	if strings.HasPrefix(name, "~") {
		return "", newErr(op, p, ErrOutside, "a leading ~ is refused: there is no home expansion; give a path relative to the root or absolute")
	}
	if strings.HasPrefix(name, "/") {
		if c := splitComps(name); len(c) > 0 && c[0] == "proc" {
			return "", newErr(op, p, ErrOutside, "paths under /proc are refused: magic links such as /proc/self/root and /proc/self/cwd would bypass the root")
		}
	}
	return name, nil
}

// parseFileURI returns the percent-decoded path of a file:// URI.
func parseFileURI(op, p string) (string, *PathError) {
	u, err := url.Parse(p)
	if err != nil {
		return "", newErr(op, p, ErrInvalid, "malformed file URI: %v", err)
	}
	switch {
	case u.Opaque != "":
		return "", newErr(op, p, ErrInvalid, "a file URI must be absolute, as in file:///dir/file")
	case u.Host != "" && !strings.EqualFold(u.Host, "localhost"):
		return "", newErr(op, p, ErrOutside, "the file URI names the remote host %q", u.Host)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(p, "#"):
		return "", newErr(op, p, ErrInvalid, "a file URI must not have a query or fragment; percent-encode ? and # in names")
	case !strings.HasPrefix(u.Path, "/"):
		return "", newErr(op, p, ErrInvalid, "a file URI must hold an absolute path")
	}
	return u.Path, nil
}

// resolve turns a path parameter into a location, walking it one component at
// a time through the root handles (Lstat and Readlink only; nothing is opened
// for reading or writing here). It follows symlinks, including the last
// component, only while they stay inside a root, and interprets ".." against
// real directories, never lexically.
//
// resolve names the target; it does not guard the later open. Callers open
// loc.rel() through loc.r.h, so a component swapped for a symlink after
// resolve returned is refused by os.Root rather than followed.
//
// resolve is also where the workspace's Policy is asked, for acc, so that
// no method can forget it: every component it looks at is matched by id
// against the entries (another name of a denied directory, a case variant,
// a bind mount), and the real path it ends at by name (an entry that did
// not exist when the policy was set, a file still to be created, a
// repository's .git/hooks). A refusal wraps ErrPolicy.
func (w *Workspace) resolve(op, p string, mode resolveMode, acc access) (location, error) {
	name, perr := checkSpelling(op, p)
	if perr != nil {
		return location{}, perr
	}
	pol := w.pol.Load()
	cur := w.ws
	todo := splitComps(name)
	if strings.HasPrefix(name, "/") {
		r, rest := w.matchSpelled(todo)
		if r == nil {
			return location{}, newErr(op, p, ErrOutside, "%s is outside the workspace root %s and the read roots", name, w.ws.real)
		}
		cur, todo = r, rest
	}
	var stack []string
	links, missing := 0, 0
	dirSyntax := false
	var last fs.FileInfo // the Lstat of stack's last component, if nothing came after it
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		last = nil
		switch c {
		case ".":
			dirSyntax = true
			continue
		case "..":
			dirSyntax = true
			if missing > 0 {
				return location{}, newErr(op, p, ErrNotFound, "%s does not exist", joinAbs(cur.realComps, stack))
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
				continue
			}
			if len(cur.realComps) == 0 {
				continue // ".." of "/" is "/"
			}
			// cur.real has no symlinks, so its lexical parent is its real
			// parent. The rest of the path is then matched as an absolute
			// path would be: "../shared/x" reaches a sibling read root.
			up := append(slices.Clone(cur.realComps[:len(cur.realComps)-1]), todo...)
			r, rest := w.matchSpelled(up)
			if r == nil {
				return location{}, newErr(op, p, ErrOutside, "\"..\" climbs out of the root %s", cur.real)
			}
			cur, stack, todo = r, nil, rest
			continue
		}
		dirSyntax = false
		if missing > 0 {
			stack = append(stack, c)
			missing++
			continue
		}
		rel := c
		if len(stack) > 0 {
			rel = strings.Join(stack, "/") + "/" + c
		}
		fi, err := cur.h.Lstat(rel)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if mode == resolveCreate {
					stack = append(stack, c)
					missing = 1
					continue
				}
				return location{}, newErr(op, p, ErrNotFound, "%s does not exist", joinAbs(cur.realComps, stack, []string{c}))
			}
			return location{}, osErr(op, p, err)
		}
		if r := pol.byID(fi, acc); r != nil {
			return location{}, refuse(op, p, joinAbs(cur.realComps, stack, []string{c}), r)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			if links > maxSymlinks {
				return location{}, newErr(op, p, ErrInvalid, "too many levels of symbolic links (more than %d)", maxSymlinks)
			}
			target, err := cur.h.Readlink(rel)
			if errors.Is(err, syscall.EINVAL) {
				return location{}, newErr(op, p, ErrConflict, "%s stopped being a symlink while the path was resolved", joinAbs(cur.realComps, stack, []string{c}))
			}
			if err != nil {
				return location{}, osErr(op, p, err)
			}
			if target == "" {
				return location{}, newErr(op, p, ErrNotFound, "symlink %s is empty", joinAbs(cur.realComps, stack, []string{c}))
			}
			tcomps := splitComps(target)
			if strings.HasPrefix(target, "/") {
				r, rest := w.matchSpelled(tcomps)
				if r == nil {
					return location{}, newErr(op, p, ErrOutside, "symlink %s points to %s, outside the workspace root and the read roots",
						joinAbs(cur.realComps, stack, []string{c}), target)
				}
				cur, stack, todo = r, nil, append(rest, todo...)
			} else {
				todo = append(tcomps, todo...)
			}
			continue
		}
		if !fi.IsDir() && len(todo) > 0 {
			return location{}, newErr(op, p, ErrNotFound, "%s is not a directory", joinAbs(cur.realComps, stack, []string{c}))
		}
		stack = append(stack, c)
		last = fi
	}
	return w.settle(op, p, location{r: cur, comps: stack, missing: missing, dirSyntax: dirSyntax, info: last}, pol, acc)
}

// settle is the end of resolve, given loc as the walk left it: loc is
// re-anchored in the most specific root, and the real path it names is
// asked of pol by name for acc, and for a write whether it lies in a git
// directory the policy protects.
func (w *Workspace) settle(op, p string, loc location, pol *policy, acc access) (location, error) {
	// Re-anchor in the most specific root: a read-only root nested in the
	// workspace (the artifacts dir, say) governs what lies below it.
	real := append(slices.Clone(loc.r.realComps), loc.comps...)
	if r, rest := w.matchReal(real); r != nil {
		loc.r, loc.comps = r, rest
	}
	if r := pol.byName(real, acc); r != nil {
		return location{}, refuse(op, p, joinAbs(real), r)
	}
	if acc == accessWrite {
		if r := pol.inGitDir(loc); r != nil {
			return location{}, refuse(op, p, joinAbs(real), r)
		}
	}
	return loc, nil
}

// errPathEscapes is the text of os.Root's unexported escape error.
const errPathEscapes = "path escapes from parent"

// osErr maps an operating-system error met on p to a *PathError wrapping the
// matching sentinel.
func osErr(op, p string, err error) *PathError {
	var pe *fs.PathError
	inner := err
	if errors.As(err, &pe) {
		inner = pe.Err
	}
	switch {
	case inner != nil && inner.Error() == errPathEscapes:
		return newErr(op, p, ErrOutside, "the path changed while it was being opened and now leads outside the root: %v", err)
	case errors.Is(err, fs.ErrNotExist):
		return newErr(op, p, ErrNotFound, "does not exist: %v", err)
	case errors.Is(err, syscall.ENOTDIR):
		return newErr(op, p, ErrNotFound, "a parent is not a directory: %v", err)
	case errors.Is(err, syscall.ELOOP):
		return newErr(op, p, ErrOutside, "a symlink appeared while the path was being opened: %v", err)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return newErr(op, p, ErrInvalid, "a path component is longer than the filesystem allows (NAME_MAX): %v", err)
	case errors.Is(err, fs.ErrPermission):
		return newErr(op, p, ErrPermission, "%v", err)
	}
	return newErr(op, p, ErrIO, "%v", err)
}

// describeMode says in words what a non-regular file is.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("not a regular file (mode %v)", m)
}
