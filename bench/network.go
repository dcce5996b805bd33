package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/protocol"
)

// downloadSize is the network figure's download, issue 25's 100 MB (the
// same 100 MiB as netproxy's BenchmarkDownload).
const downloadSize = 100 << 20

// network measures issue 25's three figures for a command under a network
// allow-list: the cost of the allow-list to a confined true, a download
// through the proxy against a direct one, and the proxy's connection setup.
func (b *bench) network() error {
	s, err := b.startServer("network")
	if err != nil {
		return err
	}
	defer s.end()
	if err := b.networkTrue(s); err != nil {
		return err
	}
	if err := b.networkDownload(s); err != nil {
		return err
	}
	return b.proxySetup()
}

// networkTrue runs a confined true under an allow-list naming a port no one
// listens on against one with the network off, interleaved.
func (b *bench) networkTrue(s *server) error {
	warm, n := b.iters(20, 5), b.iters(400, 30)
	allowList := &protocol.Sandbox{Network: &protocol.Network{Allow: []string{"127.0.0.1:1"}}}
	off := &protocol.Sandbox{Network: protocol.NetworkOff()}
	ctx, cancel := limit()
	defer cancel()
	run := func(sb *protocol.Sandbox) (time.Duration, error) {
		t0 := time.Now()
		r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"true"}, Sandbox: sb})
		d := time.Since(t0)
		if err == nil && !r.Success {
			err = fmt.Errorf("runCommand true did not succeed: %+v", r)
		}
		return d, err
	}
	var got, base durations
	for i := range warm + n {
		a, err := run(allowList)
		if err != nil {
			return fmt.Errorf("under an allow-list: %w", err)
		}
		o, err := run(off)
		if err != nil {
			return fmt.Errorf("network off: %w", err)
		}
		if i >= warm {
			got, base = append(got, a), append(base, o)
		}
	}
	g, o := got.pct(50), base.pct(50)
	b.add(row{Figure: "`runCommand` of `true`, confined, network allow-list, p50", Value: fmtDur(g), Baseline: "confined, network off: " + fmtDur(o),
		Ratio: ratio(float64(g), float64(o)), Target: "≤ 1.5×", Met: met(float64(g) <= 1.5*float64(o)),
		Why: fmt.Sprintf("the allow-list costs %s a command here over a network-off one: the forking thread unshares a network namespace of its own (CLONE_NEWNET, a kernel allocation of a whole network stack, freed after the command by a deferred cleanup the kernel batches), brings up its loopback, opens the proxy's listener inside it, and the server starts a netproxy.Proxy to serve it and closes it when the command ends; none of it can be kept across commands, as each command's proxy enforces that command's own list.",
			fmtDur(g-o))})
	b.note("allow-list `true`: %d rounds (after %d to warm up) of `runCommand` `true` on a default (confined, workspace-write) server with `sandbox: {network: {allow: [\"127.0.0.1:1\"]}}`, interleaved with the same with `sandbox: {network: false}`; each request's round trip includes the JSON-RPC exchange; medians.", n, warm)
	return nil
}

// networkDownload downloads 100 MiB with curl, run by the server, from a
// loopback HTTP server in this process: through the proxy under an
// allow-list naming it, and directly (--noproxy '*', network on),
// interleaved, comparing curl's own time_total.
func (b *bench) networkDownload(s *server) error {
	const figure = "100 MiB download through the proxy from a loopback server (curl's time_total, p50)"
	if _, err := exec.LookPath("curl"); err != nil {
		b.add(row{Figure: figure, Value: "skipped: curl is not installed on this machine", Target: "≥ 0.8×"})
		return nil
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/100mb" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(downloadSize))
		for range downloadSize / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go srv.Serve(l) // ended by the Close deferred below
	defer srv.Close()
	origin := l.Addr().String()
	url := "http://" + origin + "/100mb"
	curl := []string{"curl", "-s", "-S", "-o", "/dev/null", "-w", "%{time_total} %{size_download}"}
	proxied := &protocol.RunCommandParams{Argv: append(curl, url),
		Sandbox: &protocol.Sandbox{Network: &protocol.Network{Allow: []string{origin}}}}
	tunnel := &protocol.RunCommandParams{Argv: append(append(curl[:len(curl):len(curl)], "--proxytunnel"), url), Sandbox: proxied.Sandbox}
	direct := &protocol.RunCommandParams{Argv: append(append(curl[:len(curl):len(curl)], "--noproxy", "*"), url),
		Sandbox: &protocol.Sandbox{Network: protocol.NetworkOn()}}
	fetch := func(p *protocol.RunCommandParams) (time.Duration, error) {
		ctx, cancel := limit()
		defer cancel()
		r, err := s.RunCommand(ctx, p)
		if err != nil {
			return 0, err
		}
		if !r.Success {
			return 0, fmt.Errorf("%s did not succeed: stdout %q stderr %q", strings.Join(p.Argv, " "), r.Stdout, r.Stderr)
		}
		var secs float64
		var size int64
		if _, err := fmt.Sscanf(r.Stdout, "%g %d", &secs, &size); err != nil {
			return 0, fmt.Errorf("curl's -w output %q: %v", r.Stdout, err)
		}
		if size != downloadSize {
			return 0, fmt.Errorf("curl downloaded %d bytes, want %d", size, downloadSize)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	reps := b.iters(15, 3)
	var got, tun, base durations
	for i := range reps + 1 { // the first of each warms up
		p, err := fetch(proxied)
		if err != nil {
			return fmt.Errorf("through the proxy: %w", err)
		}
		t, err := fetch(tunnel)
		if err != nil {
			return fmt.Errorf("through a CONNECT tunnel: %w", err)
		}
		d, err := fetch(direct)
		if err != nil {
			return fmt.Errorf("directly: %w", err)
		}
		if i > 0 {
			got, tun, base = append(got, p), append(tun, t), append(base, d)
		}
	}
	rate := func(d time.Duration) float64 { return float64(downloadSize) / (1 << 20) / d.Seconds() }
	g, t, d := rate(got.pct(50)), rate(tun.pct(50)), rate(base.pct(50))
	ok := g >= 0.8*d
	r := row{Figure: figure, Value: fmt.Sprintf("%.0f MiB/s", g), Baseline: fmt.Sprintf("the same curl, `--noproxy '*'`, network on: %.0f MiB/s", d),
		Ratio: ratio(g, d), Target: "≥ 0.8×", Met: met(ok)}
	if !ok {
		r.Why = b.downloadWhy(g/d, t/d)
	}
	b.add(r)
	b.add(row{Figure: "the same download through a CONNECT tunnel of the proxy (`curl --proxytunnel`), p50", Value: fmt.Sprintf("%.0f MiB/s", t),
		Baseline: fmt.Sprintf("direct: %.0f MiB/s", d), Ratio: ratio(t, d)})
	b.note("download: a `net/http` server in the bench process on 127.0.0.1 serves 100 MiB (1 MiB writes, Content-Length set); %d times (after 1 to warm up), interleaved, the server runs `curl -s -S -o /dev/null -w '%%{time_total} %%{size_download}' http://%s/100mb` confined with `sandbox: {network: {allow: [\"%s\"]}}` (curl reaches it through `http_proxy`, so the proxy forwards it as absolute-URI HTTP, from the command's namespace to the server's loopback), the same with `--proxytunnel` (a CONNECT tunnel, shown beside it for comparison; the proxy splices both, the plain body after its head), and the same with `--noproxy '*'` and `sandbox: {network: true}`; the figure is curl's own `time_total` (the download, not the command's start and end), medians, as MiB/s.", reps, origin, origin)
	return nil
}

// downloadWhy explains a download through the proxy under 0.8× a direct
// one: plain is its ratio in this run, tunnel the ratio of the same
// download through a CONNECT tunnel, and netproxy's BenchmarkDownload, run
// now, gives both hops alone (one Go process, no curl, no command).
func (b *bench) downloadWhy(plain, tunnel float64) string {
	why := "through the proxy every byte crosses two loopback TCP connections instead of one, the origin's to the proxy and the proxy's to curl in the command's namespace. " +
		"The proxy splices between them, 1 MiB at a time (splice(2) through a pipe: the bytes never enter it), both curl's plain `http://` body after its head and a CONNECT tunnel (`curl --proxytunnel`): " +
		fmt.Sprintf("%.2f× and %.2f× in this run. ", plain, tunnel) +
		"The proxy's side of the second connection asks for cubic (or reno) congestion control rather than the machine's default, BBR here, whose pacing by timer cost this download a third of its speed (0.46–0.48× before, in runs like this one). " +
		"What is left is CPU, and this VM has two vCPUs for three parties. A direct download is a two-stage pipeline: measured with perf over 30 downloads, the origin spends about 21 ms of CPU per 100 MiB and curl about 20 ms (27 ms with its start and exit), each on its own vCPU (pinned both to one, the direct download takes 39–43 ms instead of 20). " +
		"Through the proxy the proxy spends about 13.5 ms more (splice's read side acknowledges the origin's segments, which on loopback runs the origin's side in the proxy's context; its write side transmits every byte again on the second connection) and curl about 11 ms more: spliced bytes reach it in 4 KiB fragments (the kernel's splice into a socket takes a pipe's pages one page at a time), each copied and checked on its own (its copy 10.5–11.4 ms instead of 6.1, `_copy_to_iter` 1.8 ms more). " +
		"So the two vCPUs carry about 21 + 31 + 13.5 ms for a download whose direct form is bound by 21 ms on either: about 32 ms against 20–22, 0.62–0.7×; even a proxy costing no CPU at all would leave curl's fragments, near 0.8× at best. " +
		"Tried in this project and measured worse: a buffered copy with a 1 MiB buffer (curl's fragments are then 32 KiB, but the proxy's two copies cost 27 ms: 55–60 ms a download), smaller socket buffers and chunks of 128–512 KiB (39–65 ms: more wake-ups, and curl's copy unchanged, so not a cache effect), 64 KiB chunks, SO_RCVLOWAT. " +
		"Meeting 0.8× on two vCPUs needs the second connection out of TCP altogether: a BPF sockmap putting the origin's bytes straight into the receive queue of the command's socket. That needs CAP_BPF and a program in the command's cgroup, takes the bytes out of the proxy's sight (its counts, its timeouts, the order of a head it wrote and the body the kernel moved), and was not built. "
	cmd := exec.Command("go", "test", "-count=1", "-run", "^$", "-bench", "^BenchmarkDownload$", "-benchtime", "5x", "./netproxy")
	cmd.Dir = b.repo
	out, err := cmd.CombinedOutput()
	x, ok := benchMetrics(string(out), "BenchmarkDownload/proxy")["x-direct"]
	h, hok := benchMetrics(string(out), "BenchmarkDownload/http")["x-direct"]
	if !ok || !hok {
		b.logf("BenchmarkDownload gave no x-direct (%v): %.300s", err, out)
		return why + "netproxy's BenchmarkDownload, which would time the hop alone, could not be run here (see the bench's log)."
	}
	b.note("download floor: `go test -run '^$' -bench '^BenchmarkDownload$' -benchtime 5x ./netproxy`, run by the bench when the download misses its target: 100 MiB from a loopback HTTP origin read by a Go client directly, through a CONNECT tunnel of the proxy and as absolute-URI HTTP through it, in one Go process, no curl and no command.")
	return why + fmt.Sprintf("netproxy's BenchmarkDownload, run now, puts the hop alone (a Go client against a direct read, all in one process, where the three parties' hand-offs are goroutine wake-ups rather than three processes' context switches) at %.2f× through a tunnel and %.2f× as plain HTTP (0.89–1.06× and 0.87–1.02× across four runs on this VM): the proxy's own path meets the target when the client is not a third process on two vCPUs.", x, h)
}

// proxySetup measures the proxy's connection setup in this process: a Go
// client connected to a netproxy.Proxy on a loopback listener writes a
// CONNECT to an allowed loopback origin and reads the 200, against a plain
// TCP dial of the origin, interleaved.
func (b *bench) proxySetup() error {
	ol, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ol.Close()
	go func() { // ends when ol is closed
		for {
			c, err := ol.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }() // ends when the client closes
		}
	}()
	origin := ol.Addr().String()
	list, err := netproxy.ParseAllowList(origin)
	if err != nil {
		return err
	}
	// A command's proxy has timeouts and a cap on connections; so does
	// this one, so that their cost is measured.
	p := netproxy.New(netproxy.Config{Allow: list, IdleTimeout: time.Minute, TotalTimeout: time.Hour, MaxConns: 64})
	pl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(pl) }()
	defer func() {
		p.Close()
		<-served
	}()
	proxyAddr := pl.Addr().String()
	req := []byte(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", origin, origin))

	warm, n := b.iters(100, 20), b.iters(3000, 200)
	var setup, dial, base durations
	for i := range warm + n {
		t0 := time.Now()
		c, err := net.Dial("tcp4", proxyAddr)
		if err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := c.Write(req); err != nil {
			c.Close()
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		t2 := time.Now()
		c.Close()
		if err != nil {
			return fmt.Errorf("CONNECT %s: %w", origin, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CONNECT %s: %s", origin, resp.Status)
		}
		t3 := time.Now()
		oc, err := net.Dial("tcp4", origin)
		if err != nil {
			return err
		}
		e := time.Since(t3)
		oc.Close()
		if i >= warm {
			setup, dial, base = append(setup, t2.Sub(t1)), append(dial, t1.Sub(t0)), append(base, e)
		}
	}
	if st := p.Stats(); st.OverLimit != 0 {
		return errors.New("the proxy refused connections over its limit: the setups overlapped")
	}
	g, e := setup.pct(50), base.pct(50)
	b.add(row{Figure: "proxy connection setup, CONNECT written → 200 read, p50", Value: fmtDur(g), Baseline: "TCP dial of the origin: " + fmtDur(e),
		Ratio: ratio(float64(g), float64(e)), Target: "≤ 1 ms", Met: met(g <= time.Millisecond),
		Why: "the proxy reads the request, checks it against the allow-list, dials the origin (a loopback TCP handshake, the baseline) and writes the 200: a handful of goroutine wake-ups on top of the baseline's dial, each of which, on 2 shared cores, waits for a CPU."})
	b.add(row{Figure: "proxy connection setup, CONNECT written → 200 read, p99", Value: fmtDur(setup.pct(99)), Baseline: "TCP dial of the origin: " + fmtDur(base.pct(99)),
		Ratio: ratio(float64(setup.pct(99)), float64(base.pct(99)))})
	b.note("proxy setup: in the bench process, a `netproxy.Proxy` (the allow-list naming a loopback origin, a command's timeouts and connection cap) serves a loopback listener; %d times (after %d to warm up), a Go client dials it (p50 %s, not counted), writes `CONNECT %s` and reads the answer with `http.ReadResponse`, timed from the write to the 200 read; interleaved with a plain TCP dial of the origin, the baseline; medians. curl's `time_connect`/`time_appconnect` would not isolate the proxy's part, so this is measured in-process.", n, warm, fmtDur(dial.pct(50)), "127.0.0.1:PORT")
	return nil
}
