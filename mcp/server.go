package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/mcp/internal/stdio"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// instructions tell the model what the server is for.
const instructions = `toolhost runs commands and reads and writes files, confined to one workspace directory (plus read-only roots), with kernel sandboxing, resource limits, timeouts and cancellation that kill a command's whole process tree.
Use run_command for commands that finish (tests, builds, git, grep); it returns the exit code and the head and tail of the output, with the full output as resources you can read in pages. Use start_command for servers, watchers and interactive programs, then wait_command, read_output, write_input and cancel_command with its handleId. Use read_file and write_file for files: paths are relative to the workspace root. Commands are never run through a shell: pass argv as a list, or ["sh", "-c", "..."] when you need one.`

// snapshotNote tells the model how to see and undo what commands change,
// when the server keeps snapshots.
const snapshotNote = `
To see and undo what a command changes, run it with snapshot: true: its result lists the paths it added, modified and deleted and gives a snapshotId, and restore_snapshot with that id undoes it. snapshot_workspace records the workspace at any moment, diff_snapshot compares it with now.`

// registriesWait bounds how long initialize (or server/discover) waits
// for the registries' hosts (--network-allow-registries), which are read
// from the server's start, for the instructions to name them. The first
// command waits for them anyway; past it the instructions say they were
// not read yet.
const registriesWait = 5 * time.Second

// instructionsFor returns the instructions of a session: what the server
// is for, and what confines its commands, naming the hosts of the network
// allow-list. It waits for the registries' hosts (up to registriesWait, or
// ctx's end).
func (s *Server) instructionsFor(ctx context.Context) string {
	sb := s.cfg.Sandbox
	var registries []string
	read := true
	if sb.Registries != nil && sb.NetworkAllow != nil && sb.Mode != tools.SandboxOff {
		wctx, cancel := context.WithTimeout(ctx, registriesWait)
		registries = sb.Registries(wctx)
		cancel()
		read = registries != nil
	}
	return instructionsText(s.cfg, registries, read)
}

// instructionsText is instructionsFor's text, with the registries' hosts
// as read (see confinementNote).
func instructionsText(cfg tools.Config, registries []string, read bool) string {
	note := ""
	if cfg.SnapshotDir != nil {
		note = snapshotNote
	}
	return instructions + note + confinementNote(cfg.Sandbox, registries, read) + mountsNote(cfg.Mounts)
}

// mountsNote tells the model where the command line's mounts show a
// bucket's objects, and what becomes of their changes.
func mountsNote(mc tools.MountsConfig) string {
	if len(mc.Specs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nMounts (a bucket's objects as files, for commands and read_file; fetched when each command starts):")
	for _, m := range mc.Specs {
		mode := "read-only"
		if !m.ReadOnly {
			mode = "writable: changes, new and deleted files are written back to the bucket when each command ends; a file changed in the bucket meanwhile is a conflict, left unwritten and named in the result"
		}
		fmt.Fprintf(&b, "\n- %s at %s, the objects of %s (%s)", m.Name, m.Path, m.URI, mode)
	}
	b.WriteString("\nAn object store keeps no modes, symlinks or empty directories.")
	return b.String()
}

// confinementNote tells the model what confines its commands beyond the
// workspace, as the command line set it: the network allow-list, host by
// host (registries are the hosts --network-allow-registries found; read
// says whether they were read), and the protected and unreadable paths. A
// client may narrow it, never widen it.
func confinementNote(sb tools.SandboxConfig, registries []string, read bool) string {
	if sb.Mode == tools.SandboxOff {
		return ""
	}
	var b strings.Builder
	switch {
	case sb.NetworkAllow != nil:
		hosts := slices.Concat(sb.NetworkAllow, registries)
		if sb.Registries != nil && !read {
			hosts = append(hosts, "the package registries this machine's Go, npm and pip use (not read yet when this session began)")
		}
		list := "none"
		if len(hosts) > 0 {
			list = strings.Join(hosts, ", ")
		}
		b.WriteString("\nNetwork: commands reach only these hosts, through a proxy toolhost sets in HTTP_PROXY, HTTPS_PROXY and ALL_PROXY: " + list)
		b.WriteString(`. Any other host is refused with HTTP 403 "toolhost: HOST:PORT is not in this command's network allow-list", and the result names it: that is policy, not a network fault, and retrying will not help (only the user can allow a host, with --network-allow).`)
	case !sb.Network:
		b.WriteString("\nNetwork: commands have none (their own loopback only).")
	}
	if len(sb.DenyRead) > 0 {
		b.WriteString("\nUnreadable to commands and to read_file (refused by policy, not missing): " + strings.Join(sb.DenyRead, ", ") + ".")
	}
	if len(sb.Protect) > 0 {
		b.WriteString("\nRead-only to commands and to write_file (git still commits): " + strings.Join(protectWords(sb.Protect), ", ") + ".")
	}
	return b.String()
}

// protectWords says the protect entries in words: "**/.git/hooks" is
// "the .git/hooks of every repository in the workspace".
func protectWords(entries []string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		if name, ok := strings.CutPrefix(e, tools.RepoRulePrefix); ok {
			e = "the .git/" + name + " of every repository in the workspace"
		}
		out[i] = e
	}
	return out
}

// Server serves one MCP session over a toolhost session run in-process.
// Shared (Options.Shared, under --persist), it serves every connection
// of one configuration in turn or at once, and outlives each: the
// toolhost session, its commands and the task table are the server's,
// and a connection only reaches them.
type Server struct {
	cfg     tools.Config
	opts    rpc.Options
	version string
	log     *slog.Logger
	shared  bool

	// inner is toolhost's own server; th talks to it. Set by New.
	inner *rpc.Server
	th    *client.Client
	// innerIn and innerOut are the pipes of inner's stdin and stdout; the
	// client writes innerIn and reads innerOut.
	innerIn  *io.PipeReader
	innerOut *io.PipeWriter
	// innerExit receives inner's exit code once it has served; its
	// goroutine is started once (start) and owned by Serve, or by Close
	// for a shared server.
	innerExit chan int
	startOnce sync.Once
	closeOnce sync.Once
	// innerEnded is cancelled once th has ended (the inner session's
	// end), by the watcher New starts; watched is closed when that
	// watcher returns, which Serve and Close wait for.
	innerEnded context.Context
	watched    chan struct{}

	mcp    *sdk.Server
	ws     workspace
	events router
	// splice and out are the connection's of a server that is not shared
	// (a shared server's connections each have their own, in conns).
	splice *stdio.Splicer
	// tasks are the session's MCP tasks; out writes the notifications
	// about them, which the SDK has no method for.
	tasks *taskTable
	out   *stdio.Outlet
	// far knows where destination commands keep their artifacts.
	far farDirs
	// callers are the tool calls an approval/request may be put on
	// (approvals.go).
	callers callers
	// owners are the principals of handles and commands (principals.go).
	owners owners

	// mu guards conns and nextConn.
	mu sync.Mutex
	// conns are the connections served, by their transport's session id.
	conns    map[string]*conn
	nextConn int
}

// conn is one MCP connection of the server: its SDK session, and what its
// transport writes that the SDK cannot.
type conn struct {
	id     string
	splice *stdio.Splicer
	out    *stdio.Outlet
	ss     *sdk.ServerSession // set once connected; guarded by Server.mu
	// principal is who the connection speaks for: localPrincipal on
	// stdio, the HTTP gate's answer over HTTP. The tasks and handles it
	// makes are its principal's alone.
	principal string
}

// localPrincipal is the principal of a stdio connection: the user who
// started toolhost (a holder's fronts are that user's by construction).
const localPrincipal = "local"

// principalOf is c's principal ("" for no connection, in tests).
func (c *conn) principalOf() string {
	if c == nil {
		return ""
	}
	return c.principal
}

// Options are the MCP server's own settings.
type Options struct {
	// Version is the server's version.
	Version string
	// TaskTTL is how long a task is kept when the client asks for no ttl
	// (0: DefaultTaskTTL); TaskTTLMax caps what a client may ask for (0:
	// DefaultTaskTTLMax).
	TaskTTL, TaskTTLMax time.Duration
	// Inner makes the toolhost server the MCP server runs its session on
	// (nil: tools.NewServer). A holder of --persist gives one whose
	// session it journals, so that a holder killed leaves no process.
	Inner func(tools.Config, rpc.Options) *rpc.Server
	// Shared makes a server that outlives its connections (ServeConn,
	// Close): under --persist, every MCP connection of one user, root and
	// command line reaches the same toolhost session and tasks. Task ids
	// then carry 128 random bits (a later connection presents one to
	// reach its task), and tasks/list lists the connection's own tasks.
	Shared bool
}

// New returns the MCP server of one session: cfg and opts are toolhost's,
// as for tools.NewServer.
func New(cfg tools.Config, opts rpc.Options, mo Options) *Server {
	version := mo.Version
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every call crosses the in-process pipe once more. Content-Length
	// framing reads a large answer in one piece, where go.lsp.dev/jsonrpc2's
	// NDJSON reader grows the line by doubling.
	opts.Framing = rpc.FramingHeader
	s := &Server{cfg: cfg, opts: opts, version: version, log: log, shared: mo.Shared, innerExit: make(chan int, 1),
		splice: stdio.NewSplicer(), out: &stdio.Outlet{}, conns: make(map[string]*conn)}
	s.ws.s = s
	s.tasks = newTaskTable(s, mo.TaskTTL, mo.TaskTTLMax)
	s.tasks.shared = mo.Shared
	s.events.init(s.tasks.routed)
	if mo.Inner != nil {
		s.inner = mo.Inner(cfg, opts)
	} else {
		s.inner = tools.NewServer(cfg, opts)
	}

	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	s.innerIn, s.innerOut = sin, sout
	s.th = client.New(cin, cout, &client.Options{
		Framing: client.FramingHeader,
		Logf:    func(format string, args ...any) { log.Debug(fmt.Sprintf(format, args...)) },
	})
	ended, end := context.WithCancel(context.Background())
	s.innerEnded, s.watched = ended, make(chan struct{})
	go func() { // owned by Serve or Close, which wait on watched
		defer close(s.watched)
		<-s.th.Done()
		end()
	}()
	client.OnNotification(s.th, protocol.StepTransitionNotification, s.events.step)
	client.OnNotification(s.th, protocol.HeartbeatNotification, s.events.heartbeat)
	client.OnNotification(s.th, protocol.ToolResultNotification, func(res *protocol.ToolResult) {
		s.ownCommand(res)
		s.events.toolResult(res)
	})
	client.OnNotification(s.th, protocol.LogMessageNotification, s.logMessage)
	client.OnRequest(s.th, protocol.ApprovalRequestRequest, s.approvalRequest)

	// The instructions each initialize (or server/discover) answers with
	// name the registries' hosts once read (tasksMiddleware); these are
	// the same without them.
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "toolhost", Title: "toolhost", Version: version}, &sdk.ServerOptions{
		Instructions: instructionsText(cfg, nil, false),
		Logger:       log,
		Capabilities: &sdk.ServerCapabilities{
			Logging:   &sdk.LoggingCapabilities{},
			Tools:     &sdk.ToolCapabilities{},
			Resources: &sdk.ResourceCapabilities{},
		},
	})
	s.addTools()
	s.addResources()
	s.addTaskMethods()
	s.mcp.AddReceivingMiddleware(s.tasksMiddleware)
	return s
}

// Serve serves the MCP session on in and out until the client closes in
// or End is called, and returns the exit code: 0 when the client ended
// the session, else the inner session's (1 after a signal).
func (s *Server) Serve(in io.Reader, out io.Writer) int {
	s.start()
	c, err := s.connect(in, out)
	if err != nil {
		s.inner.End("mcp: " + err.Error())
		<-s.innerExit
		<-s.watched
		return 1
	}
	waitErr := s.await(c)
	byClient := s.th.Err() == nil
	if byClient {
		s.log.Info("the MCP client ended the session", "err", waitErr)
		s.closeInner()
	} else {
		s.th.Close()
	}
	code := <-s.innerExit
	<-s.watched
	if byClient {
		return 0
	}
	return code
}

// ServeConn serves one connection of a shared server on in and out,
// until the client closes in or the server ends, and returns 0 when the
// client ended it, 1 when the server did. The toolhost session, its
// commands and its tasks outlive the connection: a call in flight when it
// ends is cancelled as by notifications/cancelled, and a task goes on.
func (s *Server) ServeConn(in io.Reader, out io.Writer) int {
	s.start()
	c, err := s.connect(in, out)
	if err != nil {
		return 1
	}
	waitErr := s.await(c)
	if s.th.Err() != nil {
		return 1
	}
	s.log.Info("an MCP connection ended; its session goes on", "connection", c.id, "err", waitErr)
	return 0
}

// Close ends a shared server: its toolhost session is shut down (every
// command stopped, and waited for), which closes its connections. It
// returns once the session has ended.
func (s *Server) Close(reason string) {
	s.closeOnce.Do(func() {
		s.start()
		s.log.Info("the MCP session ends", "reason", reason)
		s.closeInner()
		<-s.innerExit
		<-s.watched
	})
}

// Done is closed once the server's toolhost session has ended.
func (s *Server) Done() <-chan struct{} { return s.th.Done() }

// start starts the inner server, once.
func (s *Server) start() {
	s.startOnce.Do(func() {
		go func() { // owned by Serve, or Close, which wait on innerExit
			code := s.inner.Serve(s.innerIn, s.innerOut)
			s.innerOut.Close()
			s.innerExit <- code
		}()
	})
}

// connect serves the MCP protocol on in and out: one more connection.
func (s *Server) connect(in io.Reader, out io.Writer) (*conn, error) {
	maxLine := s.opts.MaxMessageBytes
	if maxLine <= 0 {
		maxLine = 16 << 20
	}
	s.mu.Lock()
	s.nextConn++
	c := &conn{id: fmt.Sprintf("c-%d", s.nextConn), splice: s.splice, out: s.out, principal: localPrincipal}
	if s.shared {
		c.splice, c.out = stdio.NewSplicer(), &stdio.Outlet{}
	}
	s.mu.Unlock()
	if err := s.connectOn(c, &stdio.Transport{In: in, Out: out, Max: maxLine, Log: s.log, Splice: c.splice, Outlet: c.out, SessionID: c.id}); err != nil {
		return nil, err
	}
	return c, nil
}

// connectOn serves the MCP protocol on t as the connection c: c is one of
// the server's connections from before the SDK reads its first message
// until await sees it end (or, on an error, not at all).
func (s *Server) connectOn(c *conn, t sdk.Transport) error {
	s.mu.Lock()
	s.conns[c.id] = c
	s.mu.Unlock()
	ss, err := s.mcp.Connect(context.Background(), t, nil)
	s.mu.Lock()
	if err != nil {
		delete(s.conns, c.id)
	} else {
		c.ss = ss
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("cannot serve MCP", "connection", c.id, "err", err)
	}
	return err
}

// await waits until the connection ends, by its client or because the
// inner session ended (End, a signal, Close), and returns how it ended.
// Every call of the connection has answered by then: its tasks whose
// answer was never written are announced, for their terminal state to
// be kept as if it had been.
func (s *Server) await(c *conn) error {
	unwatch := s.watch(c)
	err := c.ss.Wait()
	s.ended(c, unwatch)
	return err
}

// watch arranges for c's session to be closed when the inner session ends
// first (End, a signal): a function for the server's one watcher to run,
// not a goroutine a connection (an HTTP server has many). The function
// it returns undoes that, and waits for it if it has begun.
func (s *Server) watch(c *conn) (unwatch func()) {
	closed := make(chan struct{})
	stop := context.AfterFunc(s.innerEnded, func() {
		defer close(closed)
		c.ss.Close()
	})
	return func() {
		if !stop() {
			<-closed // it ran: the caller owns it
		}
	}
}

// ended forgets c, whose session has ended (its Wait has returned), and
// what was watching it.
func (s *Server) ended(c *conn, unwatch func()) {
	unwatch()
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	s.callers.drop(c.ss)
	s.tasks.disconnected(c)
}

// connOf returns the connection of a request's session.
func (s *Server) connOf(ss *sdk.ServerSession) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss != nil {
		if c := s.conns[ss.ID()]; c != nil {
			return c
		}
	}
	// A connection that has ended: what it writes goes nowhere.
	return &conn{splice: stdio.NewSplicer(), out: &stdio.Outlet{}}
}

// closeInner ends the inner session as a client that is done does: shutdown
// (every running command is stopped, and waited for) if it was opened,
// exit, and the end of its input.
func (s *Server) closeInner() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.ws.mu.Lock()
	opened := s.ws.opened && s.ws.err == nil
	s.ws.mu.Unlock()
	if opened {
		if err := s.th.Shutdown(ctx); err != nil {
			s.log.Warn("toolhost shutdown failed", "err", err)
		}
	}
	_ = s.th.Exit(ctx)
	s.th.Close()
}

// End ends the session from outside (a signal): every command is stopped,
// the MCP session closes and Serve returns.
func (s *Server) End(reason string) { s.inner.End(reason) }

// logMessage forwards toolhost's window/logMessage as notifications/message,
// to every connection.
func (s *Server) logMessage(p *protocol.LogMessageParams) {
	s.mu.Lock()
	var sessions []*sdk.ServerSession
	for _, c := range s.conns {
		if c.ss != nil {
			sessions = append(sessions, c.ss)
		}
	}
	s.mu.Unlock()
	level := sdk.LoggingLevel("warning")
	if p.Type == protocol.MessageError {
		level = "error"
	}
	for _, ss := range sessions {
		s.logf(context.Background(), ss, level, "%s", p.Message)
	}
}

// logf sends a notifications/message, which the client gets once it has
// set a log level, and writes it to the log at debug level.
func (s *Server) logf(ctx context.Context, ss *sdk.ServerSession, level sdk.LoggingLevel, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Debug("mcp log message", "level", level, "msg", msg)
	if err := ss.Log(ctx, &sdk.LoggingMessageParams{Level: level, Logger: "toolhost", Data: msg}); err != nil {
		s.log.Debug("log message not sent", "err", err)
	}
}

// closeTimeout bounds the end of the inner session when the client has
// gone: shutdown stops every command within its kill grace.
const closeTimeout = 60 * time.Second

// errClosed is the protocol error of a call made once toolhost's session
// has ended.
var errClosed = errors.New("the toolhost session has ended")
