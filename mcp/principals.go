package mcp

import (
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// Principals (issue 37). Over HTTP, connections of several principals (a
// bearer token's holder, an OAuth subject) share one server: its
// toolhost session, its commands and its tasks. A handle, a command's
// artifacts and a task belong to the principal whose connection made
// them; to any other they do not exist, in the same words as an id that
// never was. The task table keeps each task's principal (tasks.go); the
// handles and commands are kept here.

// ownersCap bounds the ids whose principal is remembered. A handle or
// command forgotten is reachable by stdio connections (the local user)
// alone: a remote principal is refused what it cannot be shown to own.
const ownersCap = 1 << 16

// owners remembers which principal made each handle and command.
type owners struct {
	mu sync.Mutex
	// ids maps handle and command ids to their principal, the latest
	// ownersCap. Guarded by mu.
	ids recent[string]
}

// own records that ss's principal made ids (empty ones are skipped).
func (s *Server) own(ss *sdk.ServerSession, ids ...string) {
	p := s.connOf(ss).principal
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	if s.owners.ids.m == nil {
		s.owners.ids = newRecent[string](ownersCap)
	}
	for _, id := range ids {
		if id != "" {
			s.owners.ids.put(id, p)
		}
	}
}

// ownCommand gives a command the principal of its handle, as its
// toolResult names both: its artifacts are then that principal's.
func (s *Server) ownCommand(res *protocol.ToolResult) {
	if res.HandleID == "" || res.CommandID == "" {
		return
	}
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	if p, ok := s.owners.ids.get(res.HandleID); ok {
		s.owners.ids.put(res.CommandID, p)
	}
}

// reaches reports whether ss's principal may reach the handle or command
// id: its own, or, for the local user, one whose maker is not known.
func (s *Server) reaches(ss *sdk.ServerSession, id string) bool {
	p := s.connOf(ss).principal
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	owner, ok := s.owners.ids.get(id)
	if !ok {
		return p == localPrincipal || p == ""
	}
	return owner == p
}

// handleFor returns the handle a tool's handleId names (a task id names
// its handle), or the error toolhost answers for an unknown handle when
// it is another principal's.
func (s *Server) handleFor(ss *sdk.ServerSession, id string) (string, error) {
	h := s.tasks.handleOf(id)
	if !s.reaches(ss, h) {
		return "", protocol.NewError(protocol.CodeHandleNotFound, &protocol.ErrorData{HandleID: id, Reason: "no running or recently finished handle has this id"},
			"handle not found: %q", id)
	}
	return h, nil
}

// ownProgress keeps of list the handles ss's principal may reach.
func (s *Server) ownProgress(ss *sdk.ServerSession, list []protocol.Progress) []protocol.Progress {
	out := list[:0:0]
	for _, p := range list {
		if s.reaches(ss, p.HandleID) {
			out = append(out, p)
		}
	}
	return out
}

// setHandle records that c's command runs behind handleID, which ss's
// principal then owns.
func (s *Server) setHandle(ss *sdk.ServerSession, c *caller, handleID string) {
	s.own(ss, handleID)
	s.callers.setHandle(c, handleID)
}
