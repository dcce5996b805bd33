package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// approvalsBody is what the approvals figure's origins answer.
const approvalsBody = "fetched\n"

// approvals measures issue 35's two figures in one session whose client
// declares capabilities.approvals and answers every approval/request at
// once: the cost of an ask beyond the client's own answer time, and a
// connection answered by a remembered (session) grant, each against a
// connection to a host the command's allow-list names, interleaved
// connection by connection inside the same commands.
//
// Four origins in this process, L, A, G and D, serve the same small body
// on loopback ports. Each round is one runCommand of this program as the
// fetch child (see fetchChild), confined with an allow-list naming L and
// D; it fetches them in cycles of A, D, L, G and A, D, G, L, each on a new
// connection through the command's proxy, and times each from the dial to
// the body's end. A is asked every time (the client allows it for once,
// which is not remembered); G was allowed for the session by the client
// before the first round, so the grant answers it without an ask. D, right
// after the ask, is not counted: whatever an ask leaves behind (the
// client's write of its answer, the server's goroutines ending, a CPU kept
// busy) then reaches L and G alike, which follow D or each other equally
// often, and neither follows a fetch of its own origin.
func (b *bench) approvals() error {
	const (
		askFigure   = "an ask's cost beyond the client's own answer time (connection start → body: asked − listed − answer time), p50"
		grantFigure = "a connection answered by a remembered (session) grant, connection start → body, p50"
	)
	var (
		mu      sync.Mutex
		arrived time.Time // when the client read the last approval/request
		answers durations // the client's answer time, per ask of A, in order
		asks    = map[string]int{}
	)
	opts := &client.Options{OnRead: func(frame []byte) {
		if bytes.Contains(frame, []byte(`"`+protocol.ApprovalRequestRequest.Method()+`"`)) {
			at := time.Now()
			mu.Lock()
			arrived = at
			mu.Unlock()
		}
	}}
	caps := &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}
	s, res, err := b.startServerWith("approvals", opts, caps)
	if err != nil {
		return err
	}
	defer s.end()
	if !res.Capabilities.Approvals.Ask {
		b.add(row{Figure: askFigure, Value: "skipped: the server does not ask here (capabilities.approvals.ask is false: no network enforcement on this machine?)", Target: "≤ 1 ms"})
		b.add(row{Figure: grantFigure, Value: "skipped: the server does not ask here", Target: "≤ 1.05×"})
		return nil
	}

	origins, stop, err := approvalOrigins(4)
	if err != nil {
		return err
	}
	defer stop()
	listed, asked, granted, spacer := origins[0], origins[1], origins[2], origins[3]

	// The client's user: allow at once, for the session for G and for
	// this connection only for A. Asks arrive one at a time (the child
	// fetches one URL at a time), so the last arrival is this ask's.
	client.OnRequest(s.Client, protocol.ApprovalRequestRequest, func(_ context.Context, p *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		scope := protocol.ApprovalOnce
		if p.Target == granted {
			scope = protocol.ApprovalSession
		}
		r := &protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: scope}
		mu.Lock()
		d := time.Since(arrived)
		asks[p.Target]++
		if p.Target == asked {
			answers = append(answers, d)
		}
		mu.Unlock()
		return r, nil
	})

	// The child runs from the root: a confined command has a /tmp of its
	// own, where go run's build of this program is out of sight.
	child := filepath.Join(s.root, "fetch-child")
	if err := linkOrCopy(b.self, child); err != nil {
		return err
	}
	sandbox := &protocol.Sandbox{Network: &protocol.Network{Allow: []string{listed, spacer}}}
	fetch := func(cycles int, orders string, targets ...string) ([]fetched, *protocol.ToolResult, error) {
		argv := []string{child, fetchChildArg, strconv.Itoa(cycles), orders}
		for _, t := range targets {
			argv = append(argv, "http://"+t+"/")
		}
		ctx, cancel := limit()
		defer cancel()
		r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: argv, Sandbox: sandbox})
		if err != nil {
			return nil, nil, err
		}
		if !r.Success {
			return nil, nil, fmt.Errorf("the fetch child did not succeed: stdout %.300q stderr %.500q", r.Stdout, r.Stderr)
		}
		got, err := parseFetches(r.Stdout, cycles, orders)
		return got, r, err
	}

	// The session grant of G: one ask, answered for the session.
	if _, _, err := fetch(1, "0", granted); err != nil {
		return fmt.Errorf("granting %s for the session: %w", granted, err)
	}
	mu.Lock()
	if asks[granted] != 1 {
		mu.Unlock()
		return fmt.Errorf("%d asks for %s, want 1", asks[granted], granted)
	}
	answers = answers[:0]
	mu.Unlock()

	// The URLs' indices: 0 L, 1 A, 2 G, 3 D; D, right after the ask, is
	// not counted.
	const (
		cycles = 80 // a round's cycles
		skip   = 4  // the first cycles of each round, not counted
		orders = "1302,1320"
	)
	rounds := b.iters(30, 5)
	var l, a, g, ans, afterAsk durations
	for round := range rounds + 1 { // the first warms up
		got, r, err := fetch(cycles, orders, listed, asked, granted, spacer)
		if err != nil {
			return err
		}
		for _, o := range r.Approvals {
			if o.Target == granted && (o.DecidedBy != protocol.DecidedByGrant || o.Decision != protocol.ApprovalAllow) {
				return fmt.Errorf("a connection to %s, granted for the session, was decided %+v, want allowed by the grant", granted, o)
			}
		}
		mu.Lock()
		na, ng, roundAns := asks[asked], asks[granted], answers
		answers = nil
		mu.Unlock()
		if ng != 1 {
			return fmt.Errorf("%s, granted for the session, was asked again (%d asks)", granted, ng)
		}
		if len(roundAns) != cycles || na != (round+1)*cycles {
			return fmt.Errorf("round %d: %d asks for %s (%d in all), want one a connection, %d", round, len(roundAns), asked, na, cycles)
		}
		if round == 0 {
			continue
		}
		ans = append(ans, roundAns[skip:]...)
		for _, f := range got {
			switch {
			case f.cycle < skip:
			case f.url == 3:
				afterAsk = append(afterAsk, f.d)
			case f.url == 0:
				l = append(l, f.d)
			case f.url == 1:
				a = append(a, f.d)
			case f.url == 2:
				g = append(g, f.d)
			}
		}
	}

	lp, ap, gp, answer := l.pct(50), a.pct(50), g.pct(50), ans.pct(50)
	cost := ap - lp - answer
	// A cycle's ask and grant against the cycle's counted L (one each a
	// cycle).
	var paired, pairedG durations
	for i := range a {
		paired, pairedG = append(paired, a[i]-l[i]-ans[i]), append(pairedG, g[i]-l[i])
	}
	b.logf("approvals: listed p50 %s, asked p50 %s, client's answer p50 %s, granted p50 %s, D, listed, right after each ask (not counted) p50 %s; per cycle asked − listed − answer p50 %s, granted − listed p50 %s",
		fmtDur(lp), fmtDur(ap), fmtDur(answer), fmtDur(gp), fmtDur(afterAsk.pct(50)), fmtDur(paired.pct(50)), fmtDur(pairedG.pct(50)))
	b.add(row{Figure: askFigure, Value: fmtDur(cost),
		Baseline: fmt.Sprintf("a listed host's connection: %s (asked: %s, the client's answer time: %s)", fmtDur(lp), fmtDur(ap), fmtDur(answer)),
		Ratio:    ratio(float64(ap-answer), float64(lp)), Target: "≤ 1 ms", Met: met(cost <= time.Millisecond),
		Why: "an ask adds, to a listed host's connection, the proxy's hold and hand-off of the connection to the session, approval/request written on the server's stdout and read by the client, its answer written back and read by the server, and the hand-back to the proxy, which only then dials the origin: two crossings of the JSON-RPC pipes (the progress round trip's cost) and a handful of goroutine wake-ups, each of which, on 2 shared cores, waits for a CPU."})
	b.add(row{Figure: grantFigure, Value: fmtDur(gp), Baseline: "a listed host's connection: " + fmtDur(lp),
		Ratio: ratio(float64(gp), float64(lp)), Target: "≤ 1.05×", Met: met(float64(gp) <= 1.05*float64(lp)),
		Why: "a connection the allow-list does not name goes from the proxy to the session's broker before it is dialled (an ask id from crypto/rand, a context with the ask's timeout, the grants looked up under the broker's lock, the outcome kept for the command's result); a listed one is dialled at once. The broker's part, a Decide answered by a session grant, took about 0.9 µs when timed alone in a loop on this machine (under a load average of 8), and a netproxy.Proxy alone in one Go process, its Ask allowing at once, served such a connection in the time of a listed one (392 against 394 µs, p50 of 6,000): microseconds against a connection of about a millisecond, so a miss by a few hundredths is the noise between interleaved samples on 2 shared cores rather than the grant's cost."})
	b.note("approvals: a default (confined) server whose client declares `capabilities: {approvals: {}}` and answers every `approval/request` at once with `allow` (scope `session` for origin G, `once` for origin A); four `net/http` origins in the bench process on 127.0.0.1 (L, A, G, D) serve the same %d-byte body. "+
		"G is allowed for the session by one command before the first round. Then %d rounds (after 1 to warm up), each one `runCommand` of this program as a fetch child, confined with `sandbox: {network: {allow: [L, D]}}`, which runs %d cycles of fetches, alternately A, D, L, G and A, D, G, L; "+
		"each fetch opens a new TCP connection to the command's proxy (`HTTP_PROXY`), writes an absolute-URI `GET` with `Connection: close` and reads the response to its end, timed in the child from the dial to the body's last byte. "+
		"Not counted: the first %d cycles of each round, and D, listed too, right after each ask (p50 %s), so that whatever an ask leaves behind reaches L and G alike: L and G follow D or each other equally often, and neither follows a fetch of its own origin. "+
		"L is the listed host (no ask, the baseline), A is asked every time (once is not remembered: the bench checks one ask a connection), G is answered by the session grant (the bench checks it is never asked again and that the command's `approvals` say `decidedBy: grant`). "+
		"The client's answer time is measured in the bench from its read loop reading the `approval/request` frame (`client.Options.OnRead`) to the handler's return (the library's encoding and write of the answer, a few µs, are counted as toolhost's). "+
		"The ask's cost = p50(A) − p50(L) − p50(answer time); its ratio is (p50(A) − p50(answer time)) ÷ p50(L) (the median of the same difference taken cycle by cycle, A − L − answer time, was %s). The grant's figure is p50(G) ÷ p50(L) (cycle by cycle, the median of G − L was %s).",
		len(approvalsBody), rounds, cycles, skip, fmtDur(afterAsk.pct(50)), fmtDur(paired.pct(50)), fmtDur(pairedG.pct(50)))
	return nil
}

// approvalOrigins serves approvalsBody on n loopback listeners, returning
// their host:ports and a function that stops them.
func approvalOrigins(n int) ([]string, func(), error) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(approvalsBody)))
		io.WriteString(w, approvalsBody)
	})}
	var addrs []string
	for range n {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			srv.Close()
			return nil, nil, err
		}
		addrs = append(addrs, l.Addr().String())
		go srv.Serve(l) // ends when srv is closed
	}
	return addrs, func() { srv.Close() }, nil
}

// fetched is one fetch of the fetch child.
type fetched struct {
	cycle, pos, url int // the cycle, the position in it, the URL's index
	d               time.Duration
}

// parseFetches reads the fetch child's output for cycles cycles of orders
// (see fetchChild): a line "j ns" for each fetch, j the URL's index.
func parseFetches(out string, cycles int, orders string) ([]fetched, error) {
	cyc := strings.Split(orders, ",")
	var got []fetched
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := range cycles {
		order := cyc[i%len(cyc)]
		for pos := range len(order) {
			if len(lines) == 0 {
				return nil, fmt.Errorf("the fetch child timed %d fetches, too few for %d cycles of %s", len(got), cycles, orders)
			}
			var j int
			var ns int64
			if _, err := fmt.Sscanf(lines[0], "%d %d", &j, &ns); err != nil || j != int(order[pos]-'0') {
				return nil, fmt.Errorf("the fetch child's line %q in cycle %d at %d of %s: %v", lines[0], i, pos, order, err)
			}
			lines = lines[1:]
			got = append(got, fetched{cycle: i, pos: pos, url: j, d: time.Duration(ns)})
		}
	}
	if len(lines) != 0 {
		return nil, fmt.Errorf("the fetch child timed %d fetches more than %d cycles of %s", len(lines), cycles, orders)
	}
	return got, nil
}

// fetchChildArg makes this program the fetch child.
const fetchChildArg = "fetch-child"

// fetchChild runs args[0] cycles of fetches of the http:// URLs
// args[2:]; args[1] is the cycles' orders, comma-separated strings of the
// URLs' indices (one digit each) used in turn ("1002,1020": B A A C, then
// B A C A). Each fetch goes through the proxy HTTP_PROXY names on a new
// connection, an absolute-URI GET with Connection: close, read to its end.
// It prints "j ns" for each fetch, j the URL's index and ns the time from
// the dial to the body's last byte, and fails on anything but a 200 with
// approvalsBody.
func fetchChild(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: bench fetch-child CYCLES ORDERS URL...")
		return 2
	}
	cycles, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
	if err != nil || proxy.Host == "" {
		fmt.Fprintf(os.Stderr, "HTTP_PROXY %q names no proxy (%v)\n", os.Getenv("HTTP_PROXY"), err)
		return 2
	}
	orders, urls := strings.Split(args[1], ","), args[2:]
	for _, o := range orders {
		for _, c := range o {
			if c < '0' || int(c-'0') >= len(urls) {
				fmt.Fprintf(os.Stderr, "order %q: %q names no URL\n", o, c)
				return 2
			}
		}
	}
	reqs := make([][]byte, len(urls))
	for j, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		reqs[j] = []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", u, pu.Host))
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := range cycles {
		for _, c := range orders[i%len(orders)] {
			j := int(c - '0')
			d, err := fetchOnce(proxy.Host, reqs[j])
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", urls[j], err)
				return 1
			}
			fmt.Fprintf(out, "%d %d\n", j, d.Nanoseconds())
		}
	}
	if err := out.Flush(); err != nil {
		return 1
	}
	return 0
}

// fetchOnce dials proxy, writes req and reads the response to its end,
// returning the time taken.
func fetchOnce(proxy string, req []byte) (time.Duration, error) {
	t0 := time.Now()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || string(body) != approvalsBody {
		return 0, errors.New(resp.Status + ": " + strings.TrimSpace(string(body)))
	}
	return d, nil
}
