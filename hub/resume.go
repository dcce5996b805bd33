package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// A far toolhost run with --persist answers capabilities.resume and a
// sessionId: when the transport to it drops (ssh or docker exec killed,
// the network gone), its session is detached there, not ended, and its
// commands go on. The hub then starts the destination's command again,
// up to Options.Retry times with backoff, and resumes that session with
// initializationOptions.resume {sessionId, lastSeq}: lastSeq is the
// highest far seq of a toolResult the hub has received, so that the far
// side sends again every toolResult after it (those made while no
// transport was there). The conn, its epoch, its prefix and its handles
// stay: only its transport changes. Requests on its handles wait for the
// resumed transport (reconnectWait at most). It is lost, and each handle
// ends "lost", only when no attempt reaches the far session, or the far
// side answers that the session is gone (SessionNotFound: past its
// --linger, or shut down).

// client returns the transport now, and the channel closed when it is
// replaced (or the conn given up).
func (c *conn) client() (*client.Client, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl, c.swapped
}

// setClient replaces the transport by a resumed one.
func (c *conn) setClient(cl *client.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.swapped
	c.cl, c.swapped = cl, make(chan struct{})
	close(old)
}

// giveUp says the conn will have no other transport: whoever waits for
// one goes on (and finds it gone).
func (c *conn) giveUp() {
	c.mu.Lock()
	if !c.gone {
		c.gone = true
		close(c.swapped)
	}
	c.mu.Unlock()
	if c.stopResume != nil {
		c.stopResume()
	}
}

// beginResume marks the destination reconnecting when c's transport
// dropped and its far session may be resumed, and returns the channel
// endResume closes; nil when it is to be lost at once (a far side without
// --persist, --destination-retry 0, or the hub closing it).
func (d *Destination) beginResume(c *conn, reason string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != c || c.sessionID == "" || c.closing() {
		return nil
	}
	ch := make(chan struct{})
	d.state, d.reason, d.resumed = protocol.DestinationReconnecting, reason, ch
	return ch
}

// endResume ends the reconnection ch: the destination is ready again, or
// (err) lost, and the conn with it.
func (d *Destination) endResume(c *conn, ch chan struct{}, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resumed = nil
	switch {
	case err == nil:
		d.state, d.reason = protocol.DestinationReady, ""
	case d.conn == c:
		d.conn = nil
		d.state, d.reason = protocol.DestinationLost, err.Error()
	}
	close(ch)
}

// setReason says which attempt of the reconnection under way runs.
func (d *Destination) setReason(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resumed != nil {
		d.reason = reason
	}
}

// reconnect starts the destination's command again, up to Options.Retry
// times, waiting retryFirst before the first attempt and twice as long
// before each next (retryMax at most), until one resumes c's far session.
// A far side that answers the session is gone ends it at once.
func (d *Destination) reconnect(c *conn, why string) error {
	retries := d.hub.opts.Retry
	delay := retryFirst
	last := why // the last error, for the error in the end
	for attempt := 1; attempt <= retries; attempt++ {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.rctx.Done():
			t.Stop()
			return fmt.Errorf("the session ended while the far session %s was being resumed; %s", c.sessionID, last)
		}
		delay = min(2*delay, retryMax)
		reason := fmt.Sprintf("resuming far session %s, attempt %d of %d; the transport dropped: %s", c.sessionID, attempt, retries, why)
		if attempt > 1 {
			reason += "; attempt " + strconv.Itoa(attempt-1) + " failed: " + last
		}
		d.setReason(reason)
		t0 := time.Now()
		err := d.resumeOnce(c)
		if err == nil {
			d.hub.log.Info("destination resumed", "destination", d.name, "session", c.sessionID, "attempt", attempt, "ms", time.Since(t0).Milliseconds())
			return nil
		}
		last = err.Error()
		d.hub.log.Warn("destination did not resume", "destination", d.name, "session", c.sessionID, "attempt", attempt, "of", retries, "err", err)
		var e *protocol.Error
		if errors.As(err, &e) && e.Code == protocol.CodeSessionNotFound {
			why := ""
			if e.Data != nil && e.Data.Reason != "" {
				why = " (" + e.Data.Reason + ")"
			}
			return fmt.Errorf("the far session %s is gone%s: %w", c.sessionID, why, err)
		}
	}
	return fmt.Errorf("the far side stayed unreachable: %d attempts to resume session %s failed, the last: %s", retries, c.sessionID, last)
}

// resumeOnce starts the destination's command and resumes c's far session
// on it: the toolResults after lastSeq come in on the new transport
// (onNotification drops any whose handle already ended), handles a lost
// answer started are cancelled (reconcile), and the transport becomes
// c's.
func (d *Destination) resumeOnce(c *conn) error {
	h := d.hub
	h.mu.Lock()
	caps := h.caps
	h.mu.Unlock()
	c.mu.Lock()
	last := c.lastSeq
	c.mu.Unlock()
	cl, init, err := d.start(c.rctx, c.argv, &protocol.InitializeParams{
		ClientInfo:            &protocol.ClientInfo{Name: "toolhost-hub"},
		Capabilities:          &caps,
		InitializationOptions: &protocol.InitializationOptions{Resume: &protocol.ResumeOptions{SessionID: c.sessionID, LastSeq: &last}},
	}, c.onNotification)
	if err != nil {
		return err
	}
	if init.SessionID != c.sessionID {
		_ = cl.Close()
		return protocol.NewError(protocol.CodeSessionNotFound, &protocol.ErrorData{SessionID: c.sessionID, Reason: protocol.SessionUnknown},
			"resuming far session %s answered session %s", c.sessionID, init.SessionID)
	}
	if err := c.reconcile(c.rctx, cl); err != nil {
		_ = cl.Close()
		return fmt.Errorf("listing the resumed session's handles: %w", err)
	}
	c.setClient(cl)
	return nil
}

// reconcile cancels, on the resumed transport cl, every far handle that
// the requests whose transport dropped under them may have started and no
// answer named (the client was answered DestinationUnavailable for them),
// and drops everything of theirs, so that nothing runs there that no one
// knows of, and nothing waits in the hub for an answer that never comes.
// Only when such a request was counted (uncertain); it first waits for
// every handle-starting call to have tracked its handle, or failed.
func (c *conn) reconcile(ctx context.Context, cl *client.Client) error {
	c.starting.Lock()
	defer c.starting.Unlock()
	c.mu.Lock()
	n := c.uncertain
	c.mu.Unlock()
	if n == 0 {
		return nil
	}
	var res protocol.ProgressResult
	if err := cl.Call(ctx, protocol.MethodProgress, &protocol.ProgressParams{}, &res); err != nil {
		return err
	}
	var cancels []string
	c.mu.Lock()
	c.uncertain = 0
	if res.List != nil {
		for _, p := range res.List.Handles {
			if c.known[p.HandleID] {
				continue
			}
			// Known from now on, and out of handles: whatever it sent
			// waiting for an answer goes, and whatever it sends (the
			// toolResult of the cancel below) is dropped.
			c.known[p.HandleID] = true
			delete(c.handles, p.HandleID)
			if p.Status == protocol.StatusRunning {
				cancels = append(cancels, p.HandleID)
			}
		}
	}
	c.mu.Unlock()
	for _, id := range cancels {
		// Not waited for: its toolResult comes, and is dropped.
		_, _ = cl.Send(ctx, protocol.MethodCancel, &protocol.CancelParams{HandleID: id})
		c.dest.hub.log.Info("cancelled a far handle no answer named", "destination", c.dest.name, "handle", id)
	}
	return nil
}

// awaitResume waits for the reconnection ch to end, until *deadline (set
// to reconnectWait from now if zero).
func (d *Destination) awaitResume(ctx context.Context, ch <-chan struct{}, deadline *time.Time) error {
	if deadline.IsZero() {
		*deadline = time.Now().Add(reconnectWait)
	}
	t := time.NewTimer(time.Until(*deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		d.mu.Lock()
		reason := d.reason
		d.mu.Unlock()
		return d.unavailable(fmt.Sprintf("still reconnecting after %v: %s", reconnectWait, reason))
	}
}

// awaitSwap waits, until *deadline, for c's transport dead (whose end a
// request met) to be replaced by a resumed one, or for c to be given up;
// the caller then looks up the far session again.
func (d *Destination) awaitSwap(ctx context.Context, c *conn, dead *client.Client, deadline *time.Time) error {
	for {
		c.mu.Lock()
		cur, sw, gone := c.cl, c.swapped, c.gone
		c.mu.Unlock()
		if cur != dead || gone {
			return nil
		}
		if err := d.awaitResume(ctx, sw, deadline); err != nil {
			return err
		}
	}
}

// farSeq returns the "seq" member of a toolResult's params, 0 if none.
func farSeq(params json.RawMessage) int64 {
	var p struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(params, &p) != nil {
		return 0
	}
	return p.Seq
}
