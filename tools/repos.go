package tools

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/toolhost/toolhost/internal/gitrepos"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
)

// RepoRulePrefix starts a protect entry that names a path in the git
// directory of every repository in the root ("**/.git/hooks"), not only
// the root's own: the agents' defaults are "**/.git/hooks" and
// "**/.git/config".
const RepoRulePrefix = "**/.git/"

// repoScan bounds the scans for repositories: gitrepos's defaults, spelled
// out because the result's notEnforced names them.
var repoScan = gitrepos.Options{Timeout: gitrepos.DefaultTimeout, MaxDirs: gitrepos.DefaultMaxDirs, MaxRepos: gitrepos.DefaultMaxRepos}

// clockSlack is how far before the start a file's change time may be
// and still count as written by the command: the kernel stamps files
// from a clock that lags by up to a tick.
const clockSlack = 20 * time.Millisecond

// repoRule returns the NAME of a "**/.git/NAME" protect entry, and
// whether p is one. NAME must be a clean relative path.
func repoRule(p string) (string, bool, error) {
	name, ok := strings.CutPrefix(p, RepoRulePrefix)
	if !ok {
		if strings.Contains(p, "**") {
			return "", false, errors.New(`"**" is only for the git directory of every repository: "**/.git/NAME", as in "**/.git/hooks"`)
		}
		return "", false, nil
	}
	if name == "" || filepath.IsAbs(name) || filepath.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "*") {
		return "", true, fmt.Errorf(`"**/.git/" must be followed by a clean path in the git directory, such as hooks or config`)
	}
	return name, true, nil
}

// addProtect returns base's protected paths and repository rules with
// asked's added: a "**/.git/NAME" entry adds NAME to the rules and the
// root's own .git/NAME to the paths (so the root's repository is
// protected even when a scan finds nothing); any other entry is a path
// in the root. field names asked for errors.
func (c *confinement) addProtect(base level, asked []string, field string) ([]string, []string, error) {
	repos := slices.Clone(base.repos)
	var paths []string
	for i, p := range asked {
		name, ok, err := repoRule(p)
		if err != nil {
			n := field
			if !strings.HasPrefix(field, "--") {
				n = fmt.Sprintf("%s[%d]", field, i)
			}
			return nil, nil, protocol.InvalidParams(n, "%q: %v", p, err)
		}
		if !ok {
			paths = append(paths, p)
			continue
		}
		if !slices.Contains(repos, name) {
			repos = append(repos, name)
		}
		paths = append(paths, filepath.Join(".git", name))
	}
	slices.Sort(repos)
	out, err := c.addPaths(base.protect, paths, field, c.inRoot)
	if err != nil {
		return nil, nil, err
	}
	return out, repos, nil
}

// protectWire is the level's protect list as the protocol says it: the
// repository rules ("**/.git/NAME"), then the paths they do not imply.
func (c *confinement) protectWire(l level) []string {
	var out []string
	for _, name := range l.repos {
		out = append(out, RepoRulePrefix+name)
	}
	for _, p := range l.protect {
		if rel, err := filepath.Rel(filepath.Join(c.root, ".git"), p); err == nil && slices.Contains(l.repos, rel) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// repoCaches keeps each session's gitrepos.Cache of its root (weakly
// keyed by its confinement, so that an entry goes with the session), so
// that the scans before and after its commands read again only the
// directories that changed. Each holds an inotify instance and watches:
// closeRepoCache closes it when the session ends (or, failing that, when
// its confinement is collected).
var repoCaches sync.Map // weak.Pointer[confinement] → *gitrepos.Cache

// repoCache is c's gitrepos.Cache.
func repoCache(c *confinement) *gitrepos.Cache {
	key := weak.Make(c)
	v, loaded := repoCaches.LoadOrStore(key, new(gitrepos.Cache))
	if !loaded {
		runtime.AddCleanup(c, dropRepoCache, key)
	}
	return v.(*gitrepos.Cache)
}

// closeRepoCache closes c's gitrepos.Cache, if it has one: its session
// ended.
func closeRepoCache(c *confinement) {
	if c != nil {
		dropRepoCache(weak.Make(c))
	}
}

// dropRepoCache removes the gitrepos.Cache of k and closes it.
func dropRepoCache(k weak.Pointer[confinement]) {
	if v, ok := repoCaches.LoadAndDelete(k); ok {
		v.(*gitrepos.Cache).Close()
	}
}

// repoWatch is what a command's repository rules found at its start, and
// what is needed to name, after it, what it wrote where nothing protected.
type repoWatch struct {
	root  string
	cache *gitrepos.Cache // the session's, for both scans
	names []string        // the rules' NAMEs
	since time.Time       // when the start's scan began, less clockSlack
	start gitrepos.Result
	err   error // the start's scan failed

	once       sync.Once
	violations []string
	after      string // the limit that cut the scan after the command short
}

// repoWatches maps each command (weakly, so an entry goes with its
// command) to its repoWatch.
var repoWatches sync.Map // weak.Pointer[process.Command] → *repoWatch

// protectRepos adds to spec's policies the protected paths of every
// repository in the root that the command's repository rules cover, found
// by a bounded scan just before the command starts (recipe steps that
// confine the filesystem alike share the one scan). It returns what the
// end of the command is compared with, or nil when no rule applies.
func (t *Tools) protectRepos(spec *process.Spec, p *protocol.RunCommandParams, steps []protocol.StepSpec) *repoWatch {
	if spec.Confine == nil {
		return nil
	}
	t.mu.Lock()
	c := t.conf
	t.mu.Unlock()
	if c == nil {
		return nil
	}
	// The levels confine computed, which checked them already.
	lvl, err := c.tighten(c.def, p.Sandbox, "sandbox")
	if err != nil {
		return nil
	}
	levels := make([]level, len(steps))
	for i, st := range steps {
		if levels[i], err = c.tighten(lvl, st.Sandbox, "steps"); err != nil {
			return nil
		}
	}
	applies := func(l level) bool { return len(l.repos) > 0 && l.fs != protocol.SandboxReadOnly }
	var names []string
	for _, l := range append([]level{lvl}, levels...) {
		if applies(l) {
			names = append(names, l.repos...)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	// Since the scan began: what changed while it ran counts as the
	// command's, rather than as nobody's.
	w := &repoWatch{root: c.root, cache: repoCache(c), names: slices.Compact(names), since: time.Now().Add(-clockSlack)}
	w.start, w.err = w.cache.Scan(c.root, repoScan)
	if w.err != nil {
		return w
	}
	gitDirs := w.start.GitDirs()
	if applies(lvl) {
		spec.Confine.Policy.Protect = slices.Concat(spec.Confine.Policy.Protect, c.repoPaths(gitDirs, lvl.repos, spec.Confine.Policy.Protect))
	}
	for i := range spec.Steps {
		if pol := spec.Steps[i].Policy; pol != nil && i < len(levels) && applies(levels[i]) {
			pol.Protect = slices.Concat(pol.Protect, c.repoPaths(gitDirs, levels[i].repos, pol.Protect))
		}
	}
	return w
}

// repoPaths are the paths NAME of each git directory, but those in have
// and any that is, or holds, the root.
func (c *confinement) repoPaths(gitDirs, names, have []string) []string {
	var out []string
	for _, g := range gitDirs {
		for _, name := range names {
			p := filepath.Join(g, name)
			if p == c.root || strings.HasPrefix(c.root, p+"/") || slices.Contains(have, p) || slices.Contains(out, p) {
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// attachRepos records w as cmd's, for its final result.
func attachRepos(cmd *process.Command, w *repoWatch) {
	if w == nil || cmd == nil {
		return
	}
	key := weak.Make(cmd)
	repoWatches.Store(key, w)
	runtime.AddCleanup(cmd, func(k weak.Pointer[process.Command]) { repoWatches.Delete(k) }, key)
}

// reposResult adds to a command's final result what its repository rules
// left unprotected: protectViolations, and the scans' limits in
// sandbox.notEnforced.
func reposResult(cmd *process.Command, res *protocol.ToolResult) {
	v, ok := repoWatches.Load(weak.Make(cmd))
	if !ok {
		return
	}
	w := v.(*repoWatch)
	w.once.Do(func() { w.violations, w.after = w.written(boundPaths(res)) })
	res.ProtectViolations = w.violations
	if res.Sandbox != nil {
		res.Sandbox.NotEnforced = slices.Concat(res.Sandbox.NotEnforced, w.gaps())
	}
}

// boundPaths are the protected paths a result says were enforced.
func boundPaths(res *protocol.ToolResult) []string {
	var out []string
	if res.Sandbox != nil {
		out = append(out, res.Sandbox.Protect...)
	}
	for _, st := range res.Steps {
		if st.Sandbox != nil {
			out = append(out, st.Sandbox.Protect...)
		}
	}
	return out
}

// written scans the root again and names, relative to the root (absolute
// outside it), every hook or other path of the rules that was written
// since the start where nothing protected it; it also returns the limit
// that cut that scan short, if one did.
func (w *repoWatch) written(bound []string) ([]string, string) {
	res, err := w.cache.Scan(w.root, repoScan)
	if err != nil {
		return nil, ""
	}
	var out []string
	for _, g := range res.GitDirs() {
		for _, p := range gitrepos.Written(g, w.names, w.since) {
			if slices.ContainsFunc(bound, func(b string) bool { return p == b || strings.HasPrefix(p, b+"/") }) {
				continue // read-only all along: someone else wrote it
			}
			if rel, err := filepath.Rel(w.root, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				p = rel
			}
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), res.Truncated
}

// gaps says, a sentence each, what the scans could not cover.
func (w *repoWatch) gaps() []string {
	var out []string
	what := "their " + strings.Join(w.names, " and ") + " stay writable"
	if w.err != nil {
		out = append(out, fmt.Sprintf("the scan for repositories in the root failed (%v): only the root's own repository is protected", w.err))
	}
	if l := w.start.Truncated; l != "" {
		out = append(out, fmt.Sprintf("the scan for repositories in the root stopped at its limit of %s: repositories past it are not protected (%s)", limitText(l), what))
	}
	if n := w.start.Unreadable; n > 0 {
		out = append(out, fmt.Sprintf("the scan for repositories could not read %d directories of the root: repositories in them are not protected (%s)", n, what))
	}
	if w.after != "" {
		out = append(out, fmt.Sprintf("the scan after the command stopped at its limit of %s: what it wrote in repositories past it is not in protectViolations", limitText(w.after)))
	}
	return out
}

// limitText says a scan's limit with its figure.
func limitText(limit string) string {
	switch limit {
	case gitrepos.LimitTime:
		return fmt.Sprintf("%d ms", repoScan.Timeout.Milliseconds())
	case gitrepos.LimitDirs:
		return fmt.Sprintf("%d directories", repoScan.MaxDirs)
	case gitrepos.LimitRepos:
		return fmt.Sprintf("%d git directories", repoScan.MaxRepos)
	}
	return limit
}
