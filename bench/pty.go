package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/creack/pty"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// rawCat is the command both sides of the PTY echo run: cat in a terminal
// set raw and without echo, so that what comes back is cat's own copy of
// the bytes, untranslated, once READY is out.
var rawCat = []string{"sh", "-c", "stty raw -echo && echo READY && exec cat"}

// echoWatch finds a token in a handle's streamed terminal output: the
// client's notification handler feeds it, the bench waits on got. mu
// guards buf and want.
type echoWatch struct {
	mu     sync.Mutex
	handle string // guarded by mu
	buf    []byte // output since want was set
	want   []byte // the token awaited; nil when none is
	bad    error  // output that does not decode; guarded by mu
	// got receives the time the handler saw want.
	got chan time.Time
}

// expect makes tok the token awaited, forgetting earlier output.
func (e *echoWatch) expect(tok []byte) {
	e.mu.Lock()
	e.buf, e.want = e.buf[:0], tok
	e.mu.Unlock()
}

// onOutput is the client's handler of output notifications.
func (e *echoWatch) onOutput(o *protocol.OutputParams) {
	at := time.Now()
	data := []byte(o.Data)
	if o.Encoding == protocol.EncodingBase64 {
		var err error
		if data, err = base64.StdEncoding.DecodeString(o.Data); err != nil {
			e.mu.Lock()
			e.bad = err
			e.mu.Unlock()
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o.HandleID != e.handle {
		return
	}
	e.buf = append(e.buf, data...)
	if e.want != nil && bytes.Contains(e.buf, e.want) {
		e.want, e.buf = nil, e.buf[:0]
		select {
		case e.got <- at:
		default:
		}
	}
}

// ptyEcho measures writeInput → the output notification that carries its
// echo, through `cat` under a PTY, against the same echo through a PTY the
// bench holds itself (the kernel's terminal and cat, without toolhost),
// interleaved.
func (b *bench) ptyEcho() error {
	s, err := b.startServer("pty-echo")
	if err != nil {
		return err
	}
	defer s.end()
	ctx, cancel := limit()
	defer cancel()
	w := &echoWatch{got: make(chan time.Time, 1)}
	ready := make(chan struct{})
	var readyOnce sync.Once
	stop := client.OnNotification(s.Client, protocol.OutputNotification, func(o *protocol.OutputParams) {
		if o.Stream == protocol.StreamPty && bytes.Contains([]byte(o.Data), []byte("READY")) {
			readyOnce.Do(func() { close(ready) })
		}
		w.onOutput(o)
	})
	defer stop()
	lr, err := s.LongRunning(ctx, &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: rawCat}, StreamOutput: true, Pty: &protocol.DefaultPtySize})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.handle = lr.HandleID
	w.mu.Unlock()
	defer s.Cancel(ctx, &protocol.CancelParams{HandleID: lr.HandleID})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return errors.New("cat under a PTY printed no READY within 30 s")
	}

	local, err := startLocalEcho()
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	defer local.close()

	warm, n := b.iters(50, 10), b.iters(2000, 100)
	var got, base durations
	for i := range warm + n {
		tok := []byte("k" + strconv.Itoa(i) + ".")
		w.expect(tok)
		t0 := time.Now()
		pend, err := s.Send(ctx, protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: lr.HandleID, Data: string(tok)})
		if err != nil {
			return err
		}
		var at time.Time
		select {
		case at = <-w.got:
		case <-time.After(30 * time.Second):
			w.mu.Lock()
			bad := w.bad
			w.mu.Unlock()
			return fmt.Errorf("no echo of %q within 30 s (%v)", tok, bad)
		}
		var r protocol.WriteInputResult
		if err := pend.Wait(ctx, &r); err != nil {
			return err
		}
		if r.BytesWritten != int64(len(tok)) {
			return fmt.Errorf("writeInput of %d bytes answered bytesWritten %d", len(tok), r.BytesWritten)
		}
		d := at.Sub(t0)
		e, err := local.roundTrip(tok)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		if i >= warm {
			got, base = append(got, d), append(base, e)
		}
	}
	p50, p99, e50, e99 := got.pct(50), got.pct(99), base.pct(50), base.pct(99)
	b.add(row{Figure: "`writeInput` → its echo in an `output` notification, `cat` under a PTY, p50", Value: fmtDur(p50),
		Baseline: "the same echo through a PTY the bench holds: " + fmtDur(e50), Ratio: ratio(float64(p50), float64(e50)),
		Target: "≤ 1 ms", Met: met(p50 <= time.Millisecond),
		Why: "the path is the request's read and decode, the write to the terminal's master, the kernel's line discipline and `cat`'s read and write, the server's pump reading the master, the artifact writes and the output notification's encode and write."})
	b.add(row{Figure: "`writeInput` → its echo in an `output` notification, `cat` under a PTY, p99", Value: fmtDur(p99),
		Baseline: "the same echo through a PTY the bench holds: " + fmtDur(e99), Ratio: ratio(float64(p99), float64(e99))})
	b.note("PTY echo: %d rounds (after %d to warm up) on one `longRunning` of `%s` with `pty: true` and `streamOutput`: the bench writes a short token with `writeInput` and times from before the request to the moment its notification handler sees the token in the `output` notifications (stream `pty`), then waits for the request's answer; interleaved with the same token written to, and read back from, a PTY the bench opens itself (github.com/creack/pty) running the same command.", n, warm, rawCat[2])
	return nil
}

// localEcho is the baseline of the PTY echo: the same command in a PTY
// the bench holds.
type localEcho struct {
	cmd    *exec.Cmd
	master *os.File
	buf    []byte
}

// startLocalEcho starts rawCat in a PTY and reads up to its READY.
func startLocalEcho() (*localEcho, error) {
	cmd := exec.Command(rawCat[0], rawCat[1:]...)
	master, err := pty.Start(cmd)
	if err != nil {
		return nil, err
	}
	l := &localEcho{cmd: cmd, master: master, buf: make([]byte, 0, 4096)}
	if err := l.readUntil([]byte("READY\n")); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// readUntil reads the master until tok has come, forgetting what came
// with it.
func (l *localEcho) readUntil(tok []byte) error {
	l.buf = l.buf[:0]
	chunk := make([]byte, 4096)
	for !bytes.Contains(l.buf, tok) {
		n, err := l.master.Read(chunk)
		if err != nil {
			return fmt.Errorf("reading the PTY for %q: %w", tok, err)
		}
		l.buf = append(l.buf, chunk[:n]...)
	}
	return nil
}

// roundTrip writes tok and times until it has come back.
func (l *localEcho) roundTrip(tok []byte) (time.Duration, error) {
	t0 := time.Now()
	if _, err := l.master.Write(tok); err != nil {
		return 0, err
	}
	if err := l.readUntil(tok); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// close ends the command and the PTY.
func (l *localEcho) close() {
	_ = l.cmd.Process.Kill()
	_ = l.master.Close()
	_ = l.cmd.Wait()
}

// ptyOutputSize is what the PTY throughput figure's child prints.
const ptyOutputSize = 100_000_000

// ptyProducer prints ptyOutputSize bytes of 'x', no newline, so that the
// terminal translates nothing: the same bytes arrive as were written.
var ptyProducer = `head -c ` + strconv.Itoa(ptyOutputSize) + ` /dev/zero | tr '\0' x`

// ptyOutput measures a child printing 100 MB under a PTY, streamed to the
// client, and the server's peak RSS, against the same producer writing
// into a file without a terminal, interleaved.
func (b *bench) ptyOutput() error {
	reps := b.iters(3, 1)
	var got, base, held durations
	var hwm, notes, skipped int64
	for range reps {
		s, err := b.startServer("pty-output")
		if err != nil {
			return err
		}
		d, n, sk, h, err := b.ptyOutputOnce(s)
		if eerr := s.end(); err == nil {
			err = eerr
		}
		if err != nil {
			return err
		}
		got, hwm, notes, skipped = append(got, d), max(hwm, h), n, sk

		file := filepath.Join(b.work, "pty-producer.out")
		syncDisks()
		t0 := time.Now()
		if out, err := exec.Command("sh", "-c", ptyProducer+` > "$1"`, "sh", file).CombinedOutput(); err != nil {
			return fmt.Errorf("baseline: %v: %s", err, out)
		}
		base = append(base, time.Since(t0))
		if err := checkSize(file); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		os.Remove(file)

		syncDisks()
		t0 = time.Now()
		if err := producerThroughPty(file); err != nil {
			return fmt.Errorf("baseline through a PTY: %w", err)
		}
		held = append(held, time.Since(t0))
		if err := checkSize(file); err != nil {
			return fmt.Errorf("baseline through a PTY: %w", err)
		}
		os.Remove(file)
	}
	rate := func(d time.Duration) float64 { return float64(ptyOutputSize) / 1e6 / d.Seconds() }
	g, e, k := rate(got.pct(50)), rate(base.pct(50)), rate(held.pct(50))
	b.add(row{Figure: "100 MB through a PTY, streamed (median)", Value: fmt.Sprintf("%.0f MB/s", g),
		Baseline: fmt.Sprintf("the same producer `> file`, no PTY: %.0f MB/s", e), Ratio: ratio(g, e)})
	b.add(row{Figure: "100 MB through a PTY, streamed, against the terminal alone (median)", Value: fmt.Sprintf("%.0f MB/s", g),
		Baseline: fmt.Sprintf("the same producer in a PTY the bench reads into a file: %.0f MB/s", k), Ratio: ratio(g, k)})
	b.add(row{Figure: "server peak RSS (VmHWM) while a child prints 100 MB under a PTY", Value: mib(hwm), Target: "≤ 64 MiB", Met: met(hwm <= 64<<20)})
	b.note("PTY throughput: `longRunning` of `sh -c \"%s\"` with `pty: true` and `streamOutput`, timed from the request to the `toolResult` (which must say 100000000 bytes in `outputPath`), the client reading every notification (the last run: %d `output` notifications, %d bytes skipped by coalescing); against `sh -c \"%s > file\"` in the same work directory, and against the same producer in a PTY the bench opens (github.com/creack/pty) and copies into a file in 64 KiB reads (what the kernel's terminal alone allows); %d runs each, interleaved, a fresh server each time, `sync` before each, medians. The peak RSS is the server's VmHWM after the largest of those runs.",
		ptyProducer, notes, skipped, ptyProducer, reps)
	return nil
}

// checkSize checks that file holds ptyOutputSize bytes.
func checkSize(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if fi.Size() != ptyOutputSize {
		return fmt.Errorf("%s holds %d bytes, want %d", file, fi.Size(), ptyOutputSize)
	}
	return nil
}

// producerThroughPty runs ptyProducer in a PTY of its own and copies the
// terminal's output into file until the terminal ends (EIO once the
// producer is gone).
func producerThroughPty(file string) error {
	cmd := exec.Command("sh", "-c", ptyProducer)
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(protocol.DefaultPtySize.Rows), Cols: uint16(protocol.DefaultPtySize.Cols)})
	if err != nil {
		return err
	}
	defer master.Close()
	f, err := os.Create(file)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	buf := make([]byte, 64<<10)
	var werr error
	for {
		n, err := master.Read(buf)
		if n > 0 && werr == nil {
			_, werr = f.Write(buf[:n])
		}
		if err != nil {
			break // EIO: the terminal's last holder is gone
		}
	}
	return errors.Join(werr, f.Close(), cmd.Wait())
}

// ptyOutputOnce runs the PTY producer once on s and returns its time, the
// number of output notifications and bytes they skipped, and the server's
// VmHWM.
func (b *bench) ptyOutputOnce(s *server) (d time.Duration, notes, skipped, hwm int64, err error) {
	ctx, cancel := limit()
	defer cancel()
	var mu sync.Mutex // guards notes and skipped
	// done gets every toolResult; the server runs only this command.
	done := make(chan protocol.ToolResult, 1)
	stopOut := client.OnNotification(s.Client, protocol.OutputNotification, func(o *protocol.OutputParams) {
		mu.Lock()
		notes++
		skipped += o.Skipped
		mu.Unlock()
	})
	defer stopOut()
	stopRes := client.OnNotification(s.Client, protocol.ToolResultNotification, func(r *protocol.ToolResult) {
		select {
		case done <- *r:
		default:
		}
	})
	defer stopRes()
	syncDisks()
	t0 := time.Now()
	lr, err := s.LongRunning(ctx, &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"sh", "-c", ptyProducer}}, StreamOutput: true, Pty: &protocol.DefaultPtySize})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	var r protocol.ToolResult
	select {
	case r = <-done:
	case <-ctx.Done():
		return 0, 0, 0, 0, fmt.Errorf("no toolResult within %v", callLimit)
	}
	d = time.Since(t0)
	if r.HandleID != lr.HandleID {
		return 0, 0, 0, 0, fmt.Errorf("toolResult of %q, want %q", r.HandleID, lr.HandleID)
	}
	if !r.Success || r.Artifacts.ByteCount != ptyOutputSize {
		return 0, 0, 0, 0, fmt.Errorf("PTY producer: success %v, %d bytes in outputPath, want %d", r.Success, r.Artifacts.ByteCount, ptyOutputSize)
	}
	if hwm, err = memoryOf(s.pid(), "VmHWM"); err != nil {
		return 0, 0, 0, 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	return d, notes, skipped, hwm, nil
}
