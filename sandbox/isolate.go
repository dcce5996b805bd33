package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
)

// netConfined reports whether the command's network is confined, so that
// pathname unix sockets outside its writable directories are cut off as
// well: today only Network false; an allow-listed network is confined too.
func (p Policy) netConfined() bool { return !p.Network }

// planIsolation plans what hides from the command what lies outside its
// sandbox: the processes of others (a PID namespace with a /proc of its
// own), protected paths (bound read-only) and denied paths (masked). It
// runs after the filesystem part of plan, whose binds it extends, and
// before they are sorted. abi is the Landlock ABI plan uses.
func planIsolation(p Policy, caps Capabilities, abi int, ly *layers, rep *Report, missing, gaps *[]string) {
	mode := p.mode()
	mntWhy := caps.reason("mountns", "no mount namespace can be made")
	if abi == 0 {
		mntWhy = caps.reason("landlock", "no Landlock to keep its mounts in place")
	}
	canMount := caps.MountNS && abi > 0

	planPIDs(p, caps, ly, missing, gaps)

	// Protected paths: read-only where the command could write them. A
	// rename of a directory above one would put a writable copy in its
	// place, so those directories are pinned (made mount points).
	var writable []string
	switch mode {
	case Full:
		writable = []string{"/"}
	default:
		writable = ly.writable
	}
	for _, pp := range cleanPaths(p.Protect) {
		if !under(pp, writable) {
			// Outside the writable directories Landlock withholds every
			// write already.
			if ly.fsHandled {
				rep.Protect = append(rep.Protect, pp)
			} else {
				*missing = append(*missing, "protected path "+pp+" stays writable: "+caps.reason("landlock", "no Landlock"))
			}
			continue
		}
		if !canMount {
			*missing = append(*missing, "protected path "+pp+" stays writable: "+mntWhy)
			continue
		}
		ly.mntns = true
		ly.binds = append(ly.binds, bind{path: pp, kind: bindReadOnly})
		rep.Protect = append(rep.Protect, pp)
	}
	for _, b := range ly.binds {
		if b.kind == bindReadOnly {
			ly.binds = append(ly.binds, pins(b.path, writable)...)
		}
	}

	// Denied paths: masked, whatever the mode. A denied directory that
	// holds directories the command uses or bind targets is masked with
	// the path down to each, and they are shown again on the mask
	// (planHolding).
	held := p.heldDirs()
	targets := p.bindTargets()
	for _, d := range cleanPaths(p.DenyRead) {
		// An unlisted path is the caller's, not the client's: one that
		// cannot be masked is reported, and does not refuse a command
		// that requires what the client asked.
		miss := missing
		if slices.Contains(p.Unlisted, d) {
			miss = gaps
		}
		if !canMount || !caps.Masks {
			why := mntWhy
			if canMount {
				why = caps.reason("masks", "no empty file system can be mounted over it")
			}
			*miss = append(*miss, "denied path "+d+" stays readable: "+why)
			continue
		}
		if slices.Contains(held, d) {
			*miss = append(*miss, "denied path "+d+" stays readable: the command uses it")
			continue
		}
		ly.mntns, ly.maskDevices = true, true
		if !planHolding(d, held, targets, ly) {
			ly.binds = append(ly.binds, bind{path: d, kind: bindMask})
		}
		if !slices.Contains(p.Unlisted, d) {
			rep.DenyRead = append(rep.DenyRead, d)
		}
	}
}

// planMountLock runs after every part of plan that makes mounts: in full
// mode nothing else makes Landlock forbid mount and umount, so it grants
// everything, so that the binds and /proc stay in place; without Landlock
// the PID namespace's /proc can be unmounted.
func planMountLock(p Policy, caps Capabilities, abi int, ly *layers, gaps *[]string) {
	if p.mode() == Full && ly.mntns && abi > 0 && !ly.fsHandled {
		ly.abi = max(ly.abi, abi)
		ly.fsHandled, ly.fsGrantAll = true, true
	}
	if ly.procfs && !ly.fsHandled {
		*gaps = append(*gaps, "the PID namespace's /proc: a command with CAP_SYS_ADMIN can unmount it ("+caps.reason("landlock", "no Landlock")+")")
	}
}

// planPIDs plans the processes part of planIsolation: a PID namespace of
// its own wherever one can be made, asked or not, with a /proc of its own
// where a mount namespace can be made and procfs takes the pidns option.
// What is not made is a gap, and missing when p.IsolatePIDs asks for it.
func planPIDs(p Policy, caps Capabilities, ly *layers, missing, gaps *[]string) {
	switch {
	case caps.PIDNS:
		ly.pidns = true
		switch {
		case !caps.MountNS:
			*gaps = append(*gaps, "/proc/<pid> of processes outside the sandbox (the PID namespace has no /proc of its own): "+caps.reason("mountns", "no mount namespace can be made"))
			if p.IsolatePIDs {
				*missing = append(*missing, "a /proc of its own PID namespace: "+caps.reason("mountns", "no mount namespace can be made"))
			}
		case !caps.PIDNSProc:
			*gaps = append(*gaps, "/proc/<pid> of processes outside the sandbox (the PID namespace has no /proc of its own): "+caps.reason("proc", "the kernel's procfs takes no pidns option"))
			if p.IsolatePIDs {
				*missing = append(*missing, "a /proc of its own PID namespace: "+caps.reason("proc", "the kernel's procfs takes no pidns option"))
			}
		default:
			ly.mntns, ly.procfs = true, true
		}
	default:
		why := caps.reason("pidns", "no PID namespace can be made")
		*gaps = append(*gaps, "processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: "+why)
		if p.IsolatePIDs {
			*missing = append(*missing, "a PID namespace of its own: "+why)
		}
	}
}

// planUnixSockets plans what keeps a command whose network is confined
// from connecting to pathname unix sockets outside its writable
// directories: Landlock's LANDLOCK_ACCESS_FS_RESOLVE_UNIX (ABI 9), else a
// seccomp filter refusing socket(AF_UNIX) altogether. It runs after the
// filesystem and network parts of plan. Full mode writes everywhere, so
// nothing is outside its writable directories.
func planUnixSockets(p Policy, caps Capabilities, abi int, ly *layers, missing *[]string) {
	if !p.netConfined() || p.mode() == Full {
		return
	}
	switch {
	case abi >= 9 && ly.fsHandled:
		ly.unixLandlock = true
	case caps.Seccomp:
		ly.unixSeccomp = true
	default:
		why := "Landlock ABI < 9"
		if abi == 0 {
			why = caps.reason("landlock", "no Landlock")
		}
		*missing = append(*missing, "pathname unix sockets outside the writable directories cut off: "+why+", "+caps.reason("seccomp", "no seccomp"))
	}
}

// pins returns a pin for each directory strictly between the deepest of
// dirs holding path and path itself.
func pins(path string, dirs []string) []bind {
	top := ""
	for _, d := range dirs {
		if under(path, []string{d}) && len(d) > len(top) {
			top = d
		}
	}
	if top == "" || top == path {
		return nil
	}
	var out []bind
	for dir := filepath.Dir(path); dir != top && dir != "/"; dir = filepath.Dir(dir) {
		out = append(out, bind{path: dir, kind: bindPin})
	}
	return out
}

// holding returns the first of dirs that path is or holds, or "".
func holding(path string, dirs []string) string {
	for _, d := range dirs {
		if under(d, []string{path}) {
			return d
		}
	}
	return ""
}

// sortBinds orders binds shallow first, so that deeper ones sit on top,
// and at one path by kind (a read-only bind over a writable one, a mask
// over both); it drops duplicates, and pins of a path bound otherwise.
func sortBinds(binds []bind) []bind {
	bound := make(map[string]bool)
	for _, b := range binds {
		if b.kind != bindPin {
			bound[b.path] = true
		}
	}
	var out []bind
	for _, b := range binds {
		if (b.kind == bindPin && bound[b.path]) || slices.Contains(out, b) {
			continue
		}
		out = append(out, b)
	}
	slices.SortStableFunc(out, func(a, b bind) int {
		if c := strings.Count(a.path, "/") - strings.Count(b.path, "/"); c != 0 {
			return c
		}
		if a.path != b.path {
			return strings.Compare(a.path, b.path)
		}
		return int(a.kind) - int(b.kind)
	})
	return out
}
