package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// conn is one far session of a destination (one epoch): a client of its
// toolhost and the handles it started through this session. When the far
// toolhost persists the session (sessionID set), a transport that drops
// is replaced by a new one that resumes the same far session (resume.go):
// the conn, its epoch and its handles stay; only cl changes.
type conn struct {
	dest  *Destination
	epoch int      // which far session of dest this is, from 1
	argv  []string // the command that reached it, started again to resume
	// sessionID is the far session's id when it persists and the hub may
	// resume it (--destination-retry above 0); "" when a dropped transport
	// loses it at once. known, rctx and stopResume are set with it.
	sessionID string
	// rctx bounds the reconnections; stopResume gives them up.
	rctx       context.Context
	stopResume context.CancelFunc
	// starting is read-held by each call that may start a far handle
	// (runCommand, longRunning), from before it is sent until the handle
	// its answer names is tracked; a reconnection write-holds it before it
	// looks for handles no answer named (reconcile).
	starting sync.RWMutex

	mu sync.Mutex // guards the fields below
	// cl is the transport now; swapped is closed when cl is replaced by a
	// resumed one, or the conn is given up.
	cl      *client.Client
	swapped chan struct{}
	// handles are the far handles whose toolResult has not been
	// forwarded, by their far id.
	handles map[string]*handle
	// known holds every far handle an answer named, and those reconcile
	// dropped (resumable conns only): a reconnection tells by it the far
	// handles a lost answer started, and nothing of a known handle that is
	// no longer in handles is forwarded.
	known map[string]bool
	// lastSeq is the highest far seq of a toolResult received: a resume
	// asks for every one after it.
	lastSeq int64
	// uncertain counts the handle-starting calls whose transport dropped
	// before their answer: each may have started a far handle no one
	// knows, which the next reconnection cancels (reconcile).
	uncertain int
	// sendTail is closed once the last Send queued has been written:
	// Sends queued while reconnecting are written in order.
	sendTail chan struct{}
	// gone says the conn will have no other transport (giveUp).
	gone bool
	// lost is set by lose: every later notification is dropped.
	lost bool
	// closingNow says the hub is closing the connection on purpose.
	closingNow bool
}

// handle is one far handle's forwarding state. Its notifications wait in
// pending until announced: until the answer that names the handle has been
// queued to the client.
type handle struct {
	announced bool
	// tracked says an answer named it (track).
	tracked bool
	pending []note
	// commandID and startedAt are the far ids and start, for a "lost"
	// result.
	commandID string
	startedAt time.Time
	// ended says its toolResult (the far one, or "lost") has been queued
	// or sent: no second one ever is.
	ended bool
}

// note is one notification to forward.
type note struct {
	method   string
	params   json.RawMessage
	critical bool
}

func (c *conn) setClosing() {
	c.mu.Lock()
	c.closingNow = true
	c.mu.Unlock()
}

func (c *conn) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closingNow
}

// prefix is what the connection's ids get: "NAME/" for the first
// connection, "NAME#2/" for the second, and so on.
func (c *conn) prefix() string {
	if c.epoch <= 1 {
		return c.dest.name + "/"
	}
	return c.dest.name + "#" + strconv.Itoa(c.epoch) + "/"
}

// sink returns where notifications go.
func (c *conn) sink() Sink {
	h := c.dest.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sink
}

// send forwards one notification now.
func (c *conn) send(n note) {
	s := c.sink()
	if s == nil {
		return
	}
	switch {
	case n.method == protocol.NotifyToolResult:
		// The far session's seq is replaced by this session's.
		s.NotifyNumbered(n.method, n.params)
	case n.critical:
		s.NotifyCritical(n.method, n.params)
	default:
		s.Notify(n.method, n.params)
	}
}

// onNotification forwards a notification of the destination, its ids
// prefixed. Those about a handle go through the handle's state, so that
// they follow the answer that names it and the toolResult is the last and
// only one. It runs on the client's dispatcher, one notification at a
// time, in the order they arrived.
func (c *conn) onNotification(method string, params json.RawMessage) {
	far := farHandleID(params)
	n := note{method: method, params: prefixIDs(params, c.prefix()), critical: isCritical(method, params)}
	if far == "" {
		c.send(n)
		return
	}
	c.mu.Lock()
	if c.lost {
		c.mu.Unlock()
		return
	}
	if method == protocol.NotifyToolResult {
		if seq := farSeq(params); seq > c.lastSeq {
			c.lastSeq = seq
		}
	}
	h := c.handles[far]
	if h == nil {
		if c.known[far] {
			// Named by an answer and gone since (its toolResult was
			// forwarded: a resume asks only for those after lastSeq, so
			// this is a defence), or started by a request whose answer was
			// lost with a transport, and dropped (reconcile).
			c.mu.Unlock()
			return
		}
		// Before the answer that names it has even reached the hub.
		h = &handle{}
		c.handles[far] = h
	}
	if h.ended {
		c.mu.Unlock()
		return
	}
	if method == protocol.NotifyToolResult {
		h.ended = true
	}
	if !h.announced {
		h.pending = append(h.pending, n)
		c.mu.Unlock()
		return
	}
	if h.ended {
		delete(c.handles, far)
	}
	// Sent under mu, so that lose cannot slip a "lost" result in before
	// it; sending only queues.
	c.send(n)
	c.mu.Unlock()
}

// isCritical says a notification must never be dropped.
func isCritical(method string, params json.RawMessage) bool {
	switch method {
	case protocol.NotifyToolResult:
		return true
	case protocol.NotifyProgress:
		var p struct {
			Value struct {
				Kind string `json:"kind"`
			} `json:"value"`
		}
		return json.Unmarshal(params, &p) == nil && p.Value.Kind == "end"
	}
	return false
}

// track records a handle a forwarded answer named; announce later lets
// its notifications go.
func (c *conn) track(far, commandID string, startedAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.handles[far]
	if h == nil {
		h = &handle{}
		c.handles[far] = h
	}
	h.commandID, h.startedAt, h.tracked = commandID, startedAt, true
	if c.known != nil {
		c.known[far] = true
	}
}

// announce sends what waited for the answer that names the handle, and
// lets the rest go as it comes.
func (c *conn) announce(far string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.handles[far]
	if h == nil || h.announced {
		return
	}
	h.announced = true
	for _, n := range h.pending {
		c.send(n)
	}
	h.pending = nil
	if h.ended {
		delete(c.handles, far)
	}
}

// lose ends the connection's handles: each that has not had its
// toolResult gets one with status "lost" (after what it was still owed,
// and after its answer once announced).
//
// Exactly one toolResult per handle, across every transport of the far
// session: onNotification, announce and lose all decide under mu, ended
// is set by whichever queues the toolResult first, and after lose nothing
// more is forwarded. The handles live in the conn, not in a transport, so
// a toolResult the far side sends again on a resumed transport (a resume
// asks for those after lastSeq, the highest far seq received, and one
// still queued on the dead transport may come on both) finds its handle
// ended and is dropped; lose runs once, when the conn is given up (the
// far side stayed unreachable past the retries, or its session is gone),
// never while a reconnection may still bring the real result.
func (c *conn) lose(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		return
	}
	c.lost = true
	now := time.Now().UTC()
	prefix := c.prefix()
	for far, h := range c.handles {
		if h.ended {
			continue
		}
		h.ended = true
		res := lostResult(prefix, far, h, now, reason)
		b, err := json.Marshal(res)
		if err != nil {
			continue
		}
		n := note{method: protocol.NotifyToolResult, params: b, critical: true}
		if h.announced {
			c.send(n)
			delete(c.handles, far)
		} else {
			h.pending = append(h.pending, n)
		}
	}
}

// lostResult is the toolResult of a handle whose destination was lost.
func lostResult(prefix, far string, h *handle, now time.Time, reason string) protocol.ToolResult {
	started := h.startedAt
	if started.IsZero() {
		started = now
	}
	cmdID := ""
	if h.commandID != "" {
		cmdID = prefix + h.commandID
	}
	return protocol.ToolResult{
		CommandID: cmdID, HandleID: prefix + far, Status: protocol.StatusLost,
		StartedAt: started, EndedAt: now, DurationMs: now.Sub(started).Milliseconds(),
		Stderr: "toolhost: the transport to destination " + prefix[:len(prefix)-1] + " was lost: " + tailOf(reason, 2000) + "\n",
		Steps:  []protocol.StepResult{},
	}
}

// Call forwards a request to the destination, and returns its result with
// ids and artifact paths prefixed. With epoch 0 it connects the
// destination first if needed; else it goes to that far session, which
// must still be the current one (a handle's requests go where the handle
// is). If the result names a handle (longRunning; runCommand that
// yielded), its notifications wait until the caller calls the announce
// function it gets, which it must do once the answer is queued
// (AfterReply): Call passes it to onHandle. A transport that dies (or will
// not start) is DestinationUnavailable; the destination's own errors come
// back with their ids prefixed.
//
// While the far session is being resumed (its transport dropped), Call
// waits for the new transport (reconnectWait at most) and sends there. A
// request whose transport dropped after it was sent is sent again on the
// resumed one if it is idempotent (wait, readOutput, progress, readFile,
// cancel, resize); any other answers DestinationUnavailable, since it may
// have reached the far side.
func (d *Destination) Call(ctx context.Context, epoch int, method string, params any, onHandle func(announce func())) (json.RawMessage, error) {
	starts := method == protocol.MethodLongRunning || method == protocol.MethodRunCommand
	var deadline time.Time // of the wait for a reconnection
	for {
		var (
			c   *conn
			err error
		)
		if epoch == 0 {
			c, err = d.connect(ctx)
		} else {
			c, err = d.at(ctx, epoch, &deadline)
		}
		if err != nil {
			return nil, err
		}
		if starts {
			c.starting.RLock()
		}
		cl, _ := c.client()
		raw, sent, err := call(ctx, cl, method, params)
		if c.sessionID != "" {
			err = farCancelled(ctx, cl, err)
		}
		if err == nil {
			raw = c.answered(method, raw, onHandle)
			if starts {
				c.starting.RUnlock()
			}
			return raw, nil
		}
		// dropped: the transport of a far session that may be resumed
		// ended under the request.
		dropped := c.sessionID != "" && errors.Is(err, client.ErrClosed)
		inFlight := dropped && sent && !idempotent(method)
		if inFlight && starts {
			// Counted before starting is released, so that the
			// reconnection's reconcile sees it.
			c.mu.Lock()
			c.uncertain++
			c.mu.Unlock()
		}
		if starts {
			c.starting.RUnlock()
		}
		if inFlight {
			return nil, d.unavailable(inFlightReason(method, err))
		}
		if !dropped {
			return nil, c.callError(err)
		}
		if err := d.awaitSwap(ctx, c, cl, &deadline); err != nil {
			return nil, err
		}
	}
}

// idempotent says a request may be sent again when its transport dropped
// before it was answered: doing it twice is doing it once.
func idempotent(method string) bool {
	switch method {
	case protocol.MethodWait, protocol.MethodReadOutput, protocol.MethodProgress, protocol.MethodReadFile,
		protocol.MethodCancel, protocol.MethodResize:
		return true
	}
	return false
}

// call sends a request on transport cl and waits for its answer; sent
// says it was written (else the transport had already ended).
func call(ctx context.Context, cl *client.Client, method string, params any) (raw json.RawMessage, sent bool, err error) {
	p, err := cl.Send(ctx, method, params)
	if err != nil {
		// Written in part, or not at all: a far toolhost never reads a
		// frame cut short as a request.
		return nil, false, err
	}
	err = p.Wait(ctx, &raw)
	return raw, true, err
}

// farCancelWait bounds how long an answer "request cancelled" that the
// hub did not ask for waits for its transport to end.
const farCancelWait = 5 * time.Second

// farCancelled returns err, or, when it is a RequestCancelled the hub did
// not ask for (ctx goes on) and the transport cl ends within
// farCancelWait, an ErrClosed: a far toolhost cancels the requests in
// flight itself only when their connection ends (a --persist far side
// whose transport dropped detaches its session, and may still write those
// answers on a pipe that outlives the transport's client), so the request
// met the drop, as if no answer had come.
func farCancelled(ctx context.Context, cl *client.Client, err error) error {
	var e *protocol.Error
	if !errors.As(err, &e) || e.Code != protocol.CodeRequestCancelled || ctx.Err() != nil {
		return err
	}
	t := time.NewTimer(farCancelWait)
	defer t.Stop()
	select {
	case <-cl.Done():
		return fmt.Errorf("%w: the far side cancelled the request as its connection ended (%v)", client.ErrClosed, err)
	case <-ctx.Done():
	case <-t.C:
	}
	return err
}

// answered tracks the handle an answer names, and returns the answer with
// its ids prefixed.
func (c *conn) answered(method string, raw json.RawMessage, onHandle func(announce func())) json.RawMessage {
	switch method {
	case protocol.MethodReadFile, protocol.MethodWriteFile:
		// No ids, and content that may be large: only the file's path,
		// the destination's, is named as its artifacts are.
		return prefixPath(raw, c.prefix())
	case protocol.MethodLongRunning, protocol.MethodRunCommand:
		var named struct {
			HandleID  string    `json:"handleId"`
			CommandID string    `json:"commandId"`
			StartedAt time.Time `json:"startedAt"`
			Status    string    `json:"status"`
		}
		_ = json.Unmarshal(raw, &named)
		if named.HandleID != "" && (method == protocol.MethodLongRunning || named.Status == string(protocol.StatusRunning)) {
			c.track(named.HandleID, named.CommandID, named.StartedAt)
			if onHandle != nil {
				onHandle(func() { c.announce(named.HandleID) })
			} else {
				c.announce(named.HandleID)
			}
		}
	}
	return prefixIDs(raw, c.prefix())
}

// lookup returns far session epoch while it is the current one, ready or
// reconnecting, without waiting; a handle of an earlier one went with it.
func (d *Destination) lookup(epoch int) (c *conn, ready bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn == nil || d.conn.epoch != epoch {
		why := "the connection that ran the handle was lost, and its handles with it"
		if d.conn == nil && d.state == protocol.DestinationLost && d.reason != "" {
			why += ": " + d.reason
		}
		return nil, false, d.unavailable(why)
	}
	return d.conn, d.resumed == nil, nil
}

// at returns far session epoch while it is the current one, waiting for a
// reconnection under way until *deadline (set to reconnectWait from now
// if zero).
func (d *Destination) at(ctx context.Context, epoch int, deadline *time.Time) (*conn, error) {
	for {
		c, ready, err := d.lookup(epoch)
		if err != nil || ready {
			return c, err
		}
		d.mu.Lock()
		ch := d.resumed
		d.mu.Unlock()
		if ch == nil {
			continue
		}
		if err := d.awaitResume(ctx, ch, deadline); err != nil {
			return nil, err
		}
	}
}

// Notify forwards a notification to the destination, if it is connected.
func (d *Destination) Notify(ctx context.Context, method string, params any) {
	if c := d.current(); c != nil {
		cl, _ := c.client()
		_ = cl.Notify(ctx, method, params)
	}
}

// callError maps the error of a forwarded call.
func (c *conn) callError(err error) error {
	if errors.Is(err, client.ErrClosed) {
		return c.dest.unavailable(err.Error())
	}
	var e *protocol.Error
	if errors.As(err, &e) {
		if e.Data != nil {
			prefix := c.prefix()
			if e.Data.HandleID != "" {
				e.Data.HandleID = prefix + e.Data.HandleID
			}
			if e.Data.Partial != nil {
				b, _ := json.Marshal(e.Data.Partial)
				var p protocol.ToolResult
				if json.Unmarshal(prefixIDs(b, prefix), &p) == nil {
					e.Data.Partial = &p
				}
			}
		}
		return e
	}
	return err
}

// Send forwards a request to far session epoch of a destination, and
// returns the wait for its answer, ids prefixed. Requests sent one after
// another reach the destination in that order: while the destination is
// ready, Send writes the request before it returns; while it reconnects,
// the request is queued, and the wait writes it once the far session is
// resumed (after those queued before it), or answers
// DestinationUnavailable when it is not. A far session that is no longer
// the current one is DestinationUnavailable: its handles were lost with
// it. Send never waits for a reconnection itself: it runs on the read
// loop (rpc.HandleOrdered).
func (d *Destination) Send(ctx context.Context, epoch int, method string, params any) (wait func(context.Context) (json.RawMessage, error), err error) {
	c, ready, err := d.lookup(epoch)
	if err != nil {
		return nil, err
	}
	prev, mine := c.queueSend()
	if ready && isClosed(prev) {
		cl, _ := c.client()
		p, err := cl.Send(ctx, method, params)
		if err == nil {
			close(mine)
			return c.answerOf(method, cl, p), nil
		}
		if c.sessionID == "" || !errors.Is(err, client.ErrClosed) {
			close(mine)
			return nil, c.callError(err)
		}
		// Not written (a frame cut short is never read as a request): the
		// transport has just ended, and the resumed one takes it, below.
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		select {
		case <-prev:
		case <-ctx.Done():
			go func() { <-prev; close(mine) }() // owned by the send chain: ends once prev is
			return nil, context.Cause(ctx)
		}
		var deadline time.Time
		for {
			c, err := d.at(ctx, epoch, &deadline)
			if err != nil {
				close(mine)
				return nil, err
			}
			cl, _ := c.client()
			p, err := cl.Send(ctx, method, params)
			if err != nil && errors.Is(err, client.ErrClosed) {
				// Not written: the transport had ended; the next one takes it.
				if err := d.awaitSwap(ctx, c, cl, &deadline); err != nil {
					close(mine)
					return nil, err
				}
				continue
			}
			close(mine)
			if err != nil {
				return nil, c.callError(err)
			}
			return c.answerOf(method, cl, p)(ctx)
		}
	}, nil
}

// queueSend takes the next place in the order of Sends: prev is closed
// once the one before has been written, and the caller closes mine once
// its own has (or will never be).
func (c *conn) queueSend() (prev <-chan struct{}, mine chan struct{}) {
	mine = make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.sendTail
	if p == nil {
		p = closedChan
	}
	c.sendTail = mine
	return p, mine
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// isClosed says ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// answerOf returns the wait for a sent request's answer, ids prefixed.
func (c *conn) answerOf(method string, cl *client.Client, p *client.Pending) func(context.Context) (json.RawMessage, error) {
	return func(ctx context.Context) (json.RawMessage, error) {
		var raw json.RawMessage
		if err := p.Wait(ctx, &raw); err != nil {
			if c.sessionID != "" {
				err = farCancelled(ctx, cl, err)
			}
			if c.sessionID != "" && errors.Is(err, client.ErrClosed) {
				return nil, c.dest.unavailable(inFlightReason(method, err))
			}
			return nil, c.callError(err)
		}
		return prefixIDs(raw, c.prefix()), nil
	}
}

// inFlightReason says why a request that is not idempotent answers
// DestinationUnavailable when its transport dropped after it was sent.
func inFlightReason(method string, err error) string {
	return "the transport dropped while " + method + " was in flight, so it may or may not have reached the far side " +
		"(the far session is being resumed; a handle such a request started there, which no answer named, is cancelled): " + err.Error()
}
