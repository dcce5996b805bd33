package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// sourceBind is one bind of the policy (Policy.Binds), planned: source
// shown at target, with real paths.
type sourceBind struct {
	source, target string
	// writable: the top mount of the bind is read-write (Bind.Writable,
	// but in read-only mode).
	writable bool
	// keep are the protected paths and read roots beneath source (a
	// writable bind only), by their paths on the machine: each is bound
	// read-only on itself in the bind once it is made, at its path there.
	keep []string
	// protects are the protected paths beneath target (a writable bind
	// only): each is cloned read-only before the bind is made and mounted
	// again on top of it, at its own path.
	protects []string
}

// holdingMask is a denied directory that holds directories the command
// uses or bind targets: it is masked like any denied path, but the mask
// holds the path down to each of them, and they are mounted again on it.
type holdingMask struct {
	path string
	// dirs are the directories held (writable directories, the root,
	// read roots), none beneath another: each is cloned with what lies
	// beneath it before the mask, and the clone is mounted at its own
	// path on the mask.
	dirs []string
	// targets are the bind targets held, none beneath dirs: the mask holds
	// an empty directory or file at each, the bind's mount point.
	targets []string
}

// checkBinds checks the policy's binds against each other and against its
// paths (real paths, at Start), and returns a policy error for a bind
// that would hide a directory the command uses, make writable what is
// never written, or show what is denied.
func (p Policy) checkBinds() error {
	if len(p.Binds) == 0 {
		return nil
	}
	mode := p.mode()
	used := cleanPaths(append(append([]string{p.Root, p.TempDir, p.CacheDir}, p.Writable...), p.ReadRoots...))
	never := cleanPaths(append(slices.Clone(p.Protect), p.ReadRoots...))
	held := p.heldDirs()
	var targets []string
	for _, b := range p.Binds {
		src, dst := filepath.Clean(b.Source), filepath.Clean(b.Target)
		what := "sandbox: bind of " + src + " on " + dst
		if dst == "/" {
			return fmt.Errorf("%s: the target is /", what)
		}
		for _, t := range targets {
			if under(dst, []string{t}) || under(t, []string{dst}) {
				return fmt.Errorf("%s: the target overlaps the target %s of another bind", what, t)
			}
		}
		if u := holding(dst, used); u != "" {
			return fmt.Errorf("%s: the target holds %s, which the command uses", what, u)
		}
		if b.Writable && mode != ReadOnly {
			if x := within(dst, never); x != "" {
				return fmt.Errorf("%s: a writable target in %s, which is never written", what, x)
			}
			if x := within(src, never); x != "" {
				return fmt.Errorf("%s: a writable source in %s, which is never written", what, x)
			}
		}
		for _, d := range cleanPaths(p.DenyRead) {
			if !under(src, []string{d}) {
				continue
			}
			// A directory the command uses in d stays in its sight.
			shown := slices.DeleteFunc(slices.Clone(held), func(h string) bool { return !under(h, []string{d}) })
			if !under(src, shown) {
				return fmt.Errorf("%s: the source lies in the denied path %s", what, d)
			}
		}
		targets = append(targets, dst)
	}
	return nil
}

// heldDirs are the directories the command uses that a denied directory
// holding them shows again on its mask: the writable directories of the
// mode, the root, the read roots and the sources of owned binds.
func (p Policy) heldDirs() []string {
	held := append(append(p.writableDirs(), p.Root), p.ReadRoots...)
	for _, b := range p.Binds {
		if b.Owned {
			held = append(held, b.Source)
		}
	}
	return cleanPaths(held)
}

// within returns the first of dirs that path is or lies beneath, or "".
func within(path string, dirs []string) string {
	for _, d := range dirs {
		if under(path, []string{d}) {
			return d
		}
	}
	return ""
}

// topmost returns paths sorted, without those beneath another of them.
func topmost(paths []string) []string {
	sorted := slices.Clone(paths)
	slices.Sort(sorted)
	var out []string
	for _, p := range sorted {
		if len(out) == 0 || !under(p, out) {
			out = append(out, p)
		}
	}
	return out
}

// planHolding plans the mask of the denied directory d, which holds
// directories the command uses (held, as Policy.heldDirs) or bind
// targets: false when it holds none, and d is masked as usual.
func planHolding(d string, held, targets []string, ly *layers) bool {
	var hm holdingMask
	for _, h := range held {
		if h != d && under(h, []string{d}) {
			hm.dirs = append(hm.dirs, h)
		}
	}
	hm.dirs = topmost(hm.dirs)
	for _, t := range targets {
		if under(t, []string{d}) && !under(t, hm.dirs) {
			hm.targets = append(hm.targets, t)
		}
	}
	if len(hm.dirs)+len(hm.targets) == 0 {
		return false
	}
	hm.path = d
	ly.holding = append(ly.holding, hm)
	// Deepest first: a mask beneath a directory another mask holds is in
	// that directory's clone.
	slices.SortStableFunc(ly.holding, func(a, b holdingMask) int {
		return strings.Count(b.path, "/") - strings.Count(a.path, "/")
	})
	return true
}

// bindTargets returns the targets of p's binds, cleaned.
func (p Policy) bindTargets() []string {
	var out []string
	for _, b := range p.Binds {
		out = append(out, filepath.Clean(b.Target))
	}
	return out
}

// planBinds plans the policy's binds, which need a mount namespace and,
// to keep them in place, Landlock. It runs after planIsolation, whose
// masks it reads. Where they cannot be made, ly.refused says so: Start
// refuses the command whatever Spec.Require says. A writable bind is a
// writable directory for Landlock (in workspace-write; full mode grants
// everything), but the protected paths and read roots beneath its source
// are bound read-only in it, and the protected paths beneath its target
// are mounted again on top of it, the directories between pinned in the
// bind (binds_linux.go). Those a mask hides are left alone: a path beneath
// the source is looked for in its clone, which has every mask, and one
// beneath the target is cloned before the masks of denied directories
// that hold directories the command uses or bind targets.
func planBinds(p Policy, caps Capabilities, abi int, ly *layers, rep *Report, missing *[]string) {
	if len(p.Binds) == 0 {
		return
	}
	mode := p.mode()
	if !caps.MountNS || abi == 0 {
		why := caps.reason("mountns", "no mount namespace can be made")
		if caps.MountNS {
			why = caps.reason("landlock", "no Landlock to keep them in place")
		}
		m := "the binds on " + strings.Join(p.bindTargets(), ", ") + ": " + why
		*missing = append(*missing, m)
		ly.refused = append(ly.refused, m)
		return
	}
	ly.mntns = true
	never := cleanPaths(append(slices.Clone(p.Protect), p.ReadRoots...))
	protect := cleanPaths(p.Protect)
	for _, b := range p.Binds {
		sb := sourceBind{source: filepath.Clean(b.Source), target: filepath.Clean(b.Target), writable: b.Writable && mode != ReadOnly}
		access := ":ro"
		if sb.writable {
			access = ":rw"
			if mode == WorkspaceWrite {
				ly.bindRules = append(ly.bindRules, sb.source)
			}
			for _, x := range never {
				if x != sb.source && under(x, []string{sb.source}) && !masked(x, ly, true) {
					sb.keep = append(sb.keep, x)
				}
			}
			for _, pp := range protect {
				if pp != sb.target && under(pp, []string{sb.target}) && !masked(pp, ly, false) {
					sb.protects = append(sb.protects, pp)
				}
			}
		}
		ly.sources = append(ly.sources, sb)
		rep.Binds = append(rep.Binds, sb.target+access)
	}
}

// masked reports whether a mask of ly hides path: it lies in a denied
// path, but for a directory a holding mask shows again (with holding;
// without it, the holding masks, made later, are not counted).
func masked(path string, ly *layers, holding bool) bool {
	for _, b := range ly.binds {
		if b.kind == bindMask && under(path, []string{b.path}) {
			return true
		}
	}
	for _, hm := range ly.holding {
		if holding && under(path, []string{hm.path}) && !under(path, hm.dirs) {
			return true
		}
	}
	return false
}

// refusal returns the error Start refuses a command with whatever
// Spec.Require says (binds that cannot be made), or nil.
func (ly layers) refusal() error {
	if len(ly.refused) == 0 {
		return nil
	}
	return &UnavailableError{Missing: slices.Clone(ly.refused)}
}
