package streamable

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// errRejected is the SDK's jsonrpc2.ErrRejected (which is internal): an
// error of Write wrapping it fails that one message, not the connection.
// Errors match by code.
var errRejected = &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}

// errClosed is the error of a Write once the session has ended.
var errClosed = errors.New("session closed")

// eventOverhead is what an event is counted for beyond its data, so that
// many empty events (priming events) are bounded too.
const eventOverhead = 64

// Transport is one session (or one ephemeral exchange): an sdk.Transport.
type Transport struct {
	// Splice, set by Open, is applied to each response's result bytes
	// before it is written; written lists callbacks to run once that
	// response is on the wire (after its last byte was written and
	// flushed, before anything written after it on that stream). A
	// callback runs with no lock held and may send on the session. nil:
	// none.
	Splice func(result []byte) (out []byte, written []func())

	h         *Handler
	id        string // the Mcp-Session-Id; "" for an ephemeral exchange
	principal string
	ephemeral bool
	// incoming carries the client's messages to Read; unbuffered, so an
	// idle session holds none.
	incoming  chan jsonrpc.Message
	done      chan struct{} // closed when the session ends, under mu
	connected atomic.Bool

	mu sync.Mutex
	// closed is set, and done closed, when the session ends.
	closed bool
	// streams holds the session's streams that are live or have events
	// kept, by id: the standalone stream and the POSTs' streams.
	streams map[string]*stream
	// calls maps each unanswered incoming call to the stream of the POST
	// that carried it.
	calls map[jsonrpc.ID]*stream
	// standalone is the stream of the GET requests; nil until needed.
	standalone *stream
	// exchange is an ephemeral exchange's one stream.
	exchange *stream
	// kept is the bytes of events kept (with eventOverhead each); seq
	// numbers events in the order they were sent, across streams, so
	// that the oldest are dropped first.
	kept int
	seq  uint64
	// serving counts the HTTP requests for the session in flight; idle
	// (the timer of Options.SessionTimeout) runs while there is none and
	// no call is unanswered, since idleSince.
	serving   int
	idle      *time.Timer
	idleSince time.Time
	// initID is the id of the initialize request that opened the session;
	// initFailed is set if it was answered with an error.
	initID     jsonrpc.ID
	initFailed bool
}

// stream is one logical SSE stream of a session: the answer to one POST
// carrying calls, or the standalone stream of the GET requests. A POST's
// stream ends once its calls are answered; the standalone stream never
// ends. A session's events are kept, within the bound of
// Options.EventBytes (the oldest dropped first, whatever their stream),
// so that a client whose connection dropped can fetch them with GET and
// Last-Event-ID: even a stream written whole, since a write that
// succeeded may not have reached a client whose connection was cut.
//
// All fields but id and resumable are guarded by the Transport's mu.
type stream struct {
	id string
	// resumable is set for a session's streams: their events carry ids
	// and are kept. An ephemeral exchange's are neither.
	resumable bool
	// events holds the kept events, by index, with no gap.
	events []event
	// next is the index of the next event.
	next int
	// unsent is the lowest index never written on any connection.
	unsent int
	// calls counts the stream's unanswered calls; ended is set once they
	// are all answered (never for the standalone stream).
	calls int
	ended bool
	// out is the HTTP request writing the stream, nil if none.
	out *outlet
}

// event is one SSE event of a stream: a message, or with no data a
// priming event.
type event struct {
	idx  int
	seq  uint64
	data []byte
	// status, for an ephemeral exchange's error response written first, is
	// the HTTP status to answer it with as application/json (SEP-2575).
	status int
	// written are the callbacks of Splice, run once the event is written
	// (or dropped unwritten, or the session ends).
	written []func()
}

// outlet is an HTTP request writing a stream: held, by the request's own
// goroutine (pump), or for a GET on HTTP/1.1 parked, its connection
// written by a goroutine that runs only while there is something to write
// (parked.go).
type outlet struct {
	// wake is signalled when the stream has events to write or the outlet
	// was replaced, while the outlet is held.
	wake chan struct{}
	// sent is the index of the next event to write; guarded by the
	// Transport's mu.
	sent int
	// parked is set once the outlet is parked; guarded by the Transport's
	// mu.
	parked *parked
}

// wakeLocked tells o, the outlet of s, that s has events to write, or
// that o was replaced or the session ended: a held outlet's request is
// signalled, without waiting (one signal pending is enough, since it
// writes all there is); a parked one's drain is started if it is not
// running.
func (t *Transport) wakeLocked(s *stream, o *outlet) {
	if o.parked != nil {
		t.drainLocked(s, o)
		return
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Connect returns the session's connection; it may be called once.
func (t *Transport) Connect(context.Context) (sdk.Connection, error) {
	if !t.connected.CompareAndSwap(false, true) {
		return nil, errors.New("transport already connected")
	}
	return (*conn)(t), nil
}

// SupportsProtocolVersion reports whether the transport serves version:
// a session (stateful) every version before 2026-07-28, an ephemeral
// exchange 2026-07-28 and later only.
func (t *Transport) SupportsProtocolVersion(v string) bool {
	return slices.Contains(sdk.SupportedProtocolVersions(), v) && (v >= version20260728) == t.ephemeral
}

// ID returns the Mcp-Session-Id ("" for an ephemeral exchange).
func (t *Transport) ID() string { return t.id }

// Principal returns who opened the session (Options.Principal).
func (t *Transport) Principal() string { return t.principal }

// Ephemeral reports whether t serves one POST of the 2026-07-28 protocol
// rather than a session.
func (t *Transport) Ephemeral() bool { return t.ephemeral }

// Done returns a channel closed once the session has ended (DELETE, idle
// timeout, Close, Handler.Close).
func (t *Transport) Done() <-chan struct{} { return t.done }

// Notify sends a notification the SDK has no method for, routed as Write
// routes a message with ctx.
func (t *Transport) Notify(ctx context.Context, method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		return err
	}
	return t.send(data, nil, 0, false, jsonrpc.ID{}, requestOf(ctx))
}

// Close ends the session: Done is closed, Read returns io.EOF, the
// streams' requests return, and its id is 404 from then on. It may be
// called many times, concurrently.
func (t *Transport) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.done)
	if t.idle != nil {
		t.idle.Stop()
	}
	var written []func()
	for _, s := range t.streams {
		if o := s.out; o != nil && o.parked != nil {
			// Its drain ends it, at once if it is waiting for a client.
			o.parked.hurry()
			t.wakeLocked(s, o)
		}
		for _, ev := range s.events {
			written = append(written, ev.written...)
		}
		s.events = nil
	}
	t.streams, t.calls, t.standalone, t.exchange, t.kept = nil, nil, nil, nil, 0
	t.mu.Unlock()
	t.h.forget(t)
	run(written)
}

// run calls each of fs in turn.
func run(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// conn is a Transport's sdk.Connection.
type conn Transport

// Read returns the next message from the client; io.EOF once the session
// has ended.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msg := <-c.incoming:
		return msg, nil
	case <-c.done:
		return nil, io.EOF
	}
}

// Write sends msg to the client. A response goes on the stream of the
// POST that carried its request; anything else on that of the request
// WithRequest marked ctx with while it is open, else on the standalone
// stream (an ephemeral exchange's one stream). A request (elicitation) on
// an ephemeral exchange is refused: its answer would have no way back.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	t := (*Transport)(c)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		m = withCode(m)
		data, written, err := t.encodeResponse(m)
		if err != nil {
			run(written)
			return err
		}
		status := 0
		if t.ephemeral {
			status = errorStatus(m)
		}
		return t.send(data, written, status, m.Error != nil, m.ID, jsonrpc.ID{})
	case *jsonrpc.Request:
		if m.IsCall() && t.ephemeral {
			return fmt.Errorf("%w: %s: an ephemeral (stateless) exchange cannot send requests to the client", errRejected, m.Method)
		}
		data, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			return err
		}
		return t.send(data, nil, 0, false, jsonrpc.ID{}, requestOf(ctx))
	}
	return fmt.Errorf("unknown message type %T", msg)
}

// Close ends the session.
func (c *conn) Close() error {
	(*Transport)(c).Close()
	return nil
}

// SessionID returns the Mcp-Session-Id ("" for an ephemeral exchange).
func (c *conn) SessionID() string { return c.id }

// codeNotInitialized is the error of a request before initialize.
const codeNotInitialized = -32002

// withCode returns r, its error given a JSON-RPC code if the SDK sent it
// without one, as the stdio transport does: -32002 for a request before
// initialize, -32603 for anything else, and a code of 0 (which JSON-RPC
// does not define) as -32600.
func withCode(r *jsonrpc.Response) *jsonrpc.Response {
	if r.Error == nil {
		return r
	}
	var we *jsonrpc.Error
	switch {
	case errors.As(r.Error, &we) && we.Code != 0:
		return r
	case we != nil:
		return &jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: we.Message, Data: we.Data}}
	}
	code, msg := int64(jsonrpc.CodeInternalError), r.Error.Error()
	if strings.Contains(msg, "invalid during session initialization") {
		code, msg = codeNotInitialized, msg+": send initialize first"
	}
	return &jsonrpc.Response{ID: r.ID, Error: &jsonrpc.Error{Code: code, Message: msg}}
}

// encodeResponse encodes a response, its result through Splice. A result
// is already JSON, compact (the SDK encoded it): it is written as it is.
func (t *Transport) encodeResponse(r *jsonrpc.Response) (data []byte, written []func(), err error) {
	if r.Error != nil || r.Result == nil {
		data, err = jsonrpc.EncodeMessage(r)
		return data, nil, err
	}
	id, err := json.Marshal(r.ID.Raw())
	if err != nil {
		return nil, nil, err
	}
	result := []byte(r.Result)
	if t.Splice != nil {
		result, written = t.Splice(result)
	}
	b := make([]byte, 0, len(result)+len(id)+40)
	b = append(append(append(append(b, `{"jsonrpc":"2.0","id":`...), id...), `,"result":`...), result...)
	return append(b, '}'), written, nil
}

// errorStatus is the HTTP status SEP-2575 gives an error response of the
// 2026-07-28 protocol (0: none, the error goes as any message).
func errorStatus(r *jsonrpc.Response) int {
	var we *jsonrpc.Error
	if r.Error == nil || !errors.As(r.Error, &we) {
		return 0
	}
	switch we.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, sdk.CodeUnsupportedProtocolVersion, sdk.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// send routes one encoded message (see Write) and queues it on its
// stream. responseTo is the id of the request it answers, if it is a
// response (failed: an error response); related the request WithRequest
// named, if any.
func (t *Transport) send(data []byte, written []func(), status int, failed bool, responseTo, related jsonrpc.ID) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		run(written)
		return errClosed
	}
	var s *stream
	if responseTo.IsValid() {
		s = t.calls[responseTo]
		if s == nil {
			t.mu.Unlock()
			run(written)
			return fmt.Errorf("%w: no request %v is waiting for its response", errRejected, responseTo.Raw())
		}
		delete(t.calls, responseTo)
		if s.calls--; s.calls == 0 {
			s.ended = true
		}
		if failed && responseTo == t.initID {
			t.initFailed = true
		}
		t.touchLocked()
	} else if related.IsValid() && t.calls[related] != nil {
		s = t.calls[related]
	} else if t.ephemeral {
		s = t.exchange
		if s == nil || s.ended {
			t.mu.Unlock()
			return fmt.Errorf("%w: the exchange has ended", errRejected)
		}
	} else {
		s = t.standaloneLocked()
	}
	dropped := t.appendLocked(s, event{data: data, status: status, written: written})
	t.mu.Unlock()
	run(dropped)
	return nil
}

// standaloneLocked returns the standalone stream, made if need be.
func (t *Transport) standaloneLocked() *stream {
	if t.standalone == nil {
		t.standalone = &stream{id: rand.Text(), resumable: true}
		t.streams[t.standalone.id] = t.standalone
	}
	return t.standalone
}

// appendLocked adds an event to s, wakes its outlet, and drops the
// session's oldest kept events while over the bound of
// Options.EventBytes; it returns the callbacks of the dropped events that
// were never written.
func (t *Transport) appendLocked(s *stream, ev event) (dropped []func()) {
	t.seq++
	ev.idx, ev.seq = s.next, t.seq
	s.next++
	s.events = append(s.events, ev)
	t.kept += len(ev.data) + eventOverhead
	if s.out != nil {
		t.wakeLocked(s, s.out)
	}
	for t.kept > t.h.opts.EventBytes {
		var oldest *stream
		for _, o := range t.streams {
			if len(o.events) > 0 && (oldest == nil || o.events[0].seq < oldest.events[0].seq) {
				oldest = o
			}
		}
		if oldest == nil || oldest == s && len(s.events) == 1 {
			break // the event just added is kept, however large
		}
		ev := oldest.events[0]
		oldest.events[0] = event{}
		oldest.events = oldest.events[1:]
		t.kept -= len(ev.data) + eventOverhead
		dropped = append(dropped, ev.written...)
		if len(oldest.events) == 0 && oldest.ended && oldest.out == nil {
			delete(t.streams, oldest.id)
		}
	}
	return dropped
}

// touchLocked starts or stops the idle timer as the session has become
// idle (no HTTP request in flight, no call unanswered) or busy.
func (t *Transport) touchLocked() {
	d := t.h.opts.SessionTimeout
	if d <= 0 || t.ephemeral || t.closed {
		return
	}
	if t.serving > 0 || len(t.calls) > 0 {
		if t.idle != nil {
			t.idle.Stop()
		}
		return
	}
	t.idleSince = time.Now()
	if t.idle == nil {
		t.idle = time.AfterFunc(d, t.expire)
	} else {
		t.idle.Reset(d)
	}
}

// expire closes the session if it has been idle for SessionTimeout, else
// sets the timer for the rest of it. A parked stream (parked.go) whose
// client is still there keeps the session open, as a held one does
// (serving): the timer starts again.
func (t *Transport) expire() {
	t.mu.Lock()
	if t.closed || t.serving > 0 || len(t.calls) > 0 {
		t.mu.Unlock()
		return
	}
	if left := t.h.opts.SessionTimeout - time.Since(t.idleSince); left > 0 {
		t.idle.Reset(left)
		t.mu.Unlock()
		return
	}
	type parkedOutlet struct {
		s *stream
		o *outlet
		p *parked
	}
	var parkedOutlets []parkedOutlet
	for _, s := range t.streams {
		if o := s.out; o != nil && o.parked != nil {
			parkedOutlets = append(parkedOutlets, parkedOutlet{s, o, o.parked})
		}
	}
	t.mu.Unlock()
	live := false
	var gone []parkedOutlet
	for _, po := range parkedOutlets {
		if po.p.alive() {
			live = true
		} else {
			gone = append(gone, po)
		}
	}
	if live {
		t.mu.Lock()
		if !t.closed {
			for _, po := range gone {
				if po.s.out == po.o {
					t.dropLocked(po.s, po.o)
				}
			}
			t.touchLocked()
		}
		t.mu.Unlock()
		t.h.log.Debug("MCP session idle, kept open: a client holds its stream", "session", t.id, "gone", len(gone))
		return
	}
	t.mu.Lock()
	busy := t.serving > 0 || len(t.calls) > 0 // since the probes began
	t.mu.Unlock()
	if busy {
		return
	}
	t.h.log.Info("MCP session closed: idle", "session", t.id, "timeout", t.h.opts.SessionTimeout)
	t.Close()
}

// enter counts an HTTP request for the session in flight; false if the
// session has ended.
func (t *Transport) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.serving++
	t.touchLocked()
	return true
}

// leave ends what enter counted.
func (t *Transport) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.serving--
	t.touchLocked()
}

// pump writes s's events on w from o.sent on, until s has ended and all
// are written, the request's ctx ends (the client went away), the outlet
// is replaced (a GET resuming the stream), or the session ends. It is run
// by the HTTP request's own goroutine; a Write only queues the event and
// signals it. The callbacks of each event run after it was written and
// flushed, before the next is written, with no lock held. (A GET's
// outlet on HTTP/1.1 is parked instead: parked.go.)
func (t *Transport) pump(ctx context.Context, w http.ResponseWriter, s *stream, o *outlet, start func(first *event) bool) {
	rc := http.NewResponseController(w)
	started := start == nil
	defer func() {
		t.mu.Lock()
		t.releaseLocked(s, o)
		t.mu.Unlock()
	}()
	for {
		t.mu.Lock()
		if s.out != o || t.closed {
			t.mu.Unlock()
			return
		}
		batch, gap := t.takeLocked(s, o)
		t.mu.Unlock()

		n, err := writeAll(batch, func(ev *event) error {
			if !started {
				started = true
				if start(ev) {
					return nil // it was the whole answer
				}
			}
			return writeEvent(w, rc, s, ev)
		})

		t.mu.Lock()
		finished := t.advanceLocked(s, o, n, err == nil && !gap)
		t.mu.Unlock()
		if err != nil || gap || finished {
			return
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			return
		case <-t.done:
			return
		}
	}
}

// writeAll writes the events of batch in turn with write, until one
// fails, and returns how many were written. The callbacks of each event
// run after it was written, or once a write before it has failed.
func writeAll(batch []event, write func(*event) error) (n int, err error) {
	for i := range batch {
		ev := &batch[i]
		if err == nil {
			if err = write(ev); err == nil {
				n++
			}
		}
		run(ev.written)
	}
	return n, err
}

// takeLocked returns the events of s that o writes next, their callbacks
// moved from the kept events to the batch (so that each runs once); gap
// is set if some were dropped before o wrote them, which ends o (the
// client resumes, and is told).
func (t *Transport) takeLocked(s *stream, o *outlet) (batch []event, gap bool) {
	if o.sent >= s.next {
		return nil, false
	}
	first := s.next - len(s.events)
	if o.sent < first {
		return nil, true
	}
	batch = slices.Clone(s.events[o.sent-first:])
	for i := range batch {
		s.events[o.sent-first+i].written = nil
	}
	return batch, false
}

// advanceLocked records that o wrote n more events of s, and reports
// whether o is finished: ok (every write succeeded, no gap) and s ended
// with all its events written.
func (t *Transport) advanceLocked(s *stream, o *outlet, n int, ok bool) (finished bool) {
	if n > 0 {
		o.sent += n
		s.unsent = max(s.unsent, o.sent)
		// Nothing is kept of an ephemeral exchange once written.
		for !s.resumable && len(s.events) > 0 && s.events[0].idx < o.sent {
			t.kept -= len(s.events[0].data) + eventOverhead
			s.events[0] = event{}
			s.events = s.events[1:]
		}
	}
	// A stream written whole is still kept: a write that succeeded may
	// not have reached a client whose connection was cut.
	return ok && s.ended && o.sent == s.next
}

// releaseLocked ends o's hold on s, if it still has it: s is left for a
// GET to resume, or forgotten once there is nothing left of it to resume.
func (t *Transport) releaseLocked(s *stream, o *outlet) {
	if s.out != o {
		return
	}
	s.out = nil
	if s.ended && len(s.events) == 0 && t.streams[s.id] == s {
		delete(t.streams, s.id) // nothing left to resume
	}
}

// writeEvent writes one SSE event and flushes it.
func writeEvent(w io.Writer, rc *http.ResponseController, s *stream, ev *event) error {
	if _, err := w.Write(appendEvent(make([]byte, 0, len(ev.data)+len(s.id)+32), s, ev)); err != nil {
		return err
	}
	return rc.Flush()
}

// appendEvent appends ev, an event of s, to b as SSE.
func appendEvent(b []byte, s *stream, ev *event) []byte {
	if s.resumable {
		b = fmt.Appendf(b, "id: %s_%d\n", s.id, ev.idx)
	}
	data := ev.data
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		b = append(append(append(b, "data: "...), line...), '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(b, '\n')
}
