package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.lsp.dev/jsonrpc2"
)

// Coalescable is a notification that later updates merge into while it waits
// to be written, so that a slow client slows notifications instead of growing
// the server's memory: heartbeats keep the latest, output appends up to a cap.
type Coalescable interface {
	// Method is the notification's method.
	Method() string
	// Merge folds newer, an update with the same key, into the pending
	// notification and returns the result.
	Merge(newer Coalescable) Coalescable
	// Params returns the params to send. The writer calls it once, when the
	// notification is written, so it may assign sequence numbers.
	Params() any
}

// Outbox limits.
const (
	// outboxHighWater pauses reading requests while more than this many
	// bytes of messages wait to be written.
	outboxHighWater = 8 << 20
	// outboxBudget drops droppable notifications while more than this many
	// bytes wait; responses and critical notifications are never dropped.
	outboxBudget = 32 << 20
)

// outItem is one message waiting to be written.
type outItem struct {
	body []byte      // an encoded message; nil for a coalesced item
	key  string      // the coalescing key of a coalesced item
	pend Coalescable // the pending coalesced notification
	// then, if set, runs once the message is written to the output; never
	// if it is not (the output failed, or the outbox stopped first).
	then func()
}

// outbox is the one outbound writer of a session. Every message the server
// sends goes through it, in the order it was queued: responses,
// notifications, and the server's requests to the client.
// The writer goroutine (run) is the only one that writes to the output.
//
// Invariants: a response or a critical notification, once queued, is written
// unless the output fails or flush gives up on a client that stopped
// reading; a coalesced notification keeps its first place in the queue and
// absorbs later updates until written.
type outbox struct {
	log *slog.Logger

	mu sync.Mutex
	// queue, pending, queued, closed and broken are guarded by mu.
	queue   []*outItem          // FIFO of messages to write
	pending map[string]*outItem // coalesced items still in queue, by key
	queued  int64               // bytes of encoded messages in queue
	closed  bool                // no more messages are accepted
	broken  bool                // the output failed; everything is discarded
	writing bool                // a message is being written, by run or by sendNow
	wake    chan struct{}       // signals the writer (capacity 1)
	room    chan struct{}       // closed, and set nil, once queued falls to the high-water mark (or the outbox stops)
	onDrain func()              // called after a write lowers queued; set before run

	// fits, if set, reports whether n more bytes fit in the output without
	// a write blocking; set before run.
	fits func(n int) bool

	dropped atomic.Int64  // droppable notifications dropped over budget
	done    chan struct{} // closed when run returns

	w interface { // owned by run
		WriteFrame(ctx context.Context, data []byte) (int64, error)
	}
}

// frameOverhead bounds what framing adds to a message: a Content-Length
// header, or a newline.
const frameOverhead = 64

// newOutbox returns an outbox that writes to out in the given framing
// ("header" or "ndjson"), framed by the library's own streams.
func newOutbox(out io.Writer, framing string, log *slog.Logger) *outbox {
	rwc := writeOnly{out}
	var stream jsonrpc2.Stream
	if framing == FramingHeader {
		stream = jsonrpc2.NewHeaderStream(rwc)
	} else {
		stream = jsonrpc2.NewNDJSONStream(rwc)
	}
	o := &outbox{
		log:     log,
		pending: make(map[string]*outItem),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	fw, ok := stream.(interface {
		WriteFrame(ctx context.Context, data []byte) (int64, error)
	})
	if !ok {
		panic("jsonrpc2 stream has no WriteFrame")
	}
	o.w = fw
	return o
}

// writeOnly adapts an io.Writer to the io.ReadWriteCloser a stream wants.
type writeOnly struct{ io.Writer }

func (writeOnly) Read([]byte) (int, error) { return 0, io.EOF }
func (writeOnly) Close() error             { return nil }

// signal wakes the writer. The caller holds mu.
func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// send queues an encoded message. A droppable message is dropped, and
// counted, while the queue is over budget.
func (o *outbox) send(body []byte, droppable bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.broken {
		return
	}
	if droppable && o.queued > outboxBudget {
		o.dropped.Add(1)
		return
	}
	o.queue = append(o.queue, &outItem{body: body})
	o.queued += int64(len(body))
	o.signal()
}

// sendThen queues an encoded message that is never dropped, and runs then
// once it has been written to the output.
func (o *outbox) sendThen(body []byte, then func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.broken {
		return
	}
	o.queue = append(o.queue, &outItem{body: body, then: then})
	o.queued += int64(len(body))
	o.signal()
}

// sendNow writes an encoded response from the calling goroutine when
// nothing is queued or being written, and otherwise queues it as send
// does. Handing an answer to the writer goroutine woke that goroutine, and
// a thread to run it; on the read loop, which then went back to a read
// that holds its thread in the kernel, the answer waited for the runtime
// to notice, which was most of an inline request's round trip.
// Unless mayBlock (a handler's goroutine, which a client that stops
// reading may hold up), it writes only what the output has room for
// without blocking (o.fits), so that such a client never stops the read
// loop: without room, or without a way to tell, the answer is queued.
func (o *outbox) sendNow(body []byte, mayBlock bool) {
	o.mu.Lock()
	if o.closed || o.broken || o.writing || len(o.queue) > 0 ||
		(!mayBlock && (o.fits == nil || !o.fits(len(body)+frameOverhead))) {
		o.mu.Unlock()
		o.send(body, false)
		return
	}
	o.writing = true
	o.mu.Unlock()
	_, err := o.w.WriteFrame(context.Background(), body)
	o.mu.Lock()
	o.writing = false
	if err != nil {
		o.broken = true
		o.queue, o.pending = nil, nil
	}
	o.signal() // run writes what was queued meanwhile, or sees the outbox broken
	o.mu.Unlock()
	if o.onDrain != nil {
		o.onDrain()
	}
	if err != nil {
		o.log.Warn("output failed; discarding further messages", "err", err)
	}
}

// notify encodes and queues a notification.
func (o *outbox) notify(method string, params any, droppable bool) {
	body, err := encodeNotification(method, params)
	if err != nil {
		o.log.Error("cannot encode notification", "method", method, "err", err)
		return
	}
	o.send(body, droppable)
}

// coalesce queues c under key, or merges it into the pending item with that
// key.
func (o *outbox) coalesce(key string, c Coalescable) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.broken {
		return
	}
	if it, ok := o.pending[key]; ok {
		it.pend = it.pend.Merge(c)
		return
	}
	it := &outItem{key: key, pend: c}
	o.pending[key] = it
	o.queue = append(o.queue, it)
	o.signal()
}

// waitRoom waits until the queue is at or under the high-water mark, so
// that a sender that must not drop (events) slows down with the client
// instead of growing the queue. It returns at once when the outbox no
// longer takes messages, and the cause when ctx ends.
func (o *outbox) waitRoom(ctx context.Context) error {
	for {
		o.mu.Lock()
		if o.queued <= outboxHighWater || o.closed || o.broken {
			o.mu.Unlock()
			return nil
		}
		if o.room == nil {
			o.room = make(chan struct{})
		}
		ch := o.room
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// hasRoom reports whether the queue is under the high-water mark (or the
// outbox no longer takes messages), so that a client that stops reading
// stops the server reading its requests instead of growing the queue.
func (o *outbox) hasRoom() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued <= outboxHighWater || o.closed || o.broken
}

// next takes the next item, waiting for one. It returns nil once the outbox
// is closed and empty, or broken.
func (o *outbox) next() *outItem {
	for {
		o.mu.Lock()
		if o.broken {
			o.mu.Unlock()
			return nil
		}
		if len(o.queue) > 0 && !o.writing {
			o.writing = true
			it := o.queue[0]
			o.queue[0] = nil
			o.queue = o.queue[1:]
			if len(o.queue) == 0 {
				o.queue = nil // let the backing array go
			}
			if it.pend != nil {
				delete(o.pending, it.key)
			}
			o.mu.Unlock()
			return it
		}
		closed := o.closed && len(o.queue) == 0
		o.mu.Unlock()
		if closed {
			return nil
		}
		<-o.wake
	}
}

// run writes queued messages until the outbox is closed and drained or the
// output fails. The session's owner runs it and waits on done.
func (o *outbox) run() {
	defer close(o.done)
	ctx := context.Background()
	for {
		it := o.next()
		if it == nil {
			return
		}
		body := it.body
		if it.pend != nil {
			var err error
			body, err = encodeNotification(it.pend.Method(), it.pend.Params())
			if err != nil {
				o.log.Error("cannot encode notification", "method", it.pend.Method(), "err", err)
				o.mu.Lock()
				o.writing = false
				o.mu.Unlock()
				continue
			}
		}
		_, err := o.w.WriteFrame(ctx, body)
		o.mu.Lock()
		o.writing = false
		if it.pend == nil {
			o.queued -= int64(len(it.body))
		}
		if err != nil {
			o.broken = true
			o.queue, o.pending = nil, nil
		}
		if o.room != nil && (o.queued <= outboxHighWater || o.broken) {
			close(o.room)
			o.room = nil
		}
		o.mu.Unlock()
		if o.onDrain != nil {
			o.onDrain()
		}
		if err != nil {
			o.log.Warn("output failed; discarding further messages", "err", err)
			return
		}
		if it.then != nil {
			it.then()
		}
	}
}

// close stops accepting messages; run writes what is queued and returns.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.signal()
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	o.mu.Unlock()
	if o.onDrain != nil {
		o.onDrain()
	}
}

// flush closes the outbox and waits until what is queued is written, or ctx
// ends (a client that stopped reading).
func (o *outbox) flush(ctx context.Context) error {
	o.close()
	select {
	case <-o.done:
		return nil
	case <-ctx.Done():
		return errors.New("client stopped reading; undelivered messages left")
	}
}

// encodeNotification encodes a notification envelope with params encoded by
// encoding/json.
func encodeNotification(method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return jsonrpc2.AppendNotification(nil, method, p), nil
}
