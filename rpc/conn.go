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

	"github.com/toolhost/toolhost/protocol"
	"go.lsp.dev/jsonrpc2"
)

// Lifecycle is what the tools do at the edges of a session.
type Lifecycle interface {
	// Initialize sets the session up from the client's params. It returns
	// the result with Workspace and Capabilities.OutputLimitBytes filled;
	// the server fills the rest.
	Initialize(ctx context.Context, s *Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error)
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
	// Persist keeps the session's work when the connection ends without
	// shutdown (the end of input, exit, a write that fails): the session
	// is left detached, its numbered notifications kept for a later
	// connection (Session.MoveTo), and a Lifecycle that is a [Detacher] is
	// told. Without it, the end of the connection ends the session.
	Persist bool
}

// Detacher is a Lifecycle told when its session is left detached.
type Detacher interface {
	// Detached says the connection that served s ended without shutdown
	// and s's work goes on; reason says why.
	Detached(s *Session, reason string)
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

// maxBusy is how many requests may compute at once; see Server.busy.
const maxBusy = 32

// maxSpareReaders bounds the goroutines that, having served a request,
// wait to read again; see Server.awaitTurn.
const maxSpareReaders = 4

// handOverAfter is how long a request served concurrently may run before
// the read loop hands the reading to another goroutine; see readLoop.
const handOverAfter = 100 * time.Microsecond

// Server serves one session of JSON-RPC over a byte stream. It owns its
// dispatch: one read loop (Serve's) reads and decodes each message once,
// one table of requests in flight knows which request every answer belongs
// to, and one writer (the outbox) sends everything.
type Server struct {
	opts Options
	log  *slog.Logger
	// session is the session the connection serves: its own, or the one a
	// resume moved it to (Session.MoveTo) during initialize, before any
	// other request is served.
	session atomic.Pointer[Session]

	framing string  // decided once the first byte is read
	out     *outbox // the one outbound writer
	// output is what out writes to; set by Serve.
	output io.Writer

	root    context.Context // parent of every request context
	endRoot context.CancelCauseFunc

	// handlers counts the goroutines that run concurrent handlers; End
	// waits for them (within EndTimeout).
	handlers sync.WaitGroup

	mu sync.Mutex
	// state and shutdownSeen are guarded by mu.
	state        lifecycleState
	shutdownSeen bool
	// inflight is the table of requests in flight, by id, guarded by mu. A
	// request enters when it is read and leaves when its response is
	// queued or written (a batch member: when the batch's answer is
	// queued), never
	// merely when its handler returns, so that nothing waiting on it (EOF,
	// the session's end, AfterReply) runs before the client can have the
	// answer.
	inflight map[jsonrpc2.ID]*request
	// busy counts the requests in inflight that still compute: not
	// detached (Session.Detach). The read loop reads no new request while
	// busy is at maxBusy, so a burst of requests whose answers the client
	// does not read cannot pile up in memory. Guarded by mu.
	busy int
	idle *sync.Cond // broadcast when inflight empties, and at the end
	// calls are the server's own requests to the client that await an
	// answer, by id; nextCall numbers them. Guarded by mu.
	calls    map[jsonrpc2.ID]chan callAnswer
	nextCall int64
	// inputEnded is set once the read loop has seen the input end: no
	// answer to a call can come, so calls fail at once. Guarded by mu.
	inputEnded bool

	// room is signalled (capacity 1) when the outbox drains or a busy
	// request ends; the read loop waits on it for room to go on.
	room chan struct{}
	// turn hands the reading to a spare reader (awaitTurn); spares counts
	// those waiting, guarded by mu.
	turn   chan struct{}
	spares int

	endOnce  sync.Once
	ended    chan struct{} // closed when the session has ended
	exitCode int           // set before ended is closed
}

// request is one request in flight.
type request struct {
	id     jsonrpc2.ID
	method string
	srv    *Server // the connection it came on
	cancel context.CancelCauseFunc
	batch  *batch // the batch it came in, or nil
	// detached and afterReply are guarded by Server.mu. afterReply runs
	// once the response is queued, or at the session's end; either way
	// exactly once, since it is taken from the request under the lock.
	detached   bool
	afterReply []func()
	// arrived is when the read loop read the request; see Arrived.
	arrived time.Time
}

// batch collects the answers to the requests of one batch; the answer
// array is queued when the last of them is done.
type batch struct {
	mu      sync.Mutex
	answers [][]byte   // encoded responses, in the order they finished; guarded by mu
	members []*request // the requests answered, to retire once queued; guarded by mu
	pending int        // requests still computing; guarded by mu
}

// callAnswer is a client's answer to a request the server sent.
type callAnswer struct {
	result json.RawMessage
	err    *protocol.Error
	gone   bool // no answer: the input ended (ErrClientGone)
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
		opts:     opts,
		log:      opts.Logger,
		inflight: make(map[jsonrpc2.ID]*request),
		calls:    make(map[jsonrpc2.ID]chan callAnswer),
		room:     make(chan struct{}, 1),
		turn:     make(chan struct{}),
		ended:    make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	s.session.Store(newSession(s, opts.Persist))
	s.root, s.endRoot = context.WithCancelCause(context.Background())
	return s
}

// Serve serves the session on in and out until it ends, and returns the
// process exit code: 0 if shutdown came before the end, else 1.
//
// The read loop runs on a goroutine of its own, so that exit or a signal
// can end the session while it blocks in a read. Serve waits for it when
// the input ends; when the session ends otherwise, a read of a real stdin
// cannot be interrupted, and the loop is left blocked in it for the
// process's exit to end (it handles nothing more: the session has ended).
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
	s.output = out
	s.out = newOutbox(out, s.framing, s.log)
	s.out.onDrain = s.signalRoom
	s.out.fits = writeRoom(out)
	go s.out.run() // owned by Serve: End flushes it and waits for it

	fr := &frameReader{in: br, framing: s.framing, max: s.opts.MaxMessageBytes, log: s.log,
		answer: func(_ int, b []byte) { s.out.send(b, false) }}
	go s.readLoop(fr) // owned by Serve; see above
	<-s.ended
	return s.exitCode
}

// readLoop reads and dispatches messages until the input ends, then gives
// the requests in flight EOFGrace to finish and ends the session.
//
// There is one read loop at a time. When a request must run concurrently,
// the loop hands the reading over to another goroutine (handOver) and
// serves the request itself: the handler starts at once, on a running
// goroutine, instead of waiting for a new one to be scheduled; for a quick
// one (Table.Quick), only if it is still being served after handOverAfter.
// Each goroutine that served a request is counted in handlers, which End
// waits for; it then waits, a spare, to be handed the reading again
// (awaitTurn).
func (s *Server) readLoop(fr *frameReader) {
	for {
		frame, err := fr.next()
		if err != nil {
			if err != io.EOF {
				s.log.Warn("input failed", "err", err)
			}
			s.endCalls()
			break
		}
		j := s.dispatch(frame)
		if j == nil {
			continue
		}
		if !j.quick {
			s.handOver(fr)
			j.serve()
			if !s.awaitTurn() {
				return
			}
			continue
		}
		// A quick request: the reading is handed over only if it is still
		// being served after handOverAfter. One served sooner (a small
		// readFile) costs no second goroutine woken, nor a thread to run
		// it, and the loop goes on reading here. The timer's function only
		// hands over and returns; the reader it starts is Serve's, like
		// this one.
		var handed atomic.Bool
		t := time.AfterFunc(handOverAfter, func() {
			if handed.CompareAndSwap(false, true) {
				s.handOver(fr)
			}
		})
		j.serve()
		if handed.CompareAndSwap(false, true) {
			t.Stop()
			continue
		}
		if !s.awaitTurn() {
			return
		}
	}
	if readerGone(s.output) {
		// The client's transport is gone both ways: no answer can reach
		// it, so nothing is worth waiting for.
		s.log.Info("input closed and nothing reads the output; ending now")
		s.finish("input closed, output unread")
		return
	}
	s.log.Info("input closed; waiting for requests in flight", "grace", s.opts.EOFGrace)
	s.waitIdle(s.opts.EOFGrace)
	s.finish("input closed")
}

// handOver gives the reading to a spare reader, or to a new goroutine
// when none waits.
func (s *Server) handOver(fr *frameReader) {
	select {
	case s.turn <- struct{}{}:
	default:
		go s.readLoop(fr) // the next reader; owned by Serve like this one
	}
}

// awaitTurn makes the calling read loop, which has served a request, a
// spare reader: it waits until handOver gives it the reading (true), and
// returns false when the session ends, or at once when maxSpareReaders
// already wait (the goroutine then ends). A spare keeps the stack that
// reading and serving grew: a new goroutine for every request grew it
// again, copying it twice, a large share of a readFile's instructions.
func (s *Server) awaitTurn() bool {
	s.mu.Lock()
	if s.spares >= maxSpareReaders {
		s.mu.Unlock()
		return false
	}
	s.spares++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.spares--
		s.mu.Unlock()
	}()
	select {
	case <-s.turn:
		return true
	case <-s.ended:
		return false
	}
}

// job is a request that must run concurrently: serve serves it; quick
// says it usually ends within handOverAfter (Table.Quick).
type job struct {
	serve func()
	quick bool
}

// dispatch handles one frame, which it owns: a message, or a batch of them.
// For a request that must run concurrently it returns the job that serves
// it, for the caller to run on a goroutine of its own.
func (s *Server) dispatch(frame []byte) *job {
	frame = bytes.TrimSpace(frame)
	switch frame[0] {
	case '{':
		m, ok := s.parse(frame, nil)
		if !ok {
			return nil
		}
		s.waitRoom(m.kind == jsonrpc2.MessageViewCall)
		return s.handle(m, nil)
	case '[':
		s.dispatchBatch(frame)
	default:
		if !json.Valid(frame) {
			s.answerError(jsonrpc2.ID{}, protocol.NewError(protocol.CodeParseError, &protocol.ErrorData{Reason: "malformed JSON: " + syntaxReason(frame)}, "parse error: malformed JSON"))
			return nil
		}
		s.answerError(jsonrpc2.ID{}, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Reason: "a message must be an object or a batch array"}, "invalid request: not an object"))
	}
	return nil
}

// dispatchBatch handles a batch: each member as a message of its own, the
// answers to its requests sent together in one array.
func (s *Server) dispatchBatch(frame []byte) {
	var members []json.RawMessage
	if err := json.Unmarshal(frame, &members); err != nil {
		s.answerError(jsonrpc2.ID{}, protocol.NewError(protocol.CodeParseError, &protocol.ErrorData{Reason: "malformed JSON: " + syntaxReason(frame)}, "parse error: malformed JSON"))
		return
	}
	if len(members) == 0 {
		s.answerError(jsonrpc2.ID{}, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Reason: "a batch must not be empty"}, "invalid request: empty batch"))
		return
	}
	s.waitRoom(true)
	b := &batch{pending: 1} // held until every member is dispatched
	for _, raw := range members {
		if raw = bytes.TrimSpace(raw); raw[0] != '{' {
			b.answer(encodeError(jsonrpc2.ID{}, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Reason: "a batch member must be an object"}, "invalid request: not an object")))
			continue
		}
		m, ok := s.parse(raw, b)
		if !ok {
			continue
		}
		if m.kind == jsonrpc2.MessageViewCall {
			b.mu.Lock()
			b.pending++
			b.mu.Unlock()
		}
		if j := s.handle(m, b); j != nil {
			go j.serve() // owned by Server through handlers
		}
	}
	s.finishBatchMember(b, nil, nil)
}

// message is one inbound message. Its method is a copy; params and result
// borrow the frame, which the message's handler then owns.
type message struct {
	kind   jsonrpc2.MessageViewKind
	id     jsonrpc2.ID
	method string
	params []byte
	result []byte
	err    *protocol.Error // a response's error
}

// parse decodes one message object. An invalid one is answered, alone or
// in its batch b, under its id when it has a valid one, and parse reports
// false; a malformed response is dropped with a warning, since nothing
// answers a response.
func (s *Server) parse(frame []byte, b *batch) (message, bool) {
	m, id, e := decodeMessage(frame)
	switch {
	case e == nil:
		return m, true
	case e.Code == 0:
		s.log.Warn("dropping a malformed response from the client", "frame", clip(string(frame), 200))
	case b != nil:
		b.answer(encodeError(id, e))
	default:
		s.answerError(id, e)
	}
	return message{}, false
}

// handle serves one decoded message; b is its batch, or nil. A request
// that must run concurrently comes back as the job that serves it.
func (s *Server) handle(m message, b *batch) *job {
	switch m.kind {
	case jsonrpc2.MessageViewNotification:
		s.notification(m.method, m.params)
	case jsonrpc2.MessageViewResponseResult, jsonrpc2.MessageViewResponseError:
		s.deliver(m)
	case jsonrpc2.MessageViewCall:
		return s.call(m, b)
	}
	return nil
}

// call serves a request: lifecycle methods and inline methods on the read
// loop, in wire order. Every other method it returns as a function to run
// on a goroutine of its own, so that a slow request never delays the next;
// that goroutine is counted in handlers before call returns.
func (s *Server) call(m message, b *batch) *job {
	ctx, cancel := context.WithCancelCause(s.root)
	req := &request{id: m.id, method: m.method, srv: s, cancel: cancel, batch: b, arrived: time.Now()}
	ctx = context.WithValue(ctx, requestKey{}, req)

	s.mu.Lock()
	state := s.state
	_, dup := s.inflight[m.id]
	if !dup {
		s.inflight[m.id] = req
		s.busy++
	}
	s.mu.Unlock()
	if dup {
		// Not entered: answered without touching the one in flight.
		cancel(nil)
		e := protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: m.method, Reason: fmt.Sprintf("id %v is already in flight", m.id)}, "invalid request: id already in flight")
		if b != nil {
			s.finishBatchMember(b, nil, encodeError(m.id, e))
		} else {
			s.answerError(m.id, e)
		}
		return nil
	}

	switch m.method {
	case protocol.MethodInitialize:
		res, e := s.initialize(ctx, m.params)
		s.reply(req, res, e)
		return nil
	case protocol.MethodShutdown:
		res, e := s.shutdown()
		s.reply(req, res, e)
		return nil
	}
	var refuse *protocol.Error
	switch state {
	case stateNew:
		refuse = protocol.NewError(protocol.CodeServerNotInitialized, &protocol.ErrorData{Method: m.method, Reason: "send initialize first"}, "server not initialized")
	case stateShutdown:
		refuse = protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: m.method, Reason: "the server is shutting down; only exit is accepted"}, "invalid request: server is shutting down")
	case stateEnding:
		refuse = protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: m.method, Reason: "the session is ending"}, "invalid request: session is ending")
	}
	if refuse != nil {
		s.reply(req, nil, refuse)
		return nil
	}
	h, ok := s.opts.Table.methods[m.method]
	if !ok {
		s.reply(req, nil, protocol.NewError(protocol.CodeMethodNotFound, &protocol.ErrorData{Method: m.method, Reason: "no such method"}, "method not found: %s", m.method))
		return nil
	}
	if h.inline {
		res, e := s.run(ctx, m.method, func() ([]byte, error) { return h.serve(ctx, s.session.Load(), m.params) })
		s.reply(req, res, e)
		return nil
	}
	// Add under mu, before End can mark the session ending and wait.
	s.mu.Lock()
	if s.state == stateEnding {
		s.mu.Unlock()
		s.reply(req, nil, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: m.method, Reason: "the session is ending"}, "invalid request: session is ending"))
		return nil
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	method, params := m.method, m.params
	work := func() ([]byte, error) { return h.serve(ctx, s.session.Load(), params) }
	if h.ordered != nil {
		// The first part runs here, in wire order; the rest, if any,
		// concurrently. The rest does not hold the frame: a writeInput
		// waiting on a child that does not read holds its bytes once,
		// decoded.
		var rest func(context.Context) ([]byte, error)
		res, e := s.run(ctx, method, func() ([]byte, error) {
			var (
				res []byte
				err error
			)
			res, rest, err = h.ordered(ctx, s.session.Load(), params)
			return res, err
		})
		params = nil
		if e != nil || rest == nil {
			s.reply(req, res, e)
			s.handlers.Done()
			return nil
		}
		work = func() ([]byte, error) { return rest(ctx) }
	}
	return &job{quick: h.quick, serve: func() {
		defer s.handlers.Done()
		res, e := s.run(ctx, method, work)
		s.answer(req, res, e, true)
	}}
}

// requestKey is the context key of the *request a handler serves.
type requestKey struct{}

// Arrived returns when the read loop read the request ctx serves (its
// handler's goroutine may start later on a loaded machine), or the zero
// time without a request. A deadline that the request sets (runCommand's
// yieldMs) counts from there.
func Arrived(ctx context.Context) time.Time {
	if req, _ := ctx.Value(requestKey{}).(*request); req != nil {
		return req.arrived
	}
	return time.Time{}
}

// run runs (part of) a handler, turning a panic into -32603 and an error
// returned once the request was cancelled into -32800.
func (s *Server) run(ctx context.Context, method string, serve func() ([]byte, error)) (res []byte, err *protocol.Error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
			res, err = nil, protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{Method: method, Reason: fmt.Sprint(r)}, "internal error: %s failed", method)
		}
	}()
	start := time.Now()
	out, herr := serve()
	s.log.Debug("request", "method", method, "duration", time.Since(start), "err", herr)
	if herr != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !errors.Is(herr, protocol.ErrRequestCancelled) {
			herr = protocol.NewError(protocol.CodeRequestCancelled, &protocol.ErrorData{Method: method, Reason: cause.Error()}, "request cancelled: %v", cause)
		}
		return nil, toError(method, herr)
	}
	return out, nil
}

// reply queues (or writes) the answer to req, a result (JSON) or an
// error, and retires req. It (or answer) is the only way a request leaves
// the table, so every request is answered exactly once.
func (s *Server) reply(req *request, result []byte, e *protocol.Error) {
	s.answer(req, result, e, false)
}

// answer is reply, which writes the answer at once when nothing waits to
// be written and the output has room for it (outbox.sendNow); handler is
// set on a handler's own goroutine, never the read loop's, which may then
// wait for the client to read.
func (s *Server) answer(req *request, result []byte, e *protocol.Error, handler bool) {
	req.cancel(nil)
	var body []byte
	if e != nil {
		body = encodeError(req.id, e)
	} else {
		body = encodeResult(req.id, result)
	}
	if req.batch != nil {
		s.finishBatchMember(req.batch, req, body)
		return
	}
	s.out.sendNow(body, handler)
	s.retire(req)
}

// answer records an answer of the batch that no request owns (an invalid
// member).
func (b *batch) answer(answer []byte) {
	b.mu.Lock()
	b.answers = append(b.answers, answer)
	b.mu.Unlock()
}

// finishBatchMember records a member's answer (if any); once no member
// computes, it queues the batch's answer array (none if no member was a
// request) and retires its requests.
func (s *Server) finishBatchMember(b *batch, req *request, answer []byte) {
	b.mu.Lock()
	if answer != nil {
		b.answers = append(b.answers, answer)
	}
	if req != nil {
		b.members = append(b.members, req)
	}
	b.pending--
	done := b.pending == 0
	answers, members := b.answers, b.members
	b.mu.Unlock()
	if !done {
		return
	}
	if len(answers) > 0 {
		s.out.send(encodeBatch(answers), false)
	}
	for _, r := range members {
		s.retire(r)
	}
}

// retire removes a request whose answer is queued from the table and runs
// what waited for the answer.
func (s *Server) retire(req *request) {
	s.mu.Lock()
	if s.inflight[req.id] == req {
		delete(s.inflight, req.id)
		if !req.detached {
			s.busy--
		}
	}
	fns := req.afterReply
	req.afterReply = nil
	if len(s.inflight) == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	s.signalRoom()
	for _, fn := range fns {
		fn()
	}
}

// afterReply registers fn to run once the answer to the request ctx serves
// is queued; without a request in flight, fn runs at once.
func (s *Server) afterReply(ctx context.Context, fn func()) {
	req, _ := ctx.Value(requestKey{}).(*request)
	s.mu.Lock()
	if req != nil && s.inflight[req.id] == req {
		req.afterReply = append(req.afterReply, fn)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	fn()
}

// detach marks the request ctx serves as no longer computing.
func (s *Server) detach(ctx context.Context) {
	req, _ := ctx.Value(requestKey{}).(*request)
	if req == nil {
		return
	}
	s.mu.Lock()
	if s.inflight[req.id] == req && !req.detached {
		req.detached = true
		s.busy--
	}
	s.mu.Unlock()
	s.signalRoom()
}

// signalRoom wakes the read loop if it waits for room.
func (s *Server) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// waitRoom waits until a message may be handled: while the outbox is over
// its high-water mark, nothing is; while maxBusy requests compute, no
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

// notification handles a client notification on the read loop. Unknown
// ones are ignored, as are all but exit and $/cancelRequest before
// initialize.
func (s *Server) notification(method string, params []byte) {
	switch method {
	case protocol.NotifyExit:
		go s.finish("exit") // owned by Serve through ended; it waits for handlers, and this is the read loop
		return
	case protocol.MethodCancelRequest:
		s.cancelRequest(params)
		return
	case protocol.NotifyInitialized:
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
	if err := h(s.root, s.session.Load(), params); err != nil {
		s.log.Warn("bad notification", "method", method, "err", err)
	}
}

// cancelRequest cancels the request in flight that $/cancelRequest names.
func (s *Server) cancelRequest(params []byte) {
	var p protocol.CancelRequestParams
	if err := json.Unmarshal(params, &p); err != nil {
		s.log.Warn("malformed $/cancelRequest", "err", err)
		return
	}
	id, ok := idFromJSON(p.ID)
	if !ok {
		s.log.Warn("$/cancelRequest without a valid id")
		return
	}
	s.mu.Lock()
	req := s.inflight[id]
	s.mu.Unlock()
	if req != nil {
		req.cancel(errCancelRequested)
	}
}

// callClient sends a request to the client and waits for its answer or
// ctx's end.
func (s *Server) callClient(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan callAnswer, 1)
	s.mu.Lock()
	if s.inputEnded {
		s.mu.Unlock()
		return nil, ErrClientGone
	}
	s.nextCall++
	n := s.nextCall
	id := jsonrpc2.NewNumberID(n)
	s.calls[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
	}()
	s.out.send(jsonrpc2.AppendCall(nil, id, method, p), false)
	select {
	case a := <-ch:
		switch {
		case a.gone:
			return nil, ErrClientGone
		case a.err != nil:
			return nil, a.err
		}
		return a.result, nil
	case <-ctx.Done():
		// The request is withdrawn: say so, as LSP's $/cancelRequest does
		// either way, so that a client showing it to its user (an ask) can
		// take it down. Its answer, if one still comes, is dropped.
		if b, err := encodeNotification(protocol.MethodCancelRequest, protocol.CancelRequestParams{ID: json.RawMessage(strconv.FormatInt(n, 10))}); err == nil {
			s.out.send(b, false)
		}
		return nil, context.Cause(ctx)
	}
}

// ErrClientGone is the error of a request to the client once its input
// has ended: no answer can come.
var ErrClientGone = errors.New("the client's input ended: no answer can come")

// endCalls fails the calls that await an answer, and every later one,
// with ErrClientGone: the input has ended.
func (s *Server) endCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inputEnded = true
	for _, ch := range s.calls {
		select {
		case ch <- callAnswer{gone: true}: // capacity 1: unless answered already
		default:
		}
	}
}

// deliver hands a client's response to the call that awaits it.
func (s *Server) deliver(m message) {
	s.mu.Lock()
	ch := s.calls[m.id]
	s.mu.Unlock()
	if ch == nil {
		s.log.Warn("dropping a response to no request of the server's", "id", m.id)
		return
	}
	select {
	case ch <- callAnswer{result: m.result, err: m.err}: // capacity 1: the first answer
	default:
		s.log.Warn("dropping a second response to one request", "id", m.id)
	}
}

// answerError queues an error answer that no request in flight owns (a bad
// frame or message).
func (s *Server) answerError(id jsonrpc2.ID, e *protocol.Error) {
	s.out.send(encodeError(id, e), false)
}

// decodeMessage decodes one message object. It scans it without copying
// (the library's zero-copy view); only a message the scan refuses is
// decoded again, to say why. An invalid message comes back as an error to
// answer under id; a malformed response as an error with code 0.
func decodeMessage(frame []byte) (message, jsonrpc2.ID, *protocol.Error) {
	v, err := jsonrpc2.ScanMessageView(frame)
	if err == nil {
		switch v.Kind {
		case jsonrpc2.MessageViewCall, jsonrpc2.MessageViewNotification:
			method, ok := v.MethodString()
			idOK := v.IDRaw == nil || v.Kind == jsonrpc2.MessageViewCall // "id": null is not an id
			paramsOK := len(v.Params) == 0 || v.Params[0] == '{' || v.Params[0] == '['
			if ok && idOK && paramsOK {
				id, _ := v.ID.ID()
				return message{kind: v.Kind, id: id, method: strings.Clone(method), params: v.Params}, id, nil
			}
		case jsonrpc2.MessageViewResponseResult:
			if id, ok := v.ID.ID(); ok {
				return message{kind: v.Kind, id: id, result: v.Result}, id, nil
			}
		case jsonrpc2.MessageViewResponseError:
			if id, ok := v.ID.ID(); ok {
				e := &protocol.Error{Code: int(v.Error.Code)}
				e.Message, _ = v.Error.MessageString()
				if v.Error.Data != nil {
					e.Data = new(protocol.ErrorData)
					if json.Unmarshal(v.Error.Data, e.Data) != nil {
						e.Data = nil
					}
				}
				return message{kind: v.Kind, id: id, err: e}, id, nil
			}
		}
	}
	id, e := whyInvalid(frame)
	return message{}, id, e
}
