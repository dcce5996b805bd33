package protocol

import "encoding/json"

// Null stands for absent params or a null result (shutdown, exit).
//
//tsgen:type null
type Null struct{}

// MarshalJSON encodes null.
func (Null) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// UnmarshalJSON accepts anything: the value carries nothing.
func (*Null) UnmarshalJSON([]byte) error { return nil }

// InitializedParams are the params of initialized: an empty object.
type InitializedParams struct{}

// InitializeParams are the params of initialize. The LSP fields toolhost
// honours are kept; unlike other params, members it does not know are
// ignored, as LSP clients add their own.
type InitializeParams struct {
	// ProcessID is the client's process id, or null.
	ProcessID *int `json:"processId,omitempty"`
	// ClientInfo names the client, for logs.
	ClientInfo *ClientInfo `json:"clientInfo,omitempty"`
	// RootURI is the workspace root as a file URI; it wins over RootPath.
	// With --root, the root must lie inside --root (a client may narrow it,
	// never widen it); without --root, RootURI or RootPath is required and
	// must be absolute.
	RootURI *string `json:"rootUri,omitempty"`
	// RootPath is the workspace root as a path (deprecated in LSP, honoured),
	// when RootURI is not given.
	RootPath *string `json:"rootPath,omitempty"`
	// Capabilities are the client's capabilities; toolhost reads
	// window.workDoneProgress.
	Capabilities *ClientCapabilities `json:"capabilities,omitempty"`
	// InitializationOptions are toolhost's own settings.
	InitializationOptions *InitializationOptions `json:"initializationOptions,omitempty"`
	// Trace is the LSP trace setting ("off", "messages", "verbose").
	Trace string `json:"trace,omitempty"`
}

// ClientInfo names a client.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// ClientCapabilities are the client capabilities toolhost reads.
type ClientCapabilities struct {
	Window *WindowClientCapabilities `json:"window,omitempty"`
	// Approvals says the client can ask its user: a connection its
	// command's allow-list refuses is then asked about
	// (approval/request) instead of refused at once.
	Approvals *ApprovalsClientCapabilities `json:"approvals,omitempty"`
}

// WindowClientCapabilities are the LSP window capabilities.
type WindowClientCapabilities struct {
	// WorkDoneProgress says the client accepts server-created progress
	// tokens: a longRunning without a workDoneToken then gets one through
	// window/workDoneProgress/create.
	WorkDoneProgress bool `json:"workDoneProgress,omitempty"`
}

// InitializationOptions are toolhost's settings a client gives in initialize.
// The roots narrow the command line's, never widen them; the others
// override the command line's defaults.
type InitializationOptions struct {
	// Destinations narrows the destinations of the command line to these
	// names; a name the command line does not give is InvalidParams.
	// Default: every one.
	Destinations []string `json:"destinations,omitempty"`
	// ReadRoots are the read-only roots, as absolute paths or file URIs.
	// Given, they replace the command line's --read-root; with --root or
	// --read-root set, each must lie inside the root or a command-line read
	// root.
	ReadRoots []string `json:"readRoots,omitempty"`
	// Env widens the environment allowlist children inherit.
	Env *EnvOptions `json:"env,omitempty"`
	// ArtifactsDir is where command output is kept, an absolute path: created
	// (mode 0700) if missing, and kept at the session's end. --artifacts-dir
	// wins over it. Default: a private temporary directory, removed at the
	// end.
	ArtifactsDir string `json:"artifactsDir,omitempty"`
	// KillGraceMs is the time between SIGTERM and SIGKILL when a command is
	// stopped; not negative. Default: --kill-grace (2 s).
	KillGraceMs *int64 `json:"killGraceMs,omitempty"`
	// DefaultTimeoutMs is the timeout of commands that give none; 0 means
	// none; not negative. Default: --default-timeout.
	DefaultTimeoutMs *int64 `json:"defaultTimeoutMs,omitempty"`
	// OutputLimitBytes is the inline output kept per stream of a command
	// that gives none, 1 to 4 MiB. Default: --output-limit-bytes (64 KiB).
	OutputLimitBytes *int64 `json:"outputLimitBytes,omitempty"`
	// Resume asks for a session a server run with --persist still holds
	// (see [ResumeOptions]); the other options are then those the session
	// was created with, and these are ignored.
	Resume *ResumeOptions `json:"resume,omitempty"`
	// Sandbox tightens the session's default confinement of commands
	// (--sandbox-default, --sandbox-network): a filesystem mode at least as
	// strict, network off where it is on. A looser one is InvalidParams.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Mounts replace the command line's --mount, only when the server
	// runs with --client-mounts; otherwise a client's mount is
	// InvalidParams. An empty list removes every mount.
	Mounts *[]Mount `json:"mounts,omitempty"`
	// Manifest shows paths of the machine to commands at targets of the
	// client's choosing.
	Manifest *Manifest `json:"manifest,omitempty"`
}

// EnvOptions configures the environment children inherit.
type EnvOptions struct {
	// Allow names more variables of the server's environment children may
	// inherit: exact names or path.Match patterns ("MY_APP_*"). An empty or
	// malformed pattern, or one with "=" or a NUL byte, is InvalidParams.
	Allow []string `json:"allow,omitempty"`
}

// InitializeResult is the result of initialize. Every path in it is a
// resolved real path.
type InitializeResult struct {
	// SessionID names the session: the same for every connection that
	// resumes it. Under --persist, initializationOptions.resume takes it.
	SessionID    string             `json:"sessionId"`
	ServerInfo   ServerInfo         `json:"serverInfo"`
	Capabilities ServerCapabilities `json:"capabilities"`
	Workspace    WorkspaceInfo      `json:"workspace"`
}

// ServerInfo names the server.
type ServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ServerCapabilities says what this build serves.
type ServerCapabilities struct {
	// Methods are the requests this build serves, lifecycle included (with
	// --debug-methods, the debug methods too), sorted.
	Methods []string `json:"methods"`
	// Notifications are the notifications this build may send, sorted.
	Notifications []string `json:"notifications"`
	// ServerRequests are the requests this build may send the client:
	// window/workDoneProgress/create, sent only to a client that advertised
	// window.workDoneProgress.
	ServerRequests []string `json:"serverRequests"`
	// Framing is the framing the session uses: "header" or "ndjson".
	Framing string `json:"framing"`
	// OutputLimitBytes is the session's default inline output kept per
	// stream.
	OutputLimitBytes int64 `json:"outputLimitBytes"`
	// MaxMessageBytes is the largest message the server reads
	// (--max-message-bytes); a larger one is refused with TooLarge.
	MaxMessageBytes int64 `json:"maxMessageBytes"`
	// Sandbox says what confinement of commands the kernel offers and what
	// the session applies by default.
	Sandbox SandboxCapability `json:"sandbox"`
	// Resume says the session outlives its connection (--persist): a
	// transport that ends without shutdown detaches it, and a later
	// initialize may resume it.
	Resume bool `json:"resume"`
	// Snapshots says snapshot, restore, diff, snapshots, dropSnapshot and
	// exportSnapshot are served, and snapshot: true on commands.
	Snapshots bool `json:"snapshots"`
	// Approvals says how the session asks its client's user.
	Approvals ApprovalsCapability `json:"approvals"`
	// Mounts says which kinds of mount this server serves.
	Mounts MountsCapability `json:"mounts"`
}

// WorkspaceInfo gives the resolved real paths the session works in.
type WorkspaceInfo struct {
	// Root is the workspace root.
	Root string `json:"root"`
	// ReadRoots are the read-only roots.
	ReadRoots []string `json:"readRoots"`
	// ArtifactsDir holds every command's output files.
	ArtifactsDir string `json:"artifactsDir"`
	// Destinations are the destinations this session may use, as
	// destinations answers; absent without any.
	Destinations []DestinationInfo `json:"destinations,omitempty"`
}

// CancelRequestParams are the params of $/cancelRequest.
type CancelRequestParams struct {
	// ID is the id of the request to cancel: a number or a string.
	ID json.RawMessage `json:"id"`
}

// MessageType is the LSP message type of window/logMessage.
type MessageType int

// The LSP message types.
const (
	MessageError   MessageType = 1
	MessageWarning MessageType = 2
	MessageInfo    MessageType = 3
	MessageLog     MessageType = 4
)

// LogMessageParams are the params of window/logMessage.
type LogMessageParams struct {
	// Type is 2 (a warning) or 1 (an error).
	Type MessageType `json:"type"`
	// Message says what happened, then its details as key=value pairs.
	Message string `json:"message"`
}
