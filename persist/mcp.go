package persist

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// ModeMCP is the Mode of a front whose client speaks the Model Context
// Protocol (`toolhost mcp`, or an MCP first message).
const ModeMCP = "mcp"

// SharedMCP is an MCP server that outlives its connections: the holder
// keeps one per MCP command line, and each MCP front of that command
// line is one more connection to it. MCP clients never resume a session
// by id: what a later connection finds (the toolhost session, its
// commands, the task table) is the server's, for this user, root and
// command line.
type SharedMCP interface {
	// ServeConn serves one connection until its client ends it or the
	// server ends, and returns the exit code.
	ServeConn(in io.Reader, out io.Writer) int
	// Close ends the server: every command is stopped, and its
	// connections end. It returns once that is done.
	Close(reason string)
	// Done is closed once the server's toolhost session has ended.
	Done() <-chan struct{}
}

// InnerServer makes the toolhost server a shared MCP server runs its
// commands in: a session of the holder, journaled as any other (so that
// a holder killed leaves no process behind), which no resume reaches.
type InnerServer func(tools.Config, rpc.Options) *rpc.Server

// MCPConfig is what an MCP front's command line makes.
type MCPConfig struct {
	// Linger is how long the server is kept with no connection attached.
	Linger time.Duration
	// New makes the server, on the toolhost server inner makes.
	New func(inner InnerServer) SharedMCP
}

// ConfigureMCP turns an MCP front's command line, environment and
// directory into its shared server's configuration; the server's logs go
// to logs.
type ConfigureMCP func(args, env []string, cwd string, logs io.Writer) (MCPConfig, error)

// MCPListener is a shared MCP server's HTTP listener: the holder keeps
// one per root, and closes it before its server.
type MCPListener interface {
	// Endpoint is the URL clients reach it at.
	Endpoint() string
	// Close stops serving HTTP (every HTTP session ends; the server goes
	// on) and returns once the listener is closed.
	Close()
}

// ListenMCP opens the HTTP listener of srv, the shared server of an MCP
// front's command line args, from its HTTP flags http; what it logs goes
// to logs. Each HTTP session calls attach as it opens, and the function
// it returns once it has ended: while one is open, srv does not linger.
type ListenMCP func(srv SharedMCP, args, http, env []string, cwd string, logs io.Writer, attach func() (detach func())) (MCPListener, error)

// mcpShared is a shared MCP server the holder keeps.
type mcpShared struct {
	key  string
	srv  SharedMCP
	logs *logSwitch

	// lingering is attached to each MCP front's socket the server serves,
	// and closes the server (holder.closeMCP) once it has been without
	// one for its linger.
	lingering
}

// mcpKey names an MCP command line: the connections of one share its
// server. The environment and directory are the first connection's.
func mcpKey(args []string) string {
	h := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return hex.EncodeToString(h[:8])
}

// serveMCP serves an MCP front: one more connection to the shared server
// of its command line, made if there is none.
func (h *holder) serveMCP(c *net.UnixConn, hl *hello, stdin, stdout, stderr *os.File, refuse func(string, ...any)) {
	if h.cfg.ConfigureMCP == nil {
		refuse("this holder does not serve MCP")
		return
	}
	if len(hl.HTTP) > 0 {
		h.serveMCPHTTP(c, hl, stderr, refuse)
		return
	}
	m, err := h.attachMCP(c, hl, stderr)
	if err != nil {
		refuse("%v", err)
		return
	}
	// An MCP connection is read from a polled duplicate of stdin, so
	// that when its front goes, closing it ends the connection at once
	// (its end detaches the shared server's linger). The cost of polling
	// is a fraction of an MCP request's.
	in, restore, err := pollable(stdin)
	if err != nil {
		h.detachMCP(m, c)
		refuse("%v", err)
		return
	}
	defer restore()
	h.serveUntilGone(c, func() int {
		code := m.srv.ServeConn(io.MultiReader(bytes.NewReader(hl.Prefix), in), stdout)
		h.detachMCP(m, c)
		return code
	}, func() { in.Close() })
	in.Close()
}

// attachMCP returns the shared server of hl's command line, with the
// connection of the front's socket c attached, making it when there is
// none (or only one that is ending).
func (h *holder) attachMCP(c *net.UnixConn, hl *hello, stderr io.Writer) (*mcpShared, error) {
	key := mcpKey(hl.Args)
	h.mcpMu.Lock()
	defer h.mcpMu.Unlock()
	h.mu.Lock()
	if m := h.mcp[key]; m != nil && m.attachLocked(c, false) {
		m.logs.set(stderr)
		h.mu.Unlock()
		h.log.Info("an MCP connection attached", "mcp", key)
		return m, nil
	}
	h.mu.Unlock()
	logs := &logSwitch{fallback: h.cfg.Log}
	mc, err := h.cfg.ConfigureMCP(hl.Args, hl.Env, hl.Cwd, logs)
	if err != nil {
		return nil, err
	}
	m := &mcpShared{key: key, logs: logs}
	m.lingering = newLingering(h, mc.Linger, "no MCP connection attached for --linger", func(_, why string) { h.closeMCP(m, why) })
	m.srv = mc.New(h.innerServer(logs, mc.Linger))
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		m.srv.Close("the holder is stopping")
		return nil, errors.New("the holder is stopping")
	}
	h.mcp[key] = m // replacing one that is ending, if any
	m.attachLocked(c, false)
	h.work.Add(1)
	h.mu.Unlock()
	go func() { // owned by h.work, which RunHolder waits for
		defer h.work.Done()
		<-m.srv.Done()
		m.end(protocol.SessionEnded, "its toolhost session ended")
	}()
	h.log.Info("an MCP session made", "mcp", key)
	return m, nil
}

// detachMCP is told that the connection by to m has ended (a front's
// socket, or an HTTP session's token): with none left, m lingers, and
// ends unless one attaches within its linger.
func (h *holder) detachMCP(m *mcpShared, by any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !m.detachLocked(by) {
		return
	}
	m.logs.set(nil)
	h.log.Info("no MCP connection attached; the MCP session lingers", "mcp", m.key, "linger", m.linger)
}

// closeMCP closes m's server, once m is ending (its HTTP listener
// first), and lets the holder go idle.
func (h *holder) closeMCP(m *mcpShared, why string) {
	h.log.Info("MCP session ending", "mcp", m.key, "why", why)
	h.mcpMu.Lock()
	if h.httpOf == m {
		h.http.Close()
		h.http, h.httpOf, h.httpArgs = nil, nil, nil
	}
	h.mcpMu.Unlock()
	m.srv.Close(why)
	h.mu.Lock()
	if h.mcp[m.key] == m {
		delete(h.mcp, m.key)
	}
	h.armIdleLocked()
	h.mu.Unlock()
}

// innerServer returns what makes a shared MCP server's toolhost server:
// one served as a front's would be, on the pipes the MCP server gives it,
// with persistence (a journal) and a linger of its own for the case its
// pipe ends without shutdown.
func (h *holder) innerServer(logs *logSwitch, linger time.Duration) InnerServer {
	return func(tc tools.Config, opts rpc.Options) *rpc.Server {
		cn := &conn{h: h, cfg: SessionConfig{Tools: tc, RPC: opts, Linger: linger}, log: opts.Logger, logs: logs, stderr: logs, internal: true}
		opts.Persist = true
		opts.Lifecycle = cn
		opts.Table = cn.prepare(nil)
		return rpc.NewServer(opts)
	}
}

// serveMCPHTTP serves a front of `toolhost mcp --persist --http`: the
// shared server of its command line, made if there is none, is served
// over the root's HTTP listener, opened if there is none. The front's
// stderr is told the endpoint; its socket stays attached (the server does
// not linger) until the front goes. The listener outlives the front: it
// closes with its server, after --linger without a front attached.
func (h *holder) serveMCPHTTP(c *net.UnixConn, hl *hello, stderr *os.File, refuse func(string, ...any)) {
	if h.cfg.ListenMCP == nil {
		refuse("this holder does not serve MCP over HTTP")
		return
	}
	m, err := h.attachMCP(c, hl, stderr)
	if err != nil {
		refuse("%v", err)
		return
	}
	l, err := h.listenMCP(m, hl)
	if err != nil {
		h.detachMCP(m, c)
		refuse("%v", err)
		return
	}
	fmt.Fprintf(stderr, "toolhost: serving MCP at %s\n", l.Endpoint())
	gone := make(chan struct{})
	h.serveUntilGone(c, func() int {
		select {
		case <-gone:
		case <-m.srv.Done():
		}
		h.detachMCP(m, c)
		return 0
	}, func() { close(gone) })
}

// listenMCP returns the root's HTTP listener, serving m: the one open if
// it serves m with the same HTTP flags, else a new one. A root has one:
// a front that asks another (another address, another server) is
// refused, naming the one open.
func (h *holder) listenMCP(m *mcpShared, hl *hello) (MCPListener, error) {
	h.mcpMu.Lock()
	defer h.mcpMu.Unlock()
	if h.http != nil {
		if h.httpOf == m && slices.Equal(h.httpArgs, hl.HTTP) {
			return h.http, nil
		}
		return nil, fmt.Errorf("this root's holder already serves MCP over HTTP at %s, for another command line: stop its fronts (it closes after --linger), or use that one", h.http.Endpoint())
	}
	l, err := h.cfg.ListenMCP(m.srv, hl.Args, hl.HTTP, hl.Env, hl.Cwd, m.logs, func() func() {
		token := new(byte) // this HTTP session's attachment
		h.mu.Lock()
		m.attachLocked(token, false)
		h.mu.Unlock()
		return func() { h.detachMCP(m, token) }
	})
	if err != nil {
		return nil, err
	}
	h.http, h.httpOf, h.httpArgs = l, m, slices.Clone(hl.HTTP)
	h.log.Info("serving MCP over HTTP", "mcp", m.key, "endpoint", l.Endpoint())
	return l, nil
}
