package protocol

// SandboxCapability says what confinement of commands this server can
// apply, as probed at start.
type SandboxCapability struct {
	// Available says commands can be confined by the kernel: Landlock is
	// there and --sandbox is not off.
	Available bool `json:"available"`
	// ABI is the kernel's Landlock ABI version, 0 without Landlock.
	ABI int `json:"abi"`
	// Reason says why confinement is unavailable or partial; "" when every
	// layer is there.
	Reason string `json:"reason,omitempty"`
	// Mode is --sandbox: "auto" (confined where the kernel can, with a
	// warning otherwise), "required" (a command that cannot be confined as
	// asked is refused with SandboxUnavailable) or "off" (no confinement).
	Mode string `json:"mode"`
	// Default is the confinement a command gets when it asks for none: the
	// command line's, narrowed by initializationOptions.sandbox.
	Default Sandbox `json:"default"`
	// Layers lists what the server can apply: "landlock-abi-N", "netns",
	// "mntns", "seccomp", and the limit mechanisms ("pids:cgroup-v1",
	// "memory:cgroup-v2", "cpu:rlimit").
	Layers []string `json:"layers"`
}

// SandboxFilesystem is how much of the filesystem a command may write.
type SandboxFilesystem string

// The filesystem modes, strictest last. Every mode reads anything the
// user can and never writes a read root.
const (
	// SandboxFull adds no filesystem confinement.
	SandboxFull SandboxFilesystem = "full"
	// SandboxWorkspaceWrite writes only under the workspace root, the
	// command's temporary directory (its TMPDIR), the session's cache
	// directory and the --writable directories.
	SandboxWorkspaceWrite SandboxFilesystem = "workspace-write"
	// SandboxReadOnly writes only to the command's temporary directory.
	SandboxReadOnly SandboxFilesystem = "read-only"
)

// Sandbox is the confinement asked for a command.
type Sandbox struct {
	// Filesystem is "workspace-write", "read-only" or "full".
	Filesystem SandboxFilesystem `json:"filesystem,omitempty"`
	// Network false cuts the command off from the network: no TCP connect
	// or bind and no UDP outside its own loopback.
	Network *bool `json:"network,omitempty"`
}

// Limits bound a command's resources. An absent field is the server's
// limit (none unless the command line sets one).
type Limits struct {
	// MemoryBytes caps the memory of the command's whole process tree.
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	// Pids caps how many processes and threads the tree holds at once.
	Pids *int64 `json:"pids,omitempty"`
	// CPUMs caps each process's CPU time (RLIMIT_CPU, rounded up to whole
	// seconds).
	CPUMs *int64 `json:"cpuMs,omitempty"`
}

// SandboxApplied says what confinement was really applied to a command:
// never more than was enforced.
type SandboxApplied struct {
	// Filesystem is the mode enforced: "full" when nothing confines writes.
	Filesystem SandboxFilesystem `json:"filesystem"`
	// Network is false only when the command could not reach the network.
	Network bool `json:"network"`
	// EnforcedBy lists the layers applied, joined by "+"
	// ("landlock-abi-7+mntns+netns"), or "" when none.
	EnforcedBy string `json:"enforcedBy"`
	// Limits maps each limit applied ("memory", "pids", "cpu") to how
	// ("cgroup-v1", "cgroup-v2", "rlimit").
	Limits map[string]string `json:"limits,omitempty"`
	// NotEnforced says, a sentence each, what was asked for and not
	// enforced (only under --sandbox auto).
	NotEnforced []string `json:"notEnforced,omitempty"`
}
