package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// TestMCPHTTPTools runs tools through toolhost mcp --http with the Go
// SDK's Streamable HTTP client and the server's bearer token: a command,
// its progress on the call's own stream, and a file written and read.
func TestMCPHTTPTools(t *testing.T) {
	h := startHTTPMCP(t)
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("version "+version, func(t *testing.T) { httpTools(t, h, version) })
	}
}

// httpTools is TestMCPHTTPTools at one protocol version ("": the SDK's
// latest, 2026-07-28, where each request is an exchange of its own).
func httpTools(t *testing.T, h *httpMCP, version string) {
	h.t = t
	s := h.connect("", nil, version)
	var w protocol.WriteFileResult
	s.ok("write_file", map[string]any{"path": "a.txt", "content": "over http\n"}, &w)
	if w.Size != 10 {
		t.Errorf("write_file = %+v", w)
	}
	if got := firstText(t, s.call("read_file", map[string]any{"path": "a.txt"})); got != "over http\n" {
		t.Errorf("read_file = %q", got)
	}
	res := s.call("run_command", map[string]any{"argv": []string{"cat", "a.txt"}})
	if res.IsError || !strings.Contains(text(res), "over http") {
		t.Errorf("run_command: %s", text(res))
	}
	// A progress token: the command's steps arrive on the call's stream,
	// before its result.
	ctx, cancel := limit()
	defer cancel()
	script := `echo "[STEP 00/02] fetch" >&2; echo "[STEP 01/02] build" >&2`
	p := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": []string{"sh", "-c", script}}}
	p.SetProgressToken("tok-1")
	if res, err := s.cs.CallTool(ctx, p); err != nil || res.IsError {
		t.Fatalf("run_command with a progress token: %v %v", err, res)
	}
	var msgs []string
	for _, p := range s.awaitProgress(2) {
		if p.ProgressToken != "tok-1" {
			t.Errorf("progress %+v, want token tok-1", p)
		}
		msgs = append(msgs, p.Message)
	}
	if len(msgs) < 2 || !strings.Contains(msgs[0], "fetch") || !strings.Contains(msgs[len(msgs)-1], "build") {
		t.Errorf("progress messages %q, want the steps fetch and build", msgs)
	}
}

// TestMCPHTTPTaskAcrossSessions makes a task on one HTTP session and
// fetches it, and its result, from another of the same principal.
func TestMCPHTTPTaskAcrossSessions(t *testing.T) {
	h := startHTTPMCP(t)
	a := h.openRaw(h.token)
	id := a.startTask("run_command", map[string]any{"argv": []string{"echo", "from a task"}})
	b := h.openRaw(h.token)
	if b.id == a.id {
		t.Fatalf("two sessions share the id %s", a.id)
	}
	res, rerr := b.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil {
		t.Fatalf("tasks/result from another session: %+v", rerr)
	}
	if !strings.Contains(string(res), "from a task") {
		t.Errorf("tasks/result = %s, want the command's output", res)
	}
	res, rerr = b.call("tasks/get", map[string]any{"taskId": id})
	if rerr != nil || !strings.Contains(string(res), `"completed"`) {
		t.Errorf("tasks/get from another session: %s %+v", res, rerr)
	}
}

// TestMCPHTTPRefusals sends what the listener must refuse, each answered
// with its status, and the server goes on.
func TestMCPHTTPRefusals(t *testing.T) {
	h := startHTTPMCP(t)
	good := h.openRaw(h.token)
	u, err := url.Parse(h.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}}
	fresh := func(token string) *rawSession { return &rawSession{h: h, token: token, version: "2025-11-25"} }
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		header string // a header the answer must have
		has    string // what it must hold
	}{
		{"no token", func() *http.Request { return fresh("").request(initialize) }, 401, "WWW-Authenticate", "Bearer"},
		{"a wrong token", func() *http.Request { return fresh(strings.Repeat("0", 64)).request(initialize) }, 401, "WWW-Authenticate", `error="invalid_token"`},
		{"a rebinding Host", func() *http.Request {
			r := good.request(initialize)
			r.Host = "attacker.example:" + u.Port()
			return r
		}, 403, "", ""},
		{"a foreign Origin", func() *http.Request {
			r := good.request(initialize)
			r.Header.Set("Origin", "https://evil.example")
			return r
		}, 403, "", ""},
		{"an Origin equal to the Host", func() *http.Request {
			r := good.request(initialize)
			r.Header.Set("Origin", "http://"+u.Host)
			return r
		}, 403, "", ""},
		{"an unknown session", func() *http.Request {
			r := good.request(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
			r.Header.Set("Mcp-Session-Id", "no-such-session")
			return r
		}, 404, "", ""},
		{"a body over the limit", func() *http.Request {
			return good.request(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{
				"name": "write_file", "arguments": map[string]any{"path": "big", "content": strings.Repeat("x", 5<<20)}}})
		}, 413, "", ""},
		{"malformed JSON", func() *http.Request {
			r := good.request(nil)
			r.Body = http.NoBody
			r.Body = ioNop(`{"jsonrpc": "2.0", "id": 4, "method": `)
			r.ContentLength = -1
			return r
		}, 400, "", "-32700"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.req())
			if resp.StatusCode != c.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, c.status, body)
			}
			if c.header != "" && !strings.Contains(resp.Header.Get(c.header), c.has) {
				t.Errorf("%s: %q, want it to hold %q", c.header, resp.Header.Get(c.header), c.has)
			}
			if c.header == "" && c.has != "" && !strings.Contains(string(body), c.has) {
				t.Errorf("body %q, want it to hold %q", body, c.has)
			}
			if strings.Contains(string(body)+resp.Header.Get("WWW-Authenticate"), h.token) {
				t.Errorf("the answer holds the server's token")
			}
		})
	}
	// A rebinding through a name that resolves to this listener: the
	// client dials 127.0.0.1, the Host is the attacker's name.
	rebind := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, u.Host)
	}}}
	req := good.request(initialize)
	req.URL.Host = "rebind.attacker.test:" + u.Port()
	req.Host = ""
	resp, err := rebind.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebinding name resolved to the listener: %s, want 403", resp.Status)
	}
	// The server went on.
	if _, rerr := good.call("tools/list", map[string]any{}); rerr != nil {
		t.Errorf("tools/list after the refusals: %+v", rerr)
	}
	if strings.Contains(h.stderr.String(), h.token) {
		t.Errorf("the log holds the token")
	}
}

// TestMCPHTTPConcurrentClients runs 50 clients of 20 calls each at once:
// every call is answered.
func TestMCPHTTPConcurrentClients(t *testing.T) {
	h := startHTTPMCP(t)
	seed := h.connect("", nil, "")
	seed.ok("write_file", map[string]any{"path": "f.txt", "content": "same\n"}, nil)
	var wg sync.WaitGroup
	errs := make(chan string, 50*20)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() { // owned by the test, which waits on wg
			defer wg.Done()
			c := sdk.NewClient(&sdk.Implementation{Name: "load", Version: "1"}, nil)
			ctx, cancel := limit()
			defer cancel()
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: httpClientWith(h.token), MaxRetries: -1}, nil)
			if err != nil {
				errs <- "connect: " + err.Error()
				return
			}
			defer cs.Close()
			for j := 0; j < 20; j++ {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "f.txt"}})
				if err != nil {
					errs <- err.Error()
					continue
				}
				if res.IsError || len(res.Content) == 0 {
					errs <- "an error result: " + text(res)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n < 5 {
			t.Error(e)
		}
		n++
	}
	if n > 0 {
		t.Errorf("%d of 1000 calls failed", n)
	}
}

// TestMCPHTTPClientGoneMidStream drops a tool call's stream after its
// first event: the command lives on, and its result is fetched later by
// resuming the stream with Last-Event-ID.
func TestMCPHTTPClientGoneMidStream(t *testing.T) {
	h := startHTTPMCP(t)
	r := h.openRaw(h.token)
	ctx, cancel := context.WithCancel(context.Background())
	req := r.request(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "run_command", "arguments": map[string]any{
		"argv": []string{"sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; echo lived on"}}}})
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tools/call: %s %s, want a stream", resp.Status, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	lastID := ""
	for lastID == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its first event: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "id:"); ok {
			lastID = strings.TrimSpace(v)
		}
	}
	cancel() // the client is gone
	resp.Body.Close()

	if _, rerr := r.call("tools/call", map[string]any{"name": "write_file", "arguments": map[string]any{"path": "go", "content": ""}}); rerr != nil {
		t.Fatalf("write_file: %+v", rerr)
	}
	get, err := http.NewRequest(http.MethodGet, h.endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Authorization", "Bearer "+h.token)
	get.Header.Set("Mcp-Session-Id", r.id)
	get.Header.Set("MCP-Protocol-Version", r.version)
	get.Header.Set("Last-Event-ID", lastID)
	lctx, lcancel := limit()
	defer lcancel()
	resp, err = http.DefaultClient.Do(get.WithContext(lctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resuming with Last-Event-ID %s: %s", lastID, resp.Status)
	}
	br = bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the resumed stream ended without the result: %v", err)
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:")
		if !ok {
			continue
		}
		var m wireMsg
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) != nil || string(m.ID) != "7" {
			continue
		}
		if !strings.Contains(string(m.Result), "lived on") {
			t.Errorf("the resumed result: %s, want the command's output", m.Result)
		}
		return
	}
}

// exchange2026 builds a 2026-07-28 POST without a session: the _meta
// triple with the tasks extension, and the headers the version wants.
func (h *httpMCP) exchange2026(id int, method, name string, params map[string]any) *http.Request {
	h.t.Helper()
	params["_meta"] = v2Meta(true)
	r := &rawSession{h: h, token: h.token, version: versionTasks2026}
	req := r.request(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req.Header.Set("MCP-Protocol-Version", versionTasks2026)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

// TestMCPHTTPStateless2026: 2026-07-28 over HTTP, each request an
// exchange of its own: a run_command past its yieldMs becomes a task, and
// a subscriptions/listen of another exchange acknowledges it and sends its
// terminal state once the command ends, on the listen's own stream.
func TestMCPHTTPStateless2026(t *testing.T) {
	h := startHTTPMCP(t)
	resp, body := do(t, h.exchange2026(1, "tools/call", "run_command", map[string]any{"name": "run_command", "arguments": map[string]any{
		"argv": []string{"sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; echo later"}, "yieldMs": 100}}))
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("a 2026-07-28 tools/call: %s (session %q): %s", resp.Status, resp.Header.Get("Mcp-Session-Id"), body)
	}
	var created task2026
	for _, m := range messagesOf(t, resp, body) {
		if string(m.ID) == "1" {
			if m.Error != nil || json.Unmarshal(m.Result, &created) != nil {
				t.Fatalf("tools/call: %s %+v", m.Result, m.Error)
			}
		}
	}
	if created.ResultType != "task" || created.TaskID == "" || created.Status != "working" {
		t.Fatalf("run_command past its yieldMs: %+v, want a working task", created)
	}

	ctx, cancel := limit()
	defer cancel()
	listen, err := http.DefaultClient.Do(h.exchange2026(2, "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": []string{created.TaskID}}}).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Body.Close()
	if listen.StatusCode != 200 {
		t.Fatalf("subscriptions/listen: %s", listen.Status)
	}
	events := make(chan wireMsg, 16)
	go func() { // ends with the listen's stream, which the test's end closes
		defer close(events)
		br := bufio.NewReader(listen.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok && strings.TrimSpace(data) != "" {
				var m wireMsg
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) == nil {
					events <- m
				}
			}
		}
	}()
	next := func(method string) wireMsg {
		t.Helper()
		for {
			select {
			case m, ok := <-events:
				if !ok {
					t.Fatalf("the listen's stream ended before %s", method)
				}
				if m.Method == method {
					return m
				}
			case <-ctx.Done():
				t.Fatalf("no %s on the listen's stream", method)
			}
		}
	}
	ack := next("notifications/subscriptions/acknowledged")
	if !strings.Contains(string(ack.Params), created.TaskID) {
		t.Errorf("the acknowledgment %s does not name the task", ack.Params)
	}
	if resp, body := do(t, h.exchange2026(3, "tools/call", "write_file", map[string]any{"name": "write_file", "arguments": map[string]any{"path": "go", "content": ""}})); resp.StatusCode != 200 {
		t.Fatalf("write_file: %s %s", resp.Status, body)
	}
	done := next("notifications/tasks")
	if !strings.Contains(string(done.Params), `"completed"`) || !strings.Contains(string(done.Params), "later") {
		t.Errorf("the task's terminal notification: %s, want completed with the command's output", done.Params)
	}
}

// TestMCPHTTPStandaloneStreamParked: through the binary, a session's GET
// stream on HTTP/1.1 is parked (chunked, Connection: close) and still
// carries what the server sends; a second GET is 409 while the first's
// client is connected, and takes the stream over once it has gone, the
// events sent meanwhile included.
func TestMCPHTTPStandaloneStreamParked(t *testing.T) {
	t.Parallel()
	h := startHTTPMCP(t, "--http-no-auth")
	r := h.openRaw("")
	get := func() (*http.Response, *bufio.Reader, context.CancelFunc) {
		req := r.request(nil)
		req.Method, req.Body, req.ContentLength = http.MethodGet, nil, 0
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Del("Content-Type")
		ctx, cancel := limit()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatalf("GET: %v", err)
		}
		return resp, bufio.NewReader(resp.Body), cancel
	}
	// next returns the data of the next event that has some.
	next := func(br *bufio.Reader) string {
		var data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			switch line = strings.TrimRight(line, "\n"); {
			case strings.HasPrefix(line, "data: "):
				data += line[len("data: "):]
			case line == "" && data != "":
				return data
			}
		}
	}
	first, br, cancel := get()
	defer cancel()
	if first.StatusCode != http.StatusOK || !first.Close || len(first.TransferEncoding) != 1 {
		t.Fatalf("GET: %s, Close %v, Transfer-Encoding %q: want 200, parked (chunked, Connection: close)", first.Status, first.Close, first.TransferEncoding)
	}
	// A task's status notifications go on the standalone stream.
	task := r.startTask("run_command", map[string]any{"argv": []string{"true"}})
	if got := next(br); !strings.Contains(got, task) {
		t.Errorf("the parked stream got %s, want a notification of task %s", got, task)
	}
	second, _, cancel2 := get()
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	cancel2()
	if second.StatusCode != http.StatusConflict {
		t.Errorf("a second GET while the first's client is there: %s %s, want 409", second.Status, b)
	}
	first.Body.Close()
	task2 := r.startTask("run_command", map[string]any{"argv": []string{"true"}})
	third, br3, cancel3 := get()
	defer cancel3()
	defer third.Body.Close()
	if third.StatusCode != http.StatusOK {
		t.Fatalf("a GET once the first's client had gone: %s, want 200", third.Status)
	}
	if got := next(br3); !strings.Contains(got, task2) {
		t.Errorf("the stream taken over got %s first, want the notification of task %s sent meanwhile", got, task2)
	}
}
