package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 37: toolhost mcp --http, driven through the binary over real
// HTTP by the Go SDK's client and by raw requests.

// httpMCP is a `toolhost mcp --http 127.0.0.1:0` under test.
type httpMCP struct {
	t        *testing.T
	root     string
	endpoint string // http://127.0.0.1:PORT/mcp
	token    string // the bearer token, in token mode
	cmd      *exec.Cmd
	exited   chan struct{}
	// stderr is what the server wrote, for the tests that look at it;
	// logged is signalled (without blocking) at each line.
	stderr *lockedBuffer
	logged chan struct{}
}

// startHTTPMCP starts the binary serving MCP over HTTP on a loopback
// port, with a bearer token in a file of the test's unless args choose
// another auth, and waits for the line that names its endpoint. It is
// stopped with SIGTERM at the test's end, and must exit 0.
func startHTTPMCP(t *testing.T, args ...string) *httpMCP {
	t.Helper()
	return startHTTPMCPEnv(t, quickExitEnv(), args...)
}

// startHTTPMCPEnv is startHTTPMCP with the server's environment.
func startHTTPMCPEnv(t *testing.T, env []string, args ...string) *httpMCP {
	t.Helper()
	h := &httpMCP{t: t, root: t.TempDir(), exited: make(chan struct{}), stderr: newLockedBuffer(), logged: make(chan struct{}, 1)}
	full := []string{"mcp", "--root", h.root, "--http", "127.0.0.1:0", "--log-level", "warn", "--kill-grace", "500ms"}
	tokenMode := true
	for _, a := range args {
		if strings.HasPrefix(a, "--oauth-issuer") || strings.HasPrefix(a, "--http-no-auth") || strings.HasPrefix(a, "--http-token-file") {
			tokenMode = false
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if tokenMode {
		full = append(full, "--http-token-file", tokenFile)
	}
	full = append(full, args...)
	h.cmd = exec.Command(binary, full...)
	h.cmd.Env = env
	pr, pw := io.Pipe()
	h.cmd.Stderr = pw
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	readDone := make(chan struct{})
	go func() { // owned by the test's cleanup, which waits on readDone
		defer close(readDone)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			h.stderr.Write([]byte(line + "\n"))
			select {
			case h.logged <- struct{}{}:
			default:
			}
			t.Logf("server: %s", line)
			if ep, ok := strings.CutPrefix(line, "toolhost: serving MCP at "); ok {
				select {
				case ready <- ep:
				default:
				}
			}
		}
	}()
	var waitErr error
	go func() { // owned by the test's cleanup, which waits on exited
		waitErr = h.cmd.Wait()
		pw.Close()
		close(h.exited)
	}()
	t.Cleanup(func() {
		h.cmd.Process.Signal(os.Interrupt)
		<-h.exited
		<-readDone
		if waitErr != nil {
			t.Errorf("toolhost mcp --http exited: %v", waitErr)
		}
	})
	ctx, cancel := limit()
	defer cancel()
	select {
	case h.endpoint = <-ready:
	case <-h.exited:
		t.Fatalf("toolhost mcp --http exited before serving: %s", h.stderr.String())
	case <-ctx.Done():
		t.Fatalf("toolhost mcp --http named no endpoint: %s", h.stderr.String())
	}
	if tokenMode {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			t.Fatalf("the token file: %v", err)
		}
		h.token = strings.TrimSpace(string(b))
	}
	return h
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// client returns an HTTP client that sends token (empty: none).
func httpClientWith(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, base: http.DefaultTransport}}
}

// connect connects the Go SDK's client with token (the server's own when
// empty and the server has one), at the SDK's latest protocol version
// unless version says, and closes it at the test's end.
func (h *httpMCP) connect(token string, opts *sdk.ClientOptions, version string) *mcpSession {
	t := h.t
	t.Helper()
	if token == "" {
		token = h.token
	}
	s := &mcpSession{t: t, root: h.root, progressed: make(chan struct{}, 1), logs: make(chan *sdk.LoggingMessageParams, 64)}
	if opts == nil {
		opts = &sdk.ClientOptions{}
	}
	if opts.ProgressNotificationHandler == nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.progress = append(s.progress, req.Params)
			s.mu.Unlock()
			select {
			case s.progressed <- struct{}{}:
			default:
			}
		}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolhost-http", Version: "1"}, opts)
	ctx, cancel := limit()
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: httpClientWith(token), MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to toolhost over HTTP: %v", err)
	}
	s.cs = cs
	t.Cleanup(func() { cs.Close() })
	return s
}

// rawSession is an MCP session over HTTP driven by hand: each call is a
// POST whose answer (JSON or server-sent events) is read whole.
type rawSession struct {
	h       *httpMCP
	token   string
	id      string // Mcp-Session-Id
	version string
	mu      sync.Mutex
	next    int
}

// openRaw initializes a session at protocol version 2025-11-25 (tasks as
// a task member on tools/call) with token.
func (h *httpMCP) openRaw(token string) *rawSession {
	h.t.Helper()
	r := &rawSession{h: h, token: token, version: "2025-11-25"}
	resp, body := r.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": r.version, "capabilities": map[string]any{"tasks": map[string]any{}}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}})
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("initialize: %s: %s", resp.Status, body)
	}
	r.id = resp.Header.Get("Mcp-Session-Id")
	if r.id == "" {
		h.t.Fatalf("initialize answered no Mcp-Session-Id")
	}
	if resp, body := r.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); resp.StatusCode != http.StatusAccepted {
		h.t.Fatalf("notifications/initialized: %s: %s", resp.Status, body)
	}
	return r
}

// request builds a POST of msg, with the session's headers.
func (r *rawSession) request(msg any) *http.Request {
	b, err := json.Marshal(msg)
	if err != nil {
		r.h.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, r.h.endpoint, bytes.NewReader(b))
	if err != nil {
		r.h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.id != "" {
		req.Header.Set("Mcp-Session-Id", r.id)
		req.Header.Set("MCP-Protocol-Version", r.version)
	}
	return req
}

// post sends msg and returns the response with its whole body.
func (r *rawSession) post(msg any) (*http.Response, []byte) {
	r.h.t.Helper()
	return do(r.h.t, r.request(msg))
}

// do sends req and reads the whole answer.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := limit()
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer to %s: %v", req.Method, err)
	}
	return resp, b
}

// call sends a request and returns the JSON-RPC response to it: the
// body's, or the last data event that is a response.
func (r *rawSession) call(method string, params any) (result json.RawMessage, rpcErr *rpcError) {
	r.h.t.Helper()
	r.mu.Lock()
	r.next++
	id := r.next
	r.mu.Unlock()
	resp, body := r.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if resp.StatusCode != http.StatusOK {
		r.h.t.Fatalf("%s: %s: %s", method, resp.Status, body)
	}
	for _, m := range messagesOf(r.h.t, resp, body) {
		if m.ID != nil && string(m.ID) == fmt.Sprint(id) {
			return m.Result, m.Error
		}
	}
	r.h.t.Fatalf("%s: no response in %s", method, body)
	return nil, nil
}

// wireMsg is a JSON-RPC message as read by hand.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
	Params json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// messagesOf returns the messages of an answer: a JSON body, or the data
// of its events.
func messagesOf(t *testing.T, resp *http.Response, body []byte) []wireMsg {
	t.Helper()
	var out []wireMsg
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, ev := range sseEvents(body) {
			if strings.TrimSpace(ev.data) == "" {
				continue
			}
			var m wireMsg
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
				t.Fatalf("an event's data is not JSON-RPC: %q: %v", ev.data, err)
			}
			out = append(out, m)
		}
		return out
	}
	var m wireMsg
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("the answer is not JSON-RPC: %q: %v", body, err)
	}
	return append(out, m)
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, data string }

// sseEvents parses a stream of server-sent events.
func sseEvents(b []byte) []sseEvent {
	var out []sseEvent
	for _, block := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
		var ev sseEvent
		seen := false
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "id:"); ok {
				ev.id, seen = strings.TrimSpace(v), true
			}
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				if ev.data != "" {
					ev.data += "\n"
				}
				ev.data += strings.TrimPrefix(v, " ")
				seen = true
			}
		}
		if seen {
			out = append(out, ev)
		}
	}
	return out
}

// ioNop is a request body of s.
func ioNop(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

// startTask calls a tool as a 2025-11-25 task (a ttl of 10 minutes) and
// returns the task's id.
func (r *rawSession) startTask(tool string, args map[string]any) string {
	r.h.t.Helper()
	res, rerr := r.call("tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000}})
	if rerr != nil {
		r.h.t.Fatalf("%s as a task: %+v", tool, rerr)
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &created); err != nil || created.Task.TaskID == "" {
		r.h.t.Fatalf("%s answered no task: %s", tool, res)
	}
	return created.Task.TaskID
}
