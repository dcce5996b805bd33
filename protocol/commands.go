package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is how a command ended, or "running" while it has not.
type Status string

// The statuses of a command.
const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusTimedOut  Status = "timedOut"
	StatusCancelled Status = "cancelled"
	// StatusLost says what held the command died first: the transport
	// to the destination that ran it (its far side ends every process
	// when its stdin ends, unless it persists and stays unreachable past
	// its linger), or the process that held a persisted session (a later
	// server killed what was left of its tree). What became of the
	// command is not known.
	StatusLost Status = "lost"
	// StatusFailed says a command never started after its runCommand had
	// answered "running": a runCommand's yieldMs passed while its start
	// (the snapshot before it, the scan of its repositories, the sandbox,
	// the spawn) was still under way, and that start then failed. Nothing
	// of the command ran; the toolResult's error carries what the
	// runCommand would have answered as its error (-32005 for a spawn
	// failure, -32009 for an unavailable sandbox, the snapshot's error).
	StatusFailed Status = "failed"
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
	// ToolResult, without a handle. It counts from the request's arrival,
	// the start included (the snapshot before the command, the scan of
	// its repositories, the sandbox, the spawn): a start that outlasts it
	// is answered "running" at yieldMs all the same, the handle still
	// starting (no pid yet), and a start that fails after that answer ends
	// the handle "failed" in its toolResult, whose error says why; one
	// that fails before is the error answer. 0 to 3600000. Default: no
	// yield, the request waits for the end.
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
	// Snapshot takes a snapshot of the root before the command starts:
	// its ToolResult then says snapshotId (the before, which one restore
	// brings back) and changes (what the command added, modified and
	// deleted).
	Snapshot bool `json:"snapshot,omitempty"`
	// Justification is the agent's reason for a sandbox wider than the
	// server allows. With it, and a client that can ask its user
	// (capabilities.approvals), the widening is asked about before
	// anything starts (approval/request, kind sandbox): allowed, the
	// command runs with exactly the sandbox asked; denied, ApprovalDenied.
	// Without it such a sandbox is InvalidParams.
	Justification string `json:"justification,omitempty"`
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
	// ProgressFile asks for a JSON snapshot of the command's progress,
	// rewritten atomically after every step transition and at the end: a
	// path inside the root (written through it, never through a symlink),
	// or true for a file beside the artifacts. The child finds its path in
	// TOOLHOST_PROGRESS_FILE; the ToolResult gives it in
	// artifacts.progressPath.
	ProgressFile *ProgressFileOption `json:"progressFile,omitempty"`
	// StdoutFormat "jsonl" pushes every stdout line that is a JSON object
	// as an event notification, in order and never dropped (a slow client
	// slows the child); other lines stay plain output. Default: "text".
	StdoutFormat StdoutFormat `json:"stdoutFormat,omitempty"`
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

// ProgressFileOption is where a progress file goes: a path in the root, or
// beside the artifacts (true). False is none.
//
//tsgen:type string | boolean
type ProgressFileOption struct {
	// Path is the path in the root; "" with Artifacts false is none.
	Path string
	// Artifacts puts the file beside the command's artifacts.
	Artifacts bool
}

// MarshalJSON encodes the path, or true or false.
func (o ProgressFileOption) MarshalJSON() ([]byte, error) {
	if o.Path != "" {
		return json.Marshal(o.Path)
	}
	return json.Marshal(o.Artifacts)
}

// UnmarshalJSON decodes a path, true or false.
func (o *ProgressFileOption) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case bool:
		*o = ProgressFileOption{Artifacts: x}
	case string:
		if x == "" {
			return errors.New("must be a path, true or false; not an empty path")
		}
		*o = ProgressFileOption{Path: x}
	default:
		return errors.New("must be a path, true or false")
	}
	return nil
}

// StdoutFormat is how a command's stdout is read.
type StdoutFormat string

// The stdout formats.
const (
	// StdoutText is plain output.
	StdoutText StdoutFormat = "text"
	// StdoutJSONL reads each line that is a JSON object as an event.
	StdoutJSONL StdoutFormat = "jsonl"
)

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

// ToolResult is how a command ended: the result of runCommand and cancel,
// and the params of toolResult.
type ToolResult struct {
	// CommandID is the command's id, unique in the session ("cmd-N").
	CommandID string `json:"commandId"`
	// HandleID names the handle of a longRunning, or of a runCommand that
	// yielded; a runCommand that ended before its yieldMs has none.
	HandleID string `json:"handleId,omitempty"`
	// Seq numbers the toolResult notifications of a session, from 1, in
	// the order they are made; initializationOptions.resume.lastSeq
	// names one. Absent from the answers of runCommand, wait and cancel.
	Seq int64 `json:"seq,omitempty"`
	// Status is "completed" (the command exited by itself, whatever its
	// code), "timedOut" or "cancelled" (cancel, $/cancelRequest,
	// window/workDoneProgress/cancel, the session's end), or "failed" (a
	// runCommand's start failed after it answered "running"). The first stop
	// decides: a command that exits on its own before a stop is acted on
	// stays "completed". It is "running" only in the snapshot a yielding
	// runCommand or a wait that timed out answers: then exitCode and signal
	// are null, endedAt is the moment of the snapshot, durationMs the time
	// so far, the output and artifacts' byteCount and lineCount what was
	// written so far, and artifacts' sha256 is "". A runCommand answers
	// "running" with its handleId at yieldMs, counted from the request's
	// arrival, even while the command is still starting (the snapshot
	// before it, the scan of its repositories, the sandbox, the spawn):
	// the handle exists from the request on, and wait, cancel, readOutput
	// and progress find it. While it starts its progress has no pid (0),
	// it has no output, and startedAt is when the request was taken up; a
	// cancel then ends it at once, "cancelled", and it never runs. A start
	// that fails after that answer ends the handle "failed" (see error),
	// in its one toolResult.
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
	// StartedAt is when the first process was forked; for a runCommand
	// with yieldMs, when the request was taken up (its start is inside).
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
	// Network says, for a command under a network allow-list, the
	// connections its proxy allowed and refused.
	Network *NetworkUse `json:"network,omitempty"`
	// LimitExceeded names the limit the command hit, after which its whole
	// tree was killed: "memory", "pids" or "cpu"; null when none was.
	LimitExceeded *string `json:"limitExceeded"`
	// SnapshotID names the snapshot taken before a command run with
	// snapshot: true; restore of it undoes the command.
	SnapshotID string `json:"snapshotId,omitempty"`
	// Changes are what such a command changed in the root, sorted by
	// path, at most 1,000.
	Changes []Change `json:"changes,omitempty"`
	// Approvals are the command's asks and how each was decided, in the
	// order they were decided (a remembered grant's answer included).
	Approvals []ApprovalOutcome `json:"approvals,omitempty"`
	// Mounts are the write-backs of the session's writable mounts when
	// the command ended, one per mount, in the session's order.
	Mounts []MountOutcome `json:"mounts,omitempty"`
	// ChangesTruncated says more paths changed than Changes holds.
	ChangesTruncated bool `json:"changesTruncated,omitempty"`
	// ProtectViolations names, relative to the root (absolute outside
	// it), each git hook or config the command wrote that a
	// "**/.git/NAME" protect rule covers but that could not be made
	// read-only: in a repository made while it ran (git init, git clone),
	// or in one that had no hooks directory or config at its start, or
	// past the scan's limit. Hooks are the entries of a hooks directory
	// but git's own *.sample files; written means changed since the start
	// (created, written, renamed into place, chmodded). Git would run or
	// obey them for the user: show them. Absent when there are none.
	ProtectViolations []string `json:"protectViolations,omitempty"`
	// Events counts the stdout lines of a longRunning with stdoutFormat
	// "jsonl"; absent otherwise.
	Events *EventCounts `json:"events,omitempty"`
	// Error is why a command with status "failed" never started: the
	// JSON-RPC error its runCommand would have answered had the start
	// ended before yieldMs. Absent for any other status.
	Error *ResultError `json:"error,omitempty"`
}

// ResultError is a JSON-RPC error carried in a toolResult: code, message
// and data as an error response would have them.
type ResultError struct {
	// Code is the error's code (-32005 spawn failed, ...).
	Code int `json:"code"`
	// Message says what failed.
	Message string `json:"message"`
	// Data is the error's data, as in an error response.
	Data *ErrorData `json:"data,omitempty"`
}

// EventCounts counts how a jsonl stdout's lines were read.
type EventCounts struct {
	// Count is the lines that were JSON objects, each sent as an event.
	Count int64 `json:"count"`
	// InvalidLines is the non-blank lines that were not JSON objects: they
	// stayed plain output.
	InvalidLines int64 `json:"invalidLines"`
	// OversizeLines is the lines longer than a message may be: neither
	// sent nor parsed (the stdout artifact holds them).
	OversizeLines int64 `json:"oversizeLines"`
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
	// ProgressPath is the progress file, for a longRunning given
	// progressFile.
	ProgressPath string `json:"progressPath,omitempty"`
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
