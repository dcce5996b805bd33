package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 37: MCP over Streamable HTTP (toolhost mcp --http), measured
// through the binary with the official Go SDK's client in sessions of
// MCP 2025-11-25, beside stdio and against its own median.

// httpSessionVersion is the protocol version of the bench's HTTP sessions:
// the SDK's client without one goes stateless (2026-07-28), with no
// session to measure.
const httpSessionVersion = "2025-11-25"

// httpMCPServer is toolhost mcp --http on a loopback port of its own,
// whose clients authenticate with the bearer token of a file it made.
type httpMCPServer struct {
	cmd      *exec.Cmd
	root     string
	endpoint string // http://127.0.0.1:PORT/mcp
	token    string
	// logged is closed once the server's stderr is at its end and written
	// to its log file, by the goroutine that reads it.
	logged chan struct{}
	// noGET makes the sessions of connect open no standalone GET stream.
	noGET bool

	// With GODEBUG=gctrace=1 (startHTTPMCPTraced), the runtime's line of
	// each GC: gcs counts them and live is the heap marked live by the
	// last, in MB; gcd is signalled at each. Guarded by mu.
	mu   sync.Mutex
	gcs  int
	live int
	gcd  chan struct{}
}

// startHTTPMCP starts toolhost mcp --http 127.0.0.1:0 on a root and an
// artifacts directory of its own, with --http-token-file, and waits for
// the line on stderr that names its endpoint.
func (b *bench) startHTTPMCP(name string, extra ...string) (*httpMCPServer, error) {
	return b.startHTTPMCPEnv(name, nil, extra...)
}

// startHTTPMCPTraced is startHTTPMCP with the runtime writing a line on
// stderr at each GC (GODEBUG=gctrace=1), which the server reads for its
// live heap (gcLive).
func (b *bench) startHTTPMCPTraced(name string, extra ...string) (*httpMCPServer, error) {
	return b.startHTTPMCPEnv(name, append(os.Environ(), "GODEBUG=gctrace=1"), extra...)
}

// startHTTPMCPEnv is startHTTPMCP with the server's environment (nil:
// this process's).
func (b *bench) startHTTPMCPEnv(name string, env []string, extra ...string) (*httpMCPServer, error) {
	b.nextID++
	base := filepath.Join(b.work, fmt.Sprintf("%02d-%s", b.nextID, name))
	h := &httpMCPServer{root: filepath.Join(base, "root"), logged: make(chan struct{}), gcd: make(chan struct{}, 1)}
	if err := os.MkdirAll(h.root, 0o755); err != nil {
		return nil, err
	}
	ef, err := os.Create(filepath.Join(base, "stderr.log"))
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(base, "token")
	argv := append([]string{"mcp", "--root", h.root, "--artifacts-dir", filepath.Join(base, "artifacts"), "--log-level", "warn",
		"--http", "127.0.0.1:0", "--http-token-file", tokenFile}, extra...)
	h.cmd = exec.Command(b.bin, argv...)
	h.cmd.Dir, h.cmd.Env = h.root, env
	stderr, err := h.cmd.StderrPipe()
	if err != nil {
		ef.Close()
		return nil, err
	}
	if err := h.cmd.Start(); err != nil {
		ef.Close()
		return nil, err
	}
	ready := make(chan string, 1)
	go func() { // owned by h, whose end waits on logged
		defer close(h.logged)
		defer ef.Close()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if mb, ok := gcLiveOf(line); ok {
				h.mu.Lock()
				h.gcs, h.live = h.gcs+1, mb
				h.mu.Unlock()
				select {
				case h.gcd <- struct{}{}:
				default:
				}
				continue
			}
			fmt.Fprintln(ef, line)
			if ep, ok := strings.CutPrefix(line, "toolhost: serving MCP at "); ok {
				select {
				case ready <- ep:
				default:
				}
			}
		}
		io.Copy(ef, stderr) // a line too long for the scanner
	}()
	ctx, cancel := limit()
	defer cancel()
	select {
	case h.endpoint = <-ready:
	case <-h.logged:
		h.cmd.Wait()
		return nil, fmt.Errorf("toolhost mcp --http ended before serving (see %s)", ef.Name())
	case <-ctx.Done():
		h.cmd.Process.Kill()
		<-h.logged
		h.cmd.Wait()
		return nil, fmt.Errorf("toolhost mcp --http named no endpoint within %v", callLimit)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		h.end()
		return nil, fmt.Errorf("the token file: %w", err)
	}
	h.token = strings.TrimSpace(string(tok))
	return h, nil
}

// pid is the server's process id.
func (h *httpMCPServer) pid() int { return h.cmd.Process.Pid }

// end stops the server with SIGINT, waits for it, and removes its
// directories; it must have exited 0.
func (h *httpMCPServer) end() error {
	h.cmd.Process.Signal(os.Interrupt)
	<-h.logged
	err := h.cmd.Wait()
	os.RemoveAll(filepath.Dir(h.root))
	if err != nil {
		return fmt.Errorf("toolhost mcp --http exited: %w", err)
	}
	return nil
}

// bearer adds the Authorization header of a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

// RoundTrip sends a copy of r with the token.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// gcLiveOf returns the heap marked live, in MB, of a line of
// GODEBUG=gctrace=1 ("gc 7 @0.5s 1%: ..., 4->5->2 MB, 5 MB goal, ...").
func gcLiveOf(line string) (int, bool) {
	if !strings.HasPrefix(line, "gc ") {
		return 0, false
	}
	for f := range strings.SplitSeq(line, ", ") {
		if heap, ok := strings.CutSuffix(f, " MB"); ok && strings.Count(heap, "->") == 2 {
			mb, err := strconv.Atoi(heap[strings.LastIndex(heap, ">")+1:])
			return mb, err == nil
		}
	}
	return 0, false
}

// gcLive returns the heap marked live by the first GC to end after the
// call, in MB: it calls call (which makes garbage) until one has.
func (h *httpMCPServer) gcLive(ctx context.Context, call func() error) (int, error) {
	h.mu.Lock()
	seen := h.gcs
	h.mu.Unlock()
	for {
		select {
		case <-h.gcd:
		case <-ctx.Done():
			return 0, ctx.Err()
		default:
			if err := call(); err != nil {
				return 0, err
			}
			continue
		}
		h.mu.Lock()
		gcs, live := h.gcs, h.live
		h.mu.Unlock()
		if gcs > seen {
			return live, nil
		}
	}
}

// client returns an HTTP client that sends the server's token over a
// connection pool of its own, as a client in a process of its own has.
func (h *httpMCPServer) client() *http.Client {
	return &http.Client{Transport: bearer{token: h.token, base: http.DefaultTransport.(*http.Transport).Clone()}}
}

// connect opens a 2025-11-25 session with the Go SDK's Streamable HTTP
// client over hc; the client opens its standalone GET stream, as it does
// by default.
func (h *httpMCPServer) connect(ctx context.Context, hc *http.Client) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "toolhost-bench", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: h.noGET},
		&sdk.ClientSessionOptions{ProtocolVersion: httpSessionVersion})
}

// callTrue calls run_command of true on cs and checks that it succeeded.
func callTrue(ctx context.Context, cs *sdk.ClientSession) error {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": []string{"true"}}})
	if err != nil {
		return err
	}
	if m, ok := res.StructuredContent.(map[string]any); res.IsError || !ok || m["success"] != true {
		return fmt.Errorf("run_command true did not succeed: %+v", res.StructuredContent)
	}
	return nil
}

// callRead calls read_file of path on cs and checks that it answered
// want bytes of text.
func callRead(ctx context.Context, cs *sdk.ClientSession, path string, want int) error {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": path}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("read_file %s answered an error: %+v", path, res.StructuredContent)
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); !ok || len(tc.Text) != want {
		return fmt.Errorf("read_file %s answered %T, want %d bytes of text", path, res.Content[0], want)
	}
	return nil
}

// mcpHTTPCall measures run_command of true over HTTP (a 2025-11-25
// session of the Go SDK's client, with a bearer token) against the same
// call over stdio (toolhost mcp), interleaved.
func (b *bench) mcpHTTPCall() error {
	h, err := b.startHTTPMCP("mcp-http")
	if err != nil {
		return err
	}
	defer h.end()
	m, err := b.startMCP("mcp-stdio")
	if err != nil {
		return err
	}
	defer m.end()
	ctx, cancel := limit()
	defer cancel()
	cs, err := h.connect(ctx, h.client())
	if err != nil {
		return fmt.Errorf("connecting over HTTP: %w", err)
	}
	defer cs.Close()

	warm, n := b.iters(20, 5), b.iters(400, 30)
	var web, pipe durations
	for i := range warm + n {
		t0 := time.Now()
		if err := callTrue(ctx, cs); err != nil {
			return fmt.Errorf("over HTTP: %w", err)
		}
		d := time.Since(t0)
		t0 = time.Now()
		if err := callTrue(ctx, m.cs); err != nil {
			return fmt.Errorf("over stdio: %w", err)
		}
		e := time.Since(t0)
		if i >= warm {
			web, pipe = append(web, d), append(pipe, e)
		}
	}
	p50, p99, s50, s99 := web.pct(50), web.pct(99), pipe.pct(50), pipe.pct(99)
	b.add(row{Figure: "MCP over HTTP: `run_command` of `true`, p50", Value: fmtDur(p50), Baseline: "over stdio: " + fmtDur(s50),
		Ratio: ratio(float64(p50), float64(s50)), Target: "≤ 1.3×", Met: met(float64(p50) <= 1.3*float64(s50))})
	b.add(row{Figure: "MCP over HTTP: `run_command` of `true`, p99", Value: fmtDur(p99), Baseline: "over stdio: " + fmtDur(s99),
		Ratio: ratio(float64(p99), float64(s99))})
	b.note("MCP over HTTP against stdio: `toolhost mcp --http 127.0.0.1:0 --http-token-file FILE`, one session of MCP %s opened by the official Go SDK's Streamable HTTP client (with its standalone GET stream; every POST with `Authorization: Bearer`), and a `toolhost mcp` over its stdin and stdout driven by the same SDK's client, as in the MCP figures; %d rounds (after %d to warm up), each a `tools/call` of `run_command` `[\"true\"]` over HTTP and then over stdio, timed from the call to its checked result.", httpSessionVersion, n, warm)
	return nil
}

// mcpHTTPConcurrent measures 50 clients, each in an HTTP session of its
// own, making 20 calls each at once, of read_file of 1 KiB and then of
// run_command of true: every call must be answered, and the per-call
// latency's p99 is set against its p50.
func (b *bench) mcpHTTPConcurrent() error {
	clients, calls := 50, b.iters(20, 5)
	// One token is one principal, whose requests in flight (the clients'
	// standalone GET streams included) the gate caps: its default, 256,
	// holds 50 clients' streams and calls.
	h, err := b.startHTTPMCP("mcp-http-concurrent")
	if err != nil {
		return err
	}
	defer h.end()
	content := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_\n", 1024/64)
	if err := os.WriteFile(filepath.Join(h.root, "small.txt"), []byte(content), 0o644); err != nil {
		return err
	}
	var took [2]time.Duration
	took[0], err = b.concurrentCalls(h, clients, calls, "`read_file` 1 KiB", func(ctx context.Context, cs *sdk.ClientSession) error {
		return callRead(ctx, cs, "small.txt", len(content))
	})
	if err != nil {
		return err
	}
	took[1], err = b.concurrentCalls(h, clients, calls, "`run_command` of `true`", callTrue)
	if err != nil {
		return err
	}
	b.note("MCP over HTTP under load: one `toolhost mcp --http` (its defaults: the %d clients share one token, so one principal, and each session's standalone GET stream counts against its cap of 256 requests in flight); %d Go SDK clients, each with a session of MCP %s and a connection pool of its own, each warmed by one uncounted call; then, released together, each makes %d sequential `tools/call`s of `read_file` of a 1 KiB file (%v from the release to the last answer); then the same with new sessions and `run_command` of `true` (%v). Each call is timed from the call to its checked result; the percentiles are of all %d calls of a tool. Any call not answered fails the figure.",
		clients, clients, httpSessionVersion, calls, took[0].Round(time.Millisecond), took[1].Round(time.Millisecond), clients*calls)
	return nil
}

// concurrentCalls opens clients sessions on h, each warmed by one
// uncounted call, then releases them together to make calls calls each,
// and adds the figure's rows; it returns the time from the release to the
// last answer.
func (b *bench) concurrentCalls(h *httpMCPServer, clients, calls int, what string, call func(context.Context, *sdk.ClientSession) error) (time.Duration, error) {
	ctx, cancel := limit()
	defer cancel()
	type result struct {
		lat      durations
		failures int
		first    error
	}
	results := make([]result, clients)
	start := make(chan struct{})
	var connected, wg sync.WaitGroup
	connected.Add(clients)
	wg.Add(clients)
	for i := range clients {
		go func() { // owned by concurrentCalls, which waits on wg
			defer wg.Done()
			r := &results[i]
			fail := func(err error, count int) {
				r.failures += count
				if r.first == nil {
					r.first = err
				}
			}
			cs, err := h.connect(ctx, h.client())
			if err == nil {
				// One call before the start, uncounted: every client's
				// session is warm when the counted calls begin.
				if err = call(ctx, cs); err != nil {
					cs.Close()
				}
			}
			connected.Done()
			<-start
			if err != nil {
				fail(err, calls)
				return
			}
			defer cs.Close()
			for range calls {
				t0 := time.Now()
				if err := call(ctx, cs); err != nil {
					fail(err, 1)
					continue
				}
				r.lat = append(r.lat, time.Since(t0))
			}
		}()
	}
	connected.Wait()
	t0 := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(t0)

	var lat durations
	failures := 0
	var first error
	for _, r := range results {
		lat = append(lat, r.lat...)
		failures += r.failures
		if first == nil {
			first = r.first
		}
	}
	total := clients * calls
	figure := fmt.Sprintf("MCP over HTTP: %d clients × %d %s at once", clients, calls, what)
	answered := fmt.Sprintf("%d of %d answered", total-failures, total)
	if first != nil {
		answered += " (first failure: " + first.Error() + ")"
		b.logf("mcp-http-concurrent: %s: %d of %d calls failed, the first: %v", what, failures, total, first)
	}
	b.add(row{Figure: figure + ", calls answered", Value: answered, Target: "all", Met: met(failures == 0)})
	if len(lat) == 0 {
		return took, errors.New("no call was answered")
	}
	p50, p99 := lat.pct(50), lat.pct(99)
	b.add(row{Figure: figure + ", per-call p99 against p50", Value: "p99 " + fmtDur(p99), Baseline: "p50 " + fmtDur(p50),
		Ratio: ratio(float64(p99), float64(p50)), Target: "≤ 5×", Met: met(failures == 0 && float64(p99) <= 5*float64(p50))})
	return took, nil
}

// mcpHTTPIdle measures the server's memory of an idle HTTP session: RSS
// with one warm session, then with N more open (each initialized, one
// call made, then idle), per session; and the same of sessions that open
// no standalone GET stream, which shows what that stream costs.
func (b *bench) mcpHTTPIdle() error {
	n := b.iters(200, 20)
	full, err := b.idleSessions("mcp-http-idle", n, false)
	if err != nil {
		return err
	}
	bare, err := b.idleSessions("mcp-http-idle-noget", n, true)
	if err != nil {
		return fmt.Errorf("without the standalone stream: %w", err)
	}
	per := float64(full.rssAfter-full.rssBefore) / float64(n)
	kib := func(m idleMemory) string {
		return fmt.Sprintf("%.1f KiB per session (RSS %s → %s; live heap %d → %d MB, %.0f KiB per session)", float64(m.rssAfter-m.rssBefore)/float64(n)/1024,
			mib(m.rssBefore), mib(m.rssAfter), m.liveBefore, m.liveAfter, float64(m.liveAfter-m.liveBefore)*1024/float64(n))
	}
	b.add(row{Figure: fmt.Sprintf("MCP over HTTP: server memory of an idle session (%d open), RSS", n), Value: kib(full),
		Baseline: "server RSS with one session: " + mib(full.rssBefore), Ratio: ratio(float64(full.rssAfter), float64(full.rssBefore)), Target: "≤ 64 KiB per session", Met: met(per <= 64<<10),
		Why: "the RSS holds the Go heap at up to twice its live size (GOGC=100: the server collects when the heap has doubled, and the pages stay resident), so the live heap per session (in the value, from the runtime's GC trace) is about half the RSS per session. A session is one goroutine (the SDK's read loop), the SDK's session state, the events kept for Last-Event-ID (here the answers to initialize and to the call) and the record of the command its call ran, which list_commands keeps. The standalone GET stream the Go SDK's client opens costs about as much as its connection (the next row is without it): on HTTP/1.1 it is parked, its connection taken from net/http and written only when there is an event, where a held request had cost two goroutines and 10 KiB of buffers (101.6 KiB per session before, 57.3 without the stream)"})
	b.add(row{Figure: fmt.Sprintf("MCP over HTTP: server memory of an idle session without a standalone GET stream (%d open), RSS", n), Value: kib(bare),
		Baseline: "server RSS with one session: " + mib(bare.rssBefore), Ratio: ratio(float64(bare.rssAfter), float64(bare.rssBefore))})
	b.note("idle HTTP sessions: one `toolhost mcp --http` (`--http-max-concurrent %d`, `GODEBUG=gctrace=1`), one session opened and called first (the shared server's first call opens the workspace), then its RSS (VmRSS) read; then %d more sessions of MCP %s opened one after another by the Go SDK's client (initialize, notifications/initialized, its standalone GET stream, one `run_command` of `true`), all left open and idle (their clients alive), and the RSS read again right after the last call returned; the figure is the difference ÷ %d, the ratio RSS after ÷ before. The RSS holds whatever garbage the server's last GC left, up to as much again as the live heap. The live heap is the one marked by the first GC after each of the two moments (the warm session's `run_command` called again until one ends), from the runtime's trace, in whole MB (±1 MB, ±%.0f KiB per session). The second row is the same on a fresh server with clients that open no standalone GET stream (`DisableStandaloneSSE`).", 2*n+64, n, httpSessionVersion, n, 1024/float64(n))
	return nil
}

// idleMemory is the server's memory before and after N idle sessions:
// RSS in bytes, live heap in MB.
type idleMemory struct {
	rssBefore, rssAfter   int64
	liveBefore, liveAfter int
}

// idleSessions starts a server with the GC trace, opens a warm session,
// then n more, each called once and left idle, and measures the server's
// memory before and after the n.
func (b *bench) idleSessions(name string, n int, noGET bool) (idleMemory, error) {
	var m idleMemory
	h, err := b.startHTTPMCPTraced(name, "--http-max-concurrent", strconv.Itoa(2*n+64))
	if err != nil {
		return m, err
	}
	defer h.end()
	h.noGET = noGET
	ctx, cancel := limit()
	defer cancel()
	// The sessions share one client's connection pool: each holds its
	// standalone GET stream's connection, and their POSTs, made one at a
	// time, reuse a pooled one, which keeps the server's connections under
	// the listener's cap (256).
	hc := h.client()
	var sessions []*sdk.ClientSession
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	open := func() error {
		cs, err := h.connect(ctx, hc)
		if err != nil {
			return err
		}
		sessions = append(sessions, cs)
		return callTrue(ctx, cs)
	}
	if err := open(); err != nil {
		return m, fmt.Errorf("the warm session: %w", err)
	}
	warm := func() error { return callTrue(ctx, sessions[0]) }
	if m.liveBefore, err = h.gcLive(ctx, warm); err != nil {
		return m, err
	}
	if m.rssBefore, err = memoryOf(h.pid(), "VmRSS"); err != nil {
		return m, err
	}
	for i := range n {
		if err := open(); err != nil {
			return m, fmt.Errorf("session %d: %w", i+1, err)
		}
	}
	if m.rssAfter, err = memoryOf(h.pid(), "VmRSS"); err != nil {
		return m, err
	}
	if m.liveAfter, err = h.gcLive(ctx, warm); err != nil {
		return m, err
	}
	return m, nil
}
