package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// Sink is where the notifications of destinations go: the session.
// *rpc.Session is one.
type Sink interface {
	// Notify sends a notification that may be dropped when the client is
	// far behind (output, heartbeat, stepTransition).
	Notify(method string, params any)
	// NotifyCritical sends a notification that is never dropped
	// ($/progress end).
	NotifyCritical(method string, params any)
	// NotifyNumbered sends a notification that is never dropped and
	// carries the session's next seq in place of any it has (toolResult).
	NotifyNumbered(method string, params any)
}

// Timeouts of the hub.
const (
	// connectTimeout bounds starting a destination's command and its
	// initialize.
	connectTimeout = 60 * time.Second
	// closeTimeout bounds a destination's shutdown at the session's end.
	closeTimeout = 10 * time.Second
	// reconnectWait bounds how long a request waits for a reconnection
	// under way before it answers DestinationUnavailable.
	reconnectWait = connectTimeout
	// retryFirst is the wait before the first attempt to reconnect; each
	// next waits twice as long, at most retryMax.
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// DefaultRetry is --destination-retry's default: how many times a
// destination whose far session persists is started again.
const DefaultRetry = 5

// Options configure a Hub.
type Options struct {
	Logger *slog.Logger
	// Version is this toolhost's version, which a bootstrapped far side
	// must answer.
	Version string
	// Bootstrap installs this binary on a far side that has no toolhost
	// or another version (--destination-bootstrap).
	Bootstrap bool
	// Retry is how many times a destination whose far toolhost persists
	// its session (it answered capabilities.resume) is started again to
	// resume it when its transport drops; 0: its handles are lost at once
	// (--destination-retry).
	Retry int
}

// Hub is a session's destinations.
type Hub struct {
	opts  Options
	log   *slog.Logger
	dests map[string]*Destination // set by New, read-only after
	order []string                // names in command-line order

	mu sync.Mutex // guards the fields below
	// sink, caps, sandbox and allowed are set by Configure.
	sink    Sink
	caps    protocol.ClientCapabilities
	sandbox *protocol.Sandbox
	allowed map[string]bool // nil: every destination
	closed  bool

	// watchers owns the goroutine of each connection that waits for its
	// transport to end; Close waits for them.
	watchers conc.WaitGroup
}

// New returns the hub of the given destinations, none connected.
func New(specs []Spec, opts Options) *Hub {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Hub{opts: opts, log: opts.Logger, dests: make(map[string]*Destination)}
	for _, s := range specs {
		h.dests[s.Name] = &Destination{hub: h, name: s.Name, argv: s.Argv, state: protocol.DestinationIdle}
		h.order = append(h.order, s.Name)
	}
	return h
}

// Empty reports whether the command line named no destination.
func (h *Hub) Empty() bool { return len(h.order) == 0 }

// Configure sets what the session's initialize said: where notifications
// go, the client's capabilities and sandbox options to pass on, and the
// destinations the client narrowed the session to (nil: every one). A
// name the command line does not give is an error.
func (h *Hub) Configure(sink Sink, caps protocol.ClientCapabilities, sandbox *protocol.Sandbox, allowed []string) error {
	var allow map[string]bool
	if allowed != nil {
		allow = make(map[string]bool)
		for i, n := range allowed {
			if _, ok := h.dests[n]; !ok {
				return protocol.InvalidParams(fmt.Sprintf("initializationOptions.destinations[%d]", i), "%q is not a destination of the command line (%s)", n, h.names())
			}
			allow[n] = true
		}
	}
	// Progress tokens of the far side's own would not be the client's:
	// the client gives workDoneToken for a destination's command instead.
	if caps.Window != nil {
		w := *caps.Window
		w.WorkDoneProgress = false
		caps.Window = &w
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sink, h.caps, h.sandbox, h.allowed = sink, caps, sandbox, allow
	return nil
}

// names lists the destinations the session may use, for messages.
func (h *Hub) names() string {
	var names []string
	for _, in := range h.List() {
		names = append(names, in.Name)
	}
	if len(names) == 0 {
		return "it has none"
	}
	return "it has " + strings.Join(names, ", ")
}

// Get returns the destination called name, if the session may use it.
func (h *Hub) Get(name string) (*Destination, error) {
	return h.get(name, "destination")
}

// get returns the destination called name, if the session may use it; an
// error names field as the wrong param.
func (h *Hub) get(name, field string) (*Destination, error) {
	d, ok := h.dests[name]
	h.mu.Lock()
	allowed := h.allowed == nil || h.allowed[name]
	h.mu.Unlock()
	if !ok || !allowed {
		return nil, protocol.InvalidParams(field, "%q is not a destination of this session (%s)", name, h.names())
	}
	return d, nil
}

// Target is where an id a destination handed out leads: the destination,
// the connection that handed it out (Epoch: 1 for the first, counting
// reconnections) and the id there.
type Target struct {
	Dest  *Destination
	Epoch int
	Far   string
}

// splitHead parses the head of a prefixed id, "NAME" or "NAME#EPOCH".
func splitHead(head string) (name string, epoch int, ok bool) {
	name, e, found := strings.Cut(head, "#")
	if !found {
		return name, 1, true
	}
	n, err := strconv.Atoi(e)
	return name, n, err == nil && n > 1
}

// Route splits a handle id a destination handed out ("NAME/h-3", or
// "NAME#2/h-3" from its second connection) into its Target; ok is false
// for an id of this server. An id of no destination of the session is
// InvalidParams naming field.
func (h *Hub) Route(id, field string) (t Target, ok bool, err error) {
	head, far, found := strings.Cut(id, "/")
	if !found {
		return Target{}, false, nil
	}
	name, epoch, good := splitHead(head)
	if !good || far == "" {
		return Target{}, true, protocol.InvalidParams(field, "%q is not a handle id: this server's are h-N, a destination's NAME/h-N", id)
	}
	d, err := h.get(name, field)
	if err != nil {
		return Target{}, true, err
	}
	return Target{Dest: d, Epoch: epoch, Far: far}, true, nil
}

// RoutePath splits the path of a destination ("NAME//abs/path", as its
// ToolResults give its artifacts) into its Target; ok is false for a path
// of this server.
func (h *Hub) RoutePath(path string) (t Target, ok bool, err error) {
	head, far, found := strings.Cut(path, "//")
	if !found {
		return Target{}, false, nil
	}
	name, epoch, good := splitHead(head)
	if !good || !validName(name) {
		return Target{}, false, nil
	}
	if _, known := h.dests[name]; !known {
		return Target{}, false, nil
	}
	d, err := h.get(name, "path")
	if err != nil {
		return Target{}, true, err
	}
	return Target{Dest: d, Epoch: epoch, Far: "/" + far}, true, nil
}

// List describes the session's destinations, in command-line order. It
// connects none.
func (h *Hub) List() []protocol.DestinationInfo {
	h.mu.Lock()
	allowed := h.allowed
	h.mu.Unlock()
	out := []protocol.DestinationInfo{}
	for _, n := range h.order {
		if allowed == nil || allowed[n] {
			out = append(out, h.dests[n].info())
		}
	}
	return out
}

// ForEachReady calls fn with every destination that is connected.
func (h *Hub) ForEachReady(fn func(*Destination)) {
	for _, n := range h.order {
		d := h.dests[n]
		if d.current() != nil {
			fn(d)
		}
	}
}

// ConnectAll connects every destination the session may use, at once;
// failures show in List.
func (h *Hub) ConnectAll(ctx context.Context) {
	var wg sync.WaitGroup // owned by ConnectAll
	for _, info := range h.List() {
		d := h.dests[info.Name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.connect(ctx); err != nil {
				h.log.Warn("destination did not connect", "destination", d.name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// Close ends every destination's session — shutdown (its handles end and
// their toolResults are forwarded), exit, then the transport — within
// ctx, and waits for the transports' goroutines. Handles whose toolResult
// has not come by then end "lost".
func (h *Hub) Close(ctx context.Context) {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	var wg sync.WaitGroup // owned by Close
	for _, n := range h.order {
		d := h.dests[n]
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.close(ctx)
		}()
	}
	wg.Wait()
	h.watchers.Wait()
}

// Destination is one destination of the command line.
type Destination struct {
	hub  *Hub
	name string
	argv []string

	mu sync.Mutex // guards the fields below
	// state is the transport's; conn is set while it is ready or
	// reconnecting.
	state  protocol.DestinationState
	reason string
	conn   *conn
	// connecting is closed when the connect under way ends; nil when
	// none is.
	connecting chan struct{}
	// resumed is closed when the reconnection under way (state
	// reconnecting) ends, resumed or given up; nil when none is.
	resumed chan struct{}
	init    *protocol.InitializeResult
	// epochs counts the far sessions made (initialized anew, not
	// resumed): each one's ids get a prefix of their own, so that a new
	// far session counting from h-1 again never reuses a lost handle's
	// id. A resumed far session keeps its epoch: its handles are the same.
	epochs int
}

// Name returns the destination's name.
func (d *Destination) Name() string { return d.name }

// info describes the destination.
func (d *Destination) info() protocol.DestinationInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := protocol.DestinationInfo{Name: d.name, State: d.state, Command: slices.Clone(d.argv), Reason: d.reason}
	if d.init != nil {
		in.Root, in.ReadRoots = d.init.Workspace.Root, d.init.Workspace.ReadRoots
		si := d.init.ServerInfo
		in.ServerInfo = &si
		if d.init.Capabilities.Resume {
			in.SessionID = d.init.SessionID
		}
	}
	return in
}

// current returns the connection while the destination is ready (not
// while it reconnects).
func (d *Destination) current() *conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resumed != nil {
		return nil
	}
	return d.conn
}

// unavailable returns the DestinationUnavailable error for reason.
func (d *Destination) unavailable(reason string) error {
	return protocol.NewError(protocol.CodeDestinationUnavailable, &protocol.ErrorData{Destination: d.name, Reason: reason},
		"destination %q unavailable: %s", d.name, firstLine(reason))
}

// connect returns the destination's connection, starting its command and
// initializing it first if needed. Concurrent callers share one attempt.
func (d *Destination) connect(ctx context.Context) (*conn, error) {
	var deadline time.Time // of the wait for a reconnection
	for {
		d.mu.Lock()
		if d.conn != nil {
			c, ch := d.conn, d.resumed
			d.mu.Unlock()
			if ch == nil {
				return c, nil
			}
			if err := d.awaitResume(ctx, ch, &deadline); err != nil {
				return nil, err
			}
			continue
		}
		d.hub.mu.Lock()
		closed := d.hub.closed
		d.hub.mu.Unlock()
		if closed {
			d.mu.Unlock()
			return nil, d.unavailable("the session is ending")
		}
		if ch := d.connecting; ch != nil {
			d.mu.Unlock()
			select {
			case <-ch:
				d.mu.Lock()
				failed := d.conn == nil && d.state == protocol.DestinationLost
				reason := d.reason
				d.mu.Unlock()
				if failed {
					return nil, d.unavailable(reason)
				}
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		ch := make(chan struct{})
		d.connecting, d.state, d.reason = ch, protocol.DestinationConnecting, ""
		d.mu.Unlock()

		c, init, err := d.dialOrBootstrap(ctx)
		d.mu.Lock()
		d.connecting = nil
		if err != nil {
			d.state, d.reason = protocol.DestinationLost, err.Error()
		} else {
			d.state, d.conn, d.init = protocol.DestinationReady, c, init
		}
		close(ch)
		d.mu.Unlock()
		if err != nil {
			d.hub.log.Warn("destination unavailable", "destination", d.name, "err", err)
			return nil, d.unavailable(err.Error())
		}
		d.hub.log.Info("destination ready", "destination", d.name, "root", init.Workspace.Root, "server", init.ServerInfo.Version)
		d.hub.watchers.Go(func() { d.watch(c) })
		return c, nil
	}
}

// dialOrBootstrap dials the destination; with Options.Bootstrap, a far side
// without toolhost, or with another version, gets this binary installed
// and started instead.
func (d *Destination) dialOrBootstrap(ctx context.Context) (*conn, *protocol.InitializeResult, error) {
	c, init, err := d.dial(ctx, d.argv)
	if !d.hub.opts.Bootstrap {
		return c, init, err
	}
	switch {
	case errors.Is(err, errNotInstalled):
	case err == nil && init.ServerInfo.Version != d.hub.opts.Version:
		d.hub.log.Info("the destination runs another version of toolhost; bootstrapping", "destination", d.name, "version", init.ServerInfo.Version)
		c.setClosing()
		cl, _ := c.client()
		_ = cl.Close()
		c.giveUp()
	default:
		return c, init, err
	}
	argv, berr := d.bootstrap(ctx)
	if berr != nil {
		if err != nil {
			return nil, nil, fmt.Errorf("%w; %w", err, berr)
		}
		return nil, nil, berr
	}
	return d.dial(ctx, argv)
}

// dial starts argv (the destination's command, or its bootstrapped form)
// and initializes the toolhost it reaches, in a new far session. The
// transport outlives ctx: only the connect waits on it.
func (d *Destination) dial(ctx context.Context, argv []string) (*conn, *protocol.InitializeResult, error) {
	h := d.hub
	h.mu.Lock()
	caps, sandbox := h.caps, h.sandbox
	h.mu.Unlock()

	// One dial at a time (connecting): the next epoch is this one's, and
	// counts once it has connected.
	d.mu.Lock()
	epoch := d.epochs + 1
	d.mu.Unlock()
	c := &conn{dest: d, epoch: epoch, argv: argv, handles: make(map[string]*handle)}
	cl, init, err := d.start(ctx, argv, &protocol.InitializeParams{
		ClientInfo:            &protocol.ClientInfo{Name: "toolhost-hub"},
		Capabilities:          &caps,
		InitializationOptions: &protocol.InitializationOptions{Sandbox: sandbox},
	}, c.onNotification)
	if err != nil {
		return nil, nil, err
	}
	c.cl, c.swapped = cl, make(chan struct{})
	if init.Capabilities.Resume && init.SessionID != "" && h.opts.Retry > 0 {
		c.sessionID, c.known = init.SessionID, make(map[string]bool)
		c.rctx, c.stopResume = context.WithCancel(context.Background())
	}
	d.mu.Lock()
	d.epochs = epoch
	d.mu.Unlock()
	return c, init, nil
}

// start starts argv, sends onNote every notification the toolhost it
// reaches sends (from the first), and initializes it with params.
func (d *Destination) start(ctx context.Context, argv []string, params *protocol.InitializeParams, onNote func(string, json.RawMessage)) (*client.Client, *protocol.InitializeResult, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = transportAttr()
	cl, err := client.Start(context.WithoutCancel(ctx), cmd, &client.Options{CloseTimeout: closeTimeout})
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", argv[0], errors.Unwrap(err))
	}
	cl.OnEveryNotification(onNote)

	ictx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	init, err := cl.Initialize(ictx, params)
	if err == nil {
		err = cl.Initialized(ictx)
	}
	if err != nil {
		if exitedNotFound(cl.Close()) {
			return nil, nil, fmt.Errorf("initializing: %w (the command exited 127): %w", errNotInstalled, err)
		}
		return nil, nil, fmt.Errorf("initializing: %w", err)
	}
	return cl, init, nil
}

// watch follows the connection's transports: an end the hub did not ask
// for either is resumed (resume.go), and watch follows the new transport,
// or loses the destination and ends the connection's handles "lost".
func (d *Destination) watch(c *conn) {
	for {
		cl, _ := c.client()
		<-cl.Done()
		reason := "the transport ended"
		if err := cl.Err(); err != nil {
			reason = err.Error()
		}
		// Reaps the transport's process, which may take closeTimeout if it
		// lives on: no reconnection waits for that.
		d.hub.watchers.Go(func() { _ = cl.Close() })
		if ch := d.beginResume(c, reason); ch != nil {
			err := d.reconnect(c, reason)
			d.endResume(c, ch, err)
			if err == nil {
				continue
			}
			reason = err.Error()
		} else {
			d.mu.Lock()
			if d.conn == c {
				d.conn = nil
				if !c.closing() {
					d.state, d.reason = protocol.DestinationLost, reason
				} else {
					d.state = protocol.DestinationIdle
				}
			}
			d.mu.Unlock()
		}
		c.giveUp()
		c.lose(reason)
		return
	}
}

// close ends the destination's session, if connected. A reconnection
// under way is waited for (closeTimeout at most, then given up), so that
// the far session is shut down, not left to linger.
func (d *Destination) close(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	d.mu.Lock()
	c, ch := d.conn, d.resumed
	if c != nil {
		// Under d.mu: watch either sees it and resumes nothing, or has
		// set resumed, which is waited for here.
		c.setClosing()
	}
	d.mu.Unlock()
	if c == nil {
		return
	}
	if ch != nil {
		select {
		case <-ch:
		case <-sctx.Done():
			c.stopResume()
			<-ch
		}
		if d.current() != c {
			return
		}
	}
	cl, _ := c.client()
	if err := cl.Shutdown(sctx); err == nil {
		_ = cl.Exit(sctx)
	}
	_ = cl.Close()
	<-cl.Done()
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
