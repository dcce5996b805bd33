package persist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// front is one connection a front handed the holder: the rpc server on
// its descriptors, and the session it serves once initialized. It is the
// server's Lifecycle.
type front struct {
	h   *Holder
	cfg SessionConfig
	log *slog.Logger
	// logs is the session log switch made for this connection; a new
	// session keeps it.
	logs   *logSwitch
	stderr io.Writer

	// fresh are the tools a new session gets; target is the session the
	// first message resumes (nil for none); refused is why a resume was
	// refused, answered to the first initialize.
	fresh   *tools.Tools
	table   *rpc.Table // the fresh tools' methods
	target  *session
	refused string
	resumed bool // the first initialize was answered, one way or the other
	// internal says the connection is a shared MCP server's own (its
	// session under the MCP protocol): no resume reaches its session.
	internal bool

	mu   sync.Mutex
	sess *session // the session served, once initialized; guarded by mu
}

// serveFront serves one front: it checks who it is, takes its
// descriptors and serves the connection on them until it ends, then
// tells the front its exit code.
func (h *Holder) serveFront(c *net.UnixConn) {
	defer c.Close()
	uid, err := peerUID(c)
	if err != nil || uid != os.Geteuid() {
		h.log.Warn("refused a connection of another user", "uid", uid, "err", err)
		return
	}
	b, files, err := recvFrame(c, 3)
	if err != nil {
		h.log.Warn("a front sent no hello", "err", err)
		return
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var hl hello
	refuse := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		h.log.Warn("front refused", "reason", msg)
		vb, _ := json.Marshal(verdict{Exit: 2, Error: msg})
		_ = sendFrame(c, vb, nil)
	}
	switch {
	case json.Unmarshal(b, &hl) != nil:
		refuse("a hello that does not decode")
		return
	case hl.V != wireVersion:
		refuse("the front speaks version %d, the holder %d", hl.V, wireVersion)
		return
	case hl.Build != h.cfg.Build:
		refuse("the front is another build (%s) than the holder (%s)", hl.Build, h.cfg.Build)
		return
	case len(files) != 3:
		refuse("the front sent %d descriptors, not stdin, stdout and stderr", len(files))
		return
	}
	stdin, stdout, stderr := files[0], files[1], files[2]
	switch hl.Mode {
	case "":
	case ModeMCP:
		h.serveMCP(c, &hl, stdin, stdout, stderr, refuse)
		return
	default:
		refuse("the front speaks %q, which the holder does not serve", hl.Mode)
		return
	}
	logs := &logSwitch{fallback: h.cfg.Log}
	logs.set(stderr)
	cfg, err := h.cfg.Configure(hl.Args, hl.Env, hl.Cwd, logs)
	if err != nil {
		refuse("%v", err)
		return
	}
	f := &front{h: h, cfg: cfg, log: cfg.RPC.Logger, logs: logs, stderr: stderr}
	opts := cfg.RPC
	opts.Persist = true
	opts.Lifecycle = f
	opts.Table = f.prepare(firstInitialize(hl.Prefix))
	srv := rpc.NewServer(opts)

	h.serveUntilGone(c, func() int {
		return srv.Serve(io.MultiReader(bytes.NewReader(hl.Prefix), stdin), stdout)
	}, func() { srv.Release("the front process is gone") })
}

// serveUntilGone serves a front's connection with serve until it
// returns, and tells the front the exit code. The front lives as long as
// its client's connection: when it goes (killed, say), release ends the
// connection. stdin stays blocking, as the front's own would be (a polled
// one cost a fifth more per request): a read blocked on it ends when the
// client closes or writes to its end of the pipe, and what it reads then
// is discarded with the ended connection.
func (h *Holder) serveUntilGone(c *net.UnixConn, serve func() int, release func()) {
	frontGone := make(chan struct{})
	go func() { // owned by serveUntilGone, which waits on frontGone
		defer close(frontGone)
		n, err := io.Copy(io.Discard, c)
		h.log.Debug("the front's socket ended", "bytes", n, "err", err)
	}()
	served := make(chan int, 1)
	go func() { // owned by serveUntilGone, which waits on served
		served <- serve()
	}()
	var code int
	select {
	case code = <-served:
	case <-frontGone:
		h.log.Info("the front is gone; its connection ends")
		release()
		code = <-served
	}
	vb, _ := json.Marshal(verdict{Exit: code})
	_ = sendFrame(c, vb, nil)
	c.CloseRead()
	c.Close()
	<-frontGone
}

// prepare decides, from the first message, which session's methods the
// connection serves: the session a resume names (revived first if a dead
// holder's), else the fresh tools of a new session.
func (f *front) prepare(p *protocol.InitializeParams) *rpc.Table {
	if p != nil && p.InitializationOptions != nil && p.InitializationOptions.Resume != nil {
		id := p.InitializationOptions.Resume.SessionID
		s, why := f.h.lookup(id)
		if s != nil {
			if tab, err := f.h.revive(s, f.cfg); err == nil {
				f.target = s
				return tab
			} else {
				f.refused = err.Error()
			}
		} else {
			f.refused = why
		}
	}
	cfg := f.cfg.Tools
	cfg.Persist = true
	cfg.Sessions = f.h.list
	var journalOf func() *journal
	cfg.OnHandle = func(hs tools.HandleStarted) {
		if j := journalOf(); j != nil {
			j.handle(hs)
		}
	}
	f.fresh = tools.New(cfg)
	journalOf = func() *journal {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.sess == nil {
			return nil
		}
		return f.sess.journal
	}
	f.table = f.fresh.Table()
	return f.table
}

// Initialize serves the connection's initialize: a resume of the session
// prepare found, or a new session.
func (f *front) Initialize(ctx context.Context, rs *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	first := !f.resumed
	f.resumed = true
	if r := resumeOf(p); r != nil {
		if !first {
			// The connection's methods were chosen by its first message
			// (prepare): a fresh session's. Saying "unknown" here would
			// be untrue of a session that lives.
			return nil, protocol.InvalidParams("initializationOptions.resume", "a connection resumes a session only with its first initialize, and this one's was answered; open a new connection to resume session %s", r.SessionID)
		}
		if f.target == nil || f.target.id != r.SessionID {
			reason := f.refused
			if f.target != nil || reason == "" {
				reason = protocol.SessionUnknown
			}
			return nil, protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: r.SessionID, Reason: reason},
				"session not found: %s", describe(reason))
		}
		return f.h.resume(ctx, f, rs, f.target, r.LastSeq, f.cfg)
	}
	if f.fresh == nil {
		// This connection's methods are a resumed session's.
		return nil, protocol.InvalidParams("initializationOptions.resume", "this connection was opened to resume session %s; give resume, or open a new connection", f.target.id)
	}
	return f.h.create(ctx, f, rs, p)
}

// resumeOf returns the resume options of p, or nil.
func resumeOf(p *protocol.InitializeParams) *protocol.ResumeOptions {
	if p == nil || p.InitializationOptions == nil {
		return nil
	}
	return p.InitializationOptions.Resume
}

// describe says a SessionNotFound reason in words.
func describe(reason string) string {
	switch reason {
	case protocol.SessionExpired:
		return "it was detached longer than its --linger, and its commands were ended"
	case protocol.SessionEnded:
		return "shutdown ended it"
	case protocol.SessionUnknown:
		return "no session of this user and root has this id"
	}
	return reason
}

// Shutdown ends the session the connection serves, at once.
func (f *front) Shutdown(ctx context.Context) {
	f.mu.Lock()
	s := f.sess
	f.mu.Unlock()
	if s == nil {
		if f.fresh != nil {
			f.fresh.Shutdown(ctx) // an initialize that failed leaves nothing, or this cleans it
		}
		return
	}
	f.h.end(s, protocol.SessionEnded, "shutdown")
}

// Detached starts the linger of the session the connection served.
func (f *front) Detached(_ *rpc.Session, reason string) {
	f.mu.Lock()
	s := f.sess
	f.mu.Unlock()
	if s != nil {
		f.h.detached(s, f, reason)
	}
}

// create makes a new session of the connection's fresh tools.
func (h *Holder) create(ctx context.Context, f *front, rs *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	t := f.fresh
	res, err := t.Initialize(ctx, rs, p)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(p)
	s := &session{
		id: t.SessionID(), root: res.Workspace.Root, createdAt: t.CreatedAt(), linger: f.cfg.Linger, logs: f.logs,
		tools: t, rs: rs, init: res, initParams: raw, table: f.table, internal: f.internal,
	}
	lo := t.Leftovers()
	me := self()
	workspace := ""
	if s.root != h.cfg.Root {
		workspace = s.root
	}
	j, err := createJournal(h.cfg.Dirs.journalPath(s.id), record{Kind: "session", V: journalVersion, ID: s.id, Root: h.cfg.Root, Workspace: workspace, MCP: s.internal,
		CreatedAt: s.createdAt, Holder: &me, Leftovers: &lo, Init: raw, LingerMs: s.linger.Milliseconds()})
	if err != nil {
		t.Shutdown(ctx)
		return nil, fmt.Errorf("cannot persist the session: %w", err)
	}
	s.journal = j
	rs.SetJournal(j)
	h.mu.Lock()
	h.sessions[s.id] = s
	s.owner = f
	h.mu.Unlock()
	f.mu.Lock()
	f.sess = s
	f.mu.Unlock()
	h.log.Info("session created", "session", s.id, "root", s.root)
	cp := *res
	return &cp, nil
}

// resume moves the connection to the session s: it answers s's
// initialize result, and once that is queued, the toolResults owed.
func (h *Holder) resume(ctx context.Context, f *front, rs *rpc.Session, s *session, lastSeq *int64, cfg SessionConfig) (*protocol.InitializeResult, error) {
	if err := h.wake(ctx, s, rs); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if s.ending {
		h.mu.Unlock()
		return nil, protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: s.id, Reason: protocol.SessionEnded}, "session not found: it is ending")
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.owner = f
	s.lingerUntil = time.Time{}
	s.logs.set(f.stderr)
	h.mu.Unlock()
	f.mu.Lock()
	f.sess = s
	f.mu.Unlock()
	rs.MoveTo(ctx, s.rs, lastSeq)
	h.log.Info("session resumed", "session", s.id)
	res := *s.init
	return &res, nil
}
