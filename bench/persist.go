package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// persistArgs returns the flags of a persisted session whose state (and
// holder socket, XDG_RUNTIME_DIR being unset or not) lies in the work
// directory.
func (b *bench) persistArgs(name string) ([]string, error) {
	dir := filepath.Join(b.work, "state-"+name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return []string{"--persist", "--state-dir", dir}, nil
}

// persistRoundTrip measures the cheapest request on a persisted session,
// whose connection a holder serves on descriptors its front handed over,
// against the same request on a session served directly, interleaved.
func (b *bench) persistRoundTrip() error {
	direct, err := b.startServer("rtt-direct")
	if err != nil {
		return err
	}
	defer direct.end()
	args, err := b.persistArgs("rtt")
	if err != nil {
		return err
	}
	held, err := b.startServer("rtt-persist", args...)
	if err != nil {
		return err
	}
	defer held.end()

	warm, n := b.iters(500, 50), b.iters(10000, 200)
	var got, base durations
	ctx, cancel := limit()
	defer cancel()
	for i := range warm + n {
		t0 := time.Now()
		if _, err := held.Progress(ctx, &protocol.ProgressParams{}); err != nil {
			return err
		}
		d := time.Since(t0)
		t0 = time.Now()
		if _, err := direct.Progress(ctx, &protocol.ProgressParams{}); err != nil {
			return err
		}
		e := time.Since(t0)
		if i >= warm {
			got, base = append(got, d), append(base, e)
		}
	}
	p50, e50 := got.pct(50), base.pct(50)
	b.add(row{Figure: "`progress {}` round trip under `--persist`, p50", Value: fmtDur(p50), Baseline: "the same, served directly: " + fmtDur(e50),
		Ratio: ratio(float64(p50), float64(e50)), Target: "≤ 1.3× direct", Met: met(float64(p50) <= 1.3*float64(e50)),
		Why: "the holder serves the connection on the descriptors the front handed it (SCM_RIGHTS): no byte is relayed, so what is left is noise between two processes"})
	b.note("`progress {}` under `--persist`: %d requests (after %d to warm up) on a persisted session and on a direct one, interleaved, each timed from before the write to after the answer is decoded.", n, warm)
	return nil
}

// persistResume measures how soon a session holding 1,000 running handles
// answers the initialize of a connection that resumes it: from the
// front's start to the answer, and the initialize round trip alone.
func (b *bench) persistResume() error {
	n := b.iters(1000, 50)
	args, err := b.persistArgs("resume")
	if err != nil {
		return err
	}
	args = append(args, "--max-processes", strconv.Itoa(n+100))
	s, err := b.startServer("resume", args...)
	if err != nil {
		return err
	}
	ctx, cancel := limit()
	defer cancel()
	// The session id: sessions names it.
	var l protocol.SessionList
	if err := s.Call(ctx, protocol.MethodSessions, protocol.SessionsParams{}, &l); err != nil || len(l) != 1 {
		s.close(false)
		return fmt.Errorf("sessions = %v, %v", l, err)
	}
	id := l[0].SessionID
	sent := make([]*client.Pending, n)
	for i := range sent {
		if sent[i], err = s.Send(ctx, protocol.MethodLongRunning, protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"sleep", "300"}}}); err != nil {
			return err
		}
	}
	for i, p := range sent {
		var r protocol.LongRunningResult
		if err := p.Wait(ctx, &r); err != nil {
			return fmt.Errorf("longRunning %d: %w", i, err)
		}
	}
	if err := s.close(false); err != nil { // detached: the front ends, the commands go on
		b.logf("detach: %v", err)
	}

	var spawn, rtt durations
	rounds := 5
	var last *server
	for i := range rounds {
		base := filepath.Join(b.work, fmt.Sprintf("resume-%d", i))
		os.MkdirAll(base, 0o755)
		argv := append([]string{b.bin, "--framing", "ndjson", "--root", s.root, "--log-level", "warn"}, args...)
		t0 := time.Now()
		c, err := startChild(argv, s.root, filepath.Join(base, "stderr.log"), nil)
		if err != nil {
			return err
		}
		t1 := time.Now()
		res, err := c.Initialize(ctx, &protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Resume: &protocol.ResumeOptions{SessionID: id}}})
		if err != nil {
			c.close(false)
			return fmt.Errorf("resume: %w", err)
		}
		spawn, rtt = append(spawn, time.Since(t0)), append(rtt, time.Since(t1))
		if res.SessionID != id {
			return fmt.Errorf("resumed %q, want %q", res.SessionID, id)
		}
		var l protocol.SessionList
		if err := c.Call(ctx, protocol.MethodSessions, protocol.SessionsParams{}, &l); err != nil || len(l) != 1 || l[0].Handles != n {
			return fmt.Errorf("sessions after the resume = %+v, %v; want %d handles", l, err, n)
		}
		if i == rounds-1 {
			last = &server{child: c, root: s.root, artifacts: s.artifacts}
			break
		}
		c.close(false)
	}
	defer last.end() // shutdown ends the session and its 1,000 commands
	b.add(row{Figure: fmt.Sprintf("resuming `initialize` of a session with %d running handles, p50 of %d", n, rounds), Value: fmtDur(rtt.pct(50)),
		Baseline: "from the front's start: " + fmtDur(spawn.pct(50)), Target: "≤ 100 ms", Met: met(rtt.pct(50) <= 100*time.Millisecond && spawn.pct(50) <= 100*time.Millisecond),
		Why: "a resume moves the connection onto the session and answers its first initialize; nothing is done per handle"})
	b.note("Resume: a persisted session starts %d `sleep 300` handles, its client closes its stdin (the session detaches), and %d new fronts each resume it, one after the other; the value times the initialize round trip, the baseline from the front's exec to the answer.", n, rounds)
	return nil
}
