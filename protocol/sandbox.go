package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
)

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
	// command's temporary directory (its TMPDIR, and its /tmp where it
	// gets a mount namespace), the root's cache directory and the
	// --writable directories.
	SandboxWorkspaceWrite SandboxFilesystem = "workspace-write"
	// SandboxReadOnly writes only to the command's temporary directory
	// (its TMPDIR, and its /tmp where it gets a mount namespace).
	SandboxReadOnly SandboxFilesystem = "read-only"
)

// Sandbox is the confinement asked for a command.
type Sandbox struct {
	// Filesystem is "workspace-write", "read-only" or "full".
	Filesystem SandboxFilesystem `json:"filesystem,omitempty"`
	// Network is true (on), false (off: no TCP connect or bind and no UDP
	// outside the command's own loopback) or {allow: [PATTERN…]}: only the
	// hosts of the allow-list, through toolhost's proxy (see
	// [NetworkAllow]). A request narrows the server's network, never
	// widens it.
	Network *Network `json:"network,omitempty"`
	// Protect lists paths in the root that a workspace-write command may
	// read but not change (relative to the root, or absolute inside it); a
	// path that does not exist is left alone. An entry "**/.git/NAME"
	// ("**/.git/hooks", "**/.git/config": the agents' defaults) is NAME
	// in the git directory of every repository in the root that exists
	// when the command starts, found by a bounded scan (PROTOCOL.md,
	// "Protected and unreadable paths"). A client adds to the server's
	// list (--protect), never removes from it.
	Protect []string `json:"protect,omitempty"`
	// DenyRead lists paths a confined command cannot read: files and
	// directories anywhere, "~" being the server's $HOME. A client adds
	// to the server's list (--deny-read), never removes from it.
	DenyRead []string `json:"denyRead,omitempty"`
}

// Network is a command's network in a [Sandbox]: on, off, or only the
// hosts an allow-list names. In JSON it is true, false or an object with
// allow.
//
//tsgen:type boolean | NetworkAllow
type Network struct {
	// On is the network when Allow is nil: true on, false off.
	On bool
	// Allow, when not nil, is the allow-list (and On is ignored).
	Allow []string
}

// NetworkOn and NetworkOff return the network on or off.
func NetworkOn() *Network  { return &Network{On: true} }
func NetworkOff() *Network { return &Network{} }

// MarshalJSON encodes the allow-list, or a boolean.
func (n Network) MarshalJSON() ([]byte, error) {
	if n.Allow != nil {
		return json.Marshal(NetworkAllow{Allow: n.Allow})
	}
	return json.Marshal(n.On)
}

// UnmarshalJSON decodes true, false or {allow: [...]}.
func (n *Network) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*n = Network{On: on}
		return nil
	}
	var a struct {
		Allow *[]string `json:"allow"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.Allow == nil {
		return errors.New(`must be true, false or {"allow": ["host", "*.domain", "host:port", "IP", …]}`)
	}
	*n = Network{Allow: *a.Allow}
	if n.Allow == nil {
		n.Allow = []string{}
	}
	return nil
}

// NetworkAllow is the allow-list form of a command's network: the command
// has a network namespace of its own, and its only way out is toolhost's
// proxy (HTTP CONNECT, plain HTTP and SOCKS5), reached on its loopback
// through HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (and their lowercase
// forms). Names are resolved by the proxy, outside; a name that resolves
// to a loopback, link-local, private or unspecified address is refused
// unless an entry is that IP literal. A refused connection gets HTTP 403
// (or the SOCKS5 refusal) saying "toolhost: HOST:PORT is not in this
// command's network allow-list".
type NetworkAllow struct {
	// Allow lists the patterns: "host", "*.domain" (its subdomains, not
	// the domain itself), either with ":port", or an IP literal with an
	// optional port ("10.0.0.5", "[::1]:8080"). Names match without regard
	// to case or a trailing dot; an entry without a port allows 80 and
	// 443.
	Allow []string `json:"allow"`
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
	// NetworkAllow is the allow-list enforced, when the command reached
	// the network only through toolhost's proxy.
	NetworkAllow []string `json:"networkAllow,omitempty"`
	// Protect and DenyRead are the paths protected and hidden, as
	// enforced (absolute).
	Protect  []string `json:"protect,omitempty"`
	DenyRead []string `json:"denyRead,omitempty"`
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

// NetworkUse says what a command under an allow-list did with the
// network, connection by connection through the proxy.
type NetworkUse struct {
	// Allowed lists the hosts reached, with what went each way.
	Allowed []NetworkAllowed `json:"allowed"`
	// Denied lists the hosts refused, with how many times each was asked.
	Denied []NetworkDenied `json:"denied"`
	// OverLimit counts the connections refused because the command had as
	// many open through the proxy as it may (256).
	OverLimit int `json:"overLimit,omitempty"`
}

// NetworkAllowed is one host and port the proxy let through.
type NetworkAllowed struct {
	// Host is the name (or IP literal) the command asked for.
	Host string `json:"host"`
	// Port is the port.
	Port int `json:"port"`
	// Connections counts the connections made.
	Connections int64 `json:"connections"`
	// BytesOut and BytesIn count what went to the host and came back.
	BytesOut int64 `json:"bytesOut"`
	BytesIn  int64 `json:"bytesIn"`
}

// NetworkDenied is one host and port the proxy refused.
type NetworkDenied struct {
	// Host is the name (or IP literal) the command asked for.
	Host string `json:"host"`
	// Port is the port.
	Port int `json:"port"`
	// Attempts counts the refusals.
	Attempts int64 `json:"attempts"`
}
