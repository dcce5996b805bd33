package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/internal/sshdtest"
	"github.com/toolhost/toolhost/protocol"
)

// farFlags are the flags of every far toolhost of the hub figures, and of
// the servers they are compared with: unconfined, so that the figures
// measure the hub and its transport, not the sandbox.
var farFlags = []string{"--sandbox", "off", "--log-level", "warn"}

// destFlag renders a --destination value, every word quoted.
func destFlag(name string, argv []string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return name + "=" + strings.Join(q, " ")
}

// farDir makes a directory of its own in the work directory for a far
// toolhost, with a root and an artifacts directory, and returns the
// toolhost's flags after --root.
func (b *bench) farDir(name string) (root string, flags []string, err error) {
	b.nextID++
	base := filepath.Join(b.work, fmt.Sprintf("%02d-%s", b.nextID, name))
	root = filepath.Join(base, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", nil, err
	}
	return root, append([]string{"--artifacts-dir", filepath.Join(base, "artifacts")}, farFlags...), nil
}

// runTrue runs `true` on s, on the destination dest when not empty, and
// returns the round trip.
func (s *server) runTrue(dest string) (time.Duration, error) {
	ctx, cancel := limit()
	defer cancel()
	t0 := time.Now()
	r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"true"}, Destination: dest})
	d := time.Since(t0)
	if err == nil && !r.Success {
		err = fmt.Errorf("runCommand true on %q did not succeed: %s %s", dest, r.Status, r.Stderr)
	}
	return d, err
}

// hubVersusStraight measures runCommand of `true` through a hub whose one
// destination, "far", is reached by transport(root) (the far toolhost's
// argv up to --root and its root), against the same request to a server
// with the same flags straight, interleaved.
func (b *bench) hubVersusStraight(name string, transport []string) (hub, straight durations, err error) {
	farRoot, flags, err := b.farDir(name + "-far")
	if err != nil {
		return nil, nil, err
	}
	argv := append(append(append([]string{}, transport...), b.bin, "--root", farRoot), flags...)
	h, err := b.startServer(name, append([]string{"--destination", destFlag("far", argv)}, farFlags...)...)
	if err != nil {
		return nil, nil, err
	}
	defer h.end()
	s, err := b.startServer(name+"-straight", farFlags...)
	if err != nil {
		return nil, nil, err
	}
	defer s.end()
	warm, n := b.iters(30, 5), b.iters(800, 30)
	for i := range warm + n {
		d, err := h.runTrue("far")
		if err != nil {
			return nil, nil, err
		}
		e, err := s.runTrue("")
		if err != nil {
			return nil, nil, err
		}
		if i >= warm {
			hub, straight = append(hub, d), append(straight, e)
		}
	}
	return hub, straight, nil
}

// hubLocal measures runCommand of `true` through the hub over a direct
// local transport (the far toolhost a child of the hub, its stdio the
// transport) against the same request to the same kind of server
// straight.
func (b *bench) hubLocal() error {
	hub, straight, err := b.hubVersusStraight("hub-local", nil)
	if err != nil {
		return err
	}
	p50, s50 := hub.pct(50), straight.pct(50)
	b.add(row{Figure: "`runCommand` of `true` through the hub, local transport, p50", Value: fmtDur(p50), Baseline: "the same straight: " + fmtDur(s50),
		Ratio: ratio(float64(p50), float64(s50)), Target: "≤ +0.3 ms", Met: met(p50-s50 <= 300*time.Microsecond),
		Why: "the hub adds one more JSON-RPC hop: the hub's read loop, package client's write to the far toolhost and its read loop, the answer decoded and its ids rewritten (a generic JSON walk), then encoded again for the client; on 2 shared cores the two servers' goroutines also compete for the CPU with the command."})
	b.add(row{Figure: "`runCommand` of `true` through the hub, local transport, p99", Value: fmtDur(hub.pct(99)), Baseline: "the same straight: " + fmtDur(straight.pct(99)),
		Ratio: ratio(float64(hub.pct(99)), float64(straight.pct(99)))})
	b.note("hub, local transport: %d rounds of `runCommand` of `true` with `destination` to a server whose destination is `toolhost --root …` run as its child, each followed by the same request straight to a server started with the far side's flags (%s); both unconfined.", len(hub), strings.Join(farFlags, " "))
	return nil
}

// hubSSH measures the same over ssh to an sshd on 127.0.0.1 started for
// the figure; without sshd it says why and measures nothing.
func (b *bench) hubSSH() error {
	d, err := sshdtest.Start(filepath.Join(b.work, "sshd"))
	if errors.Is(err, sshdtest.ErrNotInstalled) {
		b.logf("hub-ssh skipped: %v", err)
		b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh", Value: "skipped: " + err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Stop()
	hub, straight, err := b.hubVersusStraight("hub-ssh", d.Argv())
	if err != nil {
		return fmt.Errorf("%w (sshd log: %s)", err, d.LogTail())
	}
	p50, s50 := hub.pct(50), straight.pct(50)
	b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh, p50", Value: fmtDur(p50), Baseline: "the same straight: " + fmtDur(s50),
		Ratio: ratio(float64(p50), float64(s50))})
	b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh, p99", Value: fmtDur(hub.pct(99)), Baseline: "the same straight: " + fmtDur(straight.pct(99)),
		Ratio: ratio(float64(hub.pct(99)), float64(straight.pct(99)))})
	b.note("hub over ssh: as the local transport, the destination `ssh -T … root@127.0.0.1 toolhost --root …` to an OpenSSH sshd started for the figure on a free loopback port with keys made for it (%d rounds).", len(hub))
	return nil
}

// hubConcurrent measures 300 concurrent runCommand of `true`, 100 on each
// of three local destinations of one hub, against 100 on each of three
// servers straight, at once; medians of whole rounds, interleaved.
func (b *bench) hubConcurrent() error {
	const perDest, nDest = 100, 3
	var specs []string
	for i := range nDest {
		root, flags, err := b.farDir(fmt.Sprintf("hub-many-far%d", i))
		if err != nil {
			return err
		}
		specs = append(specs, "--destination", destFlag("d"+strconv.Itoa(i), append([]string{b.bin, "--root", root}, flags...)))
	}
	h, err := b.startServer("hub-many", append(specs, farFlags...)...)
	if err != nil {
		return err
	}
	defer h.end()
	var straight []*server
	for i := range nDest {
		s, err := b.startServer(fmt.Sprintf("hub-many-straight%d", i), farFlags...)
		if err != nil {
			return err
		}
		defer s.end()
		straight = append(straight, s)
	}
	// round sends 100 runCommand to each target at once and waits for
	// every answer.
	round := func(targets []*server, dests []string) (time.Duration, error) {
		ctx, cancel := limit()
		defer cancel()
		t0 := time.Now()
		var sent []*client.Pending
		for range perDest {
			for i, s := range targets {
				p, err := s.Send(ctx, protocol.MethodRunCommand, protocol.RunCommandParams{Argv: []string{"true"}, Destination: dests[i]})
				if err != nil {
					return 0, err
				}
				sent = append(sent, p)
			}
		}
		for _, p := range sent {
			var r protocol.ToolResult
			if err := p.Wait(ctx, &r); err != nil {
				return 0, err
			}
			if !r.Success {
				return 0, fmt.Errorf("runCommand true: %s %s", r.Status, r.Stderr)
			}
		}
		return time.Since(t0), nil
	}
	hubTargets, hubDests := []*server{h, h, h}, []string{"d0", "d1", "d2"}
	warm, n := 2, b.iters(15, 3)
	var got, base durations
	for i := range warm + n {
		d, err := round(hubTargets, hubDests)
		if err != nil {
			return fmt.Errorf("through the hub: %w", err)
		}
		e, err := round(straight, []string{"", "", ""})
		if err != nil {
			return fmt.Errorf("straight: %w", err)
		}
		if i >= warm {
			got, base = append(got, d), append(base, e)
		}
	}
	p50, s50 := got.pct(50), base.pct(50)
	b.add(row{Figure: "300 concurrent `runCommand` of `true` across 3 local destinations → every answer (median)", Value: fmtDur(p50),
		Baseline: "100 each to 3 servers straight, at once: " + fmtDur(s50), Ratio: ratio(float64(p50), float64(s50))})
	b.note("300 concurrent commands: %d rounds (after %d to warm up) of 100 `runCommand` of `true` to each of three local destinations of one hub, all sent before any answer is awaited, each round followed by the same 300 straight to three servers (one client each); time from the first write to the last answer.", n, warm)
	return nil
}
