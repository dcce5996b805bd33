package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// HandleStarted describes a handle as it starts, for the journal of a
// persisted session (Config.OnHandle): what a later server needs to end
// it in a "lost" toolResult if this one dies first.
type HandleStarted struct {
	HandleID  string    `json:"handleId"`
	CommandID string    `json:"commandId"`
	StartedAt time.Time `json:"startedAt"`
	Command   string    `json:"command"`
}

// newSessionID returns a fresh, unguessable session id.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// SessionID returns the session's id, which initialize answers.
func (t *Tools) SessionID() string { return t.sessionID }

// Running counts the session's handles still running.
func (t *Tools) Running() int {
	_, mgr := t.state()
	if mgr == nil {
		return 0
	}
	n := 0
	for _, c := range mgr.Handles() {
		select {
		case <-c.Done():
		default:
			if c.HandleID() != "" {
				n++
			}
		}
	}
	return n
}

// Leftovers returns what the session's commands could leave behind were
// this process to die (see process.Leftovers); zero before Initialize.
func (t *Tools) Leftovers() process.Leftovers {
	_, mgr := t.state()
	if mgr == nil {
		return process.Leftovers{}
	}
	return mgr.Leftovers()
}

// AdoptResults makes wait answer these final results for handles a
// server before this one held: those it ended, and those it lost.
func (t *Tools) AdoptResults(results []protocol.ToolResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.adopted == nil {
		t.adopted = make(map[string]protocol.ToolResult)
	}
	for _, r := range results {
		if r.HandleID != "" {
			r.Seq = 0
			t.adopted[r.HandleID] = r
		}
	}
}

// adoptedResult returns the result AdoptResults gave for handleID.
func (t *Tools) adoptedResult(handleID string) (protocol.ToolResult, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.adopted[handleID]
	return r, ok
}

// handleStarted tells Config.OnHandle of a handle that started.
func (t *Tools) handleStarted(cmd *process.Command, command string) {
	if t.cfg.OnHandle == nil {
		return
	}
	t.cfg.OnHandle(HandleStarted{HandleID: cmd.HandleID(), CommandID: cmd.ID(), StartedAt: cmd.StartedAt().UTC(), Command: command})
}

// sessions lists this user's sessions for this root: the holder's, under
// --persist; otherwise this one alone.
func (t *Tools) sessions(context.Context, *rpc.Session, *protocol.SessionsParams) (*protocol.SessionList, error) {
	if t.cfg.Sessions != nil {
		l := protocol.SessionList(t.cfg.Sessions())
		return &l, nil
	}
	ws, _ := t.state()
	l := protocol.SessionList{{SessionID: t.sessionID, Root: ws.Root(), Attached: true, CreatedAt: t.createdAt, Handles: t.Running()}}
	return &l, nil
}

// CreatedAt returns when the session was initialized.
func (t *Tools) CreatedAt() time.Time { return t.createdAt }

// sessionNotFound is the error of a resume this server cannot serve.
func sessionNotFound(id, reason, format string, args ...any) error {
	return protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: id, Reason: reason}, format, args...)
}
