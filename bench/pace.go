package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// readOutputWake measures how soon a readOutput waiting with waitMs
// answers once new output exists: a longRunning `cat FIFO` relays each
// line the bench writes into the FIFO to its stdout, and the bench times
// from its write to the answer of the readOutput that was waiting for it.
func (b *bench) readOutputWake() error {
	s, err := b.startServer("readoutput")
	if err != nil {
		return err
	}
	defer s.end()
	fifo := filepath.Join(s.root, "feed")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return err
	}
	ctx, cancel := limit()
	defer cancel()
	lr, err := s.LongRunning(ctx, &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"cat", "feed"}}})
	if err != nil {
		return err
	}
	defer s.Cancel(ctx, &protocol.CancelParams{HandleID: lr.HandleID})
	feed, err := os.OpenFile(fifo, os.O_WRONLY, 0) // waits for cat's open
	if err != nil {
		return err
	}
	defer feed.Close()
	warm, n := b.iters(20, 5), b.iters(300, 20)
	var got durations
	var next int64
	waitMs := int64(60000)
	for i := range warm + n {
		pend, err := s.Send(ctx, protocol.MethodReadOutput, protocol.ReadOutputParams{HandleID: lr.HandleID, Offset: &next, WaitMs: &waitMs})
		if err != nil {
			return err
		}
		// Give the request time to reach its wait: the figure is the wake,
		// not the request's own round trip.
		time.Sleep(3 * time.Millisecond)
		t0 := time.Now()
		if _, err := fmt.Fprintf(feed, "line %d\n", i); err != nil {
			return err
		}
		var r protocol.ReadOutputResult
		if err := pend.Wait(ctx, &r); err != nil {
			return err
		}
		d := time.Since(t0)
		if r.NextOffset <= next || !r.Running {
			return fmt.Errorf("readOutput woke without new bytes: %+v", r)
		}
		next = r.NextOffset
		if i >= warm {
			got = append(got, d)
		}
	}
	p50, p99 := got.pct(50), got.pct(99)
	b.add(row{Figure: "`readOutput` with `waitMs`: new output → answer, p50", Value: fmtDur(p50), Target: "≤ 1 ms", Met: met(p50 <= time.Millisecond),
		Why: "the path is the bench's write into the FIFO, `cat` reading and writing it, the server's pump reading the pipe and writing the artifact, the capture closing the channel the waiting request holds, a reread of the file and the JSON-RPC answer."})
	b.add(row{Figure: "`readOutput` with `waitMs`: new output → answer, p99", Value: fmtDur(p99)})
	b.note("`readOutput` wake-up: %d rounds (after %d to warm up): a `readOutput {waitMs: 60000}` at the end of a running `cat FIFO`'s output, 3 ms for it to reach its wait, then the bench writes a line into the FIFO and times until the answer carrying it arrives; the figure includes `cat`'s relay of the line.", n, warm)
	return nil
}

// yieldOverhead compares runCommand of `true` with a yieldMs it never
// reaches against runCommand without one, interleaved.
func (b *bench) yieldOverhead() error {
	s, err := b.startServer("yield", "--sandbox", "off")
	if err != nil {
		return err
	}
	defer s.end()
	ctx, cancel := limit()
	defer cancel()
	warm, n := b.iters(30, 5), b.iters(600, 30)
	yield := int64(60000)
	var with, without durations
	run := func(y *int64) (time.Duration, error) {
		t0 := time.Now()
		r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"true"}, YieldMs: y})
		d := time.Since(t0)
		if err == nil && (!r.Success || r.HandleID != "") {
			err = fmt.Errorf("runCommand true with yieldMs %v: %+v", y, r)
		}
		return d, err
	}
	for i := range warm + n {
		a, err := run(nil)
		if err != nil {
			return err
		}
		c, err := run(&yield)
		if err != nil {
			return err
		}
		if i >= warm {
			without, with = append(without, a), append(with, c)
		}
	}
	w50, o50 := with.pct(50), without.pct(50)
	b.add(row{Figure: "`runCommand` of `true` with `yieldMs` it never reaches, p50", Value: fmtDur(w50), Baseline: "without `yieldMs`: " + fmtDur(o50),
		Ratio: ratio(float64(w50), float64(o50)), Target: "no slower (≤ 1.05×)", Met: met(float64(w50) <= 1.05*float64(o50)),
		Why: "a yield costs one timer, stopped when the command ends first; the rest is noise of the fork on 2 shared cores."})
	b.note("`yieldMs`: %d rounds (after %d to warm up) of `runCommand true` to a `--sandbox off` server, alternately without `yieldMs` and with `yieldMs: 60000`.", n, warm)
	return nil
}
