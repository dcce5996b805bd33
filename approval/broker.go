package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The defaults of Config's zero values.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxPending = 8
)

// Config is what a Broker is made of: how it asks, and how long it waits.
// Deny and a nil Ask stop the asking only: a remembered grant (an Always
// one in the Store, say) still answers; a caller that wants none gives no
// Store.
type Config struct {
	Ask        Asker            // nil: nobody can ask (every ask is denied ByNoClient)
	Deny       bool             // --approvals deny: every ask is denied ByPolicy, nobody is asked
	Timeout    time.Duration    // how long an ask waits for the user; 0 is 60s
	MaxPending int              // distinct asks waiting at once per Broker; 0 is 8; past it an ask is denied ByPolicy without asking
	Store      *Store           // the always-grants; nil: Always is not offered
	Root       string           // the canonical root the Store's grants are kept under; "": the Store is not used
	Now        func() time.Time // for tests; nil is time.Now
}

// Broker decides the asks of one session, and remembers its grants. Its
// methods may be called from any goroutine.
type Broker struct {
	// Set by New, then read only.
	ask        Asker
	deny       bool
	timeout    time.Duration
	maxPending int
	store      *Store
	root       string
	now        func() time.Time

	// ctx is the parent of every ask's context; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// running counts the goroutines that run an Asker (run); the Broker
	// owns them, and Close waits for them.
	running sync.WaitGroup

	// waiting, when set (by tests, before any Decide), is called each
	// time a caller of Decide starts waiting on an ask.
	waiting func(Request)

	// mu guards the fields below. It is never held while an Asker runs
	// nor while the Store writes (a read of the Store, a stat mostly,
	// happens under it, so that a grant and the ask it ends are seen at
	// once).
	mu     sync.Mutex
	closed bool // Close ran: every Decide is denied
	// pending holds the asks waiting for an answer, at most one per Kind
	// and Target; an ask leaves it as it is resolved, after its grant
	// (if any) is remembered, so that a caller finds one or the other.
	pending map[key]*ask
	// grants holds the Command and Session grants, in the order made.
	grants []Grant
}

// key is what merges asks: one question per Kind and Target.
type key struct {
	kind   Kind
	target string
}

// ask is one question put to the user, on which every caller of Decide
// for its Kind and Target waits while it is pending.
type ask struct {
	req    Request            // as asked: the first caller's, with its ID and Scopes; read only
	ctx    context.Context    // ends at the timeout, when the ask is resolved (abandoned too), or at Close
	cancel context.CancelFunc // of ctx
	done   chan struct{}      // closed once out is set

	// Guarded by Broker.mu.
	waiters     int     // callers of Decide waiting on done; at 0 the ask is abandoned
	handleEnded bool    // EndCommand ran for req.HandleID: a Command allow is not remembered
	saving      bool    // an Always allow is being written: only run resolves the ask now, once saved
	resolved    bool    // out is set and done closed
	out         Outcome // the decision, for every waiter it covers
}

// New returns a Broker for cfg. Close releases it.
func New(cfg Config) *Broker {
	b := &Broker{
		ask:        cfg.Ask,
		deny:       cfg.Deny,
		timeout:    cfg.Timeout,
		maxPending: cfg.MaxPending,
		store:      cfg.Store,
		root:       cfg.Root,
		now:        cfg.Now,
		pending:    make(map[key]*ask),
	}
	if b.timeout <= 0 {
		b.timeout = DefaultTimeout
	}
	if b.maxPending <= 0 {
		b.maxPending = DefaultMaxPending
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// Close denies every pending ask (ByNoClient) and every later Decide, and
// waits for the Askers it started to return: an Asker must honour its
// context. The remembered grants stay readable (Grants) and revocable.
func (b *Broker) Close() {
	b.mu.Lock()
	b.closed = true
	for _, a := range b.pending {
		if !a.saving { // an always the user gave in time is saved, then resolved by run
			b.resolveLocked(a, deny(a.req, ByNoClient, ReasonNoClient), nil)
		}
	}
	b.mu.Unlock()
	b.cancel()
	b.running.Wait()
}

// Decide decides r (its ID and Scopes are filled in by Decide): a
// remembered grant that covers it answers at once (ByGrant); else it is
// asked, merged with an ask already pending for the same Kind and Target
// (across handles: one question, whose answer every waiter gets if it
// covers it — a deny or a Session/Always allow covers all waiters; a
// Once/Command allow covers only the handle it was asked for, and the
// others then ask again). ctx ending (the command ended) is a deny
// ByNoClient for that caller only. The ask waits at most Timeout
// (ByTimeout, "no answer"). Decide never blocks past ctx or Timeout, and
// never panics on a bad Answer (a Scope not offered, or an allow with no
// scope, is a deny ByPolicy with a reason saying so).
func (b *Broker) Decide(ctx context.Context, r Request) Outcome {
	r.ID = newID("a-")
	r.Scopes = nil
	if !r.Kind.valid() || r.Target == "" {
		return deny(r, ByPolicy, fmt.Sprintf("%s: kind %q, target %q", reasonBadRequest, r.Kind, r.Target))
	}
	if ctx.Err() != nil { // ended already: nobody to ask for
		return deny(r, ByNoClient, ReasonEnded)
	}
	wctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	for {
		a, out, decided := b.join(r)
		if decided {
			return out
		}
		if b.waiting != nil {
			b.waiting(r)
		}
		select {
		case <-a.done:
		case <-wctx.Done():
			if !b.leave(a) {
				return gaveUp(ctx, a)
			}
			// Resolved meanwhile: its answer counts, if it is r's.
		}
		if a.answers(r) {
			return a.out
		}
		// A Once or Command allow for another handle: ask again, for r,
		// unless r's time is up.
		if wctx.Err() != nil {
			return gaveUp(ctx, a)
		}
	}
}

// gaveUp is the deny of a caller of Decide who stopped waiting on a:
// ByNoClient when its ctx ended (the command ended), else ByTimeout.
func gaveUp(ctx context.Context, a *ask) Outcome {
	if ctx.Err() != nil {
		return deny(a.req, ByNoClient, ReasonEnded)
	}
	return deny(a.req, ByTimeout, ReasonTimeout)
}

// join decides r at once, or returns the ask it is to wait on: one
// already pending for its Kind and Target, or a new one.
func (b *Broker) join(r Request) (a *ask, out Outcome, decided bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, deny(r, ByNoClient, ReasonNoClient), true
	}
	for _, g := range b.grants {
		if g.covers(r) {
			return nil, g.outcome(r), true
		}
	}
	storeOK := false
	if b.store != nil && b.root != "" {
		gs, err := b.store.Grants(b.root)
		storeOK = err == nil // a refused file answers nothing, and takes no grant
		for _, g := range gs {
			if g.covers(r) {
				return nil, g.outcome(r), true
			}
		}
	}
	k := key{r.Kind, r.Target}
	if a := b.pending[k]; a != nil {
		a.waiters++
		return a, Outcome{}, false
	}
	switch {
	case b.deny:
		return nil, deny(r, ByPolicy, ReasonOff), true
	case b.ask == nil:
		return nil, deny(r, ByNoClient, ReasonNoClient), true
	case len(b.pending) >= b.maxPending:
		return nil, deny(r, ByPolicy, fmt.Sprintf("%s (%d at once)", ReasonPending, b.maxPending)), true
	}
	r.Scopes = []Scope{Once}
	if r.HandleID != "" {
		r.Scopes = append(r.Scopes, Command)
	}
	r.Scopes = append(r.Scopes, Session)
	if storeOK {
		r.Scopes = append(r.Scopes, Always)
	}
	a = &ask{req: r, done: make(chan struct{}), waiters: 1}
	a.ctx, a.cancel = context.WithTimeout(b.ctx, b.timeout)
	b.pending[k] = a
	b.running.Add(1)
	go b.run(a)
	return a, Outcome{}, false
}

// answers reports whether a's decision answers r, one of its waiters: a
// deny, or an allow for the session or always, answers all of them; an
// allow for once or for the command answers only the handle asked for
// (and, without a handle, only the caller asked for).
func (a *ask) answers(r Request) bool {
	if !a.out.Allow || a.out.Scope == Session || a.out.Scope == Always {
		return true
	}
	if r.ID == a.req.ID {
		return true
	}
	return a.req.HandleID != "" && r.HandleID == a.req.HandleID
}

// leave is a waiter of a giving up; the last one to leave abandons the
// ask, whose Asker is then cancelled. It reports whether a was resolved
// already, so that its decision counts.
func (b *Broker) leave(a *ask) (resolved bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.resolved {
		return true
	}
	a.waiters--
	if a.waiters == 0 && !a.saving {
		b.resolveLocked(a, deny(a.req, ByNoClient, ReasonEnded), nil)
	}
	return false
}

// run puts a to the user, and resolves it with the answer. It is owned by
// the Broker (running), and ends when the Asker returns.
func (b *Broker) run(a *ask) {
	defer b.running.Done()
	defer a.cancel()
	var (
		ans Answer
		err error
	)
	if a.ctx.Err() == nil { // abandoned, or closed, before it was put: never put it
		req := a.req // the Asker's to keep: it cannot change a's
		req.Argv = append([]string(nil), req.Argv...)
		req.Scopes = append([]Scope(nil), req.Scopes...)
		ans, err = b.ask(a.ctx, req)
	}
	out, g := b.judge(a, ans, err)
	if g != nil && g.Scope == Always {
		b.mu.Lock()
		if a.resolved { // timed out, or abandoned: nobody said always in time
			b.mu.Unlock()
			return
		}
		a.saving = true
		b.mu.Unlock()
		if err := b.store.Add(*g); err != nil {
			out, g = deny(a.req, ByPolicy, fmt.Sprintf("the grant could not be saved: %v", err)), nil
		}
		g = nil // in the Store, not in memory
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resolveLocked(a, out, g)
}

// judge turns what the Asker returned into a's decision, and for an allow
// for the command, the session or always, the grant to remember.
func (b *Broker) judge(a *ask, ans Answer, err error) (Outcome, *Grant) {
	r := a.req
	switch {
	case a.ctx.Err() != nil || pastDeadline(a.ctx): // an answer too late is no answer
		return b.ended(a), nil
	case errors.Is(err, ErrNoClient):
		return deny(r, ByNoClient, ReasonNoClient), nil
	case err != nil:
		return deny(r, ByPolicy, fmt.Sprintf("the client answered with an error: %v", err)), nil
	case !ans.Allow:
		return deny(r, ByUser, ReasonUser), nil
	case ans.Scope == "":
		return deny(r, ByPolicy, "the answer allows with no scope"), nil
	case !r.offers(ans.Scope):
		return deny(r, ByPolicy, fmt.Sprintf("the answer's scope %q was not offered", ans.Scope)), nil
	}
	out := Outcome{ID: r.ID, Kind: r.Kind, Target: r.Target, Allow: true, Scope: ans.Scope, DecidedBy: ByUser}
	if ans.Scope == Once {
		return out, nil
	}
	g := &Grant{ID: newID("g-"), Kind: r.Kind, Target: r.Target, Scope: ans.Scope, CreatedAt: b.now()}
	switch ans.Scope {
	case Command:
		g.HandleID = r.HandleID
	case Always:
		g.Root = b.root
	}
	return out, g
}

// ended is the decision of an ask whose context ended before an answer.
func (b *Broker) ended(a *ask) Outcome {
	if errors.Is(a.ctx.Err(), context.DeadlineExceeded) || a.ctx.Err() == nil && pastDeadline(a.ctx) {
		return deny(a.req, ByTimeout, ReasonTimeout)
	}
	return deny(a.req, ByNoClient, ReasonNoClient)
}

// pastDeadline reports whether ctx's deadline has passed. Its Err says so
// only once its timer has run, which on a busy machine can be after an
// answer that came at the deadline (a client that gave up asking its user
// at the same time): such an answer is too late all the same.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// resolveLocked decides a, once: it remembers g (a Command or Session
// grant), then takes a out of pending and wakes its waiters. b.mu is held.
func (b *Broker) resolveLocked(a *ask, out Outcome, g *Grant) {
	if a.resolved {
		return
	}
	a.resolved, a.out = true, out
	if g != nil && !(g.Scope == Command && a.handleEnded) {
		b.rememberLocked(*g)
	}
	if k := (key{a.req.Kind, a.req.Target}); b.pending[k] == a {
		delete(b.pending, k)
	}
	close(a.done)
	a.cancel()
}

// rememberLocked adds g to the grants in memory, unless one allows the
// same already. b.mu is held.
func (b *Broker) rememberLocked(g Grant) {
	for _, h := range b.grants {
		if h.same(g) {
			return
		}
	}
	b.grants = append(b.grants, g)
}

// Grants lists the remembered grants: the Command and Session ones in
// memory, in the order made, then this root's Always ones, in the Store's
// order. A Store that cannot be read adds none.
func (b *Broker) Grants() []Grant {
	b.mu.Lock()
	gs := append([]Grant(nil), b.grants...)
	b.mu.Unlock()
	if b.store != nil && b.root != "" {
		always, _ := b.store.Grants(b.root)
		gs = append(gs, always...)
	}
	return gs
}

// Revoke drops a remembered grant by its id (from the Store too for an
// Always one of this root); an unknown id is an error wrapping ErrUnknown.
func (b *Broker) Revoke(id string) error {
	b.mu.Lock()
	for i, g := range b.grants {
		if g.ID == id {
			b.grants = append(b.grants[:i:i], b.grants[i+1:]...)
			b.mu.Unlock()
			return nil
		}
	}
	b.mu.Unlock()
	if b.store != nil && b.root != "" {
		gs, err := b.store.Grants(b.root)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g.ID == id {
				return b.store.Remove(id)
			}
		}
	}
	return fmt.Errorf("approval %s: %w", id, ErrUnknown)
}

// EndCommand drops the grants of Command scope of the handle (the
// command ended); a Command allow still pending for it will not be
// remembered.
func (b *Broker) EndCommand(handleID string) {
	if handleID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.grants[:0]
	for _, g := range b.grants {
		if g.Scope != Command || g.HandleID != handleID {
			kept = append(kept, g)
		}
	}
	clear(b.grants[len(kept):])
	b.grants = kept
	for _, a := range b.pending {
		if a.req.HandleID == handleID {
			a.handleEnded = true
		}
	}
}
