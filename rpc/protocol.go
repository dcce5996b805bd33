// Package rpc holds toolhost's wire protocol and serves it: the protocol
// types (this file is their single source of truth; methods.go pairs each
// method with them), the method table with typed handlers, the error codes,
// and the server that owns a session's dispatch (conn.go: one read loop, one
// table of requests in flight, one writer) and lifecycle. It takes
// go.lsp.dev/jsonrpc2's message views, ids and output framing, and knows
// nothing of the tools it serves: they register into a [Table].
package rpc

//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts -md ../PROTOCOL.md -codes errors.go protocol.go methods.go

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Requests a client sends.
const (
	MethodInitialize    = "initialize"
	MethodShutdown      = "shutdown"
	MethodRunCommand    = "runCommand"
	MethodLongRunning   = "longRunning"
	MethodCancel        = "cancel"
	MethodReadFile      = "readFile"
	MethodWriteFile     = "writeFile"
	MethodProgress      = "progress"
	MethodWait          = "wait"
	MethodReadOutput    = "readOutput"
	MethodWriteInput    = "writeInput"
	MethodResize        = "resize"
	MethodSignal        = "signal"
	MethodDestinations  = "destinations"
	MethodCancelRequest = "$/cancelRequest" // a notification, though LSP calls it a method
)

// Notifications a client sends.
const (
	NotifyInitialized            = "initialized"
	NotifyExit                   = "exit"
	NotifyWorkDoneProgressCancel = "window/workDoneProgress/cancel"
)

// Notifications and requests the server sends.
const (
	NotifyToolResult             = "toolResult"
	NotifyStepTransition         = "stepTransition"
	NotifyHeartbeat              = "heartbeat"
	NotifyOutput                 = "output"
	NotifyProgress               = "$/progress"
	NotifyLogMessage             = "window/logMessage"
	MethodWorkDoneProgressCreate = "window/workDoneProgress/create"
)

// Status is how a command ended, or "running" while it has not.
type Status string

// The statuses of a command.
const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusTimedOut  Status = "timedOut"
	StatusCancelled Status = "cancelled"
	// StatusLost says the transport to the destination that ran the
	// command died first: what became of the command is not known here
	// (its far side ends every process when its stdin ends).
	StatusLost Status = "lost"
)

// StepStatus is the status of one step, in a stepTransition or a StepResult.
type StepStatus string

// The statuses of a step. Transitions carry start, done, fail and skip; a
// StepResult may also say cancelled (the step was running when a cancel or
// the timeout stopped it). Running is a step's state while it runs: results
// are final, so none says it.
const (
	StepStart     StepStatus = "start"
	StepDone      StepStatus = "done"
	StepFail      StepStatus = "fail"
	StepSkip      StepStatus = "skip"
	StepCancelled StepStatus = "cancelled"
	StepRunning   StepStatus = "running"
)

// Encoding names how file content travels in readFile and writeFile.
type Encoding string

// The encodings of file content.
const (
	EncodingUTF8   Encoding = "utf-8"
	EncodingBase64 Encoding = "base64"
)

// Stream names one output stream of a command.
type Stream string

// The output streams.
const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
	// StreamPty is the one stream of a command under a pseudo-terminal:
	// what it wrote to the terminal, stdout and stderr merged by the
	// terminal itself, echoed input included.
	StreamPty Stream = "pty"
)

// OutputStream names the artifact readOutput reads: one stream's file, or
// output.log, where both streams and the step markers are interleaved in
// arrival order.
type OutputStream string

// The artifacts readOutput reads.
const (
	OutputStreamOutput OutputStream = "output"
	OutputStreamStdout OutputStream = "stdout"
	OutputStreamStderr OutputStream = "stderr"
	// OutputStreamPty reads a command's terminal output: under a PTY the
	// same bytes as "stdout" and "output".
	OutputStreamPty OutputStream = "pty"
)

// TimeoutReason says which timeout ended a command.
type TimeoutReason string

// The timeouts that end a command.
const (
	// TimeoutDeadline is timeoutMs: the command ran that long.
	TimeoutDeadline TimeoutReason = "deadline"
	// TimeoutInactivity is inactivityTimeoutMs: the command printed
	// nothing and wrote no marker for that long.
	TimeoutInactivity TimeoutReason = "inactivity"
)

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
	// Sandbox tightens the session's default confinement of commands
	// (--sandbox-default, --sandbox-network): a filesystem mode at least as
	// strict, network off where it is on. A looser one is InvalidParams.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
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
}

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

// RunCommandParams are the params of runCommand.
type RunCommandParams struct {
	// Destination runs the command on a destination of the server's
	// command line (--destination NAME=ARGV) instead of here: its handle
	// and command ids, and its artifact paths, then start with "NAME/".
	// Default: here.
	Destination string `json:"destination,omitempty"`
	// Argv is the program and its arguments; a longRunning with steps gives
	// none. It is never run through a shell: $HOME, *, ;, backquotes, $(…)
	// and quotes reach the program as they are. An argv[0] without a slash is looked up
	// in the child's PATH (the allowlisted PATH, or the one Env sets), not
	// the server's; an empty PATH entry means Cwd. With a slash it is a
	// path, relative to Cwd.
	Argv []string `json:"argv,omitempty"`
	// Cwd is the working directory: relative to the root, or absolute inside
	// the root or a read root. Default: the root.
	Cwd string `json:"cwd,omitempty"`
	// Env sets variables on top of the inherited allowlist; null unsets one.
	Env map[string]*string `json:"env,omitempty"`
	// Stdin is the text the command reads on its stdin. Without it, stdin is
	// the null device: a command that reads it gets EOF at once. A command
	// never shares the server's stdin, so it can never eat the JSON-RPC
	// stream.
	Stdin *string `json:"stdin,omitempty"`
	// TimeoutMs bounds the whole command (every step of a recipe) from the
	// start of its first process; more than 0. Default:
	// initializationOptions.defaultTimeoutMs, else --default-timeout (0:
	// none).
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// InactivityTimeoutMs ends the command, as timeoutMs does (the kill
	// ladder on its whole tree, status "timedOut"), once it has printed
	// nothing on any stream and written no step marker for that long; more
	// than 0. The result's timeoutReason then says "inactivity". Default:
	// none.
	InactivityTimeoutMs *int64 `json:"inactivityTimeoutMs,omitempty"`
	// YieldMs, on runCommand only (longRunning refuses it), bounds how long
	// the request waits: a command still running after yieldMs answers a
	// ToolResult with status "running", a handleId and the output so far,
	// and goes on as a handle, as a longRunning's does (progress, wait,
	// readOutput, cancel, and exactly one toolResult notification, sent
	// after that answer). A command that ends first answers its final
	// ToolResult, without a handle. 0 to 3600000. Default: no yield, the
	// request waits for the end.
	YieldMs *int64 `json:"yieldMs,omitempty"`
	// OutputLimitBytes is the inline output kept per stream, head and tail,
	// 1 to 4194304. Default: the session's
	// (initializationOptions.outputLimitBytes, else --output-limit-bytes,
	// 64 KiB).
	OutputLimitBytes *int64 `json:"outputLimitBytes,omitempty"`
	// Sandbox confines the command; it may only tighten the session's
	// default (capabilities.sandbox.default): a looser mode or network on
	// where the default is off is InvalidParams. Default: the session's.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Limits bound the command's resources; each may only lower the
	// server's (--limit-memory, --limit-pids, --limit-cpu). Default: the
	// server's.
	Limits *Limits `json:"limits,omitempty"`
	// WorkDoneToken asks for $/progress begin, report and end on this token;
	// a runCommand then also sends stepTransition and heartbeat (a
	// longRunning always does). window/workDoneProgress/cancel on the token
	// cancels the command.
	WorkDoneToken *ProgressToken `json:"workDoneToken,omitempty"`
}

// LongRunningParams are the params of longRunning: everything runCommand
// takes, plus a label, streamed output, or a recipe of steps instead of argv.
type LongRunningParams struct {
	RunCommandParams
	// Label names the handle for people: the label of progress and the title
	// of $/progress. Default: for the label, the argv joined with spaces or
	// the step names joined with ", "; for the title, LongRunningResult's
	// command.
	Label string `json:"label,omitempty"`
	// StreamOutput asks for output notifications while the command runs.
	StreamOutput bool `json:"streamOutput,omitempty"`
	// Pty runs the command (every step of a recipe, unless a step says
	// otherwise) in a pseudo-terminal of its own: `true` is 24 rows of 80
	// columns, `{rows, cols}` a size (1 to 10000 each), `false` none. The
	// command leads a new session with the terminal as its controlling
	// terminal and as its stdin, stdout and stderr, so its output is one
	// stream, "pty"; TERM is xterm-256color unless env sets it. It implies
	// openStdin, and excludes stdin.
	Pty *PtySize `json:"pty,omitempty"`
	// OpenStdin keeps the command's stdin open (a pipe, without pty) for
	// writeInput, until writeInput with eof or the command's end. It
	// excludes stdin. Default: false, stdin is stdin's text or empty.
	OpenStdin bool `json:"openStdin,omitempty"`
	// Steps is a recipe, run in order, instead of Argv (give one or the
	// other).
	Steps []StepSpec `json:"steps,omitempty"`
}

// StepSpec is one step of a recipe: a process, and process group, of its
// own.
type StepSpec struct {
	// Name names the step in stepTransition, progress and the result; not
	// blank.
	Name string `json:"name"`
	// Argv is the step's program and its arguments, as in runCommand.
	Argv []string `json:"argv"`
	// Cwd is the step's working directory. Default: the request's.
	Cwd string `json:"cwd,omitempty"`
	// Env sets variables on top of the request's env; null unsets one.
	Env map[string]*string `json:"env,omitempty"`
	// ContinueOnError lets the next step run after this one fails; the
	// failure still decides the result's exit code.
	ContinueOnError bool `json:"continueOnError,omitempty"`
	// Sandbox confines this step; it may only tighten the request's.
	// Default: the request's.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Pty runs this step in a pseudo-terminal of its own (`true`, a size,
	// or `false` for none). Default: the request's pty.
	Pty *PtySize `json:"pty,omitempty"`
}

// PtySize is the size of a pseudo-terminal. On the wire it is `true` (24
// rows of 80 columns), `false` (no terminal: Rows and Cols are 0) or
// `{rows, cols}`.
//
//tsgen:type boolean | { rows: number; cols: number }
type PtySize struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// DefaultPtySize is the size `pty: true` asks for.
var DefaultPtySize = PtySize{Rows: 24, Cols: 80}

// On reports whether a terminal is asked for.
func (p *PtySize) On() bool { return p != nil && (p.Rows != 0 || p.Cols != 0) }

// MarshalJSON encodes false, or the size.
func (p PtySize) MarshalJSON() ([]byte, error) {
	if !p.On() {
		return []byte("false"), nil
	}
	return fmt.Appendf(nil, `{"rows":%d,"cols":%d}`, p.Rows, p.Cols), nil
}

// UnmarshalJSON decodes true, false or {rows, cols}; the size is checked
// by the method that takes it.
func (p *PtySize) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*p = DefaultPtySize
		return nil
	case "false":
		*p = PtySize{}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return errors.New("must be true, false or {rows, cols}")
	}
	var v struct{ Rows, Cols *int }
	for k, raw := range m {
		var dst **int
		switch k {
		case "rows":
			dst = &v.Rows
		case "cols":
			dst = &v.Cols
		default:
			return fmt.Errorf("must be true, false or {rows, cols}: unknown member %q", k)
		}
		if err := json.Unmarshal(raw, dst); err != nil || *dst == nil {
			return fmt.Errorf("%s must be an integer", k)
		}
	}
	if v.Rows == nil || v.Cols == nil {
		return errors.New("needs both rows and cols")
	}
	*p = PtySize{Rows: *v.Rows, Cols: *v.Cols}
	return nil
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

// LongRunningResult is the result of longRunning, sent as soon as the
// command has started.
type LongRunningResult struct {
	// HandleID names the handle in cancel, progress and the notifications.
	HandleID string `json:"handleId"`
	// CommandID is the command's id, unique in the session ("cmd-N").
	CommandID string `json:"commandId"`
	// PID is the process id of the command (of a recipe's first step).
	PID int `json:"pid"`
	// ProcessGroupID is the process group the command leads: its PID.
	ProcessGroupID int `json:"processGroupId"`
	// StartedAt is when the first process was forked.
	StartedAt time.Time `json:"startedAt"`
	// Command is the command line, for display (it is never run): the argv
	// quoted as a POSIX shell would need it, or for a recipe each step's argv
	// so quoted, joined with " && ".
	Command string `json:"command"`
}

// CancelParams are the params of cancel.
type CancelParams struct {
	// HandleID names the handle to cancel.
	HandleID string `json:"handleId"`
	// GraceMs is the time between SIGTERM and SIGKILL for this cancel; 0
	// sends SIGKILL right after SIGTERM; not negative. Default: the
	// session's kill grace.
	GraceMs *int64 `json:"graceMs,omitempty"`
}

// ToolResult is how a command ended: the result of runCommand and cancel,
// and the params of toolResult.
type ToolResult struct {
	// CommandID is the command's id, unique in the session ("cmd-N").
	CommandID string `json:"commandId"`
	// HandleID names the handle of a longRunning, or of a runCommand that
	// yielded; a runCommand that ended before its yieldMs has none.
	HandleID string `json:"handleId,omitempty"`
	// Status is "completed" (the command exited by itself, whatever its
	// code), "timedOut" or "cancelled" (cancel, $/cancelRequest,
	// window/workDoneProgress/cancel, the session's end). The first stop
	// decides: a command that exits on its own before a stop is acted on
	// stays "completed". It is "running" only in the snapshot a yielding
	// runCommand or a wait that timed out answers: then exitCode and signal
	// are null, endedAt is the moment of the snapshot, durationMs the time
	// so far, the output and artifacts' byteCount and lineCount what was
	// written so far, and artifacts' sha256 is "".
	Status Status `json:"status"`
	// TimeoutReason says which timeout ended a "timedOut" command:
	// "deadline" (timeoutMs) or "inactivity" (inactivityTimeoutMs). Absent
	// for any other status.
	TimeoutReason TimeoutReason `json:"timeoutReason,omitempty"`
	// Success is Status == "completed" && ExitCode == 0.
	Success bool `json:"success"`
	// ExitCode is the exit code, or null when a signal ended the process. A
	// shell that traps SIGTERM and exits 7 reports Status "cancelled" or
	// "timedOut" with ExitCode 7.
	ExitCode *int `json:"exitCode"`
	// Signal names the signal that ended the process ("SIGTERM",
	// "SIGKILL"), or is null.
	Signal *string `json:"signal"`
	// StartedAt is when the first process was forked.
	StartedAt time.Time `json:"startedAt"`
	// EndedAt is when the result became final: processes gone, pipes
	// drained.
	EndedAt time.Time `json:"endedAt"`
	// DurationMs is EndedAt minus StartedAt.
	DurationMs int64 `json:"durationMs"`
	// Stdout is the inline stdout, valid UTF-8 (invalid bytes become
	// U+FFFD; the artifacts keep the bytes): at most the output limit, its
	// first half and its last half, cut on rune boundaries. When bytes were
	// left out, a line of its own between head and tail says how many and
	// where the rest is.
	Stdout string `json:"stdout"`
	// Stderr is the inline stderr, kept as Stdout is, without the step
	// marker lines.
	Stderr string `json:"stderr"`
	// StdoutTruncated says bytes were left out of Stdout.
	StdoutTruncated bool `json:"stdoutTruncated"`
	// StderrTruncated says bytes were left out of Stderr.
	StderrTruncated bool `json:"stderrTruncated"`
	// Artifacts are the files that hold the whole output.
	Artifacts Artifacts `json:"artifacts"`
	// Steps are the recipe's steps, or those the command's step markers
	// announced, in order.
	Steps []StepResult `json:"steps"`
	// Sandbox says what confinement was applied (for a recipe, to its first
	// step; each step's is in its StepResult); absent under --sandbox off.
	Sandbox *SandboxApplied `json:"sandbox,omitempty"`
	// LimitExceeded names the limit the command hit, after which its whole
	// tree was killed: "memory", "pids" or "cpu"; null when none was.
	LimitExceeded *string `json:"limitExceeded"`
}

// Artifacts are the files that hold a command's whole output, in
// <artifactsDir>/<commandId>/. Later commands may evict them over
// --artifacts-cap-bytes.
type Artifacts struct {
	// StdoutPath is the file of the whole stdout.
	StdoutPath string `json:"stdoutPath"`
	// StderrPath is the file of the whole stderr, without marker lines.
	StderrPath string `json:"stderrPath"`
	// OutputPath holds stdout and stderr interleaved in arrival order, step
	// markers included.
	OutputPath string `json:"outputPath"`
	// ByteCount is the size of OutputPath.
	ByteCount int64 `json:"byteCount"`
	// LineCount counts the lines of OutputPath; a last line without a
	// newline counts.
	LineCount int64 `json:"lineCount"`
	// Sha256 is the hex sha256 of OutputPath.
	Sha256 string `json:"sha256"`
}

// StepResult is how one step went.
type StepResult struct {
	// Name is the step's name.
	Name string `json:"name"`
	// Status is "done", "fail", "skip", or "cancelled" when a cancel or the
	// timeout stopped the step (its stepTransition said "fail").
	Status StepStatus `json:"status"`
	// DurationMs is how long the step ran.
	DurationMs int64 `json:"durationMs"`
	// ExitCode is the step's exit code, or null when it was skipped or a
	// signal ended it.
	ExitCode *int `json:"exitCode"`
	// Sandbox says what confinement was applied to the step; absent for a
	// step that did not run, or under --sandbox off.
	Sandbox *SandboxApplied `json:"sandbox,omitempty"`
}

// ReadFileParams are the params of readFile.
type ReadFileParams struct {
	// Destination reads or writes on a destination of the server's command
	// line, under its own roots. Default: here.
	Destination string `json:"destination,omitempty"`
	// Path is the file: relative to the root, absolute inside the root, a
	// read root or the artifacts directory, or a file URI.
	Path string `json:"path"`
	// Line is the first line to read, 1-based; 0 means 1; not negative.
	// Default: 1.
	Line int `json:"line,omitempty"`
	// Limit is how many lines to read; 0 means to the end of the file; not
	// negative.
	Limit int `json:"limit,omitempty"`
	// MaxBytes is the most bytes of file content in the answer, counted
	// before base64: not negative, at most 64 MiB; 0 means the default. A whole-file read
	// of a larger file is refused with TooLarge. Default: 1 MiB.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// ReadFileResult is the result of readFile.
type ReadFileResult struct {
	// Path is the absolute real path of the file read.
	Path string `json:"path"`
	// Content is the selected lines, "\n" included, as text or base64.
	Content string `json:"content"`
	// Encoding is "base64" when the selected bytes hold a NUL byte or are
	// not valid UTF-8 (decided per page), else "utf-8".
	Encoding Encoding `json:"encoding"`
	// Size is the size of the whole file in bytes.
	Size int64 `json:"size"`
	// StartLine is the first line returned: the params' line.
	StartLine int `json:"startLine"`
	// EndLine is the last line returned; StartLine - 1 when none.
	EndLine int `json:"endLine"`
	// TotalLines counts the lines of the whole file (0 for an empty file).
	TotalLines int `json:"totalLines"`
	// Truncated says lines remain after EndLine, or EndLine's bytes were
	// cut.
	Truncated bool `json:"truncated"`
	// MTime is the file's modification time, in UTC.
	MTime time.Time `json:"mtime"`
}

// WriteFileParams are the params of writeFile.
type WriteFileParams struct {
	// Destination reads or writes on a destination of the server's command
	// line, under its own roots. Default: here.
	Destination string `json:"destination,omitempty"`
	// Path is the file: as for readFile, but under the workspace root and
	// outside every read root and the artifacts directory.
	Path string `json:"path"`
	// Content is the new content, whole; base64 that does not decode is
	// InvalidParams. Default: empty.
	Content string `json:"content"`
	// Encoding says how Content is encoded: "utf-8" or "base64"; anything
	// else is InvalidParams. Default: "utf-8".
	Encoding Encoding `json:"encoding,omitempty"`
	// CreateDirs creates missing parent directories (mode 0755, less the
	// umask); without it a missing parent is NotFound.
	CreateDirs bool `json:"createDirs,omitempty"`
	// ExpectedSha256 is the hex sha256 (64 digits, any case) the file must
	// have now, else Conflict and nothing is written; 64 zeros means the
	// file must not exist yet. A malformed one is InvalidParams.
	ExpectedSha256 *string `json:"expectedSha256,omitempty"`
}

// WriteFileResult is the result of writeFile.
type WriteFileResult struct {
	// Path is the absolute real path of the file written: a symlink's target
	// when written through one.
	Path string `json:"path"`
	// Size is the number of bytes written, after base64 decoding.
	Size int64 `json:"size"`
	// Sha256 is the hex sha256 of the new content: the next write's
	// expectedSha256.
	Sha256 string `json:"sha256"`
}

// WaitParams are the params of wait.
type WaitParams struct {
	// HandleID names the handle to wait for.
	HandleID string `json:"handleId"`
	// TimeoutMs bounds the wait, 0 to 3600000; 0 answers at once. It does
	// not stop the command. Default: 30000.
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
}

// ReadOutputParams are the params of readOutput.
type ReadOutputParams struct {
	// HandleID names the handle whose artifact to read.
	HandleID string `json:"handleId"`
	// Stream is the artifact: "output" (output.log: stdout, stderr and
	// step markers interleaved), "stdout" or "stderr". Default: "output".
	Stream OutputStream `json:"stream,omitempty"`
	// Offset is the byte offset to read from; a negative one counts from
	// the end (-1000: the last 1000 bytes, a tail), clamped to 0. Past the
	// end it reads nothing (and waits, as below). Default: 0.
	Offset *int64 `json:"offset,omitempty"`
	// MaxBytes bounds the bytes read, 1 to 1048576. Default: 65536.
	MaxBytes *int64 `json:"maxBytes,omitempty"`
	// WaitMs, when there is nothing to read at the offset and the command
	// still runs, waits up to that long for bytes to arrive, and answers
	// as soon as some do (or the command ends); 0 to 60000. Default: 0,
	// answer at once.
	WaitMs *int64 `json:"waitMs,omitempty"`
}

// ReadOutputResult is the result of readOutput.
type ReadOutputResult struct {
	// Data is the bytes read: UTF-8 text, or base64 when they are not
	// valid UTF-8 (see Encoding). While the command runs, a rune is never
	// split: the read stops before an incomplete one at the end.
	Data string `json:"data"`
	// Encoding is "utf-8" or "base64", how Data carries the bytes.
	Encoding Encoding `json:"encoding"`
	// Offset is where the read began: the params' offset, a negative one
	// resolved from the end.
	Offset int64 `json:"offset"`
	// NextOffset is the offset after the bytes read: where the next read
	// goes on.
	NextOffset int64 `json:"nextOffset"`
	// TotalBytes is the artifact's size when it was read.
	TotalBytes int64 `json:"totalBytes"`
	// EOF says the command has ended and NextOffset is the end of the
	// artifact: nothing more will come.
	EOF bool `json:"eof"`
	// Running says the command was still running when the bytes were read.
	Running bool `json:"running"`
}

// WriteInputParams are the params of writeInput.
type WriteInputParams struct {
	// HandleID names the handle whose input to write: its pseudo-terminal,
	// or its open stdin.
	HandleID string `json:"handleId"`
	// Data is the bytes to write, as Encoding says. Under a PTY the
	// terminal's line discipline reads them as typed keys: "\r" ends a
	// line, "\u0003" (Ctrl-C) interrupts, "\u001a" (Ctrl-Z) stops.
	// Default: nothing (with eof, only the end of input).
	Data string `json:"data,omitempty"`
	// Encoding says how Data is encoded: "utf-8" or "base64". Default:
	// "utf-8".
	Encoding Encoding `json:"encoding,omitempty"`
	// EOF ends the input once Data is written: stdin's pipe is closed, and
	// under a PTY the terminal's EOF character (Ctrl-D) is sent, which a
	// program reading a line at its start takes as the end of input.
	EOF bool `json:"eof,omitempty"`
}

// WriteInputResult is the result of writeInput.
type WriteInputResult struct {
	// BytesWritten is how many bytes of Data the command's input took:
	// all of them, unless the command ended first.
	BytesWritten int64 `json:"bytesWritten"`
}

// ResizeParams are the params of resize.
type ResizeParams struct {
	// HandleID names a handle that runs in a pseudo-terminal.
	HandleID string `json:"handleId"`
	// Rows is the terminal's new height, 1 to 10000.
	Rows int `json:"rows"`
	// Cols is the terminal's new width, 1 to 10000.
	Cols int `json:"cols"`
}

// DestinationsParams are the params of destinations: an empty object.
type DestinationsParams struct{}

// DestinationState is the state of a destination's transport.
type DestinationState string

// The states of a destination.
const (
	// DestinationIdle: not connected yet; the first request connects.
	DestinationIdle DestinationState = "idle"
	// DestinationConnecting: its command is starting and being initialized.
	DestinationConnecting DestinationState = "connecting"
	// DestinationReady: connected and initialized.
	DestinationReady DestinationState = "ready"
	// DestinationLost: its transport died or could not start (Reason says
	// why); the next request to it connects again.
	DestinationLost DestinationState = "lost"
)

// DestinationInfo describes one destination.
type DestinationInfo struct {
	// Name is the name the command line gave it.
	Name string `json:"name"`
	// State is its transport's state.
	State DestinationState `json:"state"`
	// Command is the argv that reaches its toolhost.
	Command []string `json:"command"`
	// Root is its workspace root, once it has been initialized.
	Root string `json:"root,omitempty"`
	// ReadRoots are its read-only roots, once it has been initialized.
	ReadRoots []string `json:"readRoots,omitempty"`
	// ServerInfo names the toolhost that answered, once initialized.
	ServerInfo *ServerInfo `json:"serverInfo,omitempty"`
	// Reason says why it is lost: the transport's end and the tail of its
	// stderr.
	Reason string `json:"reason,omitempty"`
}

// DestinationList is the result of destinations.
type DestinationList []DestinationInfo

// ResizeResult is the result of resize: an empty object.
type ResizeResult struct{}

// SignalParams are the params of signal.
type SignalParams struct {
	// HandleID names the handle to signal.
	HandleID string `json:"handleId"`
	// Signal is the signal's name: "SIGINT", "SIGTERM", "SIGKILL",
	// "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGCONT", "SIGSTOP", "SIGUSR1",
	// "SIGUSR2", "SIGWINCH" or "SIGALRM" (the "SIG" may be left out).
	Signal string `json:"signal"`
}

// SignalResult is the result of signal.
type SignalResult struct {
	// ProcessGroupID is the process group the signal went to: the
	// terminal's foreground group under a PTY, else the running step's
	// group.
	ProcessGroupID int `json:"processGroupId"`
}

// ProgressParams are the params of progress.
type ProgressParams struct {
	// Destination, without HandleID, lists that destination's handles
	// instead of this server's. Default: here.
	Destination string `json:"destination,omitempty"`
	// HandleID selects one handle; without it, every handle.
	HandleID string `json:"handleId,omitempty"`
}

// Progress is a snapshot of one handle. It agrees with the notifications
// sent before it: the step it names is the one of the latest
// stepTransition.
type Progress struct {
	// HandleID names the handle.
	HandleID string `json:"handleId"`
	// CommandID is the command's id.
	CommandID string `json:"commandId"`
	// Label is the longRunning's label, or its default.
	Label string `json:"label"`
	// Status is "running", then the ToolResult's status.
	Status Status `json:"status"`
	// PID is the running (or last) step's process.
	PID int `json:"pid"`
	// CurrentStep is the index (1-based) of the step of the latest
	// stepTransition; 0 before any.
	CurrentStep int `json:"currentStep"`
	// TotalSteps is the latest known total; 0 when unknown.
	TotalSteps int `json:"totalSteps"`
	// StepName is the name of the step of the latest stepTransition; ""
	// before any.
	StepName string `json:"stepName"`
	// ElapsedMs is the time since the start; once ended, the result's
	// durationMs.
	ElapsedMs int64 `json:"elapsedMs"`
	// UpdatedAt is the last change: a step, a marker, a process started.
	UpdatedAt time.Time `json:"updatedAt"`
	// LastHeartbeatAt is the time of the latest heartbeat marker (every one
	// counts, even those coalesced away), or null.
	LastHeartbeatAt *time.Time `json:"lastHeartbeatAt"`
	// OutputBytes counts the user-visible bytes so far: stdout, and stderr
	// without marker lines.
	OutputBytes int64 `json:"outputBytes"`
	// ExitCode is null while running; then the ToolResult's exitCode.
	ExitCode *int `json:"exitCode"`
	// Pty is the size of the running step's pseudo-terminal; absent when
	// it has none.
	Pty *PtySize `json:"pty,omitempty"`
	// InputOpen says writeInput reaches the running step: it has a
	// pseudo-terminal, or an open stdin that eof has not closed.
	InputOpen bool `json:"inputOpen,omitempty"`
}

// ProgressList is the result of progress without a handleId.
type ProgressList struct {
	// Handles are every running handle and the 256 most recently finished
	// ones, oldest start first.
	Handles []Progress `json:"handles"`
}

// StepTransitionParams are the params of stepTransition: a step of a
// command started or ended.
type StepTransitionParams struct {
	// HandleID names the handle; a runCommand has none.
	HandleID string `json:"handleId,omitempty"`
	// CommandID is the command's id.
	CommandID string `json:"commandId"`
	// Step is the step's name.
	Step string `json:"step"`
	// Status is "start", "done", "fail" or "skip". A recipe step that a
	// cancel or the timeout stopped ends "fail" (its StepResult says
	// "cancelled"); a warning marker ends "done".
	Status StepStatus `json:"status"`
	// Index is the step's index, 1-based.
	Index int `json:"index"`
	// Total is the number of steps; 0 when unknown.
	Total int `json:"total"`
	// ElapsedMs is 0 at "start"; the step's duration at its end.
	ElapsedMs int64 `json:"elapsedMs"`
	// TS is the time the child stated in its marker, else the time the
	// server saw the transition.
	TS time.Time `json:"ts"`
}

// HeartbeatParams are the params of heartbeat.
type HeartbeatParams struct {
	// HandleID names the handle; a runCommand has none.
	HandleID string `json:"handleId,omitempty"`
	// CommandID is the command's id.
	CommandID string `json:"commandId"`
	// Step is the marker's step: in a recipe, the running recipe step;
	// without a name, the current step.
	Step string `json:"step"`
	// ElapsedMs is the marker's elapsed time, else the time since the step
	// (or the command) started.
	ElapsedMs int64 `json:"elapsedMs"`
}

// OutputParams are the params of output.
type OutputParams struct {
	// HandleID names the handle.
	HandleID string `json:"handleId"`
	// Stream is "stdout" or "stderr"; stderr carries no marker lines.
	Stream Stream `json:"stream"`
	// Seq starts at 1 and increases by exactly one per notification of a
	// stream of a handle: a gap would mean a lost notification.
	Seq int64 `json:"seq"`
	// Data is the output: text when the bytes are valid UTF-8 (a character
	// cut between two reads waits for the next chunk), else base64.
	Data string `json:"data"`
	// Encoding is "base64" when the bytes are not valid UTF-8; absent,
	// Data is the text itself.
	Encoding Encoding `json:"encoding,omitempty"`
	// Skipped counts bytes left out before Data because the client read too
	// slowly; the stream's artifact file holds them.
	Skipped int64 `json:"skipped,omitempty"`
}

// ProgressToken is an LSP progress token: a string or an integer.
//
//tsgen:type string | number
type ProgressToken struct {
	str   string
	num   int64
	isNum bool
}

// NewStringToken returns a string progress token.
func NewStringToken(s string) ProgressToken { return ProgressToken{str: s} }

// NewNumberToken returns an integer progress token.
func NewNumberToken(n int64) ProgressToken { return ProgressToken{num: n, isNum: true} }

// String returns the token for logs and map keys; number and string tokens
// never collide.
func (t ProgressToken) String() string {
	if t.isNum {
		return "n:" + strconv.FormatInt(t.num, 10)
	}
	return "s:" + t.str
}

// MarshalJSON encodes the token as a JSON string or number.
func (t ProgressToken) MarshalJSON() ([]byte, error) {
	if t.isNum {
		return strconv.AppendInt(nil, t.num, 10), nil
	}
	return json.Marshal(t.str)
}

// UnmarshalJSON decodes a JSON string or integer.
func (t *ProgressToken) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = NewStringToken(s)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("progress token must be a string or an integer, not %s", b)
	}
	*t = NewNumberToken(n)
	return nil
}

// ProgressNotification are the params of $/progress.
type ProgressNotification struct {
	// Token is the request's workDoneToken, or the one the server created.
	Token ProgressToken `json:"token"`
	// Value is a [WorkDoneProgressBegin], [WorkDoneProgressReport] or
	// [WorkDoneProgressEnd].
	Value any `json:"value"`
}

// WorkDoneProgressBegin starts a progress.
type WorkDoneProgressBegin struct {
	Kind string `json:"kind"` // "begin"
	// Title is the longRunning's label, else the command as
	// LongRunningResult's command gives it.
	Title string `json:"title"`
	// Cancellable is true: window/workDoneProgress/cancel cancels the
	// command.
	Cancellable bool   `json:"cancellable"`
	Message     string `json:"message,omitempty"`
	Percentage  *int   `json:"percentage,omitempty"`
}

// WorkDoneProgressReport reports on a progress: one per step transition.
type WorkDoneProgressReport struct {
	Kind        string `json:"kind"` // "report"
	Cancellable bool   `json:"cancellable"`
	// Message is "step 2/5: build" when a step starts and "step 2/5: build
	// (done)", "(fail)" or "(skip)" when it ends; "step 2: build" without a
	// total, "build" without an index.
	Message string `json:"message,omitempty"`
	// Percentage is the share of steps finished, when the total is known:
	// (index-1)*100/total at a start, index*100/total at an end.
	Percentage *int `json:"percentage,omitempty"`
}

// WorkDoneProgressEnd ends a progress, exactly once, whatever ended the
// command.
type WorkDoneProgressEnd struct {
	Kind string `json:"kind"` // "end"
	// Message is "completed (exit 3)", "cancelled" or "timedOut".
	Message string `json:"message,omitempty"`
}

// WorkDoneProgressCreateParams are the params of
// window/workDoneProgress/create.
type WorkDoneProgressCreateParams struct {
	// Token is the token to create: "toolhost/" and the handle's id.
	Token ProgressToken `json:"token"`
}

// WorkDoneProgressCancelParams are the params of
// window/workDoneProgress/cancel.
type WorkDoneProgressCancelParams struct {
	// Token is the token of the progress to cancel.
	Token ProgressToken `json:"token"`
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
}
