package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// ProgressResult is the result of progress: one handle's snapshot when the
// params name a handle, else the list of every handle's. In Go, exactly one
// of One and List is set.
//
//tsgen:type Progress | ProgressList
type ProgressResult struct {
	One  *Progress
	List *ProgressList
}

// MarshalJSON encodes the snapshot or the list that is set.
func (r ProgressResult) MarshalJSON() ([]byte, error) {
	if r.One != nil {
		return json.Marshal(r.One)
	}
	if r.List == nil {
		return []byte(`{"handles":[]}`), nil
	}
	return json.Marshal(r.List)
}

// UnmarshalJSON decodes a list (an object with "handles") or a snapshot.
func (r *ProgressResult) UnmarshalJSON(b []byte) error {
	var probe struct {
		Handles json.RawMessage `json:"handles"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if probe.Handles != nil && !bytes.Equal(bytes.TrimSpace(probe.Handles), []byte("null")) {
		r.One, r.List = nil, new(ProgressList)
		return json.Unmarshal(b, r.List)
	}
	r.One, r.List = new(Progress), nil
	return json.Unmarshal(b, r.One)
}

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

// CancelParams are the params of cancel.
type CancelParams struct {
	// HandleID names the handle to cancel.
	HandleID string `json:"handleId"`
	// GraceMs is the time between SIGTERM and SIGKILL for this cancel; 0
	// sends SIGKILL right after SIGTERM; not negative. Default: the
	// session's kill grace.
	GraceMs *int64 `json:"graceMs,omitempty"`
}

// EventParams are the params of event: one JSON object a command printed
// on a line of its stdout (stdoutFormat "jsonl").
type EventParams struct {
	// HandleID names the handle.
	HandleID string `json:"handleId"`
	// Seq starts at 1 and increases by exactly one per event of a handle.
	Seq int64 `json:"seq"`
	// Event is the object, as the command printed it.
	Event json.RawMessage `json:"event"`
}

// Port is a TCP port a command's process tree listens on.
type Port struct {
	// Port is the port number.
	Port int `json:"port"`
	// Address is the address it listens on: "0.0.0.0", "::", "127.0.0.1", …
	Address string `json:"address"`
	// PID is the process holding the listening socket.
	PID int `json:"pid"`
	// InsidePort and InsideAddress are the socket's own port and address
	// when the command has a network namespace of its own (its network off
	// or allow-listed): Port and Address are then the host side of the
	// forward toolhost keeps into the namespace, on this machine's
	// loopback, where a browser reaches it. Absent otherwise.
	InsidePort    int    `json:"insidePort,omitempty"`
	InsideAddress string `json:"insideAddress,omitempty"`
}

// PortOpenedParams are the params of portOpened.
type PortOpenedParams struct {
	// HandleID names the handle whose process tree listens.
	HandleID string `json:"handleId"`
	// Port is the port number.
	Port int `json:"port"`
	// Address is the address it listens on (for a forward out of the
	// command's network namespace, the host side's: see InsidePort).
	Address string `json:"address"`
	// PID is the process holding the listening socket, as this machine
	// numbers it.
	PID int `json:"pid"`
	// InsidePort and InsideAddress are the socket's own port and address
	// when the command has a network namespace of its own (its network off
	// or allow-listed): Port and Address are then the host side of the
	// forward toolhost keeps into the namespace, on this machine's
	// loopback, where a browser reaches it. Absent otherwise.
	InsidePort    int    `json:"insidePort,omitempty"`
	InsideAddress string `json:"insideAddress,omitempty"`
}

// PortClosedParams are the params of portClosed.
type PortClosedParams struct {
	// HandleID names the handle.
	HandleID string `json:"handleId"`
	// Port is the port that no longer listens (for a forward, its host
	// side, which is closed first).
	Port int `json:"port"`
	// Address is the address it listened on.
	Address string `json:"address"`
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
	// A runCommand's handle still starting (it answered "running" before
	// its start ended) has no output yet: data is empty, offsets 0, and
	// running true; once it ended without starting, eof is true.
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
	// Ports are the TCP ports the handle's process tree listens on now.
	Ports []Port `json:"ports,omitempty"`
	// ProgressPath is the handle's progress file, if it has one.
	ProgressPath string `json:"progressPath,omitempty"`
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

// Message describes the transition in a line, as progress reports show it
// ($/progress, MCP's notifications/progress): "step 2/5: build" when a
// step starts, "step 2/5: build (fail)" when it ends or is skipped;
// without a total "step 2: build", without an index "build".
func (p *StepTransitionParams) Message() string {
	var msg string
	switch {
	case p.Total > 0:
		msg = fmt.Sprintf("step %d/%d: %s", p.Index, p.Total, p.Step)
	case p.Index > 0:
		msg = fmt.Sprintf("step %d: %s", p.Index, p.Step)
	default:
		msg = p.Step
	}
	if p.Status != StepStart {
		msg += " (" + string(p.Status) + ")"
	}
	return msg
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
