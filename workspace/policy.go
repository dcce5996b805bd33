package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Policy is what no method of a Workspace passes, whatever its roots allow:
// the paths it never reads and those it never writes. It is the file
// methods' half of the policy a confined command gets from the kernel
// (the sandbox masks DenyRead and binds Protect read-only), so that every
// door of the server asks the same one.
type Policy struct {
	// DenyRead are absolute paths (files or directories, and everything
	// beneath them) that are never read, nor written.
	DenyRead []string
	// Protect are absolute paths (files or directories, and everything
	// beneath them) that are never written.
	Protect []string
	// Repos are slash-separated paths relative to a git directory
	// ("hooks", "config") never written in any repository under the
	// roots: a nested one, one made later, a bare one, a submodule's or a
	// worktree's git directory (the agents' "**/.git/hooks" and
	// "**/.git/config").
	Repos []string
}

// The names of the two kinds of entries, as the wire's error data gives
// them.
const (
	PolicyDenyRead = "denyRead"
	PolicyProtect  = "protect"
)

// access is what a resolved path is wanted for.
type access int

const (
	accessRead access = iota
	accessWrite
)

// rule is one entry of a policy.
type rule struct {
	kind  string // PolicyDenyRead or PolicyProtect
	entry string // as configured
	// spellings are the components of the entry as configured and of its
	// real path (symlinks in the part that exists resolved).
	spellings [][]string
}

// applies reports whether the rule refuses acc: a denied path is neither
// read nor written, a protected one only not written.
func (r *rule) applies(acc access) bool {
	return r.kind == PolicyDenyRead || acc == accessWrite
}

// policy is a Policy compiled for checks.
//
// Invariant: nothing here changes after compile, except the link set,
// which links guards.
type policy struct {
	rules []*rule
	// ids are the files and directories the entries named when the policy
	// was set (the entry itself and, for a symlink, what it leads to), so
	// that any other name of them (a case variant, a bind mount) is
	// caught while a path is resolved.
	ids map[fileID]*rule
	// repo are Repos, as components relative to a git directory.
	repo []repoRule
	// links finds the hard links of denied files.
	links linkSet
}

// repoRule protects comps inside every git directory.
type repoRule struct {
	comps []string
	r     *rule
}

// SetPolicy makes p the policy of every later call. Entries that are not
// absolute are an error wrapping ErrInvalid; entries that do not exist
// yet still apply, by name, once they do. An empty policy costs nothing.
func (w *Workspace) SetPolicy(p Policy) error {
	c, err := compilePolicy(p)
	if err != nil {
		return err
	}
	if len(c.rules) == 0 && len(c.repo) == 0 {
		c = nil
	}
	w.pol.Store(c)
	return nil
}

// recheck asks the policy again of f, a file opened by name that is not
// the one resolve looked at (a write renamed a new file over the name in
// between, or a rename moved a directory): the directory the kernel's
// name for the descriptor lies in is resolved afresh, every directory on
// the way matched by id, and the file itself is matched by name and by id.
// Writes that go on renaming new files over the name change nothing here:
// the file opened is checked, wherever its name now leads.
func (w *Workspace) recheck(op, p string, f *os.File, st fs.FileInfo) error {
	name, ok := fdPath(f)
	if !ok {
		return newErr(op, p, ErrConflict, "the file changed while it was being opened, and it could not be checked again; nothing was read, read it again")
	}
	dir, base := path.Split(name)
	loc, err := w.resolve(op, dir, resolveExisting, accessRead)
	if err == nil {
		real := append(splitComps(loc.abs()), base)
		if r := w.pol.Load().byName(real, accessRead); r != nil {
			err = refuse(op, p, joinAbs(real), r)
		} else if r := w.pol.Load().byID(st, accessRead); r != nil {
			err = refuse(op, p, joinAbs(real), r)
		}
	}
	var pe *PathError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrPolicy) && errors.As(err, &pe):
		pe.Path = p
		return err
	}
	return newErr(op, p, ErrConflict, "the file changed while it was being opened, and it could not be checked again (%v); nothing was read, read it again", err)
}

// compilePolicy compiles p.
func compilePolicy(p Policy) (*policy, error) {
	c := &policy{ids: map[fileID]*rule{}}
	add := func(kind string, entries []string) error {
		for _, e := range entries {
			if !filepath.IsAbs(e) {
				return newErr("policy", e, ErrInvalid, "a %s entry must be an absolute path", kind)
			}
			r := &rule{kind: kind, entry: filepath.Clean(e)}
			r.spellings = append(r.spellings, splitComps(r.entry))
			if real := realPrefix(r.entry); real != r.entry {
				r.spellings = append(r.spellings, splitComps(real))
			}
			c.rules = append(c.rules, r)
			for _, st := range []func(string) (fs.FileInfo, error){os.Lstat, os.Stat} {
				if fi, err := st(r.entry); err == nil {
					if id, ok := idOf(fi); ok {
						if old, dup := c.ids[id]; !dup || old.kind != PolicyDenyRead {
							c.ids[id] = r
						}
					}
				}
			}
		}
		return nil
	}
	if err := add(PolicyDenyRead, p.DenyRead); err != nil {
		return nil, err
	}
	if err := add(PolicyProtect, p.Protect); err != nil {
		return nil, err
	}
	for _, name := range p.Repos {
		comps := splitComps(name)
		if len(comps) == 0 || filepath.IsAbs(name) || slices.Contains(comps, "..") {
			return nil, newErr("policy", name, ErrInvalid, "a repository rule must be a path inside a git directory, such as hooks")
		}
		c.repo = append(c.repo, repoRule{comps: comps, r: &rule{kind: PolicyProtect, entry: "**/.git/" + strings.Join(comps, "/")}})
	}
	c.links.entries = slices.Clone(p.DenyRead)
	return c, nil
}

// realPrefix returns p with the symlinks of its longest existing prefix
// resolved, and the rest as written.
func realPrefix(p string) string {
	rest := ""
	for q := p; ; {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(q)
		if parent == q {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
		q = parent
	}
}

// byID returns the rule an entry's file or directory id falls under, for
// acc, or nil.
func (c *policy) byID(fi fs.FileInfo, acc access) *rule {
	if c == nil || len(c.ids) == 0 {
		return nil
	}
	id, ok := idOf(fi)
	if !ok {
		return nil
	}
	if r := c.ids[id]; r != nil && r.applies(acc) {
		return r
	}
	return nil
}

// byName returns the rule the absolute real path comps falls under, for
// acc, or nil: an entry it equals or lies beneath, or, for a write, a
// repository rule.
func (c *policy) byName(comps []string, acc access) *rule {
	if c == nil {
		return nil
	}
	for _, r := range c.rules {
		if !r.applies(acc) {
			continue
		}
		for _, s := range r.spellings {
			if hasPrefixComps(comps, s) {
				return r
			}
		}
	}
	if acc != accessWrite {
		return nil
	}
	for i, name := range comps {
		if !strings.EqualFold(name, ".git") {
			continue
		}
		// X in .git itself, or in the git directory of a submodule or a
		// worktree below it (.git/modules/NAME…/X, .git/worktrees/NAME/X).
		inner := comps[i+1:]
		nested := len(inner) > 0 && (strings.EqualFold(inner[0], "modules") || strings.EqualFold(inner[0], "worktrees"))
		for _, rr := range c.repo {
			for j := range inner {
				if j > 0 && !nested {
					break
				}
				if hasPrefixFold(inner[j:], rr.comps) {
					return rr.r
				}
			}
		}
	}
	return nil
}

// hasPrefixFold is hasPrefixComps ignoring case: a repository's .git/HOOKS
// on a case-insensitive filesystem is its .git/hooks.
func hasPrefixFold(comps, prefix []string) bool {
	if len(comps) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if !strings.EqualFold(comps[i], p) {
			return false
		}
	}
	return true
}

// refuse builds the error for path p refused by r.
func refuse(op, p, abs string, r *rule) *PathError {
	var e *PathError
	if r.kind == PolicyDenyRead {
		e = newErr(op, p, ErrPolicy, "%s is under denyRead %s: no door of toolhost reads or writes it, and commands cannot see it. This is policy, not a missing file; asking again will not help", abs, r.entry)
	} else {
		e = newErr(op, p, ErrPolicy, "%s is under protect %s: it may be read, but no door of toolhost and no command writes it. This is policy, not a missing file; asking again will not help", abs, r.entry)
	}
	e.Policy, e.Entry = r.kind, r.entry
	return e
}

// maxLinkScan bounds the entries of the denied directories looked at to
// find the hard links of their files: past it, a file with more than one
// link is refused, since it could be one.
const maxLinkScan = 20000

// linkSet is the set of ids of the files under the denyRead entries, which
// a hard link elsewhere shares. It is made at the first read of a file
// with more than one link, and made again when a directory it walked has
// changed since.
type linkSet struct {
	entries []string

	mu       sync.Mutex // guards what follows
	built    bool
	files    map[fileID]string  // a denied file's id → the entry it is under
	dirs     map[string]fileTag // every directory walked, as it was then
	complete bool               // the walk saw everything, within maxLinkScan
}

// lookup returns the denyRead entry a file with id is under, or "", and
// whether the answer is sure.
func (l *linkSet) lookup(id fileID) (entry string, sure bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.built || l.stale() {
		l.build()
	}
	return l.files[id], l.complete
}

// stale reports whether a directory the set was made from changed since.
func (l *linkSet) stale() bool {
	for d, tag := range l.dirs {
		fi, err := os.Lstat(d)
		if err != nil || tagOf(fi) != tag {
			return true
		}
	}
	return false
}

// build walks the denyRead entries, up to maxLinkScan entries.
func (l *linkSet) build() {
	l.built, l.complete = true, true
	l.files, l.dirs = map[fileID]string{}, map[string]fileTag{}
	seen := 0
	for _, e := range l.entries {
		top, err := filepath.EvalSymlinks(e)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				l.complete = false
			}
			continue
		}
		err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				l.complete = false
				return nil
			}
			if seen++; seen > maxLinkScan {
				l.complete = false
				return filepath.SkipAll
			}
			fi, err := d.Info()
			if err != nil {
				l.complete = false
				return nil
			}
			if d.IsDir() {
				l.dirs[p] = tagOf(fi)
				return nil
			}
			if id, ok := idOf(fi); ok {
				l.files[id] = e
			}
			return nil
		})
		if err != nil {
			l.complete = false
		}
	}
}

// checkOpened refuses, for a read, a file opened with more than one link
// that is (or may be) a hard link of a denied file.
func (c *policy) checkOpened(op, p, abs string, st fs.FileInfo) error {
	if c == nil || len(c.links.entries) == 0 || links(st) < 2 {
		return nil
	}
	id, ok := idOf(st)
	if !ok {
		return nil
	}
	entry, sure := c.links.lookup(id)
	if entry != "" {
		return refuse(op, p, abs, &rule{kind: PolicyDenyRead, entry: entry})
	}
	if !sure {
		e := newErr(op, p, ErrPolicy, "%s has several hard links, and the denyRead directories hold more than %d entries (or could not all be read), so it could not be told apart from a denied file; it is refused by policy", abs, maxLinkScan)
		e.Policy, e.Entry = PolicyDenyRead, strings.Join(c.links.entries, ", ")
		return e
	}
	return nil
}

// Inside returns the entries of kind (PolicyDenyRead or PolicyProtect)
// that lie in the workspace root, as slash-separated paths relative to
// it, for what walks the root itself (snapshots); "." when an entry holds
// the whole root.
func (w *Workspace) Inside(kind string) []string {
	c := w.pol.Load()
	if c == nil {
		return nil
	}
	var out []string
	for _, r := range c.rules {
		if r.kind != kind {
			continue
		}
		for _, s := range r.spellings {
			for _, root := range [][]string{w.ws.realComps, w.ws.givenComps} {
				var rel string
				switch {
				case root == nil:
					continue
				case hasPrefixComps(s, root):
					rel = strings.Join(s[len(root):], "/")
				case hasPrefixComps(root, s):
					rel = "."
				default:
					continue
				}
				if rel == "" {
					rel = "."
				}
				if !slices.Contains(out, rel) {
					out = append(out, rel)
				}
			}
		}
	}
	return out
}

// Check asks the policy about path p (which need not exist) for a read,
// or for a write when write is set, as every method does. It returns an
// error wrapping ErrPolicy when the policy refuses it, and nil otherwise,
// whatever else may be wrong with the path: the caller checks that.
func (w *Workspace) Check(op, p string, write bool) error {
	acc := accessRead
	if write {
		acc = accessWrite
	}
	_, err := w.resolve(op, p, resolveCreate, acc)
	if errors.Is(err, ErrPolicy) {
		return err
	}
	return nil
}

// DeniedFiles returns a test of whether a file, by device and inode, is a
// file under a denyRead entry, for what walks the root itself: a hard link
// elsewhere in the root is that same file. It is nil when nothing is
// denied. The set is the one reads use (see maxLinkScan), made again when
// a denied directory changed.
func (w *Workspace) DeniedFiles() func(dev, ino uint64) bool {
	c := w.pol.Load()
	if c == nil || len(c.links.entries) == 0 {
		return nil
	}
	files := c.links.current()
	return func(dev, ino uint64) bool {
		_, ok := files[fileID{dev: dev, ino: ino}]
		return ok
	}
}

// current returns the set, made again first if it is stale. The map is
// never changed once made (build makes a new one), so callers may keep it.
func (l *linkSet) current() map[fileID]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.built || l.stale() {
		l.build()
	}
	return l.files
}

// inGitDir returns the repository rule a write to loc falls under because
// one of its existing ancestors (the root included) is a git directory
// whatever its name: a bare repository, a worktree's or a submodule's git
// directory. byName covers those named .git, existing or not.
func (c *policy) inGitDir(loc location) *rule {
	if c == nil || len(c.repo) == 0 {
		return nil
	}
	existing := len(loc.comps) - loc.missing
	for i := min(existing, len(loc.comps)-1); i >= 0; i-- {
		if !isGitDir(loc.r.h, loc.comps[:i]) {
			continue
		}
		for _, rr := range c.repo {
			if hasPrefixFold(loc.comps[i:], rr.comps) {
				return rr.r
			}
		}
	}
	return nil
}

// isGitDir reports whether the directory comps below h is a git directory,
// as git itself tells one: a HEAD, and objects/ or a commondir file.
func isGitDir(h *os.Root, comps []string) bool {
	dir := strings.Join(comps, "/")
	if dir == "" {
		dir = "."
	}
	fi, err := h.Lstat(dir + "/HEAD")
	if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0) {
		return false
	}
	if fi, err := h.Lstat(dir + "/objects"); err == nil && fi.IsDir() {
		return true
	}
	fi, err = h.Lstat(dir + "/commondir")
	return err == nil && fi.Mode().IsRegular()
}
