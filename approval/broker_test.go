package approval

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const root = "/home/u/project"

// ignoreIDs compares Outcomes and Grants without their random ids.
var ignoreIDs = cmpopts.IgnoreFields(Outcome{}, "ID")
var ignoreGrantIDs = cmpopts.IgnoreFields(Grant{}, "ID")

func TestScopes(t *testing.T) {
	const target = "example.com:443"
	for _, tc := range []struct {
		scope Scope
		// whether a second request is answered by a grant: of the same
		// handle, and of another handle.
		sameHandle, otherHandle bool
	}{
		{Once, false, false},
		{Command, true, false},
		{Session, true, true},
		{Always, true, true},
	} {
		t.Run(string(tc.scope), func(t *testing.T) {
			store := openStore(t)
			var asks atomic.Int32
			b := newBroker(t, Config{Ask: answering(Answer{Allow: true, Scope: tc.scope}, &asks), Store: store, Root: root})
			ctx := context.Background()

			got := b.Decide(ctx, netReq("h1", target))
			want := Outcome{Kind: Network, Target: target, Allow: true, Scope: tc.scope, DecidedBy: ByUser}
			if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
				t.Fatalf("first Decide: mismatch (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got.ID, "a-") {
				t.Errorf("outcome id %q, want an approval id", got.ID)
			}

			for _, h := range []struct {
				id    string
				grant bool
			}{{"h1", tc.sameHandle}, {"h2", tc.otherHandle}} {
				before := asks.Load()
				got := b.Decide(ctx, netReq(h.id, target))
				asked := asks.Load() > before
				if asked == h.grant || (got.DecidedBy == ByGrant) != h.grant || !got.Allow {
					t.Errorf("handle %s: asked %v, outcome %+v; want answered by a grant: %v", h.id, asked, got, h.grant)
				}
				if h.grant && !strings.HasPrefix(got.ID, "g-") {
					t.Errorf("handle %s: outcome id %q, want a grant's", h.id, got.ID)
				}
			}

			var wantGrants []Grant
			switch tc.scope {
			case Command:
				wantGrants = []Grant{ // h2 was asked, and allowed for its command too
					{Kind: Network, Target: target, Scope: Command, HandleID: "h1", CreatedAt: t0},
					{Kind: Network, Target: target, Scope: Command, HandleID: "h2", CreatedAt: t0},
				}
			case Session:
				wantGrants = []Grant{{Kind: Network, Target: target, Scope: Session, CreatedAt: t0}}
			case Always:
				wantGrants = []Grant{{Kind: Network, Target: target, Scope: Always, Root: root, CreatedAt: t0}}
			}
			if diff := cmp.Diff(wantGrants, b.Grants(), ignoreGrantIDs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Grants: mismatch (-want +got):\n%s", diff)
			}

			// The command ends: its grants go; the others stay.
			b.EndCommand("h1")
			before := asks.Load()
			b.Decide(ctx, netReq("h1", target))
			if asked, want := asks.Load() > before, tc.scope == Once || tc.scope == Command; asked != want {
				t.Errorf("after EndCommand: asked %v, want %v", asked, want)
			}
		})
	}
}

func TestDenyIsNotRemembered(t *testing.T) {
	var asks atomic.Int32
	b := newBroker(t, Config{Ask: answering(Answer{Allow: false, Scope: Session}, &asks), Store: openStore(t), Root: root})
	for i := range 2 {
		got := b.Decide(context.Background(), netReq("h1", "example.com:443"))
		want := Outcome{Kind: Network, Target: "example.com:443", DecidedBy: ByUser, Reason: "denied by the user"}
		if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
			t.Errorf("Decide %d: mismatch (-want +got):\n%s", i, diff)
		}
	}
	if n := asks.Load(); n != 2 {
		t.Errorf("%d asks, want 2: a deny is never remembered", n)
	}
	if gs := b.Grants(); len(gs) != 0 {
		t.Errorf("Grants after denies: %+v", gs)
	}
}

func TestAlwaysSurvivesARestart(t *testing.T) {
	store := openStore(t)
	var asks atomic.Int32
	b := newBroker(t, Config{Ask: answering(Answer{Allow: true, Scope: Always}, &asks), Store: store, Root: root})
	req := Request{Argv: []string{"make"}, Kind: Sandbox, Target: "write /home/u/.cache/go-build", Justification: "the build cache"}
	if got := b.Decide(context.Background(), req); !got.Allow || got.Scope != Always {
		t.Fatalf("Decide: %+v, want an allow always", got)
	}
	b.Close()

	// A restart: a new Store on the same file, a new Broker.
	store2, err := OpenStore(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	b2 := newBroker(t, Config{Ask: never(t), Store: store2, Root: root})
	got := b2.Decide(context.Background(), req)
	want := Outcome{Kind: Sandbox, Target: req.Target, Allow: true, Scope: Always, DecidedBy: ByGrant}
	if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
		t.Errorf("after the restart: mismatch (-want +got):\n%s", diff)
	}
	wantGrants := []Grant{{Kind: Sandbox, Target: req.Target, Scope: Always, Root: root, CreatedAt: t0}}
	if diff := cmp.Diff(wantGrants, b2.Grants(), ignoreGrantIDs); diff != "" {
		t.Errorf("Grants after the restart: mismatch (-want +got):\n%s", diff)
	}

	// Another root, and a wider or other target, are not covered.
	b3 := newBroker(t, Config{Store: store2, Root: "/home/u/other"})
	if got := b3.Decide(context.Background(), req); got.Allow {
		t.Errorf("another root: %+v, want a deny", got)
	}
	b4 := newBroker(t, Config{Store: store2, Root: root, Ask: answering(Answer{Allow: false}, new(atomic.Int32))})
	for _, target := range []string{"write /home/u/.cache", "write /home/u/.cache/go-build/x", "write /home/u/.cache/go-build "} {
		r := req
		r.Target = target
		if got := b4.Decide(context.Background(), r); got.Allow {
			t.Errorf("target %q: %+v, want a deny (a grant is exactly what was asked)", target, got)
		}
	}
}

func TestScopesOffered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle string
		store  bool
		want   []Scope
	}{
		{"handle and store", "h1", true, []Scope{Once, Command, Session, Always}},
		{"no handle", "", true, []Scope{Once, Session, Always}},
		{"no store", "h1", false, []Scope{Once, Command, Session}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Root: root}
			if tc.store {
				cfg.Store = openStore(t)
			}
			var got []Scope
			cfg.Ask = func(ctx context.Context, r Request) (Answer, error) {
				got = r.Scopes
				return Answer{}, nil
			}
			newBroker(t, cfg).Decide(context.Background(), netReq(tc.handle, "example.com:443"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scopes offered: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDamagedStoreOffersNoAlways(t *testing.T) {
	store := openStore(t)
	if err := store.Add(Grant{ID: newID("g-"), Kind: Network, Target: "example.com:443", Scope: Always, Root: root, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, store.Path(), `{"version":1,"grants":[`) // damaged by someone else
	var got []Scope
	b := newBroker(t, Config{Store: store, Root: root, Ask: func(ctx context.Context, r Request) (Answer, error) {
		got = r.Scopes
		return Answer{}, nil
	}})
	out := b.Decide(context.Background(), netReq("h1", "example.com:443"))
	if out.Allow {
		t.Errorf("a grant in a damaged file answered: %+v", out)
	}
	if diff := cmp.Diff([]Scope{Once, Command, Session}, got); diff != "" {
		t.Errorf("scopes offered: mismatch (-want +got):\n%s", diff)
	}
}

func TestMerge(t *testing.T) {
	targets := []string{"a.example:443", "b.example:443", "c.example:80", "d.example:443", "e.example:8080"}
	for _, tc := range []struct {
		name   string
		answer Answer
		want   func(target string) Outcome
	}{
		{"allow session", Answer{Allow: true, Scope: Session}, func(target string) Outcome {
			return Outcome{Kind: Network, Target: target, Allow: true, Scope: Session, DecidedBy: ByUser}
		}},
		{"deny", Answer{Allow: false}, func(target string) Outcome {
			return Outcome{Kind: Network, Target: target, DecidedBy: ByUser, Reason: "denied by the user"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newFakeUser()
			b := newBroker(t, Config{Ask: u.ask})
			waiting := watchWaits(b)

			type result struct {
				handle string
				out    Outcome
			}
			results := make(chan result, 100)
			var wg sync.WaitGroup // the test owns the 100 callers
			for h := 1; h <= 20; h++ {
				for _, target := range targets {
					wg.Go(func() {
						handle := fmt.Sprintf("h%d", h)
						results <- result{handle, b.Decide(context.Background(), netReq(handle, target))}
					})
				}
			}
			waits(t, waiting, 100) // every caller waits on an ask: nothing is answered yet
			asked := map[string]string{}
			for range targets {
				c := u.next(t)
				if _, dup := asked[c.req.Target]; dup {
					t.Errorf("%s asked twice", c.req.Target)
				}
				asked[c.req.Target] = c.req.ID
				c.answer(tc.answer)
			}
			wg.Wait()
			close(results)
			if n := u.n.Load(); n != 5 {
				t.Errorf("%d asks, want 5", n)
			}
			n := 0
			for r := range results {
				n++
				if diff := cmp.Diff(tc.want(r.out.Target), r.out, ignoreIDs); diff != "" {
					t.Errorf("%s %s: mismatch (-want +got):\n%s", r.handle, r.out.Target, diff)
				}
				if r.out.ID != asked[r.out.Target] {
					t.Errorf("%s %s: outcome id %s, want the ask's %s", r.handle, r.out.Target, r.out.ID, asked[r.out.Target])
				}
			}
			if n != 100 {
				t.Errorf("%d outcomes, want 100", n)
			}
		})
	}
}

func TestNarrowAllowAsksOthersAgain(t *testing.T) {
	for _, scope := range []Scope{Once, Command} {
		t.Run(string(scope), func(t *testing.T) {
			const target = "example.com:443"
			u := newFakeUser()
			b := newBroker(t, Config{Ask: u.ask})
			waiting := watchWaits(b)
			ctx := context.Background()

			h1 := decideAsync(ctx, b, netReq("h1", target))
			first := u.next(t)
			h1b := decideAsync(ctx, b, netReq("h1", target)) // another connection of h1
			h2 := decideAsync(ctx, b, netReq("h2", target))
			waits(t, waiting, 3)
			first.answer(Answer{Allow: true, Scope: scope})

			for i, ch := range []<-chan Outcome{h1, h1b} {
				got := <-ch
				want := Outcome{ID: first.req.ID, Kind: Network, Target: target, Allow: true, Scope: scope, DecidedBy: ByUser}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("h1 caller %d: mismatch (-want +got):\n%s", i, diff)
				}
			}
			again := u.next(t)
			if again.req.HandleID != "h2" || again.req.ID == first.req.ID {
				t.Errorf("asked again %+v, want h2's own ask", again.req)
			}
			again.answer(Answer{Allow: false})
			want := Outcome{ID: again.req.ID, Kind: Network, Target: target, DecidedBy: ByUser, Reason: "denied by the user"}
			if diff := cmp.Diff(want, <-h2); diff != "" {
				t.Errorf("h2: mismatch (-want +got):\n%s", diff)
			}
			if n := u.n.Load(); n != 2 {
				t.Errorf("%d asks, want 2", n)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask, Timeout: testTimeout})
	got := b.Decide(context.Background(), netReq("h1", "example.com:443"))
	want := Outcome{Kind: Network, Target: "example.com:443", DecidedBy: ByTimeout, Reason: "no answer"}
	if diff := cmp.Diff(want, got, ignoreIDs); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	b.Close() // waits for the Asker, which honours its context
	select {
	case c := <-u.calls: // it was put before the time was up
		<-c.ctx.Done()
		if c.req.ID != got.ID {
			t.Errorf("outcome id %s, want the ask's %s", got.ID, c.req.ID)
		}
	default:
	}
}

func TestTimeoutWithAnAskerThatIgnoresIt(t *testing.T) {
	release := make(chan struct{})
	b := newBroker(t, Config{Timeout: testTimeout, Ask: func(ctx context.Context, r Request) (Answer, error) {
		<-release // deaf to ctx
		return Answer{Allow: true, Scope: Session}, nil
	}})
	got := b.Decide(context.Background(), netReq("h1", "example.com:443"))
	if got.Allow || got.DecidedBy != ByTimeout || got.Reason != "no answer" {
		t.Errorf("Decide: %+v, want a deny by timeout", got)
	}
	close(release) // the answer comes after the timeout
	b.Close()      // waits for the Asker's goroutine
	if gs := b.Grants(); len(gs) != 0 {
		t.Errorf("an answer after the timeout was remembered: %+v", gs)
	}
}

// TestAnswerAtTheDeadline: an answer (here the client's error, as when it
// stopped asking its user at the same deadline) that comes once the ask's
// deadline has passed, its timer not yet run, is a timeout, not the
// client's error.
func TestAnswerAtTheDeadline(t *testing.T) {
	b := newBroker(t, Config{Ask: never(t)})
	a := &ask{req: netReq("h1", "example.com:443"), ctx: timerNotRun{context.Background(), time.Now()}}
	got, g := b.judge(a, Answer{}, errors.New("eliciting the user: context deadline exceeded"))
	if got.Allow || got.DecidedBy != ByTimeout || g != nil {
		t.Errorf("judge: %+v, %+v; want a deny by timeout", got, g)
	}
}

// timerNotRun is a context whose deadline has passed while its Err is
// still nil, as until its timer runs.
type timerNotRun struct {
	context.Context
	deadline time.Time
}

func (c timerNotRun) Deadline() (time.Time, bool) { return c.deadline, true }

func TestEndedContextIsNeverAsked(t *testing.T) {
	b := newBroker(t, Config{Ask: never(t)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := b.Decide(ctx, netReq("h1", "example.com:443")); got.Allow || got.DecidedBy != ByNoClient {
		t.Errorf("Decide with an ended context: %+v, want a deny ByNoClient", got)
	}
}

func TestCallerCancelled(t *testing.T) {
	const target = "example.com:443"
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask})
	waiting := watchWaits(b)

	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	h1 := decideAsync(ctx1, b, netReq("h1", target))
	c := u.next(t)
	h2 := decideAsync(context.Background(), b, netReq("h2", target))
	waits(t, waiting, 2)

	cancel1() // h1 ended
	want := Outcome{Kind: Network, Target: target, DecidedBy: ByNoClient, Reason: ReasonEnded}
	if diff := cmp.Diff(want, <-h1, ignoreIDs); diff != "" {
		t.Errorf("h1: mismatch (-want +got):\n%s", diff)
	}
	select {
	case <-c.ctx.Done():
		t.Fatal("the ask was cancelled while h2 still waits on it")
	default:
	}
	c.answer(Answer{Allow: true, Scope: Session})
	want = Outcome{ID: c.req.ID, Kind: Network, Target: target, Allow: true, Scope: Session, DecidedBy: ByUser}
	if diff := cmp.Diff(want, <-h2); diff != "" {
		t.Errorf("h2: mismatch (-want +got):\n%s", diff)
	}
}

func TestAbandonedAskIsCancelled(t *testing.T) {
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask, MaxPending: 1})
	ctx, cancel := context.WithCancel(context.Background())
	out := decideAsync(ctx, b, netReq("h1", "example.com:443"))
	c := u.next(t)
	cancel()
	if got := <-out; got.DecidedBy != ByNoClient {
		t.Errorf("Decide: %+v, want a deny ByNoClient", got)
	}
	<-c.ctx.Done() // nobody waits: the question is withdrawn
	// and its place is free: another ask is asked, not refused by the cap.
	out = decideAsync(context.Background(), b, netReq("h2", "other.example:443"))
	u.next(t).answer(Answer{Allow: true, Scope: Once})
	if got := <-out; !got.Allow {
		t.Errorf("the next ask: %+v, want an allow", got)
	}
}

func TestMaxPending(t *testing.T) {
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask, MaxPending: 2})
	waiting := watchWaits(b)
	ctx := context.Background()
	a := decideAsync(ctx, b, netReq("h1", "a.example:443"))
	bb := decideAsync(ctx, b, netReq("h1", "b.example:443"))
	calls := []call{u.next(t), u.next(t)}
	waits(t, waiting, 2)

	got := b.Decide(ctx, netReq("h2", "c.example:443"))
	if got.Allow || got.DecidedBy != ByPolicy || !strings.Contains(got.Reason, "too many approvals pending") {
		t.Errorf("past the cap: %+v, want a deny by policy saying too many approvals are pending", got)
	}
	merged := decideAsync(ctx, b, netReq("h2", "a.example:443")) // joins a pending ask: no new one
	waits(t, waiting, 1)
	if n := u.n.Load(); n != 2 {
		t.Errorf("%d asks, want 2", n)
	}
	for _, c := range calls {
		c.answer(Answer{Allow: true, Scope: Session})
	}
	for _, ch := range []<-chan Outcome{a, bb, merged} {
		if got := <-ch; !got.Allow {
			t.Errorf("%+v, want an allow", got)
		}
	}
}

func TestNobodyAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want Outcome
	}{
		{"deny", Config{Deny: true, Ask: never(t)}, Outcome{DecidedBy: ByPolicy, Reason: "approvals are off (--approvals deny)"}},
		{"no asker", Config{}, Outcome{DecidedBy: ByNoClient, Reason: "no client can ask"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t, tc.cfg)
			got := b.Decide(context.Background(), netReq("h1", "example.com:443"))
			tc.want.Kind, tc.want.Target = Network, "example.com:443"
			if diff := cmp.Diff(tc.want, got, ignoreIDs); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle string
		store  bool
		answer Answer
		err    error
		by     DecidedBy
		reason string
	}{
		{"scope not offered", "h1", true, Answer{Allow: true, Scope: "forever"}, nil, ByPolicy, `scope "forever" was not offered`},
		{"always without a store", "h1", false, Answer{Allow: true, Scope: Always}, nil, ByPolicy, `scope "always" was not offered`},
		{"command without a handle", "", true, Answer{Allow: true, Scope: Command}, nil, ByPolicy, `scope "command" was not offered`},
		{"allow without a scope", "h1", true, Answer{Allow: true}, nil, ByPolicy, "no scope"},
		{"an error answer", "h1", true, Answer{Allow: true, Scope: Session}, errors.New("user closed the dialog"), ByPolicy, "the client answered with an error: user closed the dialog"},
		{"no client", "h1", true, Answer{}, fmt.Errorf("connection ended: %w", ErrNoClient), ByNoClient, "no client can ask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Root: root, Ask: func(ctx context.Context, r Request) (Answer, error) { return tc.answer, tc.err }}
			if tc.store {
				cfg.Store = openStore(t)
			}
			b := newBroker(t, cfg)
			got := b.Decide(context.Background(), netReq(tc.handle, "example.com:443"))
			if got.Allow || got.Scope != "" || got.DecidedBy != tc.by || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("Decide: %+v, want a deny %s saying %q", got, tc.by, tc.reason)
			}
			if gs := b.Grants(); len(gs) != 0 {
				t.Errorf("a bad answer was remembered: %+v", gs)
			}
		})
	}
}

func TestBadRequest(t *testing.T) {
	b := newBroker(t, Config{Ask: never(t)})
	for _, r := range []Request{{Kind: "file", Target: "/etc/passwd"}, {Kind: Network}} {
		if got := b.Decide(context.Background(), r); got.Allow || got.DecidedBy != ByPolicy {
			t.Errorf("Decide(%+v): %+v, want a deny by policy", r, got)
		}
	}
}

func TestRevoke(t *testing.T) {
	store := openStore(t)
	var scope Scope
	var asks atomic.Int32
	b := newBroker(t, Config{Store: store, Root: root, Ask: func(ctx context.Context, r Request) (Answer, error) {
		asks.Add(1)
		return Answer{Allow: true, Scope: scope}, nil
	}})
	for _, scope = range []Scope{Command, Session, Always} {
		target := string(scope) + ".example:443"
		b.Decide(context.Background(), netReq("h1", target))
		gs := b.Grants()
		if len(gs) != 1 || gs[0].Scope != scope {
			t.Fatalf("Grants: %+v, want one of scope %s", gs, scope)
		}
		if err := b.Revoke(gs[0].ID); err != nil {
			t.Fatalf("Revoke %s: %v", scope, err)
		}
		if gs := b.Grants(); len(gs) != 0 {
			t.Errorf("Grants after the revoke of a %s grant: %+v", scope, gs)
		}
		before := asks.Load()
		if b.Decide(context.Background(), netReq("h1", target)); asks.Load() == before {
			t.Errorf("a revoked %s grant still answers", scope)
		}
		b.Revoke(b.Grants()[0].ID) // what the second ask remembered
	}
	if all, err := store.All(); err != nil || len(all) != 0 {
		t.Errorf("the Store after the revokes: %+v, %v", all, err)
	}
	for _, id := range []string{"g-0123", "", "a-0123"} {
		if err := b.Revoke(id); !errors.Is(err, ErrUnknown) {
			t.Errorf("Revoke(%q): %v, want ErrUnknown", id, err)
		}
	}
	// An Always grant of another root is not this Broker's to revoke.
	other := Grant{ID: newID("g-"), Kind: Network, Target: "x.example:443", Scope: Always, Root: "/elsewhere", CreatedAt: t0}
	if err := store.Add(other); err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(other.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("Revoke of another root's grant: %v, want ErrUnknown", err)
	}
}

func TestClose(t *testing.T) {
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask})
	out := decideAsync(context.Background(), b, netReq("h1", "example.com:443"))
	c := u.next(t)
	b.Close()
	<-c.ctx.Done()
	if got := <-out; got.Allow || got.DecidedBy != ByNoClient {
		t.Errorf("pending at Close: %+v, want a deny ByNoClient", got)
	}
	if got := b.Decide(context.Background(), netReq("h1", "example.com:443")); got.Allow || got.DecidedBy != ByNoClient {
		t.Errorf("after Close: %+v, want a deny ByNoClient", got)
	}
}

func TestCommandAllowAfterEndCommandIsNotRemembered(t *testing.T) {
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask})
	waiting := watchWaits(b)
	out := decideAsync(context.Background(), b, netReq("h1", "example.com:443"))
	waits(t, waiting, 1)
	b.EndCommand("h1")
	u.next(t).answer(Answer{Allow: true, Scope: Command})
	<-out
	if gs := b.Grants(); len(gs) != 0 {
		t.Errorf("a Command grant of an ended command: %+v", gs)
	}
}

func TestRequestIDs(t *testing.T) {
	b := newBroker(t, Config{Deny: true})
	seen := map[string]bool{}
	var prev *big.Int
	for i := range 1000 {
		id := b.Decide(context.Background(), netReq("h1", "example.com:443")).ID
		hex, ok := strings.CutPrefix(id, "a-")
		n, isHex := new(big.Int).SetString(hex, 16)
		if !ok || !isHex || len(hex) < 32 {
			t.Fatalf("id %q: want a- and 128 bits of hex", id)
		}
		if seen[id] {
			t.Fatalf("id %q twice", id)
		}
		seen[id] = true
		if prev != nil {
			d := new(big.Int).Sub(n, prev)
			if d.Abs(d).BitLen() < 64 {
				t.Errorf("ids %d and %d are %v apart: sequential", i-1, i, d)
			}
		}
		prev = n
	}
}

func TestAlwaysThatCannotBeSavedIsADeny(t *testing.T) {
	store := openStore(t)
	if err := store.Add(alwaysGrant("/elsewhere", "x.example:443")); err != nil {
		t.Fatal(err)
	}
	u := newFakeUser()
	b := newBroker(t, Config{Ask: u.ask, Store: store, Root: root})
	out := decideAsync(context.Background(), b, netReq("h1", "example.com:443"))
	c := u.next(t)
	if !c.req.offers(Always) {
		t.Fatalf("scopes offered %v, want always among them", c.req.Scopes)
	}
	writeFile(t, store.Path(), "damaged meanwhile")
	c.answer(Answer{Allow: true, Scope: Always})
	got := <-out
	if got.Allow || got.DecidedBy != ByPolicy || !strings.Contains(got.Reason, "the grant could not be saved") {
		t.Errorf("Decide: %+v, want a deny by policy saying the grant could not be saved", got)
	}
	if got, _ := os.ReadFile(store.Path()); string(got) != "damaged meanwhile" {
		t.Errorf("the damaged file was overwritten: %q", got)
	}
}
