package client

import (
	"context"

	"github.com/toolhost/toolhost/protocol"
)

// Call sends the request t with params (nil sends none) and returns its
// decoded result, as Client.Call does.
func Call[P, R any](ctx context.Context, c *Client, t protocol.RequestType[P, R], params *P) (*R, error) {
	var p any
	if params != nil {
		p = params
	}
	r := new(R)
	if err := c.Call(ctx, t.Method(), p, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Notify sends the notification t with params (nil sends none).
func Notify[P any](ctx context.Context, c *Client, t protocol.NotificationType[P], params *P) error {
	var p any
	if params != nil {
		p = params
	}
	return c.Notify(ctx, t.Method(), p)
}

// Initialize opens the session: it sends the workspace root and the
// client's capabilities and settings (nil is none: the server's --root
// then) and returns what the server serves and the resolved workspace.
// Send Initialized next.
func (c *Client) Initialize(ctx context.Context, params *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	if params == nil {
		params = &protocol.InitializeParams{}
	}
	return Call(ctx, c, protocol.InitializeRequest, params)
}

// Initialized tells the server the client has its initialize answer.
func (c *Client) Initialized(ctx context.Context) error {
	return Notify(ctx, c, protocol.InitializedNotification, &protocol.InitializedParams{})
}

// Shutdown asks the server to end the session: it cancels running commands
// and answers once they have ended. Send Exit next.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := Call(ctx, c, protocol.ShutdownRequest, nil)
	return err
}

// Exit tells the server to exit: with status 0 after Shutdown, 1 without.
func (c *Client) Exit(ctx context.Context) error {
	return Notify(ctx, c, protocol.ExitNotification, nil)
}

// RunCommand runs a command to its end and returns how it ended, with its
// output's head and tail and the files that hold all of it. Cancelling ctx
// ends the command; the -32800 answer's data holds the partial result.
func (c *Client) RunCommand(ctx context.Context, params *protocol.RunCommandParams) (*protocol.ToolResult, error) {
	return Call(ctx, c, protocol.RunCommandRequest, params)
}

// LongRunning starts a command, or a recipe of steps, behind a handle and
// answers at once. The command's end comes as a toolResult notification
// (see OnNotification with protocol.ToolResultNotification); its steps, output
// and heartbeats come as notifications too.
func (c *Client) LongRunning(ctx context.Context, params *protocol.LongRunningParams) (*protocol.LongRunningResult, error) {
	return Call(ctx, c, protocol.LongRunningRequest, params)
}

// Cancel ends a handle's command (TERM, then KILL after the grace) and
// returns its final result once its processes are gone; for a handle that
// has ended it returns the final result again.
func (c *Client) Cancel(ctx context.Context, params *protocol.CancelParams) (*protocol.ToolResult, error) {
	return Call(ctx, c, protocol.CancelRequest, params)
}

// Wait waits up to params.TimeoutMs for a handle to end and returns its
// final result, or its snapshot (Status protocol.StatusRunning) if the timeout
// came first. Cancelling ctx ends the wait, not the command.
func (c *Client) Wait(ctx context.Context, params *protocol.WaitParams) (*protocol.ToolResult, error) {
	return Call(ctx, c, protocol.WaitRequest, params)
}

// ReadOutput reads a handle's output artifact from a byte offset, waiting
// up to params.WaitMs for new bytes; read on from the result's NextOffset
// until EOF.
func (c *Client) ReadOutput(ctx context.Context, params *protocol.ReadOutputParams) (*protocol.ReadOutputResult, error) {
	return Call(ctx, c, protocol.ReadOutputRequest, params)
}

// WriteInput writes bytes to a handle's pseudo-terminal or open stdin,
// in order with the writes before it; with params.EOF it then ends the
// input.
func (c *Client) WriteInput(ctx context.Context, params *protocol.WriteInputParams) (*protocol.WriteInputResult, error) {
	return Call(ctx, c, protocol.WriteInputRequest, params)
}

// Resize sets the size of a handle's pseudo-terminal.
func (c *Client) Resize(ctx context.Context, params *protocol.ResizeParams) error {
	_, err := Call(ctx, c, protocol.ResizeRequest, params)
	return err
}

// Signal sends a signal, by name, to a handle's foreground process group.
func (c *Client) Signal(ctx context.Context, params *protocol.SignalParams) (*protocol.SignalResult, error) {
	return Call(ctx, c, protocol.SignalRequest, params)
}

// ReadFile reads a file inside a root, whole or a page of lines.
func (c *Client) ReadFile(ctx context.Context, params *protocol.ReadFileParams) (*protocol.ReadFileResult, error) {
	return Call(ctx, c, protocol.ReadFileRequest, params)
}

// WriteFile writes a file inside the workspace root, atomically.
func (c *Client) WriteFile(ctx context.Context, params *protocol.WriteFileParams) (*protocol.WriteFileResult, error) {
	return Call(ctx, c, protocol.WriteFileRequest, params)
}

// Progress returns a snapshot of one handle (params.HandleID) or of every
// handle (nil params or no HandleID).
func (c *Client) Progress(ctx context.Context, params *protocol.ProgressParams) (*protocol.ProgressResult, error) {
	if params == nil {
		params = &protocol.ProgressParams{}
	}
	return Call(ctx, c, protocol.ProgressRequest, params)
}

// WorkDoneProgressCancel cancels the handle whose progress token is token,
// as an LSP client's cancel button does.
func (c *Client) WorkDoneProgressCancel(ctx context.Context, token protocol.ProgressToken) error {
	return Notify(ctx, c, protocol.WorkDoneProgressCancelNotification, &protocol.WorkDoneProgressCancelParams{Token: token})
}
