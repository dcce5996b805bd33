package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// Lifecycle is what the tools do at the edges of a session.
type Lifecycle interface {
	// Initialize sets the session up from the client's params. It returns
	// the result with Workspace and Capabilities.OutputLimitBytes filled;
	// the server fills the rest.
	Initialize(ctx context.Context, s *Session, p *InitializeParams) (*InitializeResult, error)
	// Shutdown ends all work the session started: every command is
	// cancelled, its processes are gone and its result is sent before it
	// returns, or ctx ends. It may be called more than once.
	Shutdown(ctx context.Context)
}

// Options configure a Server.
type Options struct {
	// Framing is FramingAuto (the default), FramingHeader or FramingNDJSON.
	Framing string
	// MaxMessageBytes is the largest message read (default 16 MiB).
	MaxMessageBytes int64
	// EOFGrace is how long requests in flight when the input ends may take
	// to finish before they are cancelled (default 30 s).
	EOFGrace time.Duration
	// EndTimeout bounds the session's end: stopping work, answering
	// requests and flushing output (default 30 s).
	EndTimeout time.Duration
	// Version is the server version for serverInfo.
	Version string
	// Logger receives logs; never stdout.
	Logger *slog.Logger
	// Table holds the methods served.
	Table *Table
	// Lifecycle is told when the session starts and ends.
	Lifecycle Lifecycle
}

// lifecycleState is where a session is in its lifecycle.
type lifecycleState int

const (
	stateNew         lifecycleState = iota // before initialize
	stateInitialized                       // serving
	stateShutdown                          // after shutdown: only exit is valid
	stateEnding                            // the session is ending
)

// Causes of a request's cancellation.
var (
	errCancelRequested = errors.New("cancelled by $/cancelRequest")
	errShuttingDown    = errors.New("the server is shutting down")
	errSessionEnded    = errors.New("the session is ending")
)

// Server serves one session of JSON-RPC over a byte stream.
type Server struct {
	opts    Options
	log     *slog.Logger
	session *Session

	framing string        // decided once the first byte is read
	out     *outbox       // the one outbound writer
	conn    jsonrpc2.Conn // the library's connection

	root    context.Context // parent of every request context
	endRoot context.CancelCauseFunc

	mu sync.Mutex
	// state, shutdownSeen, inflight, unanswered and active are guarded by
	// mu.
	state        lifecycleState
	shutdownSeen bool
	inflight     map[string]context.CancelCauseFunc // cancel funcs of running handlers, by id key
	// unanswered counts, by id key, the requests dispatched to handle whose
	// response the sink has not yet queued; active is their sum. A request
	// is in flight until its response is queued, not merely until its
	// handler returns: the library writes the response after that, and a
	// batch's only when every member is done.
	unanswered map[string]int
	active     int
	idle       *sync.Cond // signalled when active falls to 0
	// busy counts the unanswered requests still computing: those not yet
	// answered and not detached (Session.Detach); detached holds the keys
	// of the detached ones. The guard reads no new request while busy is
	// at maxBusy, so a burst of requests whose answers the client does not
	// read cannot pile up in memory.
	busy     int
	detached map[string]int

	// room is signalled (capacity 1) when the outbox drains or a busy
	// request ends; the guard waits on it for room to forward a request.
	room chan struct{}

	// afterReply holds callbacks to run once the response to a request is
	// queued, by id key; guarded by afterReplyMu. afterReplyCount lets the
	// sink skip looking when there are none.
	afterReplyMu    sync.Mutex
	afterReply      map[string][]func()
	afterReplyCount atomic.Int64

	endOnce  sync.Once
	ended    chan struct{} // closed when the session has ended
	exitCode int           // set before ended is closed
}

// NewServer returns a server for one session.
func NewServer(opts Options) *Server {
	if opts.Framing == "" {
		opts.Framing = FramingAuto
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 16 << 20
	}
	if opts.EOFGrace <= 0 {
		opts.EOFGrace = 30 * time.Second
	}
	if opts.EndTimeout <= 0 {
		opts.EndTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Table == nil {
		opts.Table = NewTable()
	}
	s := &Server{
		opts:       opts,
		log:        opts.Logger,
		inflight:   make(map[string]context.CancelCauseFunc),
		unanswered: make(map[string]int),
		detached:   make(map[string]int),
		room:       make(chan struct{}, 1),
		afterReply: make(map[string][]func()),
		ended:      make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	s.session = &Session{srv: s}
	s.root, s.endRoot = context.WithCancelCause(context.Background())
	return s
}

// Serve serves the session on in and out until it ends, and returns the
// process exit code: 0 if shutdown came before the end, else 1.
func (s *Server) Serve(in io.Reader, out io.Writer) int {
	br := bufio.NewReaderSize(in, 64<<10)
	s.framing = s.opts.Framing
	if s.framing == FramingAuto {
		f, err := detectFraming(br)
		if err != nil {
			s.log.Info("input ended before any message", "err", err)
			f = FramingNDJSON
		}
		s.framing = f
	}
	s.log.Debug("serving", "framing", s.framing)
	s.out = newOutbox(out, s.framing, s.log)
	s.out.onDrain = s.signalRoom
	go s.out.run() // owned by Serve: end flushes it and waits for it

	g := &guard{in: br, framing: s.framing, max: s.opts.MaxMessageBytes, out: s.out, log: s.log}
	s.conn = jsonrpc2.NewConn(&guardStream{srv: s, g: g}, jsonrpc2.WithPreempter(s))
	s.conn.Go(s.root, s.handle)
	<-s.ended
	return s.exitCode
}

// inputEnded is called by the library's read loop, through the guard, when
// the input ends: requests in flight get EOFGrace to finish, then the
// session ends. The library drops replies still in flight once its read
// loop ends, which is why the read loop is held here until the end is
// done.
func (s *Server) inputEnded(err error) {
	if err != io.EOF {
		s.log.Warn("input failed", "err", err)
	}
	s.log.Info("input closed; waiting for requests in flight", "grace", s.opts.EOFGrace)
	s.waitIdle(s.opts.EOFGrace)
	s.End("input closed")
}

// maxBusy is how many requests may compute at once; see Server.busy.
const maxBusy = 32

// signalRoom wakes the guard if it waits for room.
func (s *Server) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// waitRoom waits until a message may be forwarded: while the outbox is
// over its high-water mark, nothing is; while maxBusy requests compute, no
// further request is (notifications, $/cancelRequest among them, still
// are).
func (s *Server) waitRoom(call bool) {
	for {
		s.mu.Lock()
		ok := s.state == stateEnding || !call || s.busy < maxBusy
		s.mu.Unlock()
		if ok && s.out.hasRoom() {
			return
		}
		<-s.room
	}
}

// detach marks the request ctx serves as no longer computing.
func (s *Server) detach(ctx context.Context) {
	key, ok := ctx.Value(requestKey{}).(string)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.unanswered[key] > s.detached[key] {
		s.detached[key]++
		s.busy--
	}
	s.mu.Unlock()
	s.signalRoom()
}

// waitIdle waits until no handler runs, or d passes. It reports whether
// none runs.
func (s *Server) waitIdle(d time.Duration) bool {
	done := make(chan struct{})
	go func() { // owned by waitIdle's caller through done; it ends when active reaches 0 or at end
		s.mu.Lock()
		for s.active > 0 && s.state != stateEnding {
			s.idle.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// End ends the session, for the given reason: it cancels every request and
// all work, answers what is in flight, flushes the output and then lets
// Serve return. It is idempotent and may be called from any goroutine (a
// signal handler, exit, the end of input).
func (s *Server) End(reason string) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		code := 1
		if s.shutdownSeen {
			code = 0
		}
		s.state = stateEnding
		s.mu.Unlock()
		s.signalRoom()
		s.log.Info("session ending", "reason", reason, "exitCode", code)

		ctx, cancel := context.WithTimeout(context.Background(), s.opts.EndTimeout)
		defer cancel()
		s.endRoot(errSessionEnded)
		s.runAllAfterReply() // no reply that is still due may hold work back
		if s.opts.Lifecycle != nil {
			s.opts.Lifecycle.Shutdown(ctx)
		}
		// Handlers answer once their contexts are cancelled; wait for them
		// (within the bound) so that their replies are queued.
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
		s.waitHandlers(ctx)
		if s.out != nil {
			if err := s.out.flush(ctx); err != nil {
				s.log.Warn("output not flushed", "err", err)
			}
			if n := s.out.dropped.Load(); n > 0 {
				s.log.Warn("notifications dropped while the client read too slowly", "count", n)
			}
		}
		s.exitCode = code
		close(s.ended)
	})
}

// waitHandlers waits until no handler runs or ctx ends.
func (s *Server) waitHandlers(ctx context.Context) {
	done := make(chan struct{})
	go func() { // owned by waitHandlers through done
		s.mu.Lock()
		for s.active > 0 {
			s.idle.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("handlers still running at the end of the session")
		s.mu.Lock()
		s.active, s.busy = 0, 0 // let the waiter above finish
		s.unanswered = make(map[string]int)
		s.detached = make(map[string]int)
		s.idle.Broadcast()
		s.mu.Unlock()
	}
}

// Done is closed when the session has ended.
func (s *Server) Done() <-chan struct{} { return s.ended }

// Preempt handles $/cancelRequest ahead of the request it cancels, on the
// library's read loop.
func (s *Server) Preempt(_ context.Context, req *jsonrpc2.Request) (any, error) {
	if req.IsCall() || req.Method() != MethodCancelRequest {
		return nil, nil
	}
	var p CancelRequestParams
	if err := json.Unmarshal(req.Params(), &p); err != nil {
		s.log.Warn("malformed $/cancelRequest", "err", err)
		return true, nil
	}
	id, ok := idFromJSON(p.ID)
	if !ok {
		s.log.Warn("$/cancelRequest without a valid id")
		return true, nil
	}
	s.mu.Lock()
	cancel := s.inflight[idKey(id)]
	s.mu.Unlock()
	if cancel != nil {
		cancel(errCancelRequested)
	}
	return true, nil
}

// idKey returns a map key for a request id; numbers and strings never
// collide.
func idKey(id jsonrpc2.ID) string {
	if n, ok := id.Number(); ok {
		return "n:" + strconv.FormatInt(n, 10)
	}
	str, _ := id.StringValue()
	return "s:" + str
}

// handle is the library's handler. It never derives a context from the
// library's ctx (a pooled object recycled when it returns); it uses that
// ctx only for jsonrpc2.Async. Lifecycle methods run inline, in wire order;
// every other request is released to run concurrently.
func (s *Server) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	// The method borrows the frame's bytes, which the library reuses once
	// the request is released: keep a copy.
	method := strings.Clone(req.Method())
	if !req.IsCall() {
		s.notification(method, json.RawMessage(bytes.Clone(req.Params())))
		return nil, nil // a notification handler's error would end the connection
	}
	key := idKey(req.ID())
	s.mu.Lock()
	s.unanswered[key]++
	s.active++
	s.busy++
	s.mu.Unlock()
	switch method {
	case MethodInitialize:
		return s.initialize(json.RawMessage(req.Params()))
	case MethodShutdown:
		return s.shutdown()
	}
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	switch state {
	case stateNew:
		return nil, NewError(CodeServerNotInitialized, &ErrorData{Method: method, Reason: "send initialize first"}, "server not initialized").wire()
	case stateShutdown, stateEnding:
		return nil, NewError(CodeInvalidRequest, &ErrorData{Method: method, Reason: "the server is shutting down; only exit is accepted"}, "invalid request: server is shutting down").wire()
	}
	h, ok := s.opts.Table.methods[method]
	if !ok {
		return nil, NewError(CodeMethodNotFound, &ErrorData{Method: method, Reason: "no such method"}, "method not found: %s", method).wire()
	}
	params := json.RawMessage(bytes.Clone(req.Params()))
	rctx, cancel := context.WithCancelCause(context.WithValue(s.root, requestKey{}, key))
	s.mu.Lock()
	if s.state == stateEnding {
		s.mu.Unlock()
		cancel(nil)
		return nil, NewError(CodeInvalidRequest, &ErrorData{Method: method, Reason: "the session is ending"}, "invalid request: session is ending").wire()
	}
	s.inflight[key] = cancel
	s.mu.Unlock()
	defer func() {
		cancel(nil)
		s.mu.Lock()
		delete(s.inflight, key)
		s.mu.Unlock()
	}()
	if !s.opts.Table.inline[method] {
		jsonrpc2.Async(ctx)
	}
	return s.call(rctx, method, h, params)
}

// requestKey is the context key of the id key of the request a handler
// serves.
type requestKey struct{}

// afterReplyFor registers fn to run once the response to the request that
// ctx serves is queued; without a request, fn runs at once.
func (s *Server) afterReplyFor(ctx context.Context, fn func()) {
	key, ok := ctx.Value(requestKey{}).(string)
	if !ok {
		fn()
		return
	}
	s.afterReplyMu.Lock()
	s.afterReply[key] = append(s.afterReply[key], fn)
	s.afterReplyCount.Add(1)
	s.afterReplyMu.Unlock()
}

// replied is told by the sink that the responses with keys are queued: the
// requests are no longer in flight, and the callbacks waiting for their
// replies run.
func (s *Server) replied(keys []string) {
	if len(keys) == 0 {
		return
	}
	s.mu.Lock()
	for _, key := range keys {
		n := s.unanswered[key]
		if n == 0 {
			continue
		}
		if d := s.detached[key]; d > 0 {
			// The answer was detached: it no longer counts as busy.
			if d == 1 {
				delete(s.detached, key)
			} else {
				s.detached[key] = d - 1
			}
		} else {
			s.busy--
		}
		if n == 1 {
			delete(s.unanswered, key)
		} else {
			s.unanswered[key] = n - 1
		}
		s.active--
	}
	if s.active == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	s.signalRoom()
	if s.afterReplyCount.Load() > 0 {
		for _, key := range keys {
			s.runAfterReply(key)
		}
	}
}

// runAfterReply runs the callbacks waiting for the response with key.
func (s *Server) runAfterReply(key string) {
	s.afterReplyMu.Lock()
	fns := s.afterReply[key]
	delete(s.afterReply, key)
	s.afterReplyCount.Add(-int64(len(fns)))
	s.afterReplyMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// runAllAfterReply runs every waiting callback, at the session's end.
func (s *Server) runAllAfterReply() {
	s.afterReplyMu.Lock()
	all := s.afterReply
	s.afterReply = make(map[string][]func())
	s.afterReplyCount.Store(0)
	s.afterReplyMu.Unlock()
	for _, fns := range all {
		for _, fn := range fns {
			fn()
		}
	}
}

// call runs a handler, turning a panic into -32603, a cancelled request
// into -32800, and the result into JSON encoded with encoding/json.
func (s *Server) call(ctx context.Context, method string, h Handler, params json.RawMessage) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
			res, err = nil, NewError(CodeInternalError, &ErrorData{Method: method, Reason: fmt.Sprint(r)}, "internal error: %s failed", method).wire()
		}
	}()
	start := time.Now()
	out, herr := h(ctx, s.session, params)
	s.log.Debug("request", "method", method, "duration", time.Since(start), "err", herr)
	if herr != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			var e *Error
			if !errors.As(herr, &e) || e.Code != CodeRequestCancelled {
				herr = NewError(CodeRequestCancelled, &ErrorData{Method: method, Reason: cause.Error()}, "request cancelled: %v", cause)
			}
		}
		return nil, toWire(method, herr)
	}
	b, merr := json.Marshal(out)
	if merr != nil {
		return nil, toWire(method, fmt.Errorf("cannot encode the result: %w", merr))
	}
	return jsonrpc2.RawMessage(b), nil
}

// notification handles a client notification. Unknown ones are ignored, as
// are all but exit before initialize.
func (s *Server) notification(method string, params json.RawMessage) {
	switch method {
	case NotifyExit:
		go s.End("exit") // End waits for handlers; this one must return first
		return
	case NotifyInitialized, MethodCancelRequest:
		return
	}
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state != stateInitialized {
		return
	}
	h, ok := s.opts.Table.notifications[method]
	if !ok {
		s.log.Debug("ignoring unknown notification", "method", method)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("notification handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	h(s.root, s.session, params)
}

// initialize answers initialize, once.
func (s *Server) initialize(raw json.RawMessage) (any, error) {
	s.mu.Lock()
	if s.state != stateNew {
		s.mu.Unlock()
		return nil, NewError(CodeInvalidRequest, &ErrorData{Method: MethodInitialize, Reason: "initialize may be sent once"}, "invalid request: already initialized").wire()
	}
	s.mu.Unlock()
	var p InitializeParams
	if err := decodeParams(raw, &p, false); err != nil {
		return nil, toWire(MethodInitialize, err)
	}
	if p.Capabilities != nil {
		s.session.mu.Lock()
		s.session.caps = *p.Capabilities
		s.session.mu.Unlock()
	}
	res := &InitializeResult{}
	if s.opts.Lifecycle != nil {
		r, err := s.opts.Lifecycle.Initialize(s.root, s.session, &p)
		if err != nil {
			return nil, toWire(MethodInitialize, err)
		}
		res = r
	}
	res.ServerInfo = ServerInfo{Name: "toolhost", Version: s.opts.Version}
	res.Capabilities.Methods = s.opts.Table.methodNames()
	res.Capabilities.Notifications = s.opts.Table.sentNames()
	res.Capabilities.ServerRequests = append([]string{}, s.opts.Table.requests...)
	res.Capabilities.Framing = s.framing
	res.Capabilities.MaxMessageBytes = s.opts.MaxMessageBytes
	if res.Workspace.ReadRoots == nil {
		res.Workspace.ReadRoots = []string{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, toWire(MethodInitialize, err)
	}
	s.mu.Lock()
	if s.state == stateNew {
		s.state = stateInitialized
	}
	s.mu.Unlock()
	return jsonrpc2.RawMessage(b), nil
}

// shutdown answers shutdown: requests in flight are cancelled and all work
// ends before the answer; afterwards only exit is accepted.
func (s *Server) shutdown() (any, error) {
	s.mu.Lock()
	switch s.state {
	case stateNew:
		s.mu.Unlock()
		return nil, NewError(CodeServerNotInitialized, &ErrorData{Method: MethodShutdown, Reason: "send initialize first"}, "server not initialized").wire()
	case stateShutdown, stateEnding:
		s.mu.Unlock()
		return nil, NewError(CodeInvalidRequest, &ErrorData{Method: MethodShutdown, Reason: "shutdown was already received"}, "invalid request: already shut down").wire()
	}
	s.state = stateShutdown
	s.shutdownSeen = true
	for _, cancel := range s.inflight {
		cancel(errShuttingDown)
	}
	s.mu.Unlock()
	if s.opts.Lifecycle != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.EndTimeout)
		defer cancel()
		s.opts.Lifecycle.Shutdown(ctx)
	}
	return jsonrpc2.RawMessage("null"), nil
}
