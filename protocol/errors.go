package protocol

// The error codes toolhost sends: JSON-RPC's, LSP's, and its own.
const (
	CodeParseError           = -32700 // not JSON; a bad header
	CodeInvalidRequest       = -32600 // not a JSON-RPC request; an id already in flight; initialize twice; anything but exit after shutdown
	CodeMethodNotFound       = -32601 // an unknown method (data.method)
	CodeInvalidParams        = -32602 // a param of the wrong type, unknown, missing or out of range (data.field)
	CodeInternalError        = -32603 // a failure of the server itself, a handler panic
	CodeServerNotInitialized = -32002 // a request before initialize
	CodeRequestCancelled     = -32800 // $/cancelRequest, or the session ending

	CodePathOutsideWorkspace   = -32001 // a path resolves outside the root and read roots (data.path, data.reason), or the policy refuses it (data.policy, data.entry)
	CodeNotFound               = -32003 // a file, directory or cwd that does not exist
	CodeHandleNotFound         = -32004 // an unknown handleId
	CodeSpawnFailed            = -32005 // the executable is missing or not runnable (data.argv0, data.reason)
	CodeTooLarge               = -32006 // over maxBytes or --max-message-bytes (data.size, data.limit)
	CodeBusy                   = -32007 // over --max-processes; nothing was started
	CodeReadOnlyRoot           = -32008 // a write into a read root or the artifacts directory
	CodeConflict               = -32009 // expectedSha256 does not match (data.expected, data.actual)
	CodeSandboxUnavailable     = -32010 // a command asks for confinement the kernel cannot give (data.missing)
	CodeNotRunning             = -32011 // writeInput, resize or signal to a handle that has ended, or whose input is closed (data.handleId, data.status)
	CodeDestinationUnavailable = -32012 // a destination that cannot be started or initialized, or whose transport died (data.destination, data.reason)
	CodeSessionNotFound        = -32030 // a resume of a session that is unknown, expired, ended, or another user's (data.sessionId, data.reason)
	CodeSnapshotTooLarge       = -32031 // a snapshot would take the store over --snapshot-max-bytes (data.largest, data.size, data.limit)
	CodeSnapshotBusy           = -32032 // a restore while the session's commands run, without force (data.reason)
	CodeSnapshotNotFound       = -32033 // an unknown snapshotId (data.snapshotId)
	CodeApprovalDenied         = -32034 // a sandbox wider than the server allows was asked about and not allowed (data.kind, data.target, data.decidedBy)
	CodeMountFailed            = -32035 // a mount could not be fetched, written back or bound; nothing was started (data.name, data.kind, data.reason)
)

// ErrorData is the data of every error toolhost sends: what and where.
type ErrorData struct {
	// Field names the param that is wrong ("steps[1].argv"), for
	// InvalidParams, and for a root of initialize outside the command
	// line's.
	Field string `json:"field,omitempty"`
	// Path is the path concerned, as the client gave it, for workspace
	// errors.
	Path string `json:"path,omitempty"`
	// Reason says what is wrong, and what to do, in words.
	Reason string `json:"reason,omitempty"`
	// Method is the method that failed: for MethodNotFound, InternalError
	// and RequestCancelled.
	Method string `json:"method,omitempty"`
	// Argv0 names the executable, for SpawnFailed.
	Argv0 string `json:"argv0,omitempty"`
	// HandleID names the handle, for HandleNotFound and a cancelled cancel.
	HandleID string `json:"handleId,omitempty"`
	// Size is the size that is too large, for TooLarge: the file's, or the
	// message's.
	Size int64 `json:"size,omitempty"`
	// Limit is the limit Size passes, for TooLarge: maxBytes or
	// --max-message-bytes.
	Limit int64 `json:"limit,omitempty"`
	// Expected is the expectedSha256 of a Conflict.
	Expected string `json:"expected,omitempty"`
	// Actual is the file's sha256 at a Conflict, or 64 zeros when it does
	// not exist.
	Actual string `json:"actual,omitempty"`
	// Partial is the partial ToolResult of a cancelled runCommand.
	Partial *ToolResult `json:"partial,omitempty"`
	// Missing lists, a phrase each, the confinement the kernel cannot give
	// (SandboxUnavailable).
	Missing []string `json:"missing,omitempty"`
	// Status is the handle's status when it is no longer running
	// (NotRunning): "completed", "cancelled", …, or "running" when only its
	// input was closed.
	Status Status `json:"status,omitempty"`
	// Destination names the destination that could not be reached.
	Destination string `json:"destination,omitempty"`
	// SessionID names the session of a SessionNotFound.
	SessionID string `json:"sessionId,omitempty"`
	// SnapshotID names the snapshot of a SnapshotNotFound.
	SnapshotID string `json:"snapshotId,omitempty"`
	// Largest are the largest directories of the root, for
	// SnapshotTooLarge.
	Largest []DirSize `json:"largest,omitempty"`
	// Policy names the policy that refused a path, for
	// PathOutsideWorkspace: "denyRead" (never read, nor written, by any
	// door) or "protect" (never written). The path is inside the roots.
	Policy string `json:"policy,omitempty"`
	// Entry is the denyRead or protect entry that matched, as configured
	// (absolute), with Policy.
	Entry string `json:"entry,omitempty"`
	// Kind, Target and DecidedBy are the ask of an ApprovalDenied: what
	// was asked, exactly, and who denied it. Kind is also a MountFailed's
	// mount kind.
	Kind      string            `json:"kind,omitempty"`
	Target    string            `json:"target,omitempty"`
	DecidedBy ApprovalDecidedBy `json:"decidedBy,omitempty"`
	// Name names the mount of a MountFailed.
	Name string `json:"name,omitempty"`
}
