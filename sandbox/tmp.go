package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
)

// hostTmp is the directory a command's own temporary directory replaces
// in its mount namespace.
const hostTmp = "/tmp"

// tmpPlan is a command's private /tmp: its temporary directory (Policy's
// TempDir) bound on /tmp in its mount namespace, after every other bind,
// so that the host's /tmp, and every other command's files in it, are out
// of its sight.
type tmpPlan struct {
	// src is the temporary directory bound on /tmp.
	src string
	// carry are the policy's directories beneath the host's /tmp (a
	// workspace root in /tmp, a read root, the artifacts directory, a bind
	// target), none beneath another nor beneath src: each is bound again,
	// with every bind beneath it, at the same path in the new /tmp, so the
	// command still finds them where the policy says.
	carry []string
	// binds maps each carried bind target to its source, which is what
	// is mounted there when /tmp is made.
	binds map[string]string
}

// planTmp plans the private /tmp of a command whose filesystem is
// confined (workspace-write and read-only) where plan made a mount
// namespace for it; Full mode keeps the host's /tmp, which it may write
// anyway. A policy without a temporary directory gets none, and where no
// mount namespace can be made, or a directory of the policy is /tmp or
// holds it, or a bind's source does (it would show the host's /tmp), gaps
// says so: /tmp is then the host's, read-only (the temporary directory
// stays writable at its own path). It runs after planBinds.
func planTmp(p Policy, caps Capabilities, ly *layers, gaps *[]string) {
	if p.mode() == Full || !ly.fsHandled || p.TempDir == "" {
		return
	}
	const what = "a private /tmp (the host's /tmp stays visible, and read-only but for TMPDIR): "
	if !ly.roRoot {
		*gaps = append(*gaps, what+caps.reason("mountns", "no mount namespace can be made"))
		return
	}
	src := filepath.Clean(p.TempDir)
	dirs := cleanPaths(append(append([]string{p.Root, p.CacheDir}, p.Writable...), p.ReadRoots...))
	sources := make(map[string]string)
	var shown []string
	for _, b := range ly.sources {
		dirs = append(dirs, b.target)
		sources[b.target] = b.source
		shown = append(shown, b.source)
	}
	for _, d := range append(append([]string{src}, dirs...), shown...) {
		if under(hostTmp, []string{d}) {
			*gaps = append(*gaps, what+d+" holds it")
			return
		}
	}
	t := &tmpPlan{src: src}
	var carry []string
	for _, d := range dirs {
		if !strictlyUnder(d, hostTmp) || under(d, []string{src}) {
			continue // outside /tmp, or bound with the temporary directory
		}
		carry = append(carry, d)
	}
	// Keep only the topmost: a directory beneath another comes with it.
	t.carry = topmost(carry)
	for _, d := range t.carry {
		if s, ok := sources[d]; ok {
			if t.binds == nil {
				t.binds = make(map[string]string)
			}
			t.binds[d] = s
		}
	}
	ly.tmp = t
}

// strictlyUnder reports whether path lies beneath dir (and is not dir).
func strictlyUnder(path, dir string) bool {
	return strings.HasPrefix(path, dir+string(filepath.Separator))
}

// privateTmpEnv points TMPDIR at /tmp in cmd's environment where it names
// the temporary directory (given, or its real path): that path is out of
// sight in the command's mount namespace, and /tmp is the same directory.
// A TMPDIR naming anything else is the caller's and is left alone.
func privateTmpEnv(env []string, dirs ...string) []string {
	out := env
	for i, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "TMPDIR" || v == "" || !slices.Contains(dirs, filepath.Clean(v)) {
			continue
		}
		if &out[0] == &env[0] {
			out = slices.Clone(env)
		}
		out[i] = "TMPDIR=" + hostTmp
	}
	return out
}
