package protocol

// RequestType names a request method together with the Go types of its
// params and result, so that the method table, the Go client and the
// generated TypeScript all carry them from this one declaration.
type RequestType[P, R any] string

// Method returns the method name.
func (t RequestType[P, R]) Method() string { return string(t) }

// NotificationType names a notification method together with the Go type
// of its params.
type NotificationType[P any] string

// Method returns the method name.
func (t NotificationType[P]) Method() string { return string(t) }

// Requests a client sends.
const (
	MethodInitialize     = "initialize"
	MethodShutdown       = "shutdown"
	MethodRunCommand     = "runCommand"
	MethodLongRunning    = "longRunning"
	MethodCancel         = "cancel"
	MethodReadFile       = "readFile"
	MethodWriteFile      = "writeFile"
	MethodProgress       = "progress"
	MethodWait           = "wait"
	MethodReadOutput     = "readOutput"
	MethodWriteInput     = "writeInput"
	MethodResize         = "resize"
	MethodSignal         = "signal"
	MethodDestinations   = "destinations"
	MethodSessions       = "sessions"
	MethodSnapshot       = "snapshot"
	MethodRestore        = "restore"
	MethodDiff           = "diff"
	MethodSnapshots      = "snapshots"
	MethodDropSnapshot   = "dropSnapshot"
	MethodExportSnapshot = "exportSnapshot"
	MethodApprovals      = "approvals"
	MethodRevokeApproval = "revokeApproval"
	MethodMounts         = "mounts"
	MethodSyncMount      = "syncMount"
	MethodCancelRequest  = "$/cancelRequest" // a notification, though LSP calls it a method
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
	NotifyEvent                  = "event"
	NotifyPortOpened             = "portOpened"
	NotifyPortClosed             = "portClosed"
	NotifyProgress               = "$/progress"
	NotifyLogMessage             = "window/logMessage"
	MethodWorkDoneProgressCreate = "window/workDoneProgress/create"
	MethodApprovalRequest        = "approval/request"
)

// Requests the client sends.
var (
	// InitializeRequest opens the session: it names the workspace root and
	// toolhost's settings, and answers what this build serves and where the
	// session works. It comes first, once.
	//
	// Errors:
	//   - [CodeInvalidRequest]: a second initialize.
	//   - [CodeInvalidParams]: no root (without --root), a relative one, a
	//     root that is not a directory, a bad initialization option.
	//   - [CodePathOutsideWorkspace]: the root or a read root lies outside
	//     what the command line allows (data: field, path).
	//   - [CodeNotFound]: the root does not exist, or the artifacts
	//     directory cannot be created (data: path).
	InitializeRequest = RequestType[InitializeParams, InitializeResult](MethodInitialize)
	// ShutdownRequest cancels the requests in flight, ends every command
	// (each handle's toolResult is sent) and then answers null. After it,
	// every request gets InvalidRequest; exit ends the session.
	//
	// Errors:
	//   - [CodeServerNotInitialized]: before initialize.
	//   - [CodeInvalidRequest]: a second shutdown.
	ShutdownRequest = RequestType[Null, Null](MethodShutdown)
	// RunCommandRequest runs one command to completion and answers with its
	// [ToolResult] once the command has exited and nothing it started is
	// left.
	//
	// Errors (but the last, nothing is started and no artifacts are
	// created):
	//   - [CodeInvalidParams]: argv missing or empty, argv[0] empty, a NUL
	//     byte in an argument or in env, a bad variable name, timeoutMs or
	//     inactivityTimeoutMs not positive, yieldMs or outputLimitBytes out
	//     of range (data: field, reason).
	//   - [CodeSpawnFailed]: argv[0] is not found in the child's PATH, or is
	//     a path that does not exist, is a directory, is not executable or
	//     not an executable format (data: argv0, reason, such as "not found
	//     in the child's PATH", "not executable", "is a directory", "not
	//     found: PATH is empty in the child's environment").
	//   - [CodePathOutsideWorkspace]: cwd resolves outside the root and the
	//     read roots: absolute, through "..", or through a symlink (data:
	//     path, reason).
	//   - [CodeNotFound]: cwd does not exist (data: path, reason).
	//   - [CodeBusy]: --max-processes commands already run (data: reason).
	//   - [CodeRequestCancelled]: $/cancelRequest stopped the command; the
	//     answer comes once its processes are gone (data: method, reason,
	//     partial).
	//
	// With yieldMs, a command still running then answers a ToolResult with
	// status "running" and a handleId, and goes on as a handle; after that
	// answer $/cancelRequest no longer reaches it (cancel does).
	RunCommandRequest = RequestType[RunCommandParams, ToolResult](MethodRunCommand)
	// LongRunningRequest starts a command, or a recipe of steps, behind a
	// handle and answers at once. The handle ends in exactly one toolResult
	// notification.
	//
	// Errors (nothing is started: no handle, no toolResult):
	//   - [CodeInvalidParams]: as for runCommand, for argv and for each
	//     step's name, argv, cwd and env (data.field "steps[1].argv"); argv
	//     and steps both given; yieldMs given; pty or openStdin with stdin;
	//     a pty size out of 1 to 10000.
	//   - [CodeSpawnFailed]: as for runCommand (a recipe step that cannot
	//     start fails instead, with exit code 127 or 126).
	//   - [CodePathOutsideWorkspace]: cwd or a step's cwd resolves outside
	//     the roots.
	//   - [CodeNotFound]: cwd or a step's cwd does not exist.
	//   - [CodeBusy]: --max-processes commands already run.
	LongRunningRequest = RequestType[LongRunningParams, LongRunningResult](MethodLongRunning)
	// CancelRequest stops a handle's whole process tree (the kill ladder)
	// and answers with its final [ToolResult] once its processes are gone.
	// On a handle that has already ended it changes nothing and answers its
	// final result again.
	//
	// Errors:
	//   - [CodeInvalidParams]: handleId missing, graceMs negative.
	//   - [CodeHandleNotFound]: the handle never existed, or finished too
	//     long ago (data: handleId).
	//   - [CodeRequestCancelled]: $/cancelRequest cancelled this cancel
	//     before the processes were gone; the kill ladder still runs to its
	//     end (data: method, handleId, reason).
	CancelRequest = RequestType[CancelParams, ToolResult](MethodCancel)
	// ReadFileRequest reads a regular file, or a page of its lines, from the
	// workspace root, a read root or the artifacts directory.
	//
	// Errors (data: path as given, reason, and per code):
	//   - [CodePathOutsideWorkspace]: the path is outside every root, or a
	//     component was swapped for a link out while the file was opened.
	//   - [CodeNotFound]: the file, or a directory on the way, does not
	//     exist; or a component is a file; the reason names the component.
	//   - [CodeTooLarge]: a whole-file read of a file over maxBytes; the
	//     reason says to page (data: size, limit).
	//   - [CodeConflict]: the file became a symlink while it was being
	//     opened (a race with another process).
	//   - [CodeInvalidParams]: path missing or empty; a bad line, limit or
	//     maxBytes; the path is a directory, FIFO, socket or device; a
	//     component longer than NAME_MAX; more than 40 symlinks (data:
	//     field).
	//   - [CodeInternalError]: the operating system refused (permission
	//     denied) or failed (an I/O error).
	ReadFileRequest = RequestType[ReadFileParams, ReadFileResult](MethodReadFile)
	// WriteFileRequest writes a whole file, atomically, under the workspace
	// root.
	//
	// Errors (data: path as given, reason, and per code):
	//   - [CodePathOutsideWorkspace]: outside every root, through a symlink
	//     that leads outside (dangling or not), or a component swapped for a
	//     link out during the write.
	//   - [CodeReadOnlyRoot]: inside a read root or the artifacts directory
	//     (also one nested in the workspace root), directly or through a
	//     symlink.
	//   - [CodeNotFound]: the parent directory does not exist and createDirs
	//     is not set (the reason says to set it); a component is a file.
	//   - [CodeConflict]: expectedSha256 does not match (data: expected,
	//     actual); or the parent directory or the target became a symlink
	//     while writing (then without expected and actual).
	//   - [CodeInvalidParams]: path missing; the target is a directory, a
	//     name ending in "/", a FIFO, socket or device; a bad encoding, bad
	//     base64 content, or a malformed expectedSha256 (data: field).
	//   - [CodeInternalError]: the operating system refused (permission
	//     denied, an immutable directory) or failed (disk full, an I/O
	//     error); the reason says where, as in "cannot write a temporary
	//     file in /home/me/project/locked: operation not permitted".
	WriteFileRequest = RequestType[WriteFileParams, WriteFileResult](MethodWriteFile)
	// ProgressRequest answers a snapshot of one handle, or of every running
	// handle and the 256 most recently finished ones.
	//
	// Errors:
	//   - [CodeHandleNotFound]: an unknown handleId (data: handleId).
	ProgressRequest = RequestType[ProgressParams, ProgressResult](MethodProgress)
	// WaitRequest waits up to timeoutMs for a handle to end and answers its
	// final [ToolResult]; a handle that has already ended answers it at
	// once, as cancel does. If the timeout comes first it answers a
	// ToolResult with status "running": the snapshot at that moment. It
	// never stops the command; any number of waits on one handle all
	// answer.
	//
	// Errors:
	//   - [CodeInvalidParams]: handleId missing, timeoutMs out of range
	//     (data: field).
	//   - [CodeHandleNotFound]: the handle never existed, or finished too
	//     long ago (data: handleId).
	//   - [CodeRequestCancelled]: $/cancelRequest cancelled the wait; the
	//     command goes on (data: method, handleId, reason).
	WaitRequest = RequestType[WaitParams, ToolResult](MethodWait)
	// ReadOutputRequest reads a handle's artifact (output.log, stdout.log
	// or stderr.log) from a byte offset, during the command and after it,
	// for as long as the artifacts are kept; with waitMs it waits for new
	// bytes, and answers as soon as they arrive.
	//
	// Errors:
	//   - [CodeInvalidParams]: handleId missing, a stream that is not
	//     "output", "stdout" or "stderr", maxBytes or waitMs out of range
	//     (data: field).
	//   - [CodeHandleNotFound]: the handle never existed, or finished too
	//     long ago (data: handleId).
	//   - [CodeNotFound]: the artifact was evicted over
	//     --artifacts-cap-bytes (data: handleId, path, reason "evicted: …").
	//   - [CodeRequestCancelled]: $/cancelRequest cancelled a read waiting
	//     for bytes (data: method, handleId, reason).
	//   - [CodeInternalError]: the artifact could not be read.
	ReadOutputRequest = RequestType[ReadOutputParams, ReadOutputResult](MethodReadOutput)
	// WriteInputRequest writes bytes to a handle's input: its
	// pseudo-terminal (longRunning with pty) or its open stdin (openStdin).
	// Writes reach the command in the order the requests arrive, across
	// requests. It answers once the command's input has taken every byte:
	// a command that does not read makes it wait, cancellable with
	// $/cancelRequest (the error's data.reason then says how many bytes
	// went in), while the requests after it for the same handle wait their
	// turn.
	//
	// Errors:
	//   - [CodeInvalidParams]: handleId missing, an encoding that is not
	//     "utf-8" or "base64", base64 that does not decode, a handle
	//     started without pty or openStdin (data: field, reason).
	//   - [CodeHandleNotFound]: an unknown handle (data: handleId).
	//   - [CodeNotRunning]: the handle has ended, or an earlier eof closed
	//     its input (data: handleId, status).
	//   - [CodeRequestCancelled]: $/cancelRequest stopped the write (data:
	//     method, handleId, reason).
	WriteInputRequest = RequestType[WriteInputParams, WriteInputResult](MethodWriteInput)
	// ResizeRequest sets the size of a handle's pseudo-terminal; the
	// terminal's foreground process group gets SIGWINCH, and `stty size`
	// inside sees the new size. Later steps of a recipe start at it.
	//
	// Errors:
	//   - [CodeInvalidParams]: rows or cols out of 1 to 10000, a handle
	//     started without pty (data: field, reason).
	//   - [CodeHandleNotFound]: an unknown handle (data: handleId).
	//   - [CodeNotRunning]: the handle has ended (data: handleId, status).
	ResizeRequest = RequestType[ResizeParams, ResizeResult](MethodResize)
	// SignalRequest sends a signal to a handle's running step: to its
	// pseudo-terminal's foreground process group (the job a shell runs
	// now), else to the step's process group. It does not end the handle
	// by itself; cancel does that, with its kill ladder.
	//
	// Errors:
	//   - [CodeInvalidParams]: handleId missing, an unknown signal name
	//     (data: field, reason).
	//   - [CodeHandleNotFound]: an unknown handle (data: handleId).
	//   - [CodeNotRunning]: the handle has ended (data: handleId, status).
	SignalRequest = RequestType[SignalParams, SignalResult](MethodSignal)
	// DestinationsRequest lists the destinations the session may use, with
	// the state of each one's transport. It never connects one.
	DestinationsRequest = RequestType[DestinationsParams, DestinationList](MethodDestinations)
	// SessionsRequest lists this OS user's sessions for this root: under
	// --persist every session the holder keeps, attached or detached;
	// otherwise only this one.
	SessionsRequest = RequestType[SessionsParams, SessionList](MethodSessions)
	// SnapshotRequest records the root as it is now: regular files,
	// directories, symlinks (as links) and modes, leaving out .git/ and
	// --snapshot-exclude, in the content-addressed store of --state-dir.
	//
	// Errors:
	//   - [CodeSnapshotTooLarge]: over --snapshot-max-bytes (data: largest).
	SnapshotRequest = RequestType[SnapshotParams, SnapshotInfo](MethodSnapshot)
	// RestoreRequest makes the root (or Paths) exactly what a snapshot
	// holds. Every content is checked against its hash before anything is
	// written; each file is written beside itself and swapped in; nothing
	// outside the root or under a read root is written.
	//
	// Errors:
	//   - [CodeSnapshotNotFound]: an unknown snapshot (data: snapshotId).
	//   - [CodeSnapshotBusy]: commands of the session run, and no force.
	//   - [CodeInvalidParams]: a path outside the root (data: field, path),
	//     a snapshot of another root.
	//   - [CodeInternalError]: a damaged store; nothing was written.
	RestoreRequest = RequestType[RestoreParams, RestoreResult](MethodRestore)
	// DiffRequest says what changed between two snapshots, or since one.
	//
	// Errors:
	//   - [CodeSnapshotNotFound]: an unknown snapshot (data: snapshotId).
	//   - [CodeInvalidParams]: a path outside the root, a snapshot of
	//     another root.
	DiffRequest = RequestType[DiffParams, DiffResult](MethodDiff)
	// SnapshotsRequest lists the snapshots of the session's root, oldest
	// first.
	SnapshotsRequest = RequestType[SnapshotsParams, SnapshotList](MethodSnapshots)
	// DropSnapshotRequest removes a snapshot; the contents no other
	// snapshot holds are collected.
	//
	// Errors:
	//   - [CodeSnapshotNotFound]: an unknown snapshot (data: snapshotId).
	DropSnapshotRequest = RequestType[DropSnapshotParams, DropSnapshotResult](MethodDropSnapshot)
	// ExportSnapshotRequest writes a snapshot as a tar into the artifacts
	// directory.
	//
	// Errors:
	//   - [CodeSnapshotNotFound]: an unknown snapshot (data: snapshotId).
	ExportSnapshotRequest = RequestType[ExportSnapshotParams, ExportSnapshotResult](MethodExportSnapshot)
	// ApprovalsRequest lists the remembered allows: the session's command
	// and session grants, and the always grants of its root.
	ApprovalsRequest = RequestType[ApprovalsParams, ApprovalList](MethodApprovals)
	// RevokeApprovalRequest drops a remembered allow; an always grant is
	// removed from the grants file. A connection it allowed stays open;
	// the next asks again.
	//
	// Errors:
	//   - [CodeInvalidParams]: an unknown approvalId (data: field).
	RevokeApprovalRequest = RequestType[RevokeApprovalParams, RevokeApprovalResult](MethodRevokeApproval)
	// MountsRequest lists the session's mounts with their state.
	MountsRequest = RequestType[MountsParams, MountList](MethodMounts)
	// SyncMountRequest writes a writable mount's changes back now, as the
	// end of a command does, and answers what it did. A mount that was
	// never fetched has nothing to write.
	//
	// Errors:
	//   - [CodeInvalidParams]: an unknown name, or a read-only mount
	//     (data: field).
	//   - [CodeMountFailed]: the bucket could not be reached or refused
	//     the credentials (data: name, kind, reason).
	SyncMountRequest = RequestType[SyncMountParams, MountOutcome](MethodSyncMount)
)

// Notifications the client sends.
var (
	// InitializedNotification follows the initialize answer, as in LSP.
	InitializedNotification = NotificationType[InitializedParams](NotifyInitialized)
	// ExitNotification ends the session: the server cancels every request
	// and command, sends what is owed and exits, with code 0 if shutdown
	// came first, else 1.
	ExitNotification = NotificationType[Null](NotifyExit)
	// CancelRequestNotification cancels the request it names if it is in
	// flight: that request then answers RequestCancelled. An unknown or
	// finished id is ignored.
	CancelRequestNotification = NotificationType[CancelRequestParams](MethodCancelRequest)
	// WorkDoneProgressCancelNotification cancels the command behind a
	// progress token, as cancel does: the handle ends "cancelled", with its
	// $/progress end and its toolResult. An unknown token is ignored.
	WorkDoneProgressCancelNotification = NotificationType[WorkDoneProgressCancelParams](NotifyWorkDoneProgressCancel)
)

// Notifications and requests the server sends.
var (
	// ToolResultNotification sends a handle's final [ToolResult]: exactly
	// one per handle, whatever ended it, after the longRunning answer that
	// names the handle and after its other notifications. It is never
	// dropped or coalesced.
	ToolResultNotification = NotificationType[ToolResult](NotifyToolResult)
	// StepTransitionNotification says a step of a command started or
	// ended: for every longRunning handle, and for a runCommand given a
	// workDoneToken. A command's transitions arrive in order, never
	// coalesced, between the answer that names its handle and its
	// toolResult.
	StepTransitionNotification = NotificationType[StepTransitionParams](NotifyStepTransition)
	// HeartbeatNotification says a step is alive, when a child writes a
	// heartbeat marker (in a recipe, any marker), under the rule of
	// stepTransition. At most one a second per command is sent, and one
	// waiting to be written is replaced by a newer one.
	HeartbeatNotification = NotificationType[HeartbeatParams](NotifyHeartbeat)
	// OutputNotification streams a handle's output, for a longRunning with
	// streamOutput. While one waits to be written, newer output of the same
	// stream joins it, up to 256 KiB; beyond that the oldest bytes are
	// skipped. All of it comes before the handle's toolResult.
	OutputNotification = NotificationType[OutputParams](NotifyOutput)
	// EventNotification pushes one JSON object a handle's command printed
	// on a line of its stdout, for a longRunning with stdoutFormat "jsonl":
	// in order, after the longRunning answer and before the toolResult,
	// never dropped or coalesced. While the client reads too slowly the
	// server stops reading the command's stdout, which slows the command.
	EventNotification = NotificationType[EventParams](NotifyEvent)
	// PortOpenedNotification says a handle's process tree started listening
	// on a TCP port (IPv4 or IPv6): once per port and address, while the
	// handle runs.
	PortOpenedNotification = NotificationType[PortOpenedParams](NotifyPortOpened)
	// PortClosedNotification says a port of portOpened no longer listens,
	// or the handle ended: every portOpened gets one, before the handle's
	// toolResult.
	PortClosedNotification = NotificationType[PortClosedParams](NotifyPortClosed)
	// WorkDoneProgressNotification is LSP work-done progress on a token:
	// begin, a report per step transition (one waiting to be written is
	// replaced by a newer one), then exactly one end, before the handle's
	// toolResult (for a runCommand, before its answer).
	WorkDoneProgressNotification = NotificationType[ProgressNotification](NotifyProgress)
	// LogMessageNotification warns about the session's work: artifacts
	// evicted over the cap, an artifact file that could not be written,
	// processes that survived SIGKILL, a command the kernel kept out of its
	// cgroup.
	LogMessageNotification = NotificationType[LogMessageParams](NotifyLogMessage)
	// WorkDoneProgressCreateRequest asks a client that advertised
	// window.workDoneProgress for a progress token, after the answer of a
	// longRunning that gave none. The client answers null; an error, no
	// answer within 5 seconds or the command's end mean no $/progress for
	// the handle.
	WorkDoneProgressCreateRequest = RequestType[WorkDoneProgressCreateParams, Null](MethodWorkDoneProgressCreate)
	// ApprovalRequestRequest asks the client's user, for a client that
	// declared capabilities.approvals, whether a confined command may do
	// what its confinement refuses: connect to a host:port its allow-list
	// does not name (the command's connection is held meanwhile), or run
	// with a sandbox wider than the session's, which it justified (before
	// it starts). Asks of
	// the same kind and target are merged into one, and an allow is
	// remembered in the scope the answer chose. An error answer, an
	// answer that is not allow or deny, a scope not offered, no answer
	// within --approval-timeout, or the connection's end are a deny.
	ApprovalRequestRequest = RequestType[ApprovalRequestParams, ApprovalRequestResult](MethodApprovalRequest)
)
