package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// eventsRate compares the rate of event notifications a jsonl longRunning
// delivers with the child's raw rate: the same program printing the same
// JSON lines into a file.
func (b *bench) eventsRate() error {
	s, err := b.startServer("events", "--sandbox", "off")
	if err != nil {
		return err
	}
	defer s.end()
	n := b.iters(200000, 5000)
	script := fmt.Sprintf(`import sys
w = sys.stdout.write
for i in range(%d):
    w('{"type":"progress","i":%%d,"msg":"step done"}\n' %% i)
`, n)
	// The raw rate: the program writing into a file.
	raw := filepath.Join(s.root, "raw.jsonl")
	out, err := os.Create(raw)
	if err != nil {
		return err
	}
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdout = out
	t0 := time.Now()
	err = cmd.Run()
	rawTook := time.Since(t0)
	out.Close()
	if err != nil {
		return err
	}
	got := make(chan int64, 1)
	count := int64(0)
	stop := client.OnNotification(s.Client, protocol.EventNotification, func(e *protocol.EventParams) {
		count++
		if count == int64(n) {
			got <- count
		}
	})
	defer stop()
	ctx, cancel := limit()
	defer cancel()
	t0 = time.Now()
	lr, err := s.LongRunning(ctx, &protocol.LongRunningParams{StdoutFormat: protocol.StdoutJSONL, RunCommandParams: protocol.RunCommandParams{Argv: []string{"python3", "-c", script}}})
	if err != nil {
		return err
	}
	select {
	case <-got:
	case <-ctx.Done():
		return fmt.Errorf("%d of %d events arrived", count, n)
	}
	took := time.Since(t0)
	if _, err := s.Wait(ctx, &protocol.WaitParams{HandleID: lr.HandleID}); err != nil {
		return err
	}
	rate := float64(n) / took.Seconds()
	rawRate := float64(n) / rawTook.Seconds()
	b.add(row{Figure: "`event` notifications per second (jsonl stdout, client reading)", Value: fmt.Sprintf("%.0f/s", rate)})
	b.add(row{Figure: "… against the child's raw line rate into a file", Value: fmt.Sprintf("%.0f/s (%.2f×)", rawRate, rate/rawRate),
		Why: "each line is split, checked as JSON and sent as its own notification, never coalesced: the child waits for the client."})
	b.note("Events: %d JSON lines of ~50 bytes from one Python loop; the raw figure is the same program writing into a file; the event figure is from longRunning to the last event received by the bench's client (unconfined).", n)
	return nil
}

// portLatency times from a listener's listen() to its portOpened.
func (b *bench) portLatency() error {
	s, err := b.startServer("ports", "--sandbox", "off")
	if err != nil {
		return err
	}
	defer s.end()
	opened := make(chan protocol.PortOpenedParams, 16)
	stop := client.OnNotification(s.Client, protocol.PortOpenedNotification, func(p *protocol.PortOpenedParams) { opened <- *p })
	defer stop()
	// The listener prints the time it started listening, in Unix nanoseconds.
	script := `import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], time.time_ns(), flush=True)
sys.stdin.read()
`
	n := b.iters(30, 5)
	var got durations
	ctx, cancel := limit()
	defer cancel()
	for range n {
		lr, err := s.LongRunning(ctx, &protocol.LongRunningParams{OpenStdin: true, RunCommandParams: protocol.RunCommandParams{Argv: []string{"python3", "-c", script}}})
		if err != nil {
			return err
		}
		var p protocol.PortOpenedParams
		select {
		case p = <-opened:
		case <-ctx.Done():
			return fmt.Errorf("no portOpened")
		}
		at := time.Now()
		ro, err := s.ReadOutput(ctx, &protocol.ReadOutputParams{HandleID: lr.HandleID, Stream: protocol.OutputStreamStdout})
		if err != nil {
			return err
		}
		f := strings.Fields(ro.Data)
		if len(f) != 2 || f[0] != strconv.Itoa(p.Port) {
			return fmt.Errorf("the listener said %q, portOpened %d", ro.Data, p.Port)
		}
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		got = append(got, at.Sub(time.Unix(0, ns)))
		if _, err := s.Cancel(ctx, &protocol.CancelParams{HandleID: lr.HandleID}); err != nil {
			return err
		}
	}
	b.add(row{Figure: "port detection: listen() → `portOpened`, p50", Value: fmtDur(got.pct(50)), Target: "about half the 200 ms scan",
		Why: "the tree is scanned every 200 ms while a handle runs; nothing is scanned while none runs."})
	b.note("Ports: %d Python listeners on an ephemeral loopback port, each timed from the listen() it printed to the portOpened the bench received.", n)
	return nil
}
