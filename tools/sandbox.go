package tools

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/workspace"
)

// confinement is a session's confinement of commands, fixed by Initialize:
// the command line's, narrowed by initializationOptions.sandbox.
type confinement struct {
	mode string // SandboxAuto, SandboxRequired or SandboxOff
	// caps are what the kernel can confine, filled in by measure;
	// noLandlock fakes a kernel without Landlock (--debug-no-landlock).
	caps       sandbox.Capabilities
	noLandlock bool
	// def is the confinement of a command that asks for none; explicit
	// says the client chose it, so that it is required, never degraded.
	def      level
	explicit bool
	// limits are the most a command may use; zero fields are unlimited.
	limits sandbox.Limits
	// root, writable and readOnly are the policy's directories; home is
	// the server's $HOME, for "~" in denyRead.
	root     string
	home     string
	writable []string
	readOnly []string
	// hidden are the paths every command is denied besides its level's
	// (SandboxConfig.Hidden), real paths of those that exist.
	hidden []string
	// dir holds the session's cache ("cache") and the confined commands'
	// temporary directories ("tmp"); Shutdown removes it.
	dir string
	// cache is the root's cache directory in the state directory, "" for
	// the session's (useRootCache); userCache are the cache variables the
	// server's environment sets.
	cache     string
	userCache map[string]string
}

// level is a filesystem mode, a network setting and the paths protected
// and hidden. Levels are compared with equal.
type level struct {
	fs protocol.SandboxFilesystem
	// network is false when the network is off; allow, when not nil,
	// limits it to the hosts of the list, through toolhost's proxy.
	network bool
	allow   *netproxy.AllowList
	// protect and denyRead are absolute paths, cleaned, without
	// duplicates: what a command may read but not change, and what it
	// may not read.
	protect, denyRead []string
	// repos are the NAMEs of the "**/.git/NAME" protect rules, sorted:
	// NAME in the git directory of every repository in the root, found
	// when a command starts (repos.go). The root's own .git/NAME is in
	// protect as well.
	repos []string
}

// equal reports whether l and o confine alike.
func (l level) equal(o level) bool {
	return l.fs == o.fs && l.equalNetwork(o) && slices.Equal(l.protect, o.protect) && slices.Equal(l.denyRead, o.denyRead) && slices.Equal(l.repos, o.repos)
}

// equalNetwork reports whether l and o have the same network.
func (l level) equalNetwork(o level) bool {
	sameAllow := (l.allow == nil) == (o.allow == nil) && (l.allow == nil || slices.Equal(l.allow.Patterns(), o.allow.Patterns()))
	return l.network == o.network && sameAllow
}

// unconfined is the level of a command nothing confines.
var unconfined = level{fs: protocol.SandboxFull, network: true}

// strictness orders the filesystem modes: a request may only go up.
var strictness = map[protocol.SandboxFilesystem]int{protocol.SandboxFull: 0, protocol.SandboxWorkspaceWrite: 1, protocol.SandboxReadOnly: 2}

// tighten returns base narrowed by asked; field names asked for errors. A
// looser mode, a wider network than base's (on where base is off or
// allow-listed, an allow-list entry base's list does not cover), or a
// malformed entry is InvalidParams. Protected and denied paths are added
// to base's, never removed.
func (c *confinement) tighten(base level, asked *protocol.Sandbox, field string) (level, error) {
	if asked == nil {
		return base, nil
	}
	out := base
	if asked.Filesystem != "" {
		n, ok := strictness[asked.Filesystem]
		if !ok {
			return base, protocol.InvalidParams(field+".filesystem", `must be "workspace-write", "read-only" or "full", not %q`, asked.Filesystem)
		}
		if n < strictness[base.fs] {
			return base, protocol.InvalidParams(field+".filesystem", "%q is looser than %q, which the server or the session set; a client may tighten confinement, never loosen it", asked.Filesystem, base.fs)
		}
		out.fs = asked.Filesystem
	}
	if asked.Network != nil {
		var err error
		if out.network, out.allow, err = narrowNetwork(base, asked.Network, field+".network"); err != nil {
			return base, err
		}
	}
	var err error
	if out.protect, out.repos, err = c.addProtect(base, asked.Protect, field+".protect"); err != nil {
		return base, err
	}
	if out.denyRead, err = c.addPaths(base.denyRead, asked.DenyRead, field+".denyRead", c.expandHome); err != nil {
		return base, err
	}
	return out, nil
}

// newConfinement sets up the session's confinement: the session directory
// and the default, narrowed by asked; measure then adds the kernel's
// capabilities.
func newConfinement(cfg SandboxConfig, ws *workspace.Workspace, asked *protocol.Sandbox) (*confinement, error) {
	c := &confinement{
		mode:   cfg.Mode,
		def:    level{fs: cfg.Filesystem, network: cfg.Network},
		limits: cfg.Limits,
		root:   ws.Root(),
		home:   cfg.Home,
	}
	if c.mode == "" {
		c.mode = SandboxAuto
	}
	if c.def.fs == "" {
		c.def.fs = protocol.SandboxWorkspaceWrite
	}
	if c.mode == SandboxOff {
		c.def = unconfined // nothing is confined
	} else if err := c.serverLevel(cfg); err != nil {
		return nil, err
	}
	def, err := c.tighten(c.def, asked, "initializationOptions.sandbox")
	if err != nil {
		return nil, err
	}
	c.def, c.explicit = def, asked != nil
	if c.mode == SandboxOff {
		return c, nil
	}
	c.noLandlock = cfg.NoLandlock
	for _, h := range cfg.Hidden {
		if real, err := filepath.EvalSymlinks(h); err == nil {
			c.hidden = append(c.hidden, real)
		}
	}
	for _, d := range cfg.Writable {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return nil, fmt.Errorf("--writable %s: %w", d, err)
		}
		c.writable = append(c.writable, real)
	}
	c.readOnly = append(append([]string{}, ws.ReadRoots()...), ws.ArtifactsDir())
	if c.dir, err = capture.MkdirOwned("", capture.KindSession); err != nil {
		return nil, fmt.Errorf("cannot create the session directory: %w", err)
	}
	for _, sub := range []string{"cache", "tmp"} {
		if err := os.Mkdir(filepath.Join(c.dir, sub), 0o700); err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("cannot create the session directory: %w", err)
		}
	}
	real, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	c.dir = real
	c.useRootCache(cfg)
	return c, nil
}

// measure fills in what the kernel can confine (sandbox.DefaultCapabilities),
// waiting for the probe main started if it has not finished: Initialize
// calls it last, so that the session's directories and process manager
// are made meanwhile.
func (c *confinement) measure() {
	if c.mode == SandboxOff {
		return
	}
	c.caps = sandbox.DefaultCapabilities()
	if c.noLandlock {
		c.caps.LandlockABI = 0
		c.caps.Reasons = maps.Clone(c.caps.Reasons)
		if c.caps.Reasons == nil {
			c.caps.Reasons = map[string]string{}
		}
		c.caps.Reasons["landlock"] = "Landlock is not available (faked by --debug-no-landlock)"
	}
}

// remove removes the session directory; it is safe on nil.
func (c *confinement) remove() {
	if c != nil && c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir = ""
	}
}

// cacheDir is the cache directory, writable in workspace-write: the
// root's (useRootCache), else the session's.
func (c *confinement) cacheDir() string {
	if c.cache != "" {
		return c.cache
	}
	return filepath.Join(c.dir, "cache")
}

// tmpRoot holds the confined commands' own temporary directories.
func (c *confinement) tmpRoot() string {
	if c == nil || c.dir == "" {
		return ""
	}
	return filepath.Join(c.dir, "tmp")
}

// capability reports the confinement for initialize.
func (c *confinement) capability() protocol.SandboxCapability {
	cap := protocol.SandboxCapability{
		Mode:    c.mode,
		ABI:     c.caps.LandlockABI,
		Default: protocol.Sandbox{Filesystem: c.def.fs, Network: c.def.wire(), Protect: c.protectWire(c.def), DenyRead: c.def.denyRead},
		Layers:  []string{},
	}
	if c.mode == SandboxOff {
		cap.Reason = "confinement is off (--sandbox off)"
		return cap
	}
	cap.Available = c.caps.LandlockABI > 0
	if cap.Available {
		cap.Layers = append(cap.Layers, fmt.Sprintf("landlock-abi-%d", min(c.caps.LandlockABI, 7)))
	}
	if c.caps.MountNS {
		cap.Layers = append(cap.Layers, "mntns")
	}
	if c.caps.PIDNS {
		cap.Layers = append(cap.Layers, "pidns")
	}
	if c.caps.NetNS != sandbox.NetNSNone {
		cap.Layers = append(cap.Layers, "netns")
	}
	if c.caps.NetNS == sandbox.NetNSUnshare {
		// A network allow-list's proxy needs a namespace it can listen in.
		cap.Layers = append(cap.Layers, "proxy")
	}
	if c.caps.Seccomp {
		cap.Layers = append(cap.Layers, "seccomp")
	}
	if v := c.caps.Memory.Version; v > 0 {
		cap.Layers = append(cap.Layers, fmt.Sprintf("memory:cgroup-v%d", v))
	}
	if v := c.caps.Pids.Version; v > 0 {
		cap.Layers = append(cap.Layers, fmt.Sprintf("pids:cgroup-v%d", v))
	}
	if c.caps.CPULimit {
		cap.Layers = append(cap.Layers, "cpu:rlimit")
	}
	var missing []string
	for _, k := range []string{"landlock", "mountns", "netns"} {
		if r := c.caps.Reasons[k]; r != "" {
			missing = append(missing, r)
		}
	}
	cap.Reason = strings.Join(missing, "; ")
	return cap
}

// policy returns the sandbox policy of a level.
func (c *confinement) policy(l level) sandbox.Policy {
	return sandbox.Policy{
		Filesystem: sandbox.Filesystem(l.fs),
		Network:    l.network && l.allow == nil,
		Root:       c.root,
		CacheDir:   c.cacheDir(),
		Writable:   c.writable,
		ReadRoots:  c.readOnly,
		Protect:    l.protect,
		DenyRead:   append(slices.Clone(l.denyRead), c.hidden...),
		Unlisted:   c.hidden,
		// A confined command gets a PID namespace wherever the server can
		// make one; --sandbox required also refuses to run without.
		IsolatePIDs: c.mode == SandboxRequired,
	}
}

// confine turns a request's sandbox, limits and steps into the process
// confinement, and points the caches of a workspace-write command at the
// session's cache directory unless env sets them. It returns nil for a
// command that runs unconfined (--sandbox off, and nothing asked).
//
// A sandbox wider than the session's is refused, unless wider (when not
// nil) gives the level to run with instead: the user allowed it.
func (c *confinement) confine(p *protocol.RunCommandParams, spec *process.Spec, steps []protocol.StepSpec, wider func(refusal error) (level, error)) error {
	explicit := c.explicit || p.Sandbox != nil || p.Limits != nil
	for _, st := range steps {
		explicit = explicit || st.Sandbox != nil
	}
	lvl, err := c.tighten(c.def, p.Sandbox, "sandbox")
	if err != nil && wider != nil {
		lvl, err = wider(err)
	}
	if err != nil {
		return err
	}
	limits, err := c.narrowLimits(p.Limits)
	if err != nil {
		return err
	}
	levels := make([]level, len(steps))
	for i, st := range steps {
		if levels[i], err = c.tighten(lvl, st.Sandbox, fmt.Sprintf("steps[%d].sandbox", i)); err != nil {
			return err
		}
	}
	if c.mode == SandboxOff {
		asked := !lvl.equal(unconfined) || limits != (sandbox.Limits{})
		for _, sl := range levels {
			asked = asked || !sl.equal(lvl)
		}
		if explicit && asked {
			return protocol.NewError(protocol.CodeSandboxUnavailable, &protocol.ErrorData{Field: "sandbox", Reason: "the server runs with --sandbox off", Missing: []string{"confinement is off (--sandbox off)"}},
				"sandbox unavailable: the server runs with --sandbox off")
		}
		return nil
	}
	for i, sl := range levels {
		// A command's allow-list is its proxy's, which serves every
		// step: a step may not have a network of its own beside it.
		if (lvl.allow != nil || sl.allow != nil) && !sl.equalNetwork(lvl) {
			return protocol.InvalidParams(fmt.Sprintf("steps[%d].sandbox.network", i), "a step's network must be its command's when either is an allow-list: give network.allow on the command, where every step uses it")
		}
	}
	spec.Confine = &process.Confinement{
		Policy:  c.policy(lvl),
		Limits:  limits,
		Require: c.mode == SandboxRequired || explicit,
		Caps:    &c.caps,
		Network: lvl.allow,
	}
	workspaceWrite := lvl.fs == protocol.SandboxWorkspaceWrite
	for i, sl := range levels {
		if !sl.equal(lvl) {
			pol := c.policy(sl)
			spec.Steps[i].Policy = &pol
		}
		workspaceWrite = workspaceWrite || sl.fs == protocol.SandboxWorkspaceWrite
	}
	if workspaceWrite {
		spec.Env = c.cacheEnv(spec.Env)
	}
	return nil
}

// narrowLimits returns the server's limits lowered by asked.
func (c *confinement) narrowLimits(asked *protocol.Limits) (sandbox.Limits, error) {
	l := c.limits
	if asked == nil {
		return l, nil
	}
	lower := func(field string, cur int64, v *int64, flag string) (int64, error) {
		if v == nil {
			return cur, nil
		}
		if *v <= 0 {
			return 0, protocol.InvalidParams("limits."+field, "must be positive, not %d", *v)
		}
		if cur > 0 && *v > cur {
			return 0, protocol.InvalidParams("limits."+field, "must be at most %d (%s); a client may lower a limit, never raise it", cur, flag)
		}
		return *v, nil
	}
	var err error
	if l.MemoryBytes, err = lower("memoryBytes", l.MemoryBytes, asked.MemoryBytes, "--limit-memory"); err != nil {
		return l, err
	}
	if l.Pids, err = lower("pids", l.Pids, asked.Pids, "--limit-pids"); err != nil {
		return l, err
	}
	if asked.CPUMs != nil {
		// The server's limit in whole milliseconds, rounded up, so that
		// one under a millisecond is not taken for none.
		cur := l.CPU.Milliseconds()
		if l.CPU%time.Millisecond != 0 {
			cur++
		}
		cpu, err := lower("cpuMs", cur, asked.CPUMs, "--limit-cpu")
		if err != nil {
			return l, err
		}
		if d := msDuration(cpu); l.CPU == 0 || d < l.CPU {
			l.CPU = d
		}
	}
	return l, nil
}

// sandboxError maps a refusal of package sandbox to SandboxUnavailable.
func sandboxError(err error) (error, bool) {
	var ue *sandbox.UnavailableError
	if !errors.As(err, &ue) {
		return nil, false
	}
	return protocol.NewError(protocol.CodeSandboxUnavailable, &protocol.ErrorData{Reason: err.Error(), Missing: ue.Missing},
		"sandbox unavailable: the kernel cannot give the confinement asked: %s", strings.Join(ue.Missing, "; ")), true
}

// sandboxApplied converts a sandbox report to the wire; allow is the
// network allow-list of the command, which the report's proxy enforced.
func sandboxApplied(r *sandbox.Report, allow []string) *protocol.SandboxApplied {
	if r == nil {
		return nil
	}
	a := &protocol.SandboxApplied{
		Filesystem:  protocol.SandboxFilesystem(r.Filesystem),
		Network:     r.Network,
		EnforcedBy:  r.EnforcedBy,
		NotEnforced: r.NotEnforced,
	}
	a.Protect, a.DenyRead = r.Protect, r.DenyRead
	if r.Proxy {
		// The command reached what the list allows, and nothing else.
		a.Network, a.NetworkAllow = true, allow
		if a.NetworkAllow == nil {
			a.NetworkAllow = []string{}
		}
	}
	if len(r.Limits) > 0 {
		a.Limits = make(map[string]string, len(r.Limits))
		for k, v := range r.Limits {
			a.Limits[string(k)] = v
		}
	}
	return a
}

// networkUse converts what a command's proxies counted to the wire.
func networkUse(s *netproxy.Stats) *protocol.NetworkUse {
	if s == nil {
		return nil
	}
	u := &protocol.NetworkUse{Allowed: make([]protocol.NetworkAllowed, 0, len(s.Allowed)), Denied: make([]protocol.NetworkDenied, 0, len(s.Denied))}
	for _, a := range s.Allowed {
		u.Allowed = append(u.Allowed, protocol.NetworkAllowed{Host: a.Host, Port: a.Port, Connections: a.Connections, BytesOut: a.BytesOut, BytesIn: a.BytesIn})
	}
	for _, d := range s.Denied {
		u.Denied = append(u.Denied, protocol.NetworkDenied{Host: d.Host, Port: d.Port, Attempts: d.Attempts})
	}
	u.OverLimit = s.OverLimit
	return u
}
