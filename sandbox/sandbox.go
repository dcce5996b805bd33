package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Filesystem is a filesystem mode of a Policy.
type Filesystem string

// The filesystem modes of the brief.
const (
	// WorkspaceWrite writes only under the workspace root, the command's
	// temporary directory, the cache directory (the root's, or the
	// session's) and the extra writable directories.
	WorkspaceWrite Filesystem = "workspace-write"
	// ReadOnly writes only to the command's temporary directory.
	ReadOnly Filesystem = "read-only"
	// Full adds no filesystem confinement (read roots are still protected
	// where a mount namespace can be made).
	Full Filesystem = "full"
)

// Policy describes the confinement asked for one command. Every mode reads
// anything the user can. Paths must be absolute directories; Start
// resolves symlinks. The zero Policy is the tightest: workspace-write
// (with no directory to write) and no network.
type Policy struct {
	// Filesystem is the filesystem mode; the zero value is WorkspaceWrite.
	Filesystem Filesystem
	// Network allows the network; false cuts the command off from it.
	Network bool
	// Proxy, with Network false, gives the command a network namespace
	// whose only way out is a proxy the caller serves: Start makes a TCP
	// listener on the namespace's loopback (ProxyListener) and puts
	// Spec.ProxyEnv's variables, naming its address, into the command's
	// environment. Where no such namespace can be made the network is off
	// instead (Require refuses). It must not be set with Network.
	Proxy bool
	// Root is the workspace root, writable in WorkspaceWrite.
	Root string
	// TempDir is the command's own temporary directory (its TMPDIR),
	// writable in WorkspaceWrite and ReadOnly.
	TempDir string
	// CacheDir is the cache directory (the root's, or the session's),
	// writable in WorkspaceWrite.
	CacheDir string
	// Writable are the extra writable directories (--writable), writable in
	// WorkspaceWrite.
	Writable []string
	// ReadRoots are never written, in any mode, even when nested in a
	// writable directory.
	ReadRoots []string
	// Protect are paths (files or directories) the command may read but
	// not change, even inside a writable directory (.git/hooks): each one
	// that exists is bound read-only on itself. Absolute; the caller
	// resolves "~" and paths relative to the root.
	Protect []string
	// DenyRead are paths the command cannot read, in any mode: each one
	// that exists is masked by an empty read-only directory or file.
	// Absolute, like Protect.
	DenyRead []string
	// Unlisted are denied paths, among DenyRead, that the Report does
	// not list: the caller's own (its state directory, its secrets),
	// which its clients never named. They are masked all the same; one
	// that cannot be is in NotEnforced, but does not make Require refuse
	// the command (the caller decides whether it may run so). Real
	// paths.
	Unlisted []string
	// Binds show files and directories of the machine at other paths in
	// the command's mount namespace (see Bind). Where no mount namespace
	// can be made Start refuses the command, Require or not: it never runs
	// without its binds.
	Binds []Bind
	// IsolatePIDs asks that the command see only its own processes (a
	// PID namespace with a /proc of its own); where that cannot be made,
	// Plan reports it missing. A command gets one wherever the server can
	// make it, asked or not.
	IsolatePIDs bool
}

// Bind shows Source at Target in the command's mount namespace: Source is
// bind-mounted there, with the mounts beneath it (the masks of denied
// paths and the read-only binds of protected paths and read roots
// included), so that what lies beneath Target on the machine is out of
// the command's sight. Source is read-only there, in every mount beneath
// it, unless Writable.
type Bind struct {
	// Source is the directory or regular file shown, absolute; Start
	// resolves symlinks. It may not lie in a denied path (a bind does not
	// show what is denied), but for a directory the command uses there,
	// which stays in its sight (a writable directory, the root, a read
	// root).
	Source string
	// Target is where the command sees Source, absolute; Start resolves
	// symlinks. It must exist, of the same kind as Source (a directory or
	// a regular file): the caller makes the mount point. It may lie
	// anywhere (in the root, in a denied directory, in the host's /tmp),
	// but may not be / nor hold a directory the command uses (the root,
	// the temporary, cache and writable directories, a read root), nor
	// another bind's target, nor lie in one.
	Target string
	// Writable lets the command write beneath Target, and so in Source,
	// in workspace-write and full modes (read-only mode binds every Source
	// read-only). A writable bind is a writable directory for Landlock,
	// but for the protected paths and read roots beneath Source, which
	// stay read-only, and for protected paths beneath Target, which are
	// bound read-only again on top of it (Source must then have them too).
	// Its Source and its Target may not lie in a protected path or a read
	// root. A bind that is not writable is never written, even where its
	// Target lies in a writable directory.
	Writable bool
	// Owned says Source is the caller's own (a mount's cache, kept in the
	// state directory every command is denied): it may lie in a denied
	// path, whose mask then holds the path down to Source and shows
	// Source again there, as it does a directory the command uses, and
	// nothing else of it.
	Owned bool
}

// mode returns the filesystem mode with the zero value resolved.
func (p Policy) mode() Filesystem {
	if p.Filesystem == "" {
		return WorkspaceWrite
	}
	return p.Filesystem
}

// writableDirs lists the directories the mode lets the command write,
// cleaned and without duplicates; nil for Full (everything).
func (p Policy) writableDirs() []string {
	var dirs []string
	switch p.mode() {
	case WorkspaceWrite:
		dirs = append([]string{p.Root, p.TempDir, p.CacheDir}, p.Writable...)
	case ReadOnly:
		dirs = []string{p.TempDir}
	}
	return cleanPaths(dirs)
}

// cleanPaths drops empty paths, cleans the rest and removes duplicates.
func cleanPaths(in []string) []string {
	var out []string
	for _, p := range in {
		if p == "" {
			continue
		}
		p = filepath.Clean(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// validate checks the mode and that every path is absolute.
func (p Policy) validate() error {
	switch p.mode() {
	case WorkspaceWrite, ReadOnly, Full:
	default:
		return fmt.Errorf("unknown filesystem mode %q", p.Filesystem)
	}
	if p.Proxy && p.Network {
		return errors.New("the network proxy needs the network off")
	}
	all := append([]string{p.Root, p.TempDir, p.CacheDir}, p.Writable...)
	all = append(all, p.ReadRoots...)
	all = append(all, p.Protect...)
	all = append(all, p.DenyRead...)
	for _, b := range p.Binds {
		if b.Source == "" || b.Target == "" {
			return fmt.Errorf("bind %q on %q: a source and a target are needed", b.Source, b.Target)
		}
		all = append(all, b.Source, b.Target)
	}
	for _, d := range all {
		if d != "" && !filepath.IsAbs(d) {
			return fmt.Errorf("path %q is not absolute", d)
		}
	}
	return nil
}

// Limits are the resource limits of one command; zero fields are unlimited.
type Limits struct {
	// MemoryBytes caps the memory of the command's whole tree (cgroup).
	MemoryBytes int64
	// Pids caps how many tasks (processes and threads) the tree holds at
	// once (cgroup).
	Pids int64
	// CPU is each process's CPU time (RLIMIT_CPU), rounded up to whole
	// seconds: SIGXCPU then, SIGKILL a second later.
	CPU time.Duration
}

// Limit names a limit a command exceeded.
type Limit string

// The limits a command can exceed; "" is none.
const (
	LimitMemory Limit = "memory"
	LimitPids   Limit = "pids"
	LimitCPU    Limit = "cpu"
)

// NetNSMethod says how a network namespace of its own is given to a child.
type NetNSMethod string

// The ways to make a network namespace.
const (
	// NetNSNone: no network namespace can be made.
	NetNSNone NetNSMethod = ""
	// NetNSUnshare: the forking thread unshares CLONE_NEWNET before the
	// fork (needs CAP_SYS_ADMIN); the namespace's loopback is brought up.
	NetNSUnshare NetNSMethod = "unshare"
	// NetNSUserNS: the child is cloned into a new user namespace, mapping
	// only the server's uid and gid, and a new network namespace (no
	// privileges needed where user namespaces are allowed); its loopback
	// stays down. The maps are written while the child is stopped at its
	// exec, so it needs PtraceStop.
	NetNSUserNS NetNSMethod = "userns"
)

// Controller says where a cgroup controller (pids or memory) is usable.
type Controller struct {
	// Version is 2 (a delegated cgroup v2 controller), 1 (a v1 hierarchy)
	// or 0 (unavailable).
	Version int `json:"version"`
	// Parent is the directory under which per-command groups are made.
	Parent string `json:"parent,omitempty"`
}

// Capabilities are what the kernel and the server's privileges offer, as
// Probe measured them. A test may build one by hand to fake a kernel.
type Capabilities struct {
	// LandlockABI is the Landlock ABI version, 0 without Landlock.
	LandlockABI int `json:"landlockAbi"`
	// NetNS is how a network namespace can be made.
	NetNS NetNSMethod `json:"netns,omitempty"`
	// MountNS reports whether the forking thread can unshare a mount
	// namespace and remount in it (CAP_SYS_ADMIN and mount_setattr).
	MountNS bool `json:"mountns"`
	// Seccomp reports whether a seccomp filter can be installed on this
	// architecture.
	Seccomp bool `json:"seccomp"`
	// CapDrop reports whether the server may drop capabilities from a
	// child's bounding set (it runs as root with CAP_SETPCAP).
	CapDrop bool `json:"capDrop"`
	// CPULimit reports whether RLIMIT_CPU can be set on a child (prlimit).
	CPULimit bool `json:"cpuLimit"`
	// PtraceStop reports whether a child can be stopped at its exec
	// (PTRACE_TRACEME), so that RLIMIT_CPU is set before it runs.
	PtraceStop bool `json:"ptraceStop"`
	// PIDNS reports whether the forking thread can unshare a PID
	// namespace (CAP_SYS_ADMIN) and start its init.
	PIDNS bool `json:"pidns"`
	// PIDNSProc reports whether a procfs of a new PID namespace can be
	// mounted from outside it (fsconfig's pidns option, Linux 6.18).
	PIDNSProc bool `json:"pidnsProc"`
	// Masks reports whether an empty file or directory can be mounted
	// over a path (an entry of a detached tmpfs cloned with open_tree).
	Masks bool `json:"masks"`
	// Pids and Memory are the cgroup controllers for the limits.
	Pids   Controller `json:"pids"`
	Memory Controller `json:"memory"`
	// Reasons explain each missing piece, keyed by "landlock", "netns",
	// "mountns", "seccomp", "pids", "memory", "cpu", "ptrace", "pidns",
	// "proc", "masks".
	Reasons map[string]string `json:"reasons,omitempty"`
}

// reason returns the recorded reason for a missing piece, or a default.
func (c Capabilities) reason(key, def string) string {
	if r := c.Reasons[key]; r != "" {
		return r
	}
	return def
}

// maxABI is the newest Landlock ABI whose rights this package knows; on a
// newer kernel it asks for these rights and reports this ABI.
const maxABI = 9

// Report says what was really applied to a command. It never claims what
// was not enforced.
type Report struct {
	// Filesystem is the mode enforced: Full when nothing confines writes.
	Filesystem Filesystem `json:"filesystem"`
	// Network is false only when the command cannot reach the network
	// (TCP and UDP) outside its own loopback.
	Network bool `json:"network"`
	// Proxy is true when the command's only way out of its network
	// namespace is the caller's proxy, on the namespace's loopback
	// (Policy.Proxy); Network is then false.
	Proxy bool `json:"proxy,omitempty"`
	// EnforcedBy lists the layers applied, joined by "+", for example
	// "landlock-abi-7+mntns+netns"; "" when none. The proxy is
	// "netns+proxy".
	EnforcedBy string `json:"enforcedBy"`
	// Limits maps each limit applied to how: "cgroup-v1", "cgroup-v2",
	// "rlimit".
	Limits map[Limit]string `json:"limits,omitempty"`
	// NotEnforced lists, one sentence each, what was asked for or is
	// usually expected and was not enforced.
	NotEnforced []string `json:"notEnforced,omitempty"`
	// Protect lists the protected paths the command cannot change (those
	// that existed when it started; Plan cannot tell and lists them all).
	Protect []string `json:"protect,omitempty"`
	// DenyRead lists the denied paths masked from the command (those that
	// existed when it started; Plan lists them all).
	DenyRead []string `json:"denyRead,omitempty"`
	// Binds lists the targets of the binds made, each followed by ":ro"
	// (read-only) or ":rw" (writable), in the policy's order; none when no
	// bind was made.
	Binds []string `json:"binds,omitempty"`
}

// ErrUnavailable is the sentinel for confinement the kernel cannot give.
// Errors from Plan and Start wrap it in an *UnavailableError.
var ErrUnavailable = errors.New("sandbox unavailable")

// UnavailableError names what is missing for the confinement asked.
type UnavailableError struct {
	// Missing lists each missing piece, one phrase each.
	Missing []string
}

// Error lists the missing pieces.
func (e *UnavailableError) Error() string {
	return "sandbox unavailable: " + strings.Join(e.Missing, "; ")
}

// Unwrap returns ErrUnavailable.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// bindKind says what a bind of the mount namespace puts over its path.
type bindKind int

// The kinds of binds, in the order they are applied to one path.
const (
	// bindWritable binds the path on itself with what lies beneath, its
	// top mount read-write (a writable directory).
	bindWritable bindKind = iota
	// bindPin binds the path on itself as it is: a mount point cannot be
	// renamed or removed, so a read-only bind beneath it stays in place.
	bindPin
	// bindReadOnly binds the path on itself, read-only with everything
	// beneath (a read root, a protected path).
	bindReadOnly
	// bindMask mounts an empty read-only directory or file over the path
	// (a denied path).
	bindMask
)

// bind is one mount of the mount namespace over path.
type bind struct {
	path string
	kind bindKind
}

// layers is the plan of what to apply to one child.
type layers struct {
	// abi is the Landlock ABI whose rights are used; 0: no Landlock.
	abi int
	// fsHandled: Landlock handles filesystem rights; fsGrantAll grants
	// them all on "/" (Full mode, to lock the mount namespace's binds).
	fsHandled, fsGrantAll bool
	// writable are the directories granted write rights.
	writable []string
	// fds are O_PATH descriptors of the policy's paths, by real path
	// (Linux; the caller owns them).
	fds map[string]int
	// netTCP: Landlock denies TCP bind and connect.
	netTCP bool
	// scoped: Landlock scopes signals and abstract unix sockets.
	scoped bool
	// mntns: a mount namespace; roRoot remounts every mount read-only
	// before binds are applied in order.
	mntns, roRoot bool
	binds         []bind
	netns         NetNSMethod
	seccomp       bool
	capDrop       bool

	// holding are the denied directories that hold directories the
	// command uses or bind targets, deepest first (binds.go), masked
	// after the other binds and the block devices.
	holding []holdingMask
	// sources are the policy's binds (Policy.Binds), made after every
	// mask; bindRules are the sources of the writable ones Landlock grants
	// writes beneath (workspace-write).
	sources   []sourceBind
	bindRules []string
	// refused are missing pieces Start refuses whatever Spec.Require says
	// (binds that cannot be made).
	refused []string

	// proxy: the forking thread makes the proxy's listener in the network
	// namespace (NetNSUnshare only); proxyPort is its port, known once it
	// is made, for Landlock's connect rule where TCP is handled.
	proxy     bool
	proxyPort uint16

	// maskDevices masks every block device under /dev too, whose raw
	// bytes would give a root command the denied files back.
	maskDevices bool
	// pidns: a PID namespace of its own, with its init; procfs: a /proc
	// of that namespace mounted over /proc.
	pidns, procfs bool
	// tmp is the command's private /tmp (tmp.go), nil without one.
	tmp *tmpPlan
	// unixLandlock: Landlock handles LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	// (ABI 9); unixSeccomp: a seccomp filter refuses socket(AF_UNIX).
	unixLandlock, unixSeccomp bool
	// pids and memory are the controllers used, Version 0 when not.
	pids, memory Controller
	// cpuSeconds is RLIMIT_CPU's soft limit, 0 for none; cpuAtExec sets it
	// while the child is stopped at its exec.
	cpuSeconds uint64
	cpuAtExec  bool
	// pidsAtExec puts the child in its v1 pids group while it is stopped
	// at its exec, where the forking thread cannot join the group first: a
	// limit of one leaves no room for the thread and the child.
	pidsAtExec bool
}

// stopAtExec reports whether the child is stopped at its exec to finish
// its set-up: RLIMIT_CPU, its v1 pids group, or the id maps of its user
// namespace.
func (ly layers) stopAtExec() bool {
	return ly.cpuAtExec || ly.pidsAtExec || ly.netns == NetNSUserNS
}

// under reports whether path is one of dirs or lies beneath one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) || d == "/" {
			return true
		}
	}
	return false
}

// Spec is everything Start needs besides the command.
type Spec struct {
	// Policy is the confinement asked.
	Policy Policy
	// Limits are the resource limits.
	Limits Limits
	// Require refuses, with an error wrapping ErrUnavailable and without
	// starting the command, when Plan reports something missing. Without
	// it Start applies what it can and the Report says what that was, but
	// for the policy's binds: a command whose binds cannot be made is
	// refused either way.
	Require bool
	// Caps is the probe to plan with; nil uses DefaultCapabilities.
	Caps *Capabilities
	// CgroupV2Dir is the command's own cgroup v2 directory when the caller
	// already forks it there (SysProcAttr.UseCgroupFD): v2 limits are then
	// written there. Empty: Start makes a v2 group of its own if it needs
	// one and the caller did not set UseCgroupFD.
	CgroupV2Dir string
	// ProxyEnv, with Policy.Proxy, returns the variables that point the
	// command at the proxy listening on addr (netproxy.Env); Start calls it
	// on the forking thread once the listener is made, before the fork,
	// and appends them to cmd's environment, where they win over any
	// earlier value. Nil adds none.
	ProxyEnv func(addr netip.AddrPort) []string
	// OnLimit, if set, is called once, from a goroutine of the Sandbox,
	// when a cgroup limit is hit while the command runs, after every
	// process in the limit's cgroups has been sent SIGKILL. Finish waits
	// for it: it must not block for long, nor wait for Finish.
	OnLimit func(Limit)
}

// DefaultCapabilities returns Probe's result, measured once per process:
// by its first caller, or by the goroutine ProbeInBackground starts, which
// a caller then waits for.
var DefaultCapabilities = sync.OnceValue(Probe)

// probing owns the goroutine of ProbeInBackground; Drain waits for it.
var probing sync.WaitGroup

// ProbeInBackground starts measuring DefaultCapabilities on a goroutine of
// its own and returns at once. A server calls it as it starts, so that the
// probe's milliseconds, most of them spent in the kernel, pass while the
// process starts and reads its client's first message, rather than after.
// Drain waits for the goroutine.
func ProbeInBackground() {
	probing.Go(func() { DefaultCapabilities() })
}

// Sandbox is one confined command, from Start to Finish.
type Sandbox struct {
	cmd    *exec.Cmd
	report Report
	sys    sysState
}

// Report returns what was applied to the command.
func (s *Sandbox) Report() Report { return s.report }

// Start starts cmd (which must not have been started) confined as spec
// asks, with cmd.Start on a dedicated OS thread: the server itself is never
// confined. It sets fields of cmd.SysProcAttr (Ptrace, Cloneflags,
// UseCgroupFD and CgroupFD) as the layers need, and leaves the caller's
// (Setpgid, ...) alone, but Pdeathsig, which it clears in a PID namespace:
// there the namespace's init dies by SIGKILL with the forking thread, and
// the kernel kills the command with it. On success the caller owns cmd as usual
// (cmd.Wait, pipes) and must call Finish once cmd.Wait has returned. On
// error the command is not running: if it had started, it was killed and
// waited for.
//
// Where a child may be stopped at its exec (Report.Limits has cpu, or the
// network namespace is a user namespace's), it is a traced child until
// Start returns: a waitid(P_ALL) elsewhere in the process must not reap or
// consume its stop meanwhile.
func Start(cmd *exec.Cmd, spec Spec) (*Sandbox, error) {
	caps := spec.Caps
	if caps == nil {
		c := DefaultCapabilities()
		caps = &c
	}
	return start(cmd, spec, *caps)
}
