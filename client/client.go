// Package client is a Go client for toolhost's JSON-RPC 2.0 protocol.
//
// A [Client] talks to one toolhost session over a byte stream: [New] takes
// any reader and writer (pipes to a server in the same process, a socket),
// and [Start] spawns the toolhost binary and talks over its stdin and stdout.
// Both framings are spoken, Content-Length headers ([FramingHeader], the
// default) and newline-delimited JSON ([FramingNDJSON]); the framing code is
// go.lsp.dev/jsonrpc2's.
//
// A session goes the way of the protocol:
//
//	c, err := client.Start(ctx, exec.Command("toolhost", "--root", dir), nil)
//	...
//	defer c.Close()
//	if _, err := c.Initialize(ctx, &protocol.InitializeParams{}); err != nil { ... }
//	c.Initialized(ctx)
//	res, err := c.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"go", "test", "./..."}})
//	...
//	c.Shutdown(ctx)
//	c.Exit(ctx)
//
// There is a typed method for every request and notification a client sends
// (see protocol/methods.go), the generic [Call] and [Notify] for any typed
// descriptor, and the raw [Client.Call] and [Client.Send] for anything else.
// An error response comes back as an *protocol.Error, to match with errors.Is
// against the sentinels of package protocol (protocol.ErrHandleNotFound, …). When the
// transport ends, every call fails with an error wrapping [ErrClosed] that
// says why (and, for [Start], how the process exited and the tail of its
// stderr). Cancelling a call's context sends $/cancelRequest; the call then
// returns the server's answer (-32800, with the partial result in its data
// where the method has one).
//
// Notifications are delivered by method to handlers added with
// [OnNotification] (typed), [Client.OnNotificationRaw] and
// [Client.OnEveryNotification], in the order they arrived, from one
// goroutine: what the server says about a handle reaches the handlers in
// the order it was said. The server's requests (window/workDoneProgress/create)
// are answered by handlers added with [OnRequest] or [Client.OnRequestRaw];
// without one the client answers null to the requests of the protocol, as
// LSP clients do, and -32601 to any other. Calls may be made from many
// goroutines at once, handlers included.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/toolhost/toolhost/protocol"
)

// Framing is how messages are delimited on the stream.
type Framing string

// The framings toolhost speaks.
const (
	// FramingHeader precedes each message with a Content-Length header, as
	// LSP does. It is the default.
	FramingHeader Framing = "header"
	// FramingNDJSON puts one message on each line.
	FramingNDJSON Framing = "ndjson"
)

// ErrClosed is wrapped by the error of every call that cannot be answered
// because the transport has ended: the server closed its output, a message
// could not be read, or Close was called.
var ErrClosed = errors.New("toolhost client: transport closed")

// Options configure a Client. The zero value (or nil) is ready to use.
type Options struct {
	// Framing is the framing of the stream (default FramingHeader). It must
	// be the server's: toolhost detects it from the first message, or is
	// told with --framing.
	Framing Framing
	// OnRead, when set, is called on the read loop with every frame read
	// from the server, before the frame is dispatched; the frame is valid
	// only during the call. Nothing more is read while it runs, so it can
	// trace the wire or hold the client back like a slow reader would.
	OnRead func(frame []byte)
	// CancelWait bounds how long a call whose context is done waits for the
	// server's answer to its $/cancelRequest before it returns the
	// context's error (default 30 s; negative: it returns at once).
	CancelWait time.Duration
	// CloseTimeout is how long Close waits for a process of Start to exit
	// after its stdin is closed before it kills it (default 10 s).
	CloseTimeout time.Duration
	// Logf, when set, is told what the client drops: a notification whose
	// params do not decode into a typed handler's type, an answer to a
	// server request that could not be written.
	Logf func(format string, args ...any)
}

// Client is a connection to one toolhost session. Its methods may be called
// from many goroutines at once.
type Client struct {
	stream jsonrpc2.Stream
	// frames reads the stream frame by frame: both of the library's streams
	// can, so that OnRead sees the bytes and batches are told apart.
	frames     frameReader
	onRead     func([]byte)
	cancelWait time.Duration
	logf       func(format string, args ...any)
	// shut closes the transport, for Close.
	shut func() error
	// proc is the process of Start, nil for New.
	proc *process

	// ctx is the context of request handlers, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc

	// nextID numbers requests from 1; ids are never reused.
	nextID atomic.Int64

	mu sync.Mutex
	// pending holds the requests in flight by id. Send adds a request before
	// writing it; the read loop removes it when its answer arrives, Wait
	// when it gives up on a cancelled request, finish when the transport
	// ends (and sets pending to nil). Whoever removes a request sets its
	// outcome and closes its done channel. Guarded by mu.
	pending map[int64]*Pending
	// subs are the notification handlers in the order they were added.
	// Guarded by mu; the dispatcher calls a snapshot.
	subs []*subscription
	// handlers answer server requests by method. Guarded by mu.
	handlers map[string]*requestHandler
	// err says why the transport ended; nil while it runs. Set once, by
	// Close or finish, whichever comes first. Guarded by mu.
	err error

	// inbox carries notifications and server requests from the read loop
	// to the dispatcher, in arrival order.
	inbox queue

	// done is closed by the dispatcher when it ends, which is after the
	// read loop has ended and every message it read was delivered.
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// frameReader is what the library's header and NDJSON streams implement
// beside Stream: reading one frame's bytes without decoding them.
type frameReader interface {
	ReadFrame(ctx context.Context) ([]byte, int64, error)
}

// lineFrames reads NDJSON frames as the library's NDJSON stream does, a
// line without its "\n", but straight from the client's 64 KiB buffer:
// the stream reads through a 4 KiB buffer of its own, so every frame over
// 4 KiB (the answer to a readFile of 4 KiB, say) was copied into a new,
// growing buffer. A frame is valid until the next ReadFrame.
type lineFrames struct {
	r    *bufio.Reader
	long []byte // a frame longer than r's buffer; reused
}

// ReadFrame returns the next line without its "\n"; io.EOF at a frame's
// boundary, io.ErrUnexpectedEOF within one.
func (l *lineFrames) ReadFrame(context.Context) ([]byte, int64, error) {
	line, err := l.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.long = append(l.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = l.r.ReadSlice('\n')
			l.long = append(l.long, line...)
		}
		line = l.long
	}
	switch {
	case err == io.EOF && len(line) == 0:
		return nil, 0, io.EOF
	case err == io.EOF:
		return nil, 0, io.ErrUnexpectedEOF
	case err != nil:
		return nil, 0, err
	}
	return line[:len(line)-1], int64(len(line)), nil
}

// New returns a client that reads the server's messages from r and writes
// its own to w, and starts its read loop and dispatcher. Close closes w and
// r when they are io.Closers and waits for both goroutines; a reader that
// is not an io.Closer must end by itself.
func New(r io.Reader, w io.Writer, opts *Options) *Client {
	return newClient(r, w, opts, nil)
}

// newClient builds a client over r and w for New and Start.
func newClient(r io.Reader, w io.Writer, opts *Options, proc *process) *Client {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CancelWait == 0 {
		o.CancelWait = 30 * time.Second
	}
	// The NDJSON stream reads lines through a 4 KiB buffer: a larger one
	// below it turns a long line's many small reads into copies.
	br := bufio.NewReaderSize(r, 64<<10)
	rwc := &duplex{r: br, w: w, closeR: r}
	var stream jsonrpc2.Stream
	switch o.Framing {
	case FramingNDJSON:
		stream = jsonrpc2.NewNDJSONStream(rwc)
	default:
		stream = jsonrpc2.NewHeaderStream(rwc)
	}
	frames, ok := stream.(frameReader)
	if !ok {
		// Both streams of go.lsp.dev/jsonrpc2 v1.0.1 read frames (the
		// tests run in both framings): this is a changed dependency.
		panic("toolhost client: the jsonrpc2 stream cannot read frames")
	}
	if o.Framing == FramingNDJSON {
		frames = &lineFrames{r: br} // the stream still writes
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		stream:     stream,
		frames:     frames,
		onRead:     o.OnRead,
		cancelWait: o.CancelWait,
		logf:       o.Logf,
		shut:       rwc.Close,
		proc:       proc,
		ctx:        ctx,
		cancel:     cancel,
		pending:    make(map[int64]*Pending),
		handlers:   make(map[string]*requestHandler),
		inbox:      queue{ready: make(chan struct{}, 1)},
		done:       make(chan struct{}),
	}
	if proc != nil {
		c.shut = proc.stdin.Close
	}
	go c.readLoop() // owned by the client: it ends before the dispatcher, which closes done
	go c.dispatch() // owned by the client: Close waits on done, which it closes
	return c
}

// duplex joins a reader and a writer into the connection a stream wants.
type duplex struct {
	r io.Reader
	w io.Writer
	// closeR is the reader given to New, which Close closes.
	closeR io.Reader
}

func (d *duplex) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d *duplex) Write(p []byte) (int, error) { return d.w.Write(p) }

// Close closes the writer, then the reader, where they can be closed.
func (d *duplex) Close() error {
	var errs []error
	if c, ok := d.w.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	if c, ok := d.closeR.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Done returns a channel closed once the transport has ended and every
// notification read before its end has been delivered.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the transport ended (an error wrapping ErrClosed), or nil
// while it runs.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the client. For New it closes the writer and the reader; for
// Start it closes the process's stdin (the server ends its session), waits
// for the process to exit (killing it after Options.CloseTimeout) and
// returns its exit error. Close waits for the client's goroutines; the
// handlers' context is cancelled. Calls still in flight fail with ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("%w: the client was closed", ErrClosed)
		}
		c.mu.Unlock()
		c.cancel()
		if c.proc != nil {
			c.closeErr = c.proc.close(c)
			return
		}
		c.closeErr = c.shut()
		<-c.done
	})
	return c.closeErr
}

// readLoop reads and routes the server's messages until the transport ends.
func (c *Client) readLoop() {
	var cause error
	for {
		frame, _, err := c.frames.ReadFrame(context.Background())
		if err != nil {
			cause = fmt.Errorf("reading from the server: %w", err)
			break
		}
		if c.onRead != nil {
			c.onRead(frame)
		}
		if cause = c.receive(frame); cause != nil {
			break
		}
	}
	c.finish(cause)
}

// receive routes one frame: an answer to its request, a notification or a
// server request to the dispatcher.
func (c *Client) receive(frame []byte) error {
	if b := bytes.TrimLeft(frame, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		// A batch answers a batch, which this client never sends: someone
		// else wrote on the same stream (OnRead saw it).
		return nil
	}
	msg, err := jsonrpc2.DecodeMessage(frame)
	if err != nil {
		return fmt.Errorf("undecodable message from the server (%v): %.200q", err, frame)
	}
	switch m := msg.(type) {
	case *jsonrpc2.Response:
		c.answer(m)
	case *jsonrpc2.Notification:
		// The method and params borrow the frame, which the next read reuses.
		c.inbox.push(inbound{method: strings.Clone(m.Method()), params: bytes.Clone(m.Params())})
	case *jsonrpc2.Call:
		c.inbox.push(inbound{method: strings.Clone(m.Method()), params: bytes.Clone(m.Params()), id: m.ID(), call: true})
	}
	return nil
}

// answer completes the request a response answers. A response to no
// request in flight (a null id answering bad input someone else wrote, a
// request given up on) is dropped.
func (c *Client) answer(resp *jsonrpc2.Response) {
	id, ok := resp.ID().Number()
	if !ok {
		return
	}
	p := c.take(id)
	if p == nil {
		return
	}
	if err := resp.Err(); err != nil {
		p.err = fromWire(err)
	} else {
		p.result = json.RawMessage(resp.Result()) // the response owns its bytes
	}
	close(p.done)
}

// take removes the request id from those in flight and returns it, or nil
// if it is not there.
func (c *Client) take(id int64) *Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[id]
	delete(c.pending, id)
	return p
}

// finish ends the transport: it records why, fails every request in flight
// and lets the dispatcher deliver what was read, then end.
func (c *Client) finish(cause error) {
	err := fmt.Errorf("%w: %v", ErrClosed, cause)
	if c.proc != nil {
		err = fmt.Errorf("%w%s", err, c.proc.ended())
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, p := range pending {
		p.err = err
		close(p.done)
	}
	c.inbox.close()
}

// fromWire turns the library's error into an *protocol.Error, decoding its data.
// Data that is not an object of protocol.ErrorData's shape is left out.
func fromWire(err error) *protocol.Error {
	var w *jsonrpc2.Error
	if !errors.As(err, &w) {
		return &protocol.Error{Code: protocol.CodeInternalError, Message: err.Error()}
	}
	e := &protocol.Error{Code: int(w.Code), Message: w.Message}
	if len(w.Data) > 0 && string(w.Data) != "null" {
		var d protocol.ErrorData
		if json.Unmarshal(w.Data, &d) == nil {
			e.Data = &d
		}
	}
	return e
}

// toWire turns a handler's error into the error object sent: an *protocol.Error
// keeps its code and data, anything else is -32603.
func toWire(err error) *jsonrpc2.Error {
	var e *protocol.Error
	if !errors.As(err, &e) {
		return jsonrpc2.NewError(protocol.CodeInternalError, err.Error())
	}
	w := jsonrpc2.NewError(jsonrpc2.Code(e.Code), e.Message)
	if e.Data != nil {
		if b, merr := json.Marshal(e.Data); merr == nil {
			w.Data = b
		}
	}
	return w
}

// Pending is a request sent and not yet waited for.
type Pending struct {
	c      *Client
	id     int64
	method string
	// done is closed once the outcome is set, by whoever removed the
	// request from Client.pending.
	done chan struct{}
	// result or err is the outcome: set once, before done is closed, and
	// read only after.
	result json.RawMessage
	err    error
}

// ID returns the request's id on the wire.
func (p *Pending) ID() jsonrpc2.ID { return jsonrpc2.NewNumberID(p.id) }

// Done returns a channel closed when the answer has arrived or the
// transport has ended.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait waits for the answer and decodes its result into result (unless it
// is nil; a *json.RawMessage receives the bytes as they are). An error
// answer is returned as an *protocol.Error. If ctx is done first, Wait sends
// $/cancelRequest and returns the server's answer, or ctx's error if the
// answer does not come within Options.CancelWait or the transport ends.
// Wait may be called again; it returns the same outcome.
func (p *Pending) Wait(ctx context.Context, result any) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		if !p.awaitCancelled() || errors.Is(p.err, ErrClosed) {
			return ctx.Err()
		}
	}
	if p.err != nil {
		return p.err
	}
	return decodeResult(p.method, p.result, result)
}

// awaitCancelled sends $/cancelRequest for p and waits for its answer at
// most Options.CancelWait. If none comes, it gives the request up and
// reports false.
func (p *Pending) awaitCancelled() bool {
	c := p.c
	params, _ := json.Marshal(protocol.CancelRequestParams{ID: json.RawMessage(strconv.FormatInt(p.id, 10))})
	// A failed write leaves the transport's end to answer the request.
	_ = c.write(context.Background(), jsonrpc2.NewNotification(protocol.MethodCancelRequest, params))
	if c.cancelWait > 0 {
		t := time.NewTimer(c.cancelWait)
		defer t.Stop()
		select {
		case <-p.done:
			return true
		case <-t.C:
		}
	}
	if c.take(p.id) == nil {
		// The answer came meanwhile; its sender is closing done.
		<-p.done
		return true
	}
	p.err = fmt.Errorf("%s: no answer to $/cancelRequest within %v", p.method, c.cancelWait)
	close(p.done)
	return false
}

// decodeResult decodes a result into out.
func decodeResult(method string, raw json.RawMessage, out any) error {
	switch o := out.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*o = raw
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: decoding the result %.200q: %w", method, raw, err)
	}
	return nil
}

// encodeParams encodes params; nil means none.
func encodeParams(params any) (jsonrpc2.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc2.RawMessage(b), nil
}

// Send writes a request and returns it in flight, to wait for later: the
// request is on the wire when Send returns, so requests sent one after the
// other reach the server in that order. params is encoded with
// encoding/json; nil sends none. ctx is checked before the write only (see
// Pending.Wait for cancelling the request): a write blocks while the server
// reads nothing, which is its backpressure.
func (c *Client) Send(ctx context.Context, method string, params any) (*Pending, error) {
	raw, err := encodeParams(params)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the params: %w", method, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &Pending{c: c, id: c.nextID.Add(1), method: method, done: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[p.id] = p
	c.mu.Unlock()
	if err := c.write(ctx, jsonrpc2.NewCall(p.ID(), method, raw)); err != nil {
		if c.take(p.id) != nil {
			p.err = err
			close(p.done)
		}
		return nil, err
	}
	return p, nil
}

// Call sends a request and waits for its answer, decoding the result into
// result as Pending.Wait does. It is the raw form of the typed methods, for
// methods and params of any shape.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	p, err := c.Send(ctx, method, params)
	if err != nil {
		return err
	}
	return p.Wait(ctx, result)
}

// Notify sends a notification; params is encoded with encoding/json, nil
// sends none.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	raw, err := encodeParams(params)
	if err != nil {
		return fmt.Errorf("%s: encoding the params: %w", method, err)
	}
	return c.write(ctx, jsonrpc2.NewNotification(method, raw))
}

// write writes one message; the stream makes each message one write.
func (c *Client) write(ctx context.Context, msg jsonrpc2.Message) error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if _, werr := c.stream.Write(ctx, msg); werr != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		// A write fails (EPIPE) when the server has gone, often before
		// the read loop has seen its end: that end, with how the process
		// exited and its stderr ("Connection refused"), says why, where
		// the write's error does not.
		t := time.NewTimer(writeEndWait)
		defer t.Stop()
		select {
		case <-c.done:
		case <-ctx.Done():
		case <-t.C:
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: writing to the server: %v", ErrClosed, werr)
	}
	return nil
}

// writeEndWait bounds how long a failed write waits for the transport's
// end to be recorded: the process's end is given 2 s (process.ended).
const writeEndWait = 3 * time.Second

// inbound is a notification or server request on its way to the
// dispatcher; it owns its bytes.
type inbound struct {
	method string
	params json.RawMessage
	id     jsonrpc2.ID
	call   bool
}

// queue is an unbounded FIFO from the read loop to the dispatcher, so that
// slow handlers never stop the reading of answers.
type queue struct {
	mu sync.Mutex
	// items and closed are guarded by mu.
	items  []inbound
	closed bool
	// ready holds a token while items may be waiting or the queue closed.
	ready chan struct{}
}

// push appends an item.
func (q *queue) push(it inbound) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.signal()
}

// close says no more items will come.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// signal leaves a token in ready, unless one waits there already, so that
// take looks again; it never blocks.
func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take waits for items and returns them all, or reports false once the
// queue is closed and empty.
func (q *queue) take(buf []inbound) ([]inbound, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			items := q.items
			q.items = buf[:0]
			q.mu.Unlock()
			return items, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

// dispatch delivers notifications and answers server requests in arrival
// order until the read loop has ended and everything it read is delivered.
func (c *Client) dispatch() {
	defer close(c.done)
	var spare []inbound
	for {
		items, ok := c.inbox.take(spare)
		if !ok {
			return
		}
		for _, it := range items {
			if it.call {
				c.serve(it)
			} else {
				c.deliver(it)
			}
		}
		clear(items)
		spare = items
	}
}

// subscription is one notification handler; method "" is every method.
type subscription struct {
	method string
	fn     func(method string, params json.RawMessage)
}

// deliver calls the handlers of a notification in the order they were added.
func (c *Client) deliver(it inbound) {
	c.mu.Lock()
	subs := c.subs
	c.mu.Unlock()
	for _, s := range subs {
		if s.method == "" || s.method == it.method {
			s.fn(it.method, it.params)
		}
	}
}

// subscribe adds a notification handler and returns its remover.
func (c *Client) subscribe(method string, fn func(method string, params json.RawMessage)) (stop func()) {
	s := &subscription{method: method, fn: fn}
	c.mu.Lock()
	// Copy on write: the dispatcher iterates over a snapshot.
	c.subs = append(c.subs[:len(c.subs):len(c.subs)], s)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.subs {
			if x == s {
				c.subs = append(c.subs[:i:i], c.subs[i+1:]...)
				return
			}
		}
	}
}

// OnEveryNotification adds a handler called with every notification, its
// method and its raw params (which it may keep). Handlers run one at a time
// on the dispatcher, in arrival order; they may call the client. The
// returned stop removes the handler.
func (c *Client) OnEveryNotification(fn func(method string, params json.RawMessage)) (stop func()) {
	return c.subscribe("", fn)
}

// OnNotificationRaw adds a handler called with the raw params of every
// notification of method, as OnEveryNotification does.
func (c *Client) OnNotificationRaw(method string, fn func(params json.RawMessage)) (stop func()) {
	return c.subscribe(method, func(_ string, params json.RawMessage) { fn(params) })
}

// OnNotification adds a handler called with the decoded params of every
// notification of t's method, as Client.OnEveryNotification does. Params
// that do not decode into P are not passed on (Options.Logf is told).
func OnNotification[P any](c *Client, t protocol.NotificationType[P], fn func(*P)) (stop func()) {
	return c.subscribe(t.Method(), func(method string, params json.RawMessage) {
		p := new(P)
		if err := json.Unmarshal(params, p); err != nil {
			c.log("dropping %s: its params %.200q do not decode: %v", method, params, err)
			return
		}
		fn(p)
	})
}

// log reports what the client drops to Options.Logf.
func (c *Client) log(format string, args ...any) {
	if c.logf != nil {
		c.logf(format, args...)
	}
}

// RequestHandler answers a server request: its result is encoded with
// encoding/json (nil is null); an *protocol.Error is answered with its code and
// data, any other error with -32603. ctx ends when the client is closed.
type RequestHandler func(ctx context.Context, params json.RawMessage) (result any, err error)

// requestHandler wraps a handler so that its remover removes only it.
type requestHandler struct{ fn RequestHandler }

// OnRequestRaw sets the handler of the server's requests of method,
// replacing any before it. Handlers run on the dispatcher, in arrival order
// with notifications; they may call the client. The returned stop removes
// it.
func (c *Client) OnRequestRaw(method string, fn RequestHandler) (stop func()) {
	h := &requestHandler{fn: fn}
	c.mu.Lock()
	c.handlers[method] = h
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.handlers[method] == h {
			delete(c.handlers, method)
		}
	}
}

// OnRequest sets the handler of the server's requests of t's method, with
// params decoded into P (params that do not decode are answered -32602).
// A nil *R answers null.
func OnRequest[P, R any](c *Client, t protocol.RequestType[P, R], fn func(ctx context.Context, params *P) (*R, error)) (stop func()) {
	return c.OnRequestRaw(t.Method(), func(ctx context.Context, raw json.RawMessage) (any, error) {
		p := new(P)
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, p); err != nil {
				return nil, protocol.InvalidParams("", "%v", err)
			}
		}
		r, err := fn(ctx, p)
		if err != nil || r == nil {
			return nil, err
		}
		return r, nil
	})
}

// answeredNull are the server requests of the protocol that the client
// answers with null when no handler is set, as LSP clients do.
var answeredNull = map[string]bool{protocol.WorkDoneProgressCreateRequest.Method(): true}

// serve answers one server request.
func (c *Client) serve(it inbound) {
	c.mu.Lock()
	h := c.handlers[it.method]
	c.mu.Unlock()
	var result any
	var err error
	switch {
	case h != nil:
		result, err = h.fn(c.ctx, it.params)
	case !answeredNull[it.method]:
		err = &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "method not found: " + it.method}
	}
	var resp *jsonrpc2.Response
	if err != nil {
		resp = jsonrpc2.NewResponse(it.id, nil, toWire(err))
	} else if b, merr := json.Marshal(result); merr != nil {
		resp = jsonrpc2.NewResponse(it.id, nil, toWire(fmt.Errorf("encoding the result of %s: %w", it.method, merr)))
	} else {
		resp = jsonrpc2.NewResponse(it.id, b, nil)
	}
	if werr := c.write(context.Background(), resp); werr != nil {
		c.log("cannot answer %s: %v", it.method, werr)
	}
}
