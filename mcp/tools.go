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
	Argv                []string           `json:"argv" jsonschema:"the program and its arguments, e.g. [\"go\", \"test\", \"./...\"]; no shell: [\"sh\", \"-c\", \"a | b\"] for pipes, globs or $VARS. A name without a slash is looked up in PATH"`
	Cwd                 string             `json:"cwd,omitempty" jsonschema:"the working directory, relative to the workspace root (default: the root)"`
	Env                 map[string]*string `json:"env,omitempty" jsonschema:"variables set on top of the inherited ones; null unsets one"`
	Stdin               *string            `json:"stdin,omitempty" jsonschema:"text fed to its stdin (default: none, reads get EOF)"`
	TimeoutMs           *int64             `json:"timeoutMs,omitempty" jsonschema:"stop it (its whole process tree) after this many ms; the status is then timedOut"`
	InactivityTimeoutMs *int64             `json:"inactivityTimeoutMs,omitempty" jsonschema:"stop it after this many ms without output"`
	OutputLimitBytes    *int64             `json:"outputLimitBytes,omitempty" jsonschema:"the output kept inline per stream, head and tail, 1 to 4194304 (default 65536); the artifacts keep all"`
	YieldMs             *int64             `json:"yieldMs,omitempty" jsonschema:"answer after at most this many ms: a command still running goes on behind a handleId (status running), for wait_command, read_output or cancel_command"`
	Sandbox             *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"tighten the confinement: filesystem \"read-only\" (writes only its own /tmp) or \"workspace-write\" (the default: writes only the workspace); network false (none), or {\"allow\": [...]} to narrow it to hosts (\"host\", \"*.domain\", either with \":port\", or an IP); protect (paths in the workspace it may read, not change) and denyRead (paths it may not read) add to the server's"`
	Limits              *protocol.Limits   `json:"limits,omitempty" jsonschema:"lower the limits of its whole process tree"`
	Snapshot            bool               `json:"snapshot,omitempty" jsonschema:"snapshot the workspace first: the result then gives snapshotId and changes (paths added, modified, deleted), and restore_snapshot with that id undoes the command"`
	Destination         string             `json:"destination,omitempty" jsonschema:"run it on this destination (a machine or container the server was started with), not here"`
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
	Name            string             `json:"name" jsonschema:"shown in progress"`
	Argv            []string           `json:"argv" jsonschema:"as in run_command"`
	Cwd             string             `json:"cwd,omitempty" jsonschema:"default: the command's"`
	Env             map[string]*string `json:"env,omitempty" jsonschema:"on top of the command's"`
	ContinueOnError bool               `json:"continueOnError,omitempty" jsonschema:"run the next step even if this one fails"`
	Sandbox         *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"tighter than the command's, as its sandbox"`
	Pty             *bool              `json:"pty,omitempty" jsonschema:"run it in a pseudo-terminal or not (default: as the command)"`
}

// StartCommandInput are the arguments of start_command.
type StartCommandInput struct {
	Argv                []string           `json:"argv,omitempty" jsonschema:"as in run_command; argv or steps"`
	Steps               []StepInput        `json:"steps,omitempty" jsonschema:"a recipe instead of argv: steps run in order, each a process of its own, reported as progress"`
	Label               string             `json:"label,omitempty" jsonschema:"a short name, shown by list_commands"`
	Cwd                 string             `json:"cwd,omitempty" jsonschema:"as in run_command"`
	Env                 map[string]*string `json:"env,omitempty" jsonschema:"as in run_command"`
	Stdin               *string            `json:"stdin,omitempty" jsonschema:"text fed to its stdin; not with pty or openStdin"`
	OpenStdin           bool               `json:"openStdin,omitempty" jsonschema:"keep stdin open (a pipe) for write_input"`
	Pty                 bool               `json:"pty,omitempty" jsonschema:"run in a pseudo-terminal (24x80 unless ptyRows, ptyCols), for programs that need one; stdout and stderr are then one stream, and write_input types into it"`
	PtyRows             int                `json:"ptyRows,omitempty" jsonschema:"the terminal's rows"`
	PtyCols             int                `json:"ptyCols,omitempty" jsonschema:"the terminal's columns"`
	TimeoutMs           *int64             `json:"timeoutMs,omitempty" jsonschema:"as in run_command"`
	InactivityTimeoutMs *int64             `json:"inactivityTimeoutMs,omitempty" jsonschema:"as in run_command"`
	OutputLimitBytes    *int64             `json:"outputLimitBytes,omitempty" jsonschema:"as in run_command"`
	Sandbox             *protocol.Sandbox  `json:"sandbox,omitempty" jsonschema:"as in run_command"`
	Limits              *protocol.Limits   `json:"limits,omitempty" jsonschema:"as in run_command"`
	Snapshot            bool               `json:"snapshot,omitempty" jsonschema:"as in run_command; its result (wait_command's, or the task's) then gives snapshotId and changes"`
	Destination         string             `json:"destination,omitempty" jsonschema:"as in run_command"`
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
	HandleID  string `json:"handleId" jsonschema:"from start_command, or a run_command that yielded"`
	TimeoutMs *int64 `json:"timeoutMs,omitempty" jsonschema:"default 30000, at most 3600000"`
}

// ReadOutputInput are the arguments of read_output.
type ReadOutputInput struct {
	HandleID string `json:"handleId" jsonschema:"the command's"`
	Stream   string `json:"stream,omitempty" jsonschema:"\"output\" (the default: stdout and stderr interleaved), \"stdout\", \"stderr\", or \"pty\" (a terminal's one stream)"`
	Offset   *int64 `json:"offset,omitempty" jsonschema:"where to read from: the last nextOffset to go on; negative counts from the end (-4000: the last 4000 bytes)"`
	MaxBytes *int64 `json:"maxBytes,omitempty" jsonschema:"default 65536, at most 1048576"`
	WaitMs   *int64 `json:"waitMs,omitempty" jsonschema:"with nothing new yet and the command running, wait up to this many ms for output (at most 60000)"`
}

// WriteInputInput are the arguments of write_input.
type WriteInputInput struct {
	HandleID string `json:"handleId" jsonschema:"of a command started with pty or openStdin"`
	Data     string `json:"data,omitempty" jsonschema:"the text; under a pty \"\\r\" is Enter, \"\\u0003\" Ctrl-C"`
	Encoding string `json:"encoding,omitempty" jsonschema:"\"utf-8\" (the default) or \"base64\""`
	EOF      bool   `json:"eof,omitempty" jsonschema:"end the input after data (close stdin; Ctrl-D under a pty)"`
}

// CancelCommandInput are the arguments of cancel_command.
type CancelCommandInput struct {
	HandleID string `json:"handleId" jsonschema:"the command's"`
	GraceMs  *int64 `json:"graceMs,omitempty" jsonschema:"ms between SIGTERM and SIGKILL (default: the server's, 2000)"`
}

// ListCommandsInput are the arguments of list_commands: none.
type ListCommandsInput struct{}

// ReadFileInput are the arguments of read_file.
type ReadFileInput struct {
	Path        string `json:"path" jsonschema:"relative to the workspace root, or absolute inside a root"`
	Line        int    `json:"line,omitempty" jsonschema:"the first line, from 1 (the default)"`
	Limit       int    `json:"limit,omitempty" jsonschema:"how many lines (default: to the end)"`
	MaxBytes    int64  `json:"maxBytes,omitempty" jsonschema:"default 1048576, at most 67108864; a larger whole file is refused: page it with line and limit"`
	Destination string `json:"destination,omitempty" jsonschema:"the file is on this destination, under its root"`
}

// WriteFileInput are the arguments of write_file.
type WriteFileInput struct {
	Path           string  `json:"path" jsonschema:"relative to the workspace root"`
	Content        string  `json:"content" jsonschema:"the whole new content"`
	Encoding       string  `json:"encoding,omitempty" jsonschema:"\"utf-8\" (the default) or \"base64\""`
	CreateDirs     bool    `json:"createDirs,omitempty" jsonschema:"create missing parent directories"`
	ExpectedSha256 *string `json:"expectedSha256,omitempty" jsonschema:"write only if the file's sha256 is this (a previous write_file's), else fail with Conflict; 64 zeros: only if it does not exist"`
	Destination    string  `json:"destination,omitempty" jsonschema:"the file is on this destination, under its root"`
}

// addTools registers the nine tools of commands and files, and the three
// of snapshots.
func (s *Server) addTools() {
	readOnly := func() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{ReadOnlyHint: true} }
	// A command may reach the network (unless its sandbox cuts it off).
	command := func() *sdk.ToolAnnotations { return &sdk.ToolAnnotations{OpenWorldHint: ptr(true)} }
	addTool[RunCommandInput, protocol.ToolResult](s, "run_command", "Run a command",
		`Run a command in the workspace and wait for its end (or yieldMs): tests, builds, git, linters, searches. Returns the status (completed, timedOut, cancelled), the exit code (non-zero is a result, not an error), and the head and tail of stdout and stderr; the full output is in the resource_links, read in pages. The kernel confines it to the workspace; cancelling the call kills its whole process tree. A progress token gets its steps as progress. For servers and interactive programs: start_command.`,
		command(), s.runCommand)
	addTool[StartCommandInput, protocol.LongRunningResult](s, "start_command", "Start a command in the background",
		`Start a long-running command (a server, a watcher, a long build, an interactive program) and return at once with its handleId, for wait_command, read_output, write_input, cancel_command and list_commands. Commands still running when the session ends are killed.`,
		command(), s.startCommand)
	addTool[WaitCommandInput, protocol.ToolResult](s, "wait_command", "Wait for a command",
		`Wait up to timeoutMs for a started command to end; returns its result as run_command does. If it still runs then, the status is "running", with the output so far, and it goes on. Cancelling the call ends the wait, not the command.`,
		readOnly(), s.waitCommand)
	addTool[ReadOutputInput, OutputRead](s, "read_output", "Read a command's output",
		`Read a command's output from a byte offset, while it runs or after; call again from nextOffset until eof, with waitMs rather than polling. The first text content is the bytes read, exactly (base64 if not UTF-8); the second gives the offsets and whether it runs.`,
		readOnly(), s.readOutput)
	addTool[WriteInputInput, protocol.WriteInputResult](s, "write_input", "Type into a command",
		`Write to the stdin of a command started with openStdin, or type into one started with pty. Returns how many bytes it took.`,
		nil, s.writeInput)
	addTool[CancelCommandInput, protocol.ToolResult](s, "cancel_command", "Cancel a command",
		`Stop a started command: SIGTERM to its whole process tree, SIGKILL after graceMs. Returns its result once every process is gone (for a command that had ended, its result again).`,
		&sdk.ToolAnnotations{DestructiveHint: ptr(true)}, s.cancelCommand)
	addTool[ListCommandsInput, protocol.ProgressList](s, "list_commands", "List commands",
		`List this session's commands, running and latest finished: handleId, label, status, step, elapsed time, output size, exit code.`,
		readOnly(), s.listCommands)
	addTool[ReadFileInput, FileRead](s, "read_file", "Read a file",
		`Read a text file of the workspace or a read-only root, whole or limit lines from line, up to maxBytes. The first text content is the file's, exactly (base64 if binary); the second gives the lines read, of how many, and whether more follows. Paths that leave the roots (.., symlinks) are refused.`,
		readOnly(), s.readFile)
	addTool[WriteFileInput, protocol.WriteFileResult](s, "write_file", "Write a file",
		`Create or replace a file of the workspace, whole and atomically (readers never see half of it). Returns its path, size and new sha256. Paths outside the workspace, in read-only roots, or through symlinks that leave it are refused.`,
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
	// The command's asks are put to this call's client (approvals.go).
	me, done := s.callers.add(ctx, req.Session, [][]string{in.Argv})
	defer done()
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
		s.setHandle(req.Session, me, started.HandleID)
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
		s.own(req.Session, res.CommandID)
		if res.Status == protocol.StatusRunning {
			s.setHandle(req.Session, me, res.HandleID) // it yielded
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
	s.setHandle(req.Session, me, started.HandleID)
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
	argvs := [][]string{in.Argv}
	for _, st := range in.Steps {
		argvs = append(argvs, st.Argv)
	}
	me, done := s.callers.add(ctx, req.Session, argvs)
	defer done()
	res, err := s.th.LongRunning(ctx, in.params())
	if err != nil {
		return s.toolError(err)
	}
	s.setHandle(req.Session, me, res.HandleID)
	if tc := taskCallFrom(ctx); tc != nil {
		// The middleware answers with the task instead.
		s.startTask(ctx, req, tc, res.HandleID, fmt.Sprintf("started %s (pid %d)", res.Command, res.PID))
	}
	return startedContent(res), nil
}

// waitCommand runs wait_command: toolhost's wait, with the handle's steps
// as progress when the call has a token.
func (s *Server) waitCommand(ctx context.Context, req *sdk.CallToolRequest, in *WaitCommandInput) (*sdk.CallToolResult, error) {
	h, err := s.handleFor(req.Session, in.HandleID)
	if err != nil {
		return s.toolError(err)
	}
	var k *sink
	if token := req.Params.GetProgressToken(); token != nil {
		var stop func()
		k, stop = s.events.watch(ctx, req.Session, token, h, false)
		defer stop()
	}
	res, err := s.th.Wait(ctx, &protocol.WaitParams{HandleID: h, TimeoutMs: in.TimeoutMs})
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
	h, err := s.handleFor(req.Session, in.HandleID)
	if err != nil {
		return s.toolError(err)
	}
	res, err := s.th.ReadOutput(ctx, &protocol.ReadOutputParams{HandleID: h, Stream: protocol.OutputStream(in.Stream),
		Offset: in.Offset, MaxBytes: in.MaxBytes, WaitMs: in.WaitMs})
	if err != nil {
		return s.toolError(err)
	}
	return readOutputContent(res), nil
}

// writeInput runs write_input: toolhost's writeInput.
func (s *Server) writeInput(ctx context.Context, req *sdk.CallToolRequest, in *WriteInputInput) (*sdk.CallToolResult, error) {
	h, err := s.handleFor(req.Session, in.HandleID)
	if err != nil {
		return s.toolError(err)
	}
	res, err := s.th.WriteInput(ctx, &protocol.WriteInputParams{HandleID: h, Data: in.Data, Encoding: protocol.Encoding(in.Encoding), EOF: in.EOF})
	if err != nil {
		return s.toolError(err)
	}
	return structured(res, "wrote %d bytes", res.BytesWritten), nil
}

// cancelCommand runs cancel_command: toolhost's cancel.
func (s *Server) cancelCommand(ctx context.Context, req *sdk.CallToolRequest, in *CancelCommandInput) (*sdk.CallToolResult, error) {
	h, err := s.handleFor(req.Session, in.HandleID)
	if err != nil {
		return s.toolError(err)
	}
	res, err := s.th.Cancel(ctx, &protocol.CancelParams{HandleID: h, GraceMs: in.GraceMs})
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
	list.Handles = s.ownProgress(req.Session, list.Handles)
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
