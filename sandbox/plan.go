package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Plan says what Start would apply for p and l given caps, without
// applying anything. The error wraps ErrUnavailable (an *UnavailableError)
// when the kernel cannot give the core of what is asked: filesystem
// confinement, a network cut off for TCP and UDP, read roots kept
// read-only inside writable directories, or a cgroup limit. The Report is
// what would be applied anyway, degraded, but for the policy's binds:
// where they cannot be made (no mount namespace) the error names them,
// and Start refuses the command whether Spec.Require is set or not.
func Plan(p Policy, l Limits, caps Capabilities) (Report, error) {
	_, r, err := plan(p, l, caps)
	return r, err
}

// plan computes the layers and the report; see Plan. Its parts run in
// this order, each adding to what the ones before planned (the binds, the
// Landlock ABI) and to missing and gaps, whose order is the report's:
// the filesystem, the processes and paths hidden (planIsolation), the
// policy's binds, Landlock keeping the mounts in place, the private /tmp,
// the binds sorted, the network, unix sockets, scoping, the capabilities
// dropped, the layers named, and last the limits.
func plan(p Policy, l Limits, caps Capabilities) (layers, Report, error) {
	if err := p.validate(); err != nil {
		return layers{}, Report{}, err
	}
	if err := p.checkBinds(); err != nil {
		return layers{}, Report{}, err
	}
	var (
		ly      layers
		missing []string
		gaps    []string
	)
	abi := min(caps.LandlockABI, maxABI)
	rep := Report{Filesystem: Full, Network: true}

	planFilesystem(p, caps, abi, &ly, &rep, &missing, &gaps)
	planIsolation(p, caps, abi, &ly, &rep, &missing, &gaps)
	planBinds(p, caps, abi, &ly, &rep, &missing)
	planMountLock(p, caps, abi, &ly, &gaps)
	planTmp(p, caps, &ly, &gaps)
	ly.binds = sortBinds(ly.binds)
	planNetwork(p, caps, abi, &ly, &rep, &missing, &gaps)
	planUnixSockets(p, caps, abi, &ly, &missing)
	planScope(caps, abi, &ly, &gaps)
	ly.capDrop = caps.CapDrop && ly.fsHandled && !ly.fsGrantAll
	rep.EnforcedBy = enforcedBy(ly)
	planLimits(l, caps, &ly, &rep, &missing, &gaps)

	rep.NotEnforced = append(slices.Clone(missing), gaps...)
	if len(missing) > 0 {
		return ly, rep, &UnavailableError{Missing: missing}
	}
	return ly, rep, nil
}

// planFilesystem plans the filesystem part of plan: outside Full mode,
// Landlock confines writes to the writable directories, and a mount
// namespace keeps the read roots inside them read-only; in Full mode the
// read roots are still bound read-only where a mount namespace can be
// made. abi is the Landlock ABI plan uses.
func planFilesystem(p Policy, caps Capabilities, abi int, ly *layers, rep *Report, missing, gaps *[]string) {
	mode := p.mode()
	confineFS := mode != Full
	readRoots := cleanPaths(p.ReadRoots)
	if confineFS {
		if abi == 0 {
			*missing = append(*missing, "filesystem confinement: "+caps.reason("landlock", "no Landlock"))
		} else {
			ly.abi = abi
			ly.fsHandled = true
			ly.writable = p.writableDirs()
			rep.Filesystem = mode
			if abi < 3 {
				*gaps = append(*gaps, "truncating files outside the writable directories (Landlock ABI < 3)")
			}
			if abi < 5 {
				*gaps = append(*gaps, "ioctl on devices (Landlock ABI < 5)")
			}
			if caps.MountNS {
				ly.mntns, ly.roRoot = true, true
				for _, w := range ly.writable {
					ly.binds = append(ly.binds, bind{path: w, kind: bindWritable})
				}
				for _, r := range readRoots {
					if under(r, ly.writable) {
						ly.binds = append(ly.binds, bind{path: r, kind: bindReadOnly})
					}
				}
			} else {
				*gaps = append(*gaps, "metadata outside the writable directories (chmod, chown, utimensat, setxattr): Landlock does not cover it and "+caps.reason("mountns", "no mount namespace can be made"))
				for _, r := range readRoots {
					if under(r, ly.writable) {
						*missing = append(*missing, "read root "+r+" inside a writable directory stays writable: "+caps.reason("mountns", "no mount namespace can be made"))
					}
				}
			}
		}
	} else if len(readRoots) > 0 {
		// Full mode still never writes a read root: bind them read-only,
		// and let Landlock (granting everything) forbid undoing the binds.
		if caps.MountNS && abi > 0 {
			ly.abi = abi
			ly.fsHandled, ly.fsGrantAll = true, true
			ly.mntns = true
			for _, r := range readRoots {
				ly.binds = append(ly.binds, bind{path: r, kind: bindReadOnly})
			}
		} else {
			why := caps.reason("mountns", "no mount namespace can be made")
			if abi == 0 {
				why = caps.reason("landlock", "no Landlock to keep the read-only binds in place")
			}
			*missing = append(*missing, "read roots kept read-only in full mode: "+why)
		}
	}
}

// planNetwork plans the network part of plan, which only Network false
// asks for (with Proxy, the caller's proxy is the one way out). With the
// network off, a network namespace with its loopback up is the boundary:
// Landlock leaves TCP alone there, so that the command's own servers
// listen and the proxy is reached. Where the forking thread cannot
// unshare one, Landlock denies TCP (ABI 4), and a user namespace's
// network namespace, else a seccomp filter, cuts off the rest.
func planNetwork(p Policy, caps Capabilities, abi int, ly *layers, rep *Report, missing, gaps *[]string) {
	if p.Network {
		return
	}
	if p.Proxy {
		if caps.NetNS == NetNSUnshare {
			ly.proxy = true
			rep.Proxy = true
		} else {
			*missing = append(*missing, "network allow-list (a proxy in a network namespace of its own): "+proxyReason(caps)+"; the network is off instead")
		}
	}
	if abi >= 4 && caps.NetNS != NetNSUnshare {
		ly.abi = max(ly.abi, abi)
		ly.netTCP = true
	}
	switch {
	case caps.NetNS == NetNSUnshare || (caps.NetNS == NetNSUserNS && caps.PtraceStop):
		ly.netns = caps.NetNS
		rep.Network = false
	case caps.Seccomp:
		ly.seccomp = true
		rep.Network = false
	default:
		why := caps.reason("netns", "no network namespace") + ", " + caps.reason("seccomp", "no seccomp")
		if ly.netTCP {
			*missing = append(*missing, "UDP cut off: "+why)
			*gaps = append(*gaps, "UDP and raw sockets (only TCP is denied, by Landlock)")
		} else {
			*missing = append(*missing, "network cut off: "+why)
			*gaps = append(*gaps, "the network (nothing can cut it off)")
		}
	}
}

// planScope plans Landlock's scoping of signals and abstract unix
// sockets, whatever the mode, and puts a command in a network namespace
// of its own in a Landlock domain even when nothing else does. It runs
// after the network and unix socket parts of plan.
func planScope(caps Capabilities, abi int, ly *layers, gaps *[]string) {
	if abi >= 6 {
		ly.abi = max(ly.abi, abi)
		ly.scoped = true
	} else if ly.netns == NetNSNone {
		*gaps = append(*gaps, "signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)")
	} else {
		*gaps = append(*gaps, "signals to processes outside the sandbox (Landlock ABI < 6; abstract unix sockets are cut off by the network namespace)")
	}
	if ly.netns == NetNSUnshare && ly.abi == 0 && abi >= 4 {
		// Nothing else puts the command in a Landlock domain, which keeps
		// it from opening the namespaces of processes outside (ptrace
		// access): handle TCP then, and let the proxy's port through.
		ly.abi = abi
		ly.netTCP = true
	}
}

// enforcedBy names the layers of ly, in the order they are applied,
// joined by "+" (Report.EnforcedBy).
func enforcedBy(ly layers) string {
	var by []string
	if ly.abi > 0 {
		by = append(by, fmt.Sprintf("landlock-abi-%d", ly.abi))
	}
	if ly.mntns {
		by = append(by, "mntns")
	}
	if ly.pidns {
		by = append(by, "pidns")
	}
	switch ly.netns {
	case NetNSUnshare:
		by = append(by, "netns")
		if ly.proxy {
			by = append(by, "proxy")
		}
	case NetNSUserNS:
		by = append(by, "userns-netns")
	}
	if ly.seccomp {
		by = append(by, "seccomp")
	}
	if ly.unixSeccomp {
		by = append(by, "seccomp-unix")
	}
	if ly.capDrop {
		by = append(by, "capdrop")
	}
	return strings.Join(by, "+")
}

// planLimits plans the limits of l: memory and pids by cgroup (a pids
// limit of one on a v1 group needs the child stopped at its exec), CPU
// time by RLIMIT_CPU, set at the exec where the child can be stopped
// there.
func planLimits(l Limits, caps Capabilities, ly *layers, rep *Report, missing, gaps *[]string) {
	cgroupLimit := func(kind Limit, want int64, c Controller, dst *Controller) {
		if want <= 0 {
			return
		}
		if c.Version == 0 {
			*missing = append(*missing, string(kind)+" limit: "+caps.reason(string(kind), "no cgroup "+string(kind)+" controller"))
			return
		}
		*dst = c
		if rep.Limits == nil {
			rep.Limits = make(map[Limit]string)
		}
		rep.Limits[kind] = fmt.Sprintf("cgroup-v%d", c.Version)
	}
	cgroupLimit(LimitMemory, l.MemoryBytes, caps.Memory, &ly.memory)
	if l.Pids == 1 && caps.Pids.Version == 1 && !caps.PtraceStop {
		*missing = append(*missing, "pids limit 1: "+caps.reason("ptrace", "the child cannot be stopped at its exec"))
	} else {
		cgroupLimit(LimitPids, l.Pids, caps.Pids, &ly.pids)
		ly.pidsAtExec = l.Pids == 1 && ly.pids.Version == 1
	}
	if l.CPU > 0 && !caps.CPULimit {
		*missing = append(*missing, "cpu limit: "+caps.reason("cpu", "no RLIMIT_CPU"))
	} else if l.CPU > 0 {
		ly.cpuSeconds = uint64((l.CPU + time.Second - 1) / time.Second)
		ly.cpuAtExec = caps.PtraceStop
		if rep.Limits == nil {
			rep.Limits = make(map[Limit]string)
		}
		rep.Limits[LimitCPU] = "rlimit"
		if !ly.cpuAtExec {
			*gaps = append(*gaps, "cpu limit for processes forked before it was set, right after exec: "+caps.reason("ptrace", "the child cannot be stopped at its exec"))
		}
	}
}

// proxyReason says why no network namespace can host the proxy's
// listener.
func proxyReason(caps Capabilities) string {
	if caps.NetNS == NetNSUserNS {
		return "the network namespace is a user namespace's, made at the fork, where the server cannot listen"
	}
	return caps.reason("netns", "no network namespace")
}
