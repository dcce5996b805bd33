package integration

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// killHolders SIGKILLs the env's holders and waits until they are gone.
func (p *persistEnv) killHolders() {
	p.t.Helper()
	pids := p.holderPIDs()
	if len(pids) == 0 {
		p.t.Fatal("no holder runs")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		awaitPidGone(p.t, pid, waitLimit)
	}
}

// TestPersistHolderKilledHandlesEndLost: a holder killed with SIGKILL
// runs no code; the next toolhost for the root kills what is left of its
// commands' trees and ends each open handle in exactly one toolResult
// with status "lost", which a resume gets, and a later resume does not
// get again. No process of the commands is left.
func TestPersistHolderKilledHandlesEndLost(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	a := start(t, p.options())
	init := a.initialize(nil)
	var handles []string
	for range 2 {
		h := a.longRun(map[string]any{"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & setsid sleep " + mk.Sleep + " & echo up; wait"}, "env": mk.env(), "streamOutput": true})
		a.awaitOutput(h.HandleID, "up")
		handles = append(handles, h.HandleID)
	}
	done := a.longRun(map[string]any{"argv": []string{"true"}})
	a.toolResultOf(done.HandleID)

	p.killHolders()
	a.wait() // the front ends with its holder

	b := start(t, p.options())
	b.initialize(resumeParams(init.SessionID, nil))
	for _, h := range handles {
		res := b.toolResultOf(h)
		if res.Status != protocol.StatusLost || res.Seq == 0 {
			t.Errorf("toolResult of %s = status %s, seq %d; want lost, numbered", h, res.Status, res.Seq)
		}
		var waited protocol.ToolResult
		b.mustCall("wait", map[string]any{"handleId": h}, &waited)
		if waited.Status != protocol.StatusLost {
			t.Errorf("wait %s = %s, want lost", h, waited.Status)
		}
	}
	awaitGone(t, mk, "", waitLimit)
	// A command of the resumed session runs, numbered after the lost ones.
	after := b.longRun(map[string]any{"argv": []string{"true"}})
	if slices.Contains(handles, after.HandleID) || after.HandleID == done.HandleID {
		t.Errorf("a new handle reuses the id %s", after.HandleID)
	}
	b.toolResultOf(after.HandleID)
	b.closeStdin()
	b.wait()

	c := start(t, p.options())
	c.initialize(resumeParams(init.SessionID, nil))
	var sess protocol.SessionList
	c.mustCall("sessions", map[string]any{}, &sess)
	if len(sess) != 1 || sess[0].SessionID != init.SessionID || !sess[0].Attached {
		t.Errorf("sessions = %+v; want the one session, attached", sess)
	}
	c.shutdown()
	if n := len(c.notifications("toolResult")); n != 0 {
		t.Errorf("a later resume got %d toolResults again, want none", n)
	}
}

// TestPersistLingerExpires: a detached session's commands are killed when
// its linger passes, and a resume then gets SessionNotFound, "expired".
func TestPersistLingerExpires(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	opts := p.options()
	opts.args = append(opts.args, "--linger", "300ms")
	a := start(t, opts)
	init := a.initialize(nil)
	h := a.longRun(map[string]any{"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo up; wait"}, "env": mk.env(), "streamOutput": true})
	a.awaitOutput(h.HandleID, "up")
	a.closeStdin()
	a.wait()
	awaitGone(t, mk, "", waitLimit)

	b := start(t, p.options())
	e := b.call("initialize", resumeParams(init.SessionID, nil), nil)
	if e == nil || e.Code != protocol.CodeSessionNotFound || errData(e).Reason != protocol.SessionExpired || errData(e).SessionID != init.SessionID {
		t.Fatalf("resume after the linger = %v (data %+v); want -32030, expired", e, errData(e))
	}
	// The connection goes on: a new session.
	res := b.initialize(nil)
	if res.SessionID == "" || res.SessionID == init.SessionID {
		t.Errorf("a new session after the refusal has id %q", res.SessionID)
	}
	b.shutdown()

	c := start(t, p.options())
	e = c.call("initialize", resumeParams(res.SessionID, nil), nil)
	if e == nil || e.Code != protocol.CodeSessionNotFound || errData(e).Reason != protocol.SessionEnded {
		t.Errorf("resume after shutdown = %v (data %+v); want -32030, ended", e, errData(e))
	}
}

// TestPersistSecondResumeOnAConnection: a connection resumes a session
// only with its first initialize. After a refused resume, a resume of a
// session that lives, on the same connection, is refused with -32602
// saying to open a new connection (not "unknown", which would be untrue);
// the connection may still start a new session, and the session named is
// untouched: a new connection resumes it.
func TestPersistSecondResumeOnAConnection(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	a := start(t, p.options())
	live := a.initialize(nil)
	a.closeStdin()
	a.wait()

	b := start(t, p.options())
	e := b.call("initialize", resumeParams("0123456789abcdef0123456789abcdef", nil), nil)
	if e == nil || e.Code != protocol.CodeSessionNotFound || errData(e).Reason != protocol.SessionUnknown {
		t.Fatalf("resume of an unknown session = %v (data %+v); want -32030, unknown", e, errData(e))
	}
	e = b.call("initialize", resumeParams(live.SessionID, nil), nil)
	if e == nil || e.Code != protocol.CodeInvalidParams || errData(e).Field != "initializationOptions.resume" || !strings.Contains(e.Message, "open a new connection to resume session "+live.SessionID) {
		t.Fatalf("a second resume on the connection = %v (data %+v); want -32602 on initializationOptions.resume, saying to open a new connection", e, errData(e))
	}
	fresh := b.initialize(nil)
	if fresh.SessionID == "" || fresh.SessionID == live.SessionID {
		t.Errorf("a new session after the refusals has id %q", fresh.SessionID)
	}
	b.shutdown()

	c := start(t, p.options())
	if got := c.initialize(resumeParams(live.SessionID, nil)); got.SessionID != live.SessionID {
		t.Errorf("a new connection's resume answered session %q, want %q", got.SessionID, live.SessionID)
	}
	c.shutdown()
}

// TestPersistResultsExactlyOnceAcrossReconnects: 200 handles end while
// the session is detached, and its clients come and go three times, each
// killed at a random point of what it is sent, each resuming with the
// last seq it has: every toolResult arrives exactly once, numbered 1 to
// 200 in order.
func TestPersistResultsExactlyOnceAcrossReconnects(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("200 commands")
	}
	const n = 200
	p := newPersistEnv(t)
	a := start(t, p.options("--max-processes", "256"))
	init := a.initialize(nil)
	for range n {
		a.longRun(map[string]any{"argv": []string{"sleep", "3"}})
	}
	// The commands end while no client is attached; the first may end
	// before.
	a.closeStdin()
	a.wait()

	seen := map[int64]string{}
	var last int64
	take := func(c *server) {
		t.Helper()
		for _, raw := range c.notifications("toolResult") {
			var r protocol.ToolResult
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			if prev, dup := seen[r.Seq]; dup {
				t.Fatalf("seq %d delivered twice (%s, %s)", r.Seq, prev, r.HandleID)
			}
			if r.Seq != last+1 {
				t.Fatalf("seq %d after %d", r.Seq, last)
			}
			seen[r.Seq], last = r.HandleID, r.Seq
		}
	}
	take(a)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := 0; len(seen) < n; round++ {
		if round > 10 {
			t.Fatalf("after %d rounds %d of %d toolResults", round, len(seen), n)
		}
		// The first resume names no lastSeq: it gets every toolResult
		// not yet written to a connection.
		var lastSeq *int64
		if round > 0 {
			lastSeq = ptr(last)
		}
		c := start(t, p.options())
		c.initialize(resumeParams(init.SessionID, lastSeq))
		stopAt := n
		if round < 3 {
			stopAt = min(n, len(seen)+1+rng.IntN(n/3))
		}
		c.notification("toolResult", stopAt-len(seen), nil, nil)
		if round < 3 {
			c.cmd.Process.Kill() // a client killed mid-stream
			c.wait()
			take(c)
		} else {
			c.shutdown()
			take(c)
		}
	}
	handles := map[string]bool{}
	for _, h := range seen {
		if handles[h] {
			t.Errorf("handle %s got two toolResults", h)
		}
		handles[h] = true
	}
	if len(handles) != n {
		t.Errorf("%d handles got a toolResult, want %d", len(handles), n)
	}
}

// TestPersistHolderKilledNarrowedRoot: a session whose client narrowed
// the workspace inside --root is still the holder's of --root, which the
// next toolhost starts: it kills what the dead holder's commands left,
// and a resume gets their handles lost.
func TestPersistHolderKilledNarrowedRoot(t *testing.T) {
	t.Parallel()
	p := newPersistEnv(t)
	mk := newMarker()
	sub := filepath.Join(p.root, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	uri := "file://" + sub
	a := start(t, p.options())
	init := a.initialize(&protocol.InitializeParams{RootURI: &uri})
	if init.Workspace.Root != sub {
		t.Fatalf("workspace root %q, want the narrowed %q", init.Workspace.Root, sub)
	}
	h := a.longRun(map[string]any{"argv": []string{"sh", "-c", "setsid sleep " + mk.Sleep + " & echo up; wait"}, "env": mk.env(), "streamOutput": true})
	a.awaitOutput(h.HandleID, "up")
	p.killHolders()
	a.wait()

	b := start(t, p.options())
	b.initialize(resumeParams(init.SessionID, nil))
	if res := b.toolResultOf(h.HandleID); res.Status != protocol.StatusLost {
		t.Errorf("toolResult of %s = %s, want lost", h.HandleID, res.Status)
	}
	awaitGone(t, mk, "", waitLimit)
	var sess protocol.SessionList
	b.mustCall("sessions", map[string]any{}, &sess)
	if len(sess) != 1 || sess[0].Root != sub {
		t.Errorf("sessions = %+v; want the one session, its root %s", sess, sub)
	}
	b.shutdown()
}
