package persist

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// session is one persisted session.
type session struct {
	id        string
	root      string
	createdAt time.Time
	logs      *logSwitch

	// tools, rs, table and init are set once the session is live: made by
	// an initialize, or revived by a resume. An adopted session (its
	// holder died) has none until it is resumed.
	tools      *tools.Tools
	rs         *rpc.Session
	table      *rpc.Table
	init       *protocol.InitializeResult
	initParams json.RawMessage
	journal    *journal
	adopted    *replay // a dead holder's journal, until resumed
	// internal says a shared MCP server serves the session: no resume
	// reaches it, and sessions {} leaves it out.
	internal bool

	// lingering is attached to the conn serving the session (one at a
	// time), and ends the session (holder.finish) once it has been
	// detached for its linger.
	lingering
}

// newSession returns a session of h with the given fields set, whose
// linger is linger.
func (h *holder) newSession(s *session, linger time.Duration) *session {
	s.lingering = newLingering(h, linger, "detached longer than --linger", func(kind, why string) { h.finish(s, kind, why) })
	return s
}

// finish ends a session, once its lingering is ending: its commands are
// killed, and its journal becomes a tombstone saying why (kind: ended or
// expired).
func (h *holder) finish(s *session, kind, why string) {
	h.log.Info("session ending", "session", s.id, "reason", kind, "why", why)
	if s.tools != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s.tools.Shutdown(ctx)
		cancel()
	}
	if s.journal != nil {
		if err := s.journal.end(s.id, h.cfg.Root, kind); err != nil {
			h.log.Warn("cannot write the session's tombstone", "session", s.id, "err", err)
		}
	} else {
		_ = writeTombstone(h.cfg.Dirs.journalPath(s.id), record{Kind: kindEnded, V: journalVersion, ID: s.id, Root: h.cfg.Root, Reason: kind, At: time.Now().UTC()})
	}
	h.mu.Lock()
	delete(h.sessions, s.id)
	h.armIdleLocked()
	h.mu.Unlock()
}

// detached starts a session's linger when by, the connection that ended,
// served it: unless a connection resumes it first, it ends when the
// linger passes.
func (h *holder) detached(s *session, by *conn, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.detachLocked(by) {
		return // another connection took it over meanwhile, or it is ending
	}
	s.logs.set(nil)
	h.log.Info("session detached", "session", s.id, "reason", reason, "linger", s.linger)
}

// list answers sessions: every session the holder holds.
func (h *holder) list() []protocol.SessionInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []protocol.SessionInfo{}
	for _, s := range h.sessions {
		if s.ending || s.internal {
			continue
		}
		attached := len(s.attached) > 0
		info := protocol.SessionInfo{SessionID: s.id, Root: s.root, Attached: attached, CreatedAt: s.createdAt}
		if !attached {
			t := s.until
			info.LingerUntil = &t
		}
		if s.tools != nil {
			info.Handles = s.tools.Running()
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// lookup finds the session a resume names, or says why none: a
// tombstone's reason, or unknown.
func (h *holder) lookup(id string) (*session, string) {
	h.mu.Lock()
	s := h.sessions[id]
	var kind string
	switch {
	case s != nil && s.internal:
		s = nil // a shared MCP server's: its id is never given out
	case s != nil && s.ending:
		s, kind = nil, s.kind
	}
	h.mu.Unlock()
	if s != nil {
		return s, ""
	}
	if kind != "" {
		return nil, kind
	}
	if !validID(id) {
		return nil, protocol.SessionUnknown
	}
	rp, err := readJournal(h.cfg.Dirs.journalPath(id))
	if err == nil && rp.ended && rp.first.Root == h.cfg.Root {
		return nil, rp.first.Reason
	}
	return nil, protocol.SessionUnknown
}

// validID reports whether id can name a journal file.
func validID(id string) bool {
	if !strings.HasPrefix(id, "s-") || len(id) > 64 {
		return false
	}
	for _, r := range id[2:] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// create makes a new session of the connection's fresh tools.
func (h *holder) create(ctx context.Context, cn *conn, rs *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	t := cn.fresh
	res, err := t.Initialize(ctx, rs, p)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(p)
	s := h.newSession(&session{
		id: t.SessionID(), root: res.Workspace.Root, createdAt: t.CreatedAt(), logs: cn.logs,
		tools: t, rs: rs, init: res, initParams: raw, table: cn.table, internal: cn.internal,
	}, cn.cfg.Linger)
	lo := t.Leftovers()
	me := self()
	workspace := ""
	if s.root != h.cfg.Root {
		workspace = s.root
	}
	j, err := createJournal(h.cfg.Dirs.journalPath(s.id), record{Kind: kindSession, V: journalVersion, ID: s.id, Root: h.cfg.Root, Workspace: workspace, MCP: s.internal,
		CreatedAt: s.createdAt, Holder: &me, Leftovers: &lo, Init: raw, LingerMs: s.linger.Milliseconds()})
	if err != nil {
		t.Shutdown(ctx)
		return nil, fmt.Errorf("cannot persist the session: %w", err)
	}
	s.journal = j
	rs.SetJournal(j)
	h.mu.Lock()
	h.sessions[s.id] = s
	s.attachLocked(cn, true)
	h.mu.Unlock()
	cn.mu.Lock()
	cn.sess = s
	cn.mu.Unlock()
	h.log.Info("session created", "session", s.id, "root", s.root)
	cp := *res
	return &cp, nil
}

// resume moves the connection to the session s: it answers s's
// initialize result, and once that is queued, the toolResults owed.
func (h *holder) resume(ctx context.Context, cn *conn, rs *rpc.Session, s *session, lastSeq *int64, cfg SessionConfig) (*protocol.InitializeResult, error) {
	if err := h.wake(ctx, s, rs); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if !s.attachLocked(cn, true) {
		h.mu.Unlock()
		return nil, protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: s.id, Reason: protocol.SessionEnded}, "session not found: it is ending")
	}
	s.logs.set(cn.stderr)
	h.mu.Unlock()
	cn.mu.Lock()
	cn.sess = s
	cn.mu.Unlock()
	rs.MoveTo(ctx, s.rs, lastSeq)
	h.log.Info("session resumed", "session", s.id)
	res := *s.init
	return &res, nil
}
