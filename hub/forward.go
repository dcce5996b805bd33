package hub

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// conn is one connection to a destination: a client of its toolhost and
// the handles it started through this session.
type conn struct {
	dest  *Destination
	epoch int            // which connection of dest this is, from 1
	c     *client.Client // set before the connection is shared

	mu sync.Mutex // guards the fields below
	// handles are the far handles whose toolResult has not been
	// forwarded, by their far id.
	handles map[string]*handle
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
	pending   []note
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
	h := c.handles[far]
	if h == nil {
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
	h.commandID, h.startedAt = commandID, startedAt
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
// and after its answer once announced). Exactly one toolResult per
// handle: onNotification, announce and lose all decide under mu, ended is
// set by whichever queues the toolResult first, and after lose nothing
// more is forwarded.
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
// destination first if needed; else it goes to that connection, which must
// still be the current one (a handle's requests go where the handle is). If
// the result names a handle (longRunning; runCommand that yielded), its
// notifications wait until the caller calls the announce function it
// gets, which it must do once the answer is queued (AfterReply): Call
// passes it to onHandle. A transport that dies (or will not start) is
// DestinationUnavailable; the destination's own errors come back with
// their ids prefixed.
func (d *Destination) Call(ctx context.Context, epoch int, method string, params any, onHandle func(announce func())) (json.RawMessage, error) {
	var (
		c   *conn
		err error
	)
	if epoch == 0 {
		c, err = d.connect(ctx)
	} else {
		c, err = d.at(epoch)
	}
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err = c.c.Call(ctx, method, params, &raw)
	if err != nil {
		return nil, c.callError(err)
	}
	switch method {
	case protocol.MethodReadFile, protocol.MethodWriteFile:
		// No ids, and content that may be large: only the file's path,
		// the destination's, is named as its artifacts are.
		return prefixPath(raw, c.prefix()), nil
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
	raw = prefixIDs(raw, c.prefix())
	return raw, nil
}

// at returns connection epoch while it is the current one; a handle of an
// earlier one went with it.
func (d *Destination) at(epoch int) (*conn, error) {
	c := d.current()
	if c == nil || c.epoch != epoch {
		return nil, d.unavailable("the connection that ran the handle was lost, and its handles with it")
	}
	return c, nil
}

// Notify forwards a notification to the destination, if it is connected.
func (d *Destination) Notify(ctx context.Context, method string, params any) {
	if c := d.current(); c != nil {
		_ = c.c.Notify(ctx, method, params)
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

// Send forwards a request to connection epoch of a destination, writing it
// before it returns (so that requests sent one after another reach the
// destination in that order), and returns the wait for its answer, ids
// prefixed. A connection that is no longer the current one is
// DestinationUnavailable: the handles it had were lost with it.
func (d *Destination) Send(ctx context.Context, epoch int, method string, params any) (wait func(context.Context) (json.RawMessage, error), err error) {
	c, err := d.at(epoch)
	if err != nil {
		return nil, err
	}
	p, err := c.c.Send(ctx, method, params)
	if err != nil {
		return nil, c.callError(err)
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		var raw json.RawMessage
		if err := p.Wait(ctx, &raw); err != nil {
			return nil, c.callError(err)
		}
		return prefixIDs(raw, c.prefix()), nil
	}, nil
}
