package approval

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// t0 is the fake clock's time.
var t0 = time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)

func fakeNow() time.Time { return t0 }

// call is one question put to a fakeUser, answered by the test.
type call struct {
	ctx   context.Context
	req   Request
	reply chan reply
}

type reply struct {
	ans Answer
	err error
}

func (c call) answer(a Answer) { c.reply <- reply{ans: a} }
func (c call) fail(err error)  { c.reply <- reply{err: err} }

// fakeUser is an Asker that hands each question to the test (calls) and
// blocks until the test answers it, or until its context ends.
type fakeUser struct {
	calls chan call
	n     atomic.Int32
}

func newFakeUser() *fakeUser { return &fakeUser{calls: make(chan call, 1000)} }

func (u *fakeUser) ask(ctx context.Context, r Request) (Answer, error) {
	u.n.Add(1)
	c := call{ctx: ctx, req: r, reply: make(chan reply, 1)}
	u.calls <- c
	select {
	case rp := <-c.reply:
		return rp.ans, rp.err
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// next returns the next question put to u.
func (u *fakeUser) next(t *testing.T) call {
	t.Helper()
	return <-u.calls
}

// answering is an Asker that answers every question at once with a,
// counting them in n.
func answering(a Answer, n *atomic.Int32) Asker {
	return func(ctx context.Context, r Request) (Answer, error) {
		n.Add(1)
		return a, nil
	}
}

// never is an Asker the test says must not be called.
func never(t *testing.T) Asker {
	return func(ctx context.Context, r Request) (Answer, error) {
		t.Errorf("asked %+v; nobody should have been", r)
		return Answer{}, ErrNoClient
	}
}

// newBroker returns a Broker for cfg (with the fake clock), closed when
// the test ends.
func newBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = fakeNow
	}
	b := New(cfg)
	t.Cleanup(b.Close)
	return b
}

// watchWaits makes b report on the returned channel each time a caller of
// Decide starts waiting on an ask. It must be called before any Decide.
func watchWaits(b *Broker) <-chan Request {
	ch := make(chan Request, 1000)
	b.waiting = func(r Request) { ch <- r }
	return ch
}

// waits receives n reports from ch.
func waits(t *testing.T, ch <-chan Request, n int) {
	t.Helper()
	for range n {
		<-ch
	}
}

// decideAsync runs Decide in a goroutine whose outcome the returned
// channel gives (the test owns the goroutine, and waits for it there).
func decideAsync(ctx context.Context, b *Broker, r Request) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() { ch <- b.Decide(ctx, r) }()
	return ch
}

// netReq is a network request of handle h for target.
func netReq(h, target string) Request {
	return Request{HandleID: h, Argv: []string{"curl", "https://" + target}, Cwd: "/root", Kind: Network, Target: target}
}

// openStore opens a Store in a fresh directory (its parent, config/, is
// created by the first Add).
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "config", "toolhost", "grants.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testTimeout is the Timeout of the tests that wait for one: short, as
// nothing is answered in them.
const testTimeout = 20 * time.Millisecond

// writeFile replaces path's content, as another program would.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
