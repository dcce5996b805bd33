package persist

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// tombstoneTTL is how long an ended session's tombstone is kept, so that
// a late resume is told why.
const tombstoneTTL = 7 * 24 * time.Hour

// adoptDead takes over the sessions of this root whose holder died: what
// is left of their commands is killed, each handle without a toolResult
// ends in one with status "lost" (written to the journal first, so that
// it is made once however many holders die), and the session waits,
// detached, for its linger. Old tombstones go.
func (h *holder) adoptDead() {
	dir := filepath.Join(h.cfg.Dirs.State, "sessions")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".journal") {
			continue
		}
		path := filepath.Join(dir, name)
		rp, err := readJournal(path)
		if err != nil {
			continue
		}
		if rp.ended {
			if time.Since(rp.first.At) > tombstoneTTL {
				_ = os.Remove(path)
			}
			continue
		}
		if rp.first.Root != h.cfg.Root || rp.holder.alive() {
			continue
		}
		if err := h.adopt(path, rp); err != nil {
			h.log.Warn("cannot take over a dead holder's session", "journal", path, "err", err)
		}
	}
}

// adopt takes over one dead holder's session.
func (h *holder) adopt(path string, rp *replay) error {
	id := rp.first.ID
	for _, lo := range rp.leftovers {
		n, err := process.KillLeftovers(lo)
		h.log.Info("killed what a dead holder's session left", "session", id, "byMarker", n, "cgroup", lo.Cgroup, "err", err)
	}
	j, err := openJournal(path)
	if err != nil {
		return err
	}
	me := self()
	if err := j.append(record{Kind: kindHolder, Holder: &me}); err != nil {
		j.close()
		return err
	}
	ended := map[string]bool{}
	var seq int64
	for _, r := range rp.results {
		ended[r.handle] = true
		seq = max(seq, r.seq)
	}
	now := time.Now().UTC()
	for _, hs := range rp.handles {
		if ended[hs.HandleID] {
			continue
		}
		seq++
		res := lostResult(hs, rp.holder.PID, now)
		msg, err := rpc.NumberedMessage(protocol.NotifyToolResult, res, seq)
		if err != nil {
			continue
		}
		j.Numbered(seq, msg)
		rp.apply(record{Kind: kindResult, Seq: seq, Message: msg})
		ended[hs.HandleID] = true
		h.log.Info("a dead holder's handle ends lost", "session", id, "handle", hs.HandleID)
	}
	linger := time.Duration(rp.first.LingerMs) * time.Millisecond
	if linger <= 0 {
		linger = 10 * time.Minute
	}
	root := rp.first.Root
	if rp.first.Workspace != "" {
		root = rp.first.Workspace
	}
	s := h.newSession(&session{id: id, root: root, createdAt: rp.first.CreatedAt, internal: rp.first.MCP,
		logs: &logSwitch{fallback: h.cfg.Log}, initParams: rp.first.Init, journal: j, adopted: rp}, linger)
	h.mu.Lock()
	h.sessions[id] = s
	s.lingerLocked() // detached from the start
	h.mu.Unlock()
	return nil
}

// lostResult is the toolResult of a handle whose holder died.
func lostResult(hs tools.HandleStarted, pid int, now time.Time) protocol.ToolResult {
	started := hs.StartedAt
	if started.IsZero() {
		started = now
	}
	return protocol.ToolResult{
		CommandID: hs.CommandID, HandleID: hs.HandleID, Status: protocol.StatusLost,
		StartedAt: started, EndedAt: now, DurationMs: now.Sub(started).Milliseconds(),
		Stderr: fmt.Sprintf("toolhost: the process that held this command (pid %d) died first; a later toolhost killed what was left of it\n", pid),
		Steps:  []protocol.StepResult{},
	}
}

// revive returns the method table of the session a resume names: a live
// one's, or for an adopted one the table of tools made for it now, from
// this connection's configuration, keeping the session's id and its
// handles' numbers (wake initializes them).
func (h *holder) revive(s *session, cfg SessionConfig) (*rpc.Table, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.tools != nil {
		return s.table, nil
	}
	tc := cfg.Tools
	tc.Persist = true
	tc.Sessions = h.list
	tc.SessionID = s.id
	tc.FirstID = maxHandleNumber(s.adopted)
	j := s.journal
	tc.OnHandle = func(hs tools.HandleStarted) { j.handle(hs) }
	tc.Logger = cfg.Tools.Logger
	s.tools = tools.New(tc)
	s.table = s.tools.Table()
	return s.table, nil
}

// wake initializes an adopted session's tools on the connection rs of
// the resume, from the session's first initialize, and puts the dead
// holder's toolResults back in its ledger.
func (h *holder) wake(ctx context.Context, s *session, rs *rpc.Session) error {
	h.mu.Lock()
	rp := s.adopted
	s.adopted = nil
	h.mu.Unlock()
	if rp == nil {
		return nil
	}
	var p protocol.InitializeParams
	if err := json.Unmarshal(s.initParams, &p); err != nil {
		return fmt.Errorf("the session's first initialize does not decode: %w", err)
	}
	res, err := s.tools.Initialize(ctx, rs, &p)
	if err != nil {
		h.mu.Lock()
		s.adopted = rp // a later resume tries again
		h.mu.Unlock()
		return err
	}
	seqs := make([]int64, len(rp.results))
	bodies := make([][]byte, len(rp.results))
	written := make([]bool, len(rp.results))
	var results []protocol.ToolResult
	for i, r := range rp.results {
		seqs[i], bodies[i], written[i] = r.seq, r.message, r.written
		var m struct {
			Params protocol.ToolResult `json:"params"`
		}
		if json.Unmarshal(r.message, &m) == nil {
			results = append(results, m.Params)
		}
	}
	rs.Restore(seqs, bodies, written)
	s.tools.AdoptResults(results)
	rs.SetJournal(s.journal)
	lo := s.tools.Leftovers()
	me := self()
	_ = s.journal.append(record{Kind: kindHolder, Holder: &me, Leftovers: &lo})
	h.mu.Lock()
	s.rs = rs
	s.init = res
	h.mu.Unlock()
	return nil
}

// maxHandleNumber returns the highest N of the handles ("h-N") a journal
// names, so that new ones are numbered after it.
func maxHandleNumber(rp *replay) uint64 {
	var n uint64
	if rp == nil {
		return 0
	}
	for _, hs := range rp.handles {
		n = max(n, handleNumber(hs))
	}
	return n
}
