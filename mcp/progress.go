package mcp

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// finishedCap bounds the handles remembered as ended.
const finishedCap = 4096

// orphanCap bounds the events kept for handles no call watches yet: those
// that arrive between a longRunning's answer and the subscription of the
// call that started it.
const orphanCap = 512

// event is a stepTransition or a heartbeat of a handle.
type event struct {
	handleID string
	step     *protocol.StepTransitionParams
	beat     *protocol.HeartbeatParams
}

// router hands the step transitions and heartbeats of handles to the
// calls that watch them with a progress token. The client's dispatcher
// calls step and heartbeat, one at a time and in arrival order.
type router struct {
	mu sync.Mutex
	// sinks are the watching calls (and tasks) by handle id, in the order
	// they began; orphans the latest events of handles nobody watched,
	// oldest first, at most orphanCap. Guarded by mu.
	sinks   map[string][]*sink
	orphans []event
	// finished holds the handles whose toolResult has come, the latest
	// finishedCap of them. Guarded by mu.
	finished recent[bool]
	// ended is told of every toolResult, after the handle is marked
	// finished and its last event was sent. Set by init.
	ended func(*protocol.ToolResult)
}

func (r *router) init(ended func(*protocol.ToolResult)) {
	r.sinks = make(map[string][]*sink)
	r.finished = newRecent[bool](finishedCap)
	r.ended = ended
}

// isFinished reports whether the toolResult of handle handleID has been
// routed (among the latest finishedCap).
func (r *router) isFinished(handleID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.finished.get(handleID)
	return ok
}

// toolResult records the end of a handle: its toolResult is the last
// notification about it, so every event of the handle has been routed.
func (r *router) toolResult(p *protocol.ToolResult) {
	if p.HandleID == "" {
		return
	}
	// seq numbers toolResults for a resume of toolhost's own protocol
	// (under --persist); MCP has task ids, and its results none.
	p.Seq = 0
	r.mu.Lock()
	r.finished.put(p.HandleID, true)
	for _, k := range r.sinks[p.HandleID] {
		k.endOnce.Do(func() { close(k.ended) })
	}
	r.mu.Unlock()
	if r.ended != nil {
		r.ended(p)
	}
}
func (r *router) step(p *protocol.StepTransitionParams) {
	if p.HandleID != "" {
		r.route(event{handleID: p.HandleID, step: p})
	}
}

func (r *router) heartbeat(p *protocol.HeartbeatParams) {
	if p.HandleID != "" {
		r.route(event{handleID: p.HandleID, beat: p})
	}
}

// route sends an event to the sinks of its handle, or keeps it as an
// orphan.
func (r *router) route(ev event) {
	r.mu.Lock()
	ks := slices.Clone(r.sinks[ev.handleID])
	if len(ks) == 0 {
		if len(r.orphans) == orphanCap {
			r.orphans = append(r.orphans[:0], r.orphans[1:]...)
		}
		r.orphans = append(r.orphans, ev)
		r.mu.Unlock()
		return
	}
	// Lock the sinks before letting go of the router: a subscription that
	// is replaying orphans holds its own, and this event comes after them.
	// (A watch locks its new sink before the router, but the sink is in
	// no list until then: no cycle.)
	for _, k := range ks {
		k.mu.Lock()
	}
	r.mu.Unlock()
	for _, k := range ks {
		k.sendLocked(ev)
		k.mu.Unlock()
	}
}

// watch sends the events of handle handleID as notifications/progress on
// token, until the returned stop is called. With replay, the events that
// arrived for the handle before the call (its start) are sent first; else
// they are dropped. Several calls may watch one handle (a task's token and
// a wait_command's): each gets every event from its start.
func (r *router) watch(ctx context.Context, ss *sdk.ServerSession, token any, handleID string, replay bool) (k *sink, stop func()) {
	k = &sink{ctx: ctx, ss: ss, token: token, ended: make(chan struct{})}
	k.mu.Lock()
	r.mu.Lock()
	r.sinks[handleID] = append(r.sinks[handleID], k)
	if _, ok := r.finished.get(handleID); ok {
		k.endOnce.Do(func() { close(k.ended) })
	}
	var past []event
	kept := r.orphans[:0]
	for _, ev := range r.orphans {
		if ev.handleID == handleID {
			past = append(past, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	clear(r.orphans[len(kept):])
	r.orphans = kept
	r.mu.Unlock()
	if replay {
		for _, ev := range past {
			k.sendLocked(ev)
		}
	}
	k.mu.Unlock()
	return k, func() {
		r.mu.Lock()
		if ks := slices.DeleteFunc(r.sinks[handleID], func(o *sink) bool { return o == k }); len(ks) > 0 {
			r.sinks[handleID] = ks
		} else {
			delete(r.sinks, handleID)
		}
		r.mu.Unlock()
		k.mu.Lock()
		k.stopped = true
		k.mu.Unlock()
	}
}

// sink is one call's progress token.
type sink struct {
	ctx   context.Context
	ss    *sdk.ServerSession
	token any
	// ended is closed once the handle's toolResult has been routed: every
	// event of the handle has been sent by then.
	ended   chan struct{}
	endOnce sync.Once

	mu sync.Mutex
	// stopped is set when the call returns: nothing is sent after its
	// answer. count numbers what is sent. Guarded by mu, which is held
	// while a notification is sent, so they go out in order.
	stopped bool
	count   progressCount
}

// sendLocked sends one event as notifications/progress; k.mu is held.
func (k *sink) sendLocked(ev event) {
	if k.stopped {
		return
	}
	progress, total, msg := k.count.next(ev)
	_ = k.ss.NotifyProgress(k.ctx, &sdk.ProgressNotificationParams{ProgressToken: k.token, Progress: progress, Total: total, Message: msg})
}

// progressCount turns a handle's events into MCP progress, which must grow
// with every notification. progress counts the steps finished and total
// the steps, when known. An event that finishes no further step (a start,
// a heartbeat, a repeated end) adds a fraction that grows towards the next
// step without reaching it: base + n/(n+1) for the nth such event since
// the last whole step, distinct in a float64 for any number of heartbeats
// a command can send.
type progressCount struct {
	sent  bool
	last  float64 // the progress last sent
	base  float64 // the steps finished at the last whole step sent
	n     int     // the events since then
	total float64 // the latest total, 0 when unknown
}

// next returns the progress, the total (0: unknown, or passed) and the
// message of one event.
func (c *progressCount) next(ev event) (progress, total float64, msg string) {
	whole := -1.0
	switch {
	case ev.step != nil:
		st := ev.step
		whole = float64(st.Index)
		if st.Status == protocol.StepStart {
			whole = float64(st.Index - 1)
		}
		c.total = float64(st.Total)
		msg = st.Message()
	case ev.beat != nil:
		msg = fmt.Sprintf("%s: alive after %.1fs", ev.beat.Step, float64(ev.beat.ElapsedMs)/1000)
	}
	if whole >= 0 && (!c.sent || whole > c.last) {
		c.base, c.n = whole, 0
		progress = whole
	} else {
		c.n++
		progress = c.base + float64(c.n)/float64(c.n+1)
	}
	c.sent, c.last = true, progress
	total = c.total
	if progress > total {
		total = 0
	}
	return progress, total, msg
}

// drainLimit bounds how long a call that saw its command end waits for
// the command's last events to be routed.
const drainLimit = 5 * time.Second

// drain waits until every event of the watched handle has been sent: the
// handle's answer (a wait's final result) can overtake the notifications
// queued before it in the client, and no progress may follow the call's
// answer.
func (k *sink) drain(ctx context.Context) {
	t := time.NewTimer(drainLimit)
	defer t.Stop()
	select {
	case <-k.ended:
	case <-ctx.Done():
	case <-t.C:
	}
}
