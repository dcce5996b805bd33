package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/protocol"
)

// maxWaitMs is the longest one toolhost wait may be asked to wait.
const maxWaitMs = 3_600_000

// RunCommandInput are the arguments of run_command.
type RunCommandInput struct {
	Argv                []string           `json:"argv" jsonschema:"the program and its arguments, e.g. [\"go\", \"test\", \"./...\"]; never run through a shell: use [\"sh\", \"-c\", \"a | b\"] for pipes, globs or $VARS. A program without a slash is looked up in PATH"`
	Cwd                 string             `json:"cwd,omitempty" jsonschema:"the working directory, relative to the workspace root (default: the root)"`
	Env                 map[string]*string `json:"env,omitempty" jsonschema:"environment variables to set on top of the inherited ones; null unsets one"`
	Stdin               *string            `json:"stdin,omitempty" jsonschema:"text to feed the command on its stdin (default: none, reads get EOF)"`
	TimeoutMs           *int64             `json:"timeoutMs,omitempty" jsonschema:"stop the command (its whole process tree) after this many milliseconds; the result says timedOut"`
	InactivityTimeoutMs *int64             `json:"inactivityTimeoutMs,omitempty" jsonschema:"stop the command when it prints nothing for this many milliseconds"`
	OutputLimitBytes    *int64             `json:"outputLimitBytes,omitempty" jsonschema:"the inline output kept per stream, head and tail, 1 to 4194304 (default 65536); the artifacts keep all of it"`
	YieldMs             *int64             `json:"yieldMs,omitempty" jsonschema:"answer after at most this many milliseconds: a command still running then goes on behind a handleId (status running), to follow with wait_command, read_output or cancel_command"`
	Sandbox             *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"tighten the kernel confinement: filesystem \"read-only\" (writes only its TMPDIR) or \"workspace-write\" (the default: writes only in the workspace); network false to cut the network off, or {\"allow\": [hosts]} to narrow it; protect (paths in the workspace the command may read but not change) and denyRead (paths it may not read) add to the server's"`
	Limits              *protocol.Limits   `json:"limits,omitempty" jsonschema:"lower the resource limits of the command's whole process tree: memoryBytes, pids, cpuMs"`
	Snapshot            bool               `json:"snapshot,omitempty" jsonschema:"take a snapshot of the workspace before the command starts: the result then says snapshotId and changes (the paths the command added, modified and deleted), and restore_snapshot with that snapshotId undoes the command"`
	Destination         string             `json:"destination,omitempty" jsonschema:"run it on this destination (another machine or container the server was started with), not here; see the enum for the names"`
}

// params returns the toolhost params of run_command.
func (in *RunCommandInput) params() protocol.RunCommandParams {
	return protocol.RunCommandParams{
		Argv: in.Argv, Cwd: in.Cwd, Env: in.Env, Stdin: in.Stdin, TimeoutMs: in.TimeoutMs,
		InactivityTimeoutMs: in.InactivityTimeoutMs, YieldMs: in.YieldMs, OutputLimitBytes: in.OutputLimitBytes,
		Sandbox: in.Sandbox, Limits: in.Limits, Snapshot: in.Snapshot, Destination: in.Destination,
	}
}

// StepInput is one step of a start_command recipe.
type StepInput struct {
	Name            string             `json:"name" jsonschema:"the step's name, shown in progress"`
	Argv            []string           `json:"argv" jsonschema:"the step's program and arguments, as in run_command"`
	Cwd             string             `json:"cwd,omitempty" jsonschema:"the step's working directory (default: the command's)"`
	Env             map[string]*string `json:"env,omitempty" jsonschema:"variables set for this step on top of the command's"`
	ContinueOnError bool               `json:"continueOnError,omitempty" jsonschema:"run the next step even if this one fails"`
	Sandbox         *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"tighten this step's confinement further than the command's"`
	Pty             *bool              `json:"pty,omitempty" jsonschema:"run this step in a pseudo-terminal (true) or not (false); default: as the command says"`
}

// StartCommandInput are the arguments of start_command.
type StartCommandInput struct {
	Argv                []string           `json:"argv,omitempty" jsonschema:"the program and its arguments, never run through a shell; give argv or steps"`
	Steps               []StepInput        `json:"steps,omitempty" jsonschema:"a recipe of steps run in order, each a process of its own, instead of argv; progress reports each step"`
	Label               string             `json:"label,omitempty" jsonschema:"a short name for the command in list_commands"`
	Cwd                 string             `json:"cwd,omitempty" jsonschema:"the working directory, relative to the workspace root (default: the root)"`
	Env                 map[string]*string `json:"env,omitempty" jsonschema:"environment variables to set on top of the inherited ones; null unsets one"`
	Stdin               *string            `json:"stdin,omitempty" jsonschema:"text to feed the command on its stdin; excludes pty and openStdin"`
	OpenStdin           bool               `json:"openStdin,omitempty" jsonschema:"keep stdin open for write_input (a pipe)"`
	Pty                 bool               `json:"pty,omitempty" jsonschema:"run in a pseudo-terminal (24x80 unless ptyRows/ptyCols say otherwise), for programs that need a terminal; stdout and stderr become one stream, and write_input types into it"`
	PtyRows             int                `json:"ptyRows,omitempty" jsonschema:"the terminal's rows, with pty"`
	PtyCols             int                `json:"ptyCols,omitempty" jsonschema:"the terminal's columns, with pty"`
	TimeoutMs           *int64             `json:"timeoutMs,omitempty" jsonschema:"stop the command (its whole process tree) after this many milliseconds"`
	InactivityTimeoutMs *int64             `json:"inactivityTimeoutMs,omitempty" jsonschema:"stop the command when it prints nothing for this many milliseconds"`
	OutputLimitBytes    *int64             `json:"outputLimitBytes,omitempty" jsonschema:"the inline output kept per stream, as in run_command"`
	Sandbox             *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"tighten the kernel confinement, as in run_command"`
	Limits              *protocol.Limits   `json:"limits,omitempty" jsonschema:"lower the resource limits, as in run_command"`
	Snapshot            bool               `json:"snapshot,omitempty" jsonschema:"take a snapshot of the workspace before the command starts, as in run_command: its result (wait_command, or the task's) then says snapshotId and changes; restore_snapshot undoes it"`
	Destination         string             `json:"destination,omitempty" jsonschema:"run it on this destination (another machine or container the server was started with), not here; see the enum for the names"`
}

// params returns the toolhost params of start_command.
func (in *StartCommandInput) params() *protocol.LongRunningParams {
	p := &protocol.LongRunningParams{
		RunCommandParams: protocol.RunCommandParams{
			Argv: in.Argv, Cwd: in.Cwd, Env: in.Env, Stdin: in.Stdin, TimeoutMs: in.TimeoutMs,
			InactivityTimeoutMs: in.InactivityTimeoutMs, OutputLimitBytes: in.OutputLimitBytes, Sandbox: in.Sandbox, Limits: in.Limits,
			Snapshot: in.Snapshot, Destination: in.Destination,
		},
		Label:     in.Label,
		OpenStdin: in.OpenStdin,
	}
	if in.Pty || in.PtyRows != 0 || in.PtyCols != 0 {
		size := protocol.DefaultPtySize
		if in.PtyRows != 0 {
			size.Rows = in.PtyRows
		}
		if in.PtyCols != 0 {
			size.Cols = in.PtyCols
		}
		p.Pty = &size
	}
	for _, st := range in.Steps {
		step := protocol.StepSpec{Name: st.Name, Argv: st.Argv, Cwd: st.Cwd, Env: st.Env, ContinueOnError: st.ContinueOnError, Sandbox: st.Sandbox}
		if st.Pty != nil {
			size := protocol.PtySize{}
			if *st.Pty {
				size = protocol.DefaultPtySize
				if p.Pty.On() {
					size = *p.Pty
				}
			}
			step.Pty = &size
		}
		p.Steps = append(p.Steps, step)
	}
	return p
}

// WaitCommandInput are the arguments of wait_command.
type WaitCommandInput struct {
	HandleID  string `json:"handleId" jsonschema:"the handleId of start_command, or of a run_command that yielded"`
	TimeoutMs *int64 `json:"timeoutMs,omitempty" jsonschema:"wait at most this many milliseconds (default 30000, at most 3600000); the command goes on after a timeout"`
}

// ReadOutputInput are the arguments of read_output.
type ReadOutputInput struct {
	HandleID string `json:"handleId" jsonschema:"the command's handleId"`
	Stream   string `json:"stream,omitempty" jsonschema:"\"output\" (stdout and stderr interleaved, the default), \"stdout\", \"stderr\", or \"pty\" (a terminal's one stream, the same bytes as stdout)"`
	Offset   *int64 `json:"offset,omitempty" jsonschema:"the byte offset to read from: the previous nextOffset to go on; negative counts from the end (-4000: the last 4000 bytes)"`
	MaxBytes *int64 `json:"maxBytes,omitempty" jsonschema:"read at most this many bytes (default 65536, at most 1048576)"`
	WaitMs   *int64 `json:"waitMs,omitempty" jsonschema:"when nothing new is there yet and the command runs, wait up to this many milliseconds for output (at most 60000)"`
}

// WriteInputInput are the arguments of write_input.
type WriteInputInput struct {
	HandleID string `json:"handleId" jsonschema:"the handleId of a command started with pty or openStdin"`
	Data     string `json:"data,omitempty" jsonschema:"the text to write; under a pty, \"\\r\" ends a line and \"\\u0003\" is Ctrl-C"`
	Encoding string `json:"encoding,omitempty" jsonschema:"\"utf-8\" (the default) or \"base64\" for bytes"`
	EOF      bool   `json:"eof,omitempty" jsonschema:"end the input after data (close stdin, or Ctrl-D under a pty)"`
}

// CancelCommandInput are the arguments of cancel_command.
type CancelCommandInput struct {
	HandleID string `json:"handleId" jsonschema:"the command's handleId"`
	GraceMs  *int64 `json:"graceMs,omitempty" jsonschema:"milliseconds between SIGTERM and SIGKILL (default: the server's, 2000)"`
}

// ListCommandsInput are the arguments of list_commands: none.
type ListCommandsInput struct{}

// ReadFileInput are the arguments of read_file.
type ReadFileInput struct {
	Path        string `json:"path" jsonschema:"the file, relative to the workspace root, or absolute inside the root or a read-only root"`
	Line        int    `json:"line,omitempty" jsonschema:"the first line to read, 1-based (default 1)"`
	Limit       int    `json:"limit,omitempty" jsonschema:"how many lines to read (default: to the end)"`
	MaxBytes    int64  `json:"maxBytes,omitempty" jsonschema:"the most bytes returned (default 1048576, at most 67108864); a whole file larger than that is refused: page it with line and limit"`
	Destination string `json:"destination,omitempty" jsonschema:"the file is on this destination (another machine or container the server was started with), under its own root; see the enum for the names"`
}

// WriteFileInput are the arguments of write_file.
type WriteFileInput struct {
	Path           string  `json:"path" jsonschema:"the file, relative to the workspace root; it is replaced whole, atomically"`
	Content        string  `json:"content" jsonschema:"the new content, whole"`
	Encoding       string  `json:"encoding,omitempty" jsonschema:"\"utf-8\" (the default) or \"base64\" for bytes"`
	CreateDirs     bool    `json:"createDirs,omitempty" jsonschema:"create missing parent directories"`
	ExpectedSha256 *string `json:"expectedSha256,omitempty" jsonschema:"write only if the file's sha256 is this (from a previous write_file), else fail with Conflict; 64 zeros: only if it does not exist"`
	Destination    string  `json:"destination,omitempty" jsonschema:"the file is on this destination (another machine or container the server was started with), under its own root; see the enum for the names"`
}

// addTools registers the nine tools, and the three of snapshots.
func (s *Server) addTools() {
	readOnly := func() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{ReadOnlyHint: true} }
	// A command may reach the network (unless its sandbox cuts it off).
	command := func() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{OpenWorldHint: ptr(true)} }
	addTool[RunCommandInput, protocol.ToolResult](s, "run_command", "Run a command",
		`Run a command in the workspace and wait for it to end (or for yieldMs). Use it for anything that finishes: tests, builds, git, linters, searches. It returns the status (completed, timedOut, cancelled), the exit code (a non-zero exit code is a result, not an error), and the head and tail of stdout and stderr (64 KiB each at most; the full output is in the resource_links, readable with resources/read in pages). The command runs confined by the kernel to the workspace (writes outside it fail), with a timeout if you give one, and cancelling the call kills its whole process tree. Give a progress token to get progress per step when the command reports steps. For servers or interactive programs use start_command.`,
		command(), s.runCommand)
	addTool[StartCommandInput, protocol.LongRunningResult](s, "start_command", "Start a command in the background",
		`Start a long-running command (a server, a watcher, a long build, an interactive program) and return at once with its handleId. Follow it with wait_command (its end), read_output (its output so far, by byte offset), write_input (with pty or openStdin), cancel_command, and list_commands. steps runs a recipe of named steps, each reported as progress. pty runs it in a pseudo-terminal for programs that need one. Every command still running when the session ends is killed.`,
		command(), s.startCommand)
	addTool[WaitCommandInput, protocol.ToolResult](s, "wait_command", "Wait for a command",
		`Wait up to timeoutMs for a started command to end and return its result as run_command does (status, exit code, head and tail of the output, resource_links). If it is still running when the time is up, the status is "running" with the output so far; the command goes on. Cancelling the call ends the wait, not the command.`,
		readOnly(), s.waitCommand)
	addTool[ReadOutputInput, OutputRead](s, "read_output", "Read a command's output",
		`Read a command's output from a byte offset, while it runs or after: call again with nextOffset to go on, until eof. waitMs waits for new output instead of polling. stream picks "output" (stdout and stderr interleaved, the default), "stdout" or "stderr". The first text content is the bytes read, exactly (base64 when they are not UTF-8); the structured content gives the offsets, the total size, and whether the command still runs.`,
		readOnly(), s.readOutput)
	addTool[WriteInputInput, protocol.WriteInputResult](s, "write_input", "Type into a command",
		`Write text to the stdin of a command started with openStdin, or type it into one started with pty ("\r" is Enter there, "\u0003" Ctrl-C). eof ends the input. Returns how many bytes the command took.`,
		nil, s.writeInput)
	addTool[CancelCommandInput, protocol.ToolResult](s, "cancel_command", "Cancel a command",
		`Stop a started command: SIGTERM to its whole process tree, then SIGKILL after graceMs. Returns its final result once every process is gone; on a command that has already ended, its result again.`,
		&sdk.ToolAnnotations{DestructiveHint: ptr(true)}, s.cancelCommand)
	addTool[ListCommandsInput, protocol.ProgressList](s, "list_commands", "List commands",
		`List the commands started in this session (running ones and the latest finished), with handleId, label, status, current step, elapsed time, output size and exit code.`,
		readOnly(), s.listCommands)
	addTool[ReadFileInput, FileRead](s, "read_file", "Read a file",
		`Read a text file in the workspace (or a read-only root), whole or a range of lines (line, limit), up to maxBytes. The first text content is the content, exactly (base64 for a binary file); the structured content gives the line range returned, the file's total lines and size, and whether more follows. Paths outside the workspace, .. escapes and symlinks that leave it are refused.`,
		readOnly(), s.readFile)
	addTool[WriteFileInput, protocol.WriteFileResult](s, "write_file", "Write a file",
		`Create or replace a file in the workspace, whole and atomically (readers never see half of it). createDirs creates missing parent directories; expectedSha256 guards against overwriting a file that changed since you read or wrote it. Returns the path, size and the new sha256. Paths outside the workspace, read-only roots and symlink escapes are refused.`,
		&sdk.ToolAnnotations{DestructiveHint: ptr(true)}, s.writeFile)
	s.addSnapshotTools()
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// runCommand runs run_command: toolhost's runCommand, or, with a progress
// token or as a task, a longRunning waited for, whose handle names its
// steps. A 2025-11-25 client that asks for a task gets one at once; a
// 2026-07-28 client that declared the extension gets one when yieldMs
// passes with the command still running.
func (s *Server) runCommand(ctx context.Context, req *sdk.CallToolRequest, in *RunCommandInput) (*sdk.CallToolResult, error) {
	p := in.params()
	token := req.Params.GetProgressToken()
	tc := taskCallFrom(ctx)
	if tc != nil && tc.form == formLegacy {
		// The client asked for a task: the command runs behind a handle
		// from the start, and yieldMs has nothing to do.
		p.YieldMs = nil
		started, err := s.th.LongRunning(ctx, &protocol.LongRunningParams{RunCommandParams: p})
		if err != nil {
			return s.toolError(err)
		}
		s.startTask(ctx, req, tc, started.HandleID, "running "+started.Command)
		return startedContent(started), nil
	}
	if tc != nil && p.YieldMs == nil {
		tc = nil // 2026-07-28: only a yield that passes makes a task
	}
	if token == nil && tc == nil {
		res, err := s.th.RunCommand(ctx, &p)
		if err != nil {
			return s.toolError(err)
		}
		return s.callResult(res), nil
	}
	// With a progress token the command runs behind a handle, whose step
	// transitions and heartbeats name it; the call waits for it (up to
	// yieldMs) as runCommand would.
	yield := p.YieldMs
	p.YieldMs = nil
	started, err := s.th.LongRunning(ctx, &protocol.LongRunningParams{RunCommandParams: p})
	if err != nil {
		return s.toolError(err)
	}
	var k *sink
	if token != nil {
		var stop func()
		k, stop = s.events.watch(ctx, req.Session, token, started.HandleID, true)
		defer stop()
	}
	res, err := s.waitHandle(ctx, started.HandleID, yield, true)
	if err != nil {
		return s.toolError(err)
	}
	if res.Status == protocol.StatusRunning && tc != nil {
		// 2026-07-28: the yield passed with the command running, the
		// moment toolhost's runCommand answers running: it goes on as a
		// task.
		s.startTask(ctx, req, tc, started.HandleID, statusLine(res))
		return s.callResult(res), nil
	}
	if k != nil && res.Status != protocol.StatusRunning {
		k.drain(ctx)
	}
	return s.callResult(res), nil
}

// waitHandle waits for a handle to end, or for limitMs (nil: no limit).
// When ctx ends first and cancel is set, the handle is cancelled and waited
// for: its whole tree is gone when waitHandle returns.
func (s *Server) waitHandle(ctx context.Context, handleID string, limitMs *int64, cancel bool) (*protocol.ToolResult, error) {
	var deadline time.Time
	if limitMs != nil {
		deadline = time.Now().Add(time.Duration(*limitMs) * time.Millisecond)
	}
	for {
		waitMs := int64(maxWaitMs)
		if !deadline.IsZero() {
			waitMs = max(0, min(waitMs, time.Until(deadline).Milliseconds()))
		}
		res, err := s.th.Wait(ctx, &protocol.WaitParams{HandleID: handleID, TimeoutMs: &waitMs})
		if ctx.Err() != nil {
			if cancel {
				return s.th.Cancel(context.WithoutCancel(ctx), &protocol.CancelParams{HandleID: handleID})
			}
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		if res.Status != protocol.StatusRunning || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return res, nil
		}
	}
}

// startCommand runs start_command: toolhost's longRunning.
func (s *Server) startCommand(ctx context.Context, req *sdk.CallToolRequest, in *StartCommandInput) (*sdk.CallToolResult, error) {
	res, err := s.th.LongRunning(ctx, in.params())
	if err != nil {
		return s.toolError(err)
	}
	if tc := taskCallFrom(ctx); tc != nil {
		// The middleware answers with the task instead.
		s.startTask(ctx, req, tc, res.HandleID, fmt.Sprintf("started %s (pid %d)", res.Command, res.PID))
	}
	return startedContent(res), nil
}

// waitCommand runs wait_command: toolhost's wait, with the handle's steps
// as progress when the call has a token.
func (s *Server) waitCommand(ctx context.Context, req *sdk.CallToolRequest, in *WaitCommandInput) (*sdk.CallToolResult, error) {
	var k *sink
	if token := req.Params.GetProgressToken(); token != nil {
		var stop func()
		k, stop = s.events.watch(ctx, req.Session, token, s.tasks.handleOf(in.HandleID), false)
		defer stop()
	}
	res, err := s.th.Wait(ctx, &protocol.WaitParams{HandleID: s.tasks.handleOf(in.HandleID), TimeoutMs: in.TimeoutMs})
	if err != nil {
		return s.toolError(err)
	}
	if k != nil && res.Status != protocol.StatusRunning {
		k.drain(ctx)
	}
	return s.callResult(res), nil
}

// readOutput runs read_output: toolhost's readOutput.
func (s *Server) readOutput(ctx context.Context, req *sdk.CallToolRequest, in *ReadOutputInput) (*sdk.CallToolResult, error) {
	res, err := s.th.ReadOutput(ctx, &protocol.ReadOutputParams{HandleID: s.tasks.handleOf(in.HandleID), Stream: protocol.OutputStream(in.Stream),
		Offset: in.Offset, MaxBytes: in.MaxBytes, WaitMs: in.WaitMs})
	if err != nil {
		return s.toolError(err)
	}
	return readOutputContent(res), nil
}

// writeInput runs write_input: toolhost's writeInput.
func (s *Server) writeInput(ctx context.Context, req *sdk.CallToolRequest, in *WriteInputInput) (*sdk.CallToolResult, error) {
	res, err := s.th.WriteInput(ctx, &protocol.WriteInputParams{HandleID: s.tasks.handleOf(in.HandleID), Data: in.Data, Encoding: protocol.Encoding(in.Encoding), EOF: in.EOF})
	if err != nil {
		return s.toolError(err)
	}
	return structured(res, "wrote %d bytes", res.BytesWritten), nil
}

// cancelCommand runs cancel_command: toolhost's cancel.
func (s *Server) cancelCommand(ctx context.Context, req *sdk.CallToolRequest, in *CancelCommandInput) (*sdk.CallToolResult, error) {
	res, err := s.th.Cancel(ctx, &protocol.CancelParams{HandleID: s.tasks.handleOf(in.HandleID), GraceMs: in.GraceMs})
	if err != nil {
		return s.toolError(err)
	}
	return s.callResult(res), nil
}

// listCommands runs list_commands: toolhost's progress of every handle.
func (s *Server) listCommands(ctx context.Context, req *sdk.CallToolRequest, in *ListCommandsInput) (*sdk.CallToolResult, error) {
	res, err := s.th.Progress(ctx, nil)
	if err != nil {
		return s.toolError(err)
	}
	list := res.List
	if list == nil {
		list = &protocol.ProgressList{}
	}
	if list.Handles == nil {
		list.Handles = []protocol.Progress{}
	}
	return listContent(list), nil
}

// readFile runs read_file: toolhost's readFile.
func (s *Server) readFile(ctx context.Context, req *sdk.CallToolRequest, in *ReadFileInput) (*sdk.CallToolResult, error) {
	// The content stays encoded as toolhost sent it, and is spliced into
	// the answer by the transport: a large file is never decoded here nor
	// encoded again.
	var raw json.RawMessage
	if err := s.th.Call(ctx, protocol.MethodReadFile, &protocol.ReadFileParams{Path: in.Path, Line: in.Line, Limit: in.Limit, MaxBytes: in.MaxBytes, Destination: in.Destination}, &raw); err != nil {
		return s.toolError(err)
	}
	content, res, err := cutFileRead(raw)
	if err != nil {
		return nil, err
	}
	placeholder, drop := s.connOf(req.Session).splice.Hold(content)
	context.AfterFunc(ctx, drop) // the answer of a cancelled call is not sent
	return readFileContent(&res, placeholder), nil
}

// writeFile runs write_file: toolhost's writeFile.
func (s *Server) writeFile(ctx context.Context, req *sdk.CallToolRequest, in *WriteFileInput) (*sdk.CallToolResult, error) {
	res, err := s.th.WriteFile(ctx, &protocol.WriteFileParams{Path: in.Path, Content: in.Content, Encoding: protocol.Encoding(in.Encoding),
		CreateDirs: in.CreateDirs, ExpectedSha256: in.ExpectedSha256, Destination: in.Destination})
	if err != nil {
		return s.toolError(err)
	}
	return structured(res, "wrote %s (%d bytes, sha256 %s)", res.Path, res.Size, res.Sha256), nil
}

// cutFileRead splits toolhost's readFile answer into its content, still
// encoded as toolhost sent it (for the splicer), and the rest of it.
func cutFileRead(raw json.RawMessage) (content json.RawMessage, res FileRead, err error) {
	content, rest, err := stdio.CutString(raw, "content")
	if err == nil {
		err = json.Unmarshal(rest, &res)
	}
	if err != nil {
		return nil, res, fmt.Errorf("decoding toolhost's readFile answer: %w", err)
	}
	return content, res, nil
}
