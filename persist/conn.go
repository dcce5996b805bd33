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

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// conn is the holder's side of one connection a front handed it: the rpc
// server on the front's descriptors, and the session it serves once
// initialized. It is that server's Lifecycle. (The front itself, the
// process that hands the connection over, is in front.go.)
type conn struct {
	h   *holder
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
func (h *holder) serveFront(c *net.UnixConn) {
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
	cn := &conn{h: h, cfg: cfg, log: cfg.RPC.Logger, logs: logs, stderr: stderr}
	opts := cfg.RPC
	opts.Persist = true
	opts.Lifecycle = cn
	opts.Table = cn.prepare(rpc.ParseFirst(hl.Prefix).Initialize())
	srv := rpc.NewServer(opts)

	h.serveUntilGone(c, func() int {
		return srv.Serve(io.MultiReader(bytes.NewReader(hl.Prefix), stdin), stdout)
	}, func() { srv.Release("the front process is gone") })
}

// serveUntilGone serves a front's connection with serve until it
// returns, and tells the front the exit code. The front lives as long as
// its client's connection: when it goes (killed, say), release ends the
// connection. stdin stays blocking, as the front's own would be (polling
// it makes every request cost more): a read blocked on it ends when the
// client closes or writes to its end of the pipe, and what it reads then
// is discarded with the ended connection.
func (h *holder) serveUntilGone(c *net.UnixConn, serve func() int, release func()) {
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
func (cn *conn) prepare(p *protocol.InitializeParams) *rpc.Table {
	if p != nil && p.InitializationOptions != nil && p.InitializationOptions.Resume != nil {
		id := p.InitializationOptions.Resume.SessionID
		s, why := cn.h.lookup(id)
		if s != nil {
			if tab, err := cn.h.revive(s, cn.cfg); err == nil {
				cn.target = s
				return tab
			} else {
				cn.refused = err.Error()
			}
		} else {
			cn.refused = why
		}
	}
	cfg := cn.cfg.Tools
	cfg.Persist = true
	cfg.Sessions = cn.h.list
	var journalOf func() *journal
	cfg.OnHandle = func(hs tools.HandleStarted) {
		if j := journalOf(); j != nil {
			j.handle(hs)
		}
	}
	cn.fresh = tools.New(cfg)
	journalOf = func() *journal {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		if cn.sess == nil {
			return nil
		}
		return cn.sess.journal
	}
	cn.table = cn.fresh.Table()
	return cn.table
}

// Initialize serves the connection's initialize: a resume of the session
// prepare found, or a new session.
func (cn *conn) Initialize(ctx context.Context, rs *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	first := !cn.resumed
	cn.resumed = true
	if r := resumeOf(p); r != nil {
		if !first {
			// The connection's methods were chosen by its first message
			// (prepare): a fresh session's. Saying "unknown" here would
			// be untrue of a session that lives.
			return nil, protocol.InvalidParams("initializationOptions.resume", "a connection resumes a session only with its first initialize, and this one's was answered; open a new connection to resume session %s", r.SessionID)
		}
		if cn.target == nil || cn.target.id != r.SessionID {
			reason := cn.refused
			if cn.target != nil || reason == "" {
				reason = protocol.SessionUnknown
			}
			return nil, protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: r.SessionID, Reason: reason},
				"session not found: %s", describe(reason))
		}
		return cn.h.resume(ctx, cn, rs, cn.target, r.LastSeq, cn.cfg)
	}
	if cn.fresh == nil {
		// This connection's methods are a resumed session's.
		return nil, protocol.InvalidParams("initializationOptions.resume", "this connection was opened to resume session %s; give resume, or open a new connection", cn.target.id)
	}
	return cn.h.create(ctx, cn, rs, p)
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
func (cn *conn) Shutdown(ctx context.Context) {
	cn.mu.Lock()
	s := cn.sess
	cn.mu.Unlock()
	if s == nil {
		if cn.fresh != nil {
			cn.fresh.Shutdown(ctx) // an initialize that failed leaves nothing, or this cleans it
		}
		return
	}
	s.end(protocol.SessionEnded, "shutdown")
}

// Detached starts the linger of the session the connection served.
func (cn *conn) Detached(_ *rpc.Session, reason string) {
	cn.mu.Lock()
	s := cn.sess
	cn.mu.Unlock()
	if s != nil {
		cn.h.detached(s, cn, reason)
	}
}
