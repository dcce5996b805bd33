// Package rpc holds toolhost's wire protocol: the protocol types (this file is
// their single source of truth), the method table, the session lifecycle, the
// error codes and the outbound notifier. It serves JSON-RPC 2.0 over a byte
// stream with go.lsp.dev/jsonrpc2 and knows nothing of the tools it serves:
// they register into a [Table].
package rpc

//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts

import (
	"bytes"
	"encoding/json"
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
	MethodCancelRequest = "$/cancelRequest"
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
)

// StepStatus is the status of one step, in a stepTransition or a StepResult.
type StepStatus string

// The statuses of a step. Transitions carry start, done, fail and skip; a
// StepResult may also say cancelled (the step was running when the handle was
// cancelled) or running (in a snapshot).
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
)

// InitializeParams are the params of initialize. The LSP fields toolhost
// honours are kept; others are accepted and ignored.
type InitializeParams struct {
	// ProcessID is the client's process id, or null.
	ProcessID *int `json:"processId,omitempty"`
	// ClientInfo names the client, for logs.
	ClientInfo *ClientInfo `json:"clientInfo,omitempty"`
	// RootURI is the workspace root as a file URI; it wins over RootPath.
	RootURI *string `json:"rootUri,omitempty"`
	// RootPath is the workspace root as a path (deprecated in LSP, honoured).
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
	// tokens (window/workDoneProgress/create).
	WorkDoneProgress bool `json:"workDoneProgress,omitempty"`
}

// InitializationOptions are toolhost's settings a client gives in initialize.
// Each narrows what the command line set; none can widen it.
type InitializationOptions struct {
	// ReadRoots are extra read-only roots, as paths or file URIs.
	ReadRoots []string `json:"readRoots,omitempty"`
	// Env widens the environment allowlist children inherit.
	Env *EnvOptions `json:"env,omitempty"`
	// ArtifactsDir is where command output is kept (must not exist yet, or
	// be an empty directory the server can own).
	ArtifactsDir string `json:"artifactsDir,omitempty"`
	// KillGraceMs is the time between TERM and KILL.
	KillGraceMs *int64 `json:"killGraceMs,omitempty"`
	// DefaultTimeoutMs is the timeout of commands that give none (0: none).
	DefaultTimeoutMs *int64 `json:"defaultTimeoutMs,omitempty"`
	// OutputLimitBytes is the default inline output kept per stream.
	OutputLimitBytes *int64 `json:"outputLimitBytes,omitempty"`
}

// EnvOptions configures the environment children inherit.
type EnvOptions struct {
	// Allow names more variables of the server's environment children may
	// inherit: exact names or patterns ending in "*" ("MY_APP_*").
	Allow []string `json:"allow,omitempty"`
}

// InitializeResult is the result of initialize.
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
	// Methods are the requests this build serves, lifecycle included.
	Methods []string `json:"methods"`
	// Notifications are the notifications this build may send.
	Notifications []string `json:"notifications"`
	// ServerRequests are the requests this build may send the client
	// (window/workDoneProgress/create, when the client advertised
	// window.workDoneProgress).
	ServerRequests []string `json:"serverRequests"`
	// Framing is the framing the session uses: "header" or "ndjson".
	Framing string `json:"framing"`
	// OutputLimitBytes is the default inline output kept per stream.
	OutputLimitBytes int64 `json:"outputLimitBytes"`
	// MaxMessageBytes is the largest message the server reads.
	MaxMessageBytes int64 `json:"maxMessageBytes"`
}

// WorkspaceInfo gives the resolved real paths the session works in.
type WorkspaceInfo struct {
	Root         string   `json:"root"`
	ReadRoots    []string `json:"readRoots"`
	ArtifactsDir string   `json:"artifactsDir"`
}

// RunCommandParams are the params of runCommand.
type RunCommandParams struct {
	// Argv is the command and its arguments; it is never run through a
	// shell. Required.
	Argv []string `json:"argv,omitempty"`
	// Cwd is the working directory, relative to the root or absolute inside
	// a root. Default: the root.
	Cwd string `json:"cwd,omitempty"`
	// Env sets variables on top of the inherited allowlist; null unsets one.
	Env map[string]*string `json:"env,omitempty"`
	// Stdin is the text the command reads on its stdin (default: empty).
	Stdin *string `json:"stdin,omitempty"`
	// TimeoutMs ends the command after this long (default: the server's).
	TimeoutMs *int64 `json:"timeoutMs,omitempty"`
	// OutputLimitBytes is the inline output kept per stream.
	OutputLimitBytes *int64 `json:"outputLimitBytes,omitempty"`
	// WorkDoneToken asks for $/progress, stepTransition and heartbeat
	// notifications about this command.
	WorkDoneToken *ProgressToken `json:"workDoneToken,omitempty"`
}

// LongRunningParams are the params of longRunning: everything runCommand
// takes, plus a label, streamed output, or a recipe of steps instead of argv.
type LongRunningParams struct {
	RunCommandParams
	// Label names the handle for people.
	Label string `json:"label,omitempty"`
	// StreamOutput asks for output notifications.
	StreamOutput bool `json:"streamOutput,omitempty"`
	// Steps is a recipe run in order, instead of argv.
	Steps []StepSpec `json:"steps,omitempty"`
}

// StepSpec is one step of a recipe.
type StepSpec struct {
	Name            string             `json:"name"`
	Argv            []string           `json:"argv"`
	Cwd             string             `json:"cwd,omitempty"`
	Env             map[string]*string `json:"env,omitempty"`
	ContinueOnError bool               `json:"continueOnError,omitempty"`
}

// LongRunningResult is the result of longRunning, sent at once.
type LongRunningResult struct {
	HandleID       string    `json:"handleId"`
	CommandID      string    `json:"commandId"`
	PID            int       `json:"pid"`
	ProcessGroupID int       `json:"processGroupId"`
	StartedAt      time.Time `json:"startedAt"`
	// Command is the command line, quoted as a shell would need it, or the
	// recipe's step names for a recipe.
	Command string `json:"command"`
}

// CancelParams are the params of cancel.
type CancelParams struct {
	HandleID string `json:"handleId"`
	// GraceMs is the time between TERM and KILL (default: the server's).
	GraceMs *int64 `json:"graceMs,omitempty"`
}

// ToolResult is how a command ended: the result of runCommand and cancel,
// and the params of toolResult.
type ToolResult struct {
	CommandID string `json:"commandId"`
	HandleID  string `json:"handleId,omitempty"`
	Status    Status `json:"status"`
	// Success is status == "completed" && exitCode == 0.
	Success bool `json:"success"`
	// ExitCode is null when a signal ended the command.
	ExitCode *int `json:"exitCode"`
	// Signal names the signal that ended the command ("SIGKILL"), or null.
	Signal     *string   `json:"signal"`
	StartedAt  time.Time `json:"startedAt"`
	EndedAt    time.Time `json:"endedAt"`
	DurationMs int64     `json:"durationMs"`
	// Stdout and Stderr keep the head and the tail of each stream within the
	// output limit; a line at the cut says how much was left out.
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	StdoutTruncated bool         `json:"stdoutTruncated"`
	StderrTruncated bool         `json:"stderrTruncated"`
	Artifacts       Artifacts    `json:"artifacts"`
	Steps           []StepResult `json:"steps"`
}

// Artifacts are the files that hold a command's whole output.
type Artifacts struct {
	StdoutPath string `json:"stdoutPath"`
	StderrPath string `json:"stderrPath"`
	// OutputPath holds stdout and stderr interleaved in arrival order, step
	// markers included.
	OutputPath string `json:"outputPath"`
	// ByteCount, LineCount and Sha256 describe OutputPath.
	ByteCount int64  `json:"byteCount"`
	LineCount int64  `json:"lineCount"`
	Sha256    string `json:"sha256"`
}

// StepResult is how one step went.
type StepResult struct {
	Name       string     `json:"name"`
	Status     StepStatus `json:"status"`
	DurationMs int64      `json:"durationMs"`
	ExitCode   *int       `json:"exitCode"`
}

// ReadFileParams are the params of readFile.
type ReadFileParams struct {
	// Path is relative to the root, or absolute inside a root, or a file URI.
	Path string `json:"path"`
	// Line is the first line to read, 1-based (default 1).
	Line int `json:"line,omitempty"`
	// Limit is how many lines to read (default: all).
	Limit int `json:"limit,omitempty"`
	// MaxBytes refuses a larger answer with TooLarge (default 1 MiB).
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// ReadFileResult is the result of readFile.
type ReadFileResult struct {
	Path       string    `json:"path"`
	Content    string    `json:"content"`
	Encoding   Encoding  `json:"encoding"`
	Size       int64     `json:"size"`
	StartLine  int       `json:"startLine"`
	EndLine    int       `json:"endLine"`
	TotalLines int       `json:"totalLines"`
	Truncated  bool      `json:"truncated"`
	MTime      time.Time `json:"mtime"`
}

// WriteFileParams are the params of writeFile.
type WriteFileParams struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Encoding of Content: "utf-8" (default) or "base64".
	Encoding Encoding `json:"encoding,omitempty"`
	// CreateDirs creates missing parent directories.
	CreateDirs bool `json:"createDirs,omitempty"`
	// ExpectedSha256 is the hex sha256 the file must have now, or Conflict.
	ExpectedSha256 *string `json:"expectedSha256,omitempty"`
}

// WriteFileResult is the result of writeFile.
type WriteFileResult struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Sha256 string `json:"sha256"`
}

// ProgressParams are the params of progress.
type ProgressParams struct {
	// HandleID selects one handle; without it, every handle.
	HandleID string `json:"handleId,omitempty"`
}

// Progress is a snapshot of one handle.
type Progress struct {
	HandleID    string `json:"handleId"`
	CommandID   string `json:"commandId"`
	Label       string `json:"label"`
	Status      Status `json:"status"`
	PID         int    `json:"pid"`
	CurrentStep int    `json:"currentStep"`
	// TotalSteps is 0 when unknown.
	TotalSteps      int        `json:"totalSteps"`
	StepName        string     `json:"stepName"`
	ElapsedMs       int64      `json:"elapsedMs"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	LastHeartbeatAt *time.Time `json:"lastHeartbeatAt"`
	OutputBytes     int64      `json:"outputBytes"`
	ExitCode        *int       `json:"exitCode"`
}

// ProgressList is the result of progress without a handleId.
type ProgressList struct {
	Handles []Progress `json:"handles"`
}

// StepTransitionParams are the params of stepTransition.
type StepTransitionParams struct {
	HandleID  string     `json:"handleId,omitempty"`
	CommandID string     `json:"commandId"`
	Step      string     `json:"step"`
	Status    StepStatus `json:"status"`
	// Index is 1-based; Total is 0 when unknown.
	Index     int       `json:"index"`
	Total     int       `json:"total"`
	ElapsedMs int64     `json:"elapsedMs"`
	TS        time.Time `json:"ts"`
}

// HeartbeatParams are the params of heartbeat.
type HeartbeatParams struct {
	HandleID  string `json:"handleId,omitempty"`
	CommandID string `json:"commandId"`
	Step      string `json:"step"`
	ElapsedMs int64  `json:"elapsedMs"`
}

// OutputParams are the params of output.
type OutputParams struct {
	HandleID string `json:"handleId"`
	Stream   Stream `json:"stream"`
	// Seq increases by one per output notification of a stream, from 1.
	Seq  int64  `json:"seq"`
	Data string `json:"data"`
	// Encoding is "base64" when the bytes are not valid UTF-8; absent,
	// Data is the text itself.
	Encoding Encoding `json:"encoding,omitempty"`
	// Skipped counts bytes left out before Data because the client read too
	// slowly; the stream's artifact file holds them.
	Skipped int64 `json:"skipped,omitempty"`
}

// ProgressToken is an LSP progress token: a string or an integer.
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
	Token ProgressToken `json:"token"`
	// Value is a WorkDoneProgressBegin, WorkDoneProgressReport or
	// WorkDoneProgressEnd.
	Value any `json:"value"`
}

// WorkDoneProgressBegin starts a progress.
type WorkDoneProgressBegin struct {
	Kind        string `json:"kind"` // "begin"
	Title       string `json:"title"`
	Cancellable bool   `json:"cancellable"`
	Message     string `json:"message,omitempty"`
	Percentage  *int   `json:"percentage,omitempty"`
}

// WorkDoneProgressReport reports on a progress.
type WorkDoneProgressReport struct {
	Kind        string `json:"kind"` // "report"
	Cancellable bool   `json:"cancellable"`
	Message     string `json:"message,omitempty"`
	Percentage  *int   `json:"percentage,omitempty"`
}

// WorkDoneProgressEnd ends a progress.
type WorkDoneProgressEnd struct {
	Kind    string `json:"kind"` // "end"
	Message string `json:"message,omitempty"`
}

// WorkDoneProgressCreateParams are the params of
// window/workDoneProgress/create.
type WorkDoneProgressCreateParams struct {
	Token ProgressToken `json:"token"`
}

// WorkDoneProgressCancelParams are the params of
// window/workDoneProgress/cancel.
type WorkDoneProgressCancelParams struct {
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
	Type    MessageType `json:"type"`
	Message string      `json:"message"`
}

// ErrorData is the data of every error toolhost sends: what and where.
type ErrorData struct {
	// Field names the param that is wrong, for InvalidParams.
	Field string `json:"field,omitempty"`
	// Path is the path concerned, for workspace errors.
	Path string `json:"path,omitempty"`
	// Reason says what is wrong in words.
	Reason string `json:"reason,omitempty"`
	// Method is the method that failed.
	Method string `json:"method,omitempty"`
	// Argv0 names the executable, for SpawnFailed.
	Argv0 string `json:"argv0,omitempty"`
	// HandleID names the handle, for HandleNotFound.
	HandleID string `json:"handleId,omitempty"`
	// Size and Limit are given for TooLarge and Busy.
	Size  int64 `json:"size,omitempty"`
	Limit int64 `json:"limit,omitempty"`
	// Expected and Actual are the hashes of a Conflict.
	Expected string `json:"expected,omitempty"`
	Actual   string `json:"actual,omitempty"`
	// Partial is the partial ToolResult of a cancelled runCommand.
	Partial *ToolResult `json:"partial,omitempty"`
}
