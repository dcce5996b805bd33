package streamable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const legacy = "2025-11-25"

// TestSession: the SDK's client initializes a session, lists and calls
// tools, and calls a custom method, which the SDK's own transport refuses
// unless connected through its own handler.
func TestSession(t *testing.T) {
	var mu sync.Mutex
	var lifted []string
	f := newFixture(t, Options{Lift: func(req *jsonrpc.Request) {
		mu.Lock()
		lifted = append(lifted, req.Method)
		mu.Unlock()
	}})
	cs := f.connect(t, legacy, nil, nil)
	defer cs.Close()
	if cs.ID() == "" {
		t.Fatal("no session id")
	}
	if got := f.h.Sessions(); got != 1 {
		t.Errorf("Sessions() = %d, want 1", got)
	}
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff([]string{"big", "block", "echo", "elicit", "notify", "progress"}, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "hello" {
		t.Errorf("echo = %q, want hello", got)
	}
	found, err := sdk.CallCustomMethod[*searchParams, *searchResult](ctx, cs, "acme/search", &searchParams{Query: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"hit for q"}, found.Hits); diff != "" {
		t.Errorf("custom method mismatch (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call", "acme/search"}
	if diff := cmp.Diff(want, lifted); diff != "" {
		t.Errorf("Lift saw mismatch (-want +got):\n%s", diff)
	}
}

// TestProgress: progress notifications go on the call's stream, before
// its result, and reach the client's handler.
func TestProgress(t *testing.T) {
	f := newFixture(t, Options{})
	seen := make(chan float64, 3)
	cs := f.connect(t, legacy, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			seen <- req.Params.Progress
		},
	}, nil)
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "progress", Arguments: map[string]any{}}
	params.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "done" {
		t.Errorf("progress = %q, want done", got)
	}
	var got []float64
	for range 3 {
		got = append(got, <-seen)
	}
	if diff := cmp.Diff([]float64{1, 2, 3}, got); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}

	// On the wire: the priming event, the progress, the result, in order,
	// on the call's own stream.
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	evs := c.call(7, "progress", `{}`).all()
	var kinds []string
	for i, ev := range evs {
		if i == 0 {
			if ev.Data != "" || ev.ID == "" {
				t.Errorf("first event %+v, want a priming event (an id, no data)", ev)
			}
			continue
		}
		m := message(t, ev)
		if m["method"] != nil {
			kinds = append(kinds, m["method"].(string))
		} else {
			kinds = append(kinds, fmt.Sprint("response ", m["id"]))
		}
	}
	want := []string{"notifications/progress", "notifications/progress", "notifications/progress", "response 7"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("call stream mismatch (-want +got):\n%s", diff)
	}
}

// TestElicit: elicitation/create goes to the client on the call's stream,
// and its answer, POSTed on its own, comes back to the tool.
func TestElicit(t *testing.T) {
	f := newFixture(t, Options{})
	cs := f.connect(t, legacy, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			if req.Params.Message == "decline" {
				return &sdk.ElicitResult{Action: "decline"}, nil
			}
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
		},
	}, nil)
	defer cs.Close()
	for _, tc := range []struct{ msg, want string }{
		{"accept", "accept yes"},
		{"decline", "decline <nil>"},
	} {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "elicit", Arguments: map[string]any{"text": tc.msg}})
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(t, res); got != tc.want {
			t.Errorf("elicit %s = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestSplice: Splice replaces the placeholder in the result written, and
// its callbacks run once the response is on the wire: the callback waits
// for the client to have read the response, which it could not if the
// callback ran first.
func TestSplice(t *testing.T) {
	f := newFixture(t, Options{})
	read := make(chan struct{})
	ran := make(chan error, 1)
	f.splice = func(*Transport) func([]byte) ([]byte, []func()) {
		return func(result []byte) ([]byte, []func()) {
			if !strings.Contains(string(result), `"PLACEHOLDER"`) {
				return result, nil
			}
			out := strings.Replace(string(result), `"PLACEHOLDER"`, `"spliced \"in\""`, 1)
			return []byte(out), []func(){func() {
				select {
				case <-read:
					ran <- nil
				case <-time.After(10 * time.Second):
					ran <- fmt.Errorf("the callback ran before the response was read")
				}
			}}
		}
	}
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	s := c.call(1, "big", `{}`)
	ev := s.until(`"result"`)
	close(read)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Result sdk.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &resp); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, &resp.Result); got != `spliced "in"` {
		t.Errorf("spliced text = %q", got)
	}

	// The SDK's client reads it as well.
	cs := f.connect(t, legacy, nil, nil)
	defer cs.Close()
	done := make(chan *sdk.CallToolResult)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "big", Arguments: map[string]any{}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if res := <-done; res != nil && textOf(t, res) != `spliced "in"` {
		t.Errorf("spliced text = %q", textOf(t, res))
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}

// TestNotify: Notify with WithRequest goes on the call's stream; without,
// on the standalone GET stream.
func TestNotify(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	get := newSSE(t, c.do(http.MethodGet, ""))
	var kinds []string
	for _, ev := range c.call(3, "notify", `{}`).all()[1:] {
		m := message(t, ev)
		if p, ok := m["params"].(map[string]any); ok {
			kinds = append(kinds, fmt.Sprint(m["method"], " ", p["on"]))
		} else {
			kinds = append(kinds, fmt.Sprint("response ", m["id"]))
		}
	}
	if diff := cmp.Diff([]string{"notifications/test call", "response 3"}, kinds); diff != "" {
		t.Errorf("call stream mismatch (-want +got):\n%s", diff)
	}
	ev := get.until("notifications/test")
	if p := message(t, ev)["params"].(map[string]any); p["on"] != "standalone" {
		t.Errorf("standalone stream got %s", ev.Data)
	}
	if ev.ID == "" {
		t.Error("standalone event without an id")
	}
	// Once the call is answered its stream is closed: what is marked
	// with it goes on the standalone stream.
	id, _ := jsonrpc.MakeID(float64(3))
	if err := f.transport(c.sid).Notify(WithRequest(context.Background(), id), "notifications/test", map[string]any{"on": "late"}); err != nil {
		t.Fatal(err)
	}
	ev = get.until("notifications/test")
	if p := message(t, ev)["params"].(map[string]any); p["on"] != "late" {
		t.Errorf("standalone stream got %s, want the late notification", ev.Data)
	}
}

// TestWithCode: an error the SDK sends without a JSON-RPC code goes out
// with one.
func TestWithCode(t *testing.T) {
	id, _ := jsonrpc.MakeID("x")
	for _, tc := range []struct {
		err  error
		want *jsonrpc.Error
	}{
		{&jsonrpc.Error{Code: -32601, Message: "nope"}, &jsonrpc.Error{Code: -32601, Message: "nope"}},
		{&jsonrpc.Error{Message: "zero"}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "zero"}},
		{fmt.Errorf("broke"), &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "broke"}},
		{fmt.Errorf(`method "tools/list" is invalid during session initialization`), &jsonrpc.Error{Code: codeNotInitialized, Message: `method "tools/list" is invalid during session initialization: send initialize first`}},
	} {
		r := withCode(&jsonrpc.Response{ID: id, Error: tc.err})
		if diff := cmp.Diff(tc.want, r.Error); diff != "" {
			t.Errorf("withCode(%v) mismatch (-want +got):\n%s", tc.err, diff)
		}
	}
}

// TestResume: a POST stream cut mid-way goes on; its result is fetched
// with GET and Last-Event-ID.
func TestResume(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	s := c.call(5, "block", `{}`)
	prime, ok := s.next()
	if !ok || prime.ID == "" || prime.Data != "" {
		t.Fatalf("first event %+v, want a priming event", prime)
	}
	<-f.started
	s.resp.Body.Close() // an unfinished body: its connection is closed
	f.release <- struct{}{}
	// Whether the result was written before or after this GET arrives, it
	// comes on it.
	r := newSSE(t, c.do(http.MethodGet, "", headerLastEvent, prime.ID))
	evs := r.all()
	if len(evs) != 1 {
		t.Fatalf("resumed stream has %d events, want 1: %+v", len(evs), evs)
	}
	if m := message(t, evs[0]); m["id"] != float64(5) || m["result"] == nil {
		t.Errorf("resumed stream got %s, want the result of 5", evs[0].Data)
	}
	if !strings.HasPrefix(evs[0].ID, strings.Split(prime.ID, "_")[0]+"_") {
		t.Errorf("event id %q is not of the stream of %q", evs[0].ID, prime.ID)
	}
	// Written whole, the stream is still kept: a GET again replays it.
	if again := newSSE(t, c.do(http.MethodGet, "", headerLastEvent, prime.ID)).all(); !cmp.Equal(again, evs) {
		t.Errorf("replay mismatch (-want +got):\n%s", cmp.Diff(evs, again))
	}
}

// TestResumeSDKClient: the SDK's client, its connection cut while a call
// is in flight, resumes the call's stream by itself.
func TestResumeSDKClient(t *testing.T) {
	f := newFixture(t, Options{})
	var mu sync.Mutex
	var conns []net.Conn
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}}
	defer hc.CloseIdleConnections()
	progress := make(chan struct{}, 1)
	cs := f.connect(t, legacy, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) { progress <- struct{}{} },
	}, hc)
	defer cs.Close()
	done := make(chan string)
	go func() {
		params := &sdk.CallToolParams{Name: "block", Arguments: map[string]any{}}
		params.SetProgressToken("p")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- textOf(t, res)
	}()
	<-f.started
	<-progress // the call's stream is open on the client's side
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	close(f.release)
	if got := <-done; got != "released" {
		t.Errorf("call = %q, want released", got)
	}
}

// TestRefusals: every refusal, with its status and JSON-RPC error.
func TestRefusals(t *testing.T) {
	f := newFixture(t, Options{MaxBody: 1024, Principal: func(r *http.Request) string { return r.Header.Get("X-Principal") }})
	c := &rawClient{t: t, url: f.srv.URL, principal: "alice"}
	c.open()
	other := &rawClient{t: t, url: f.srv.URL, principal: "bob"}
	other.open()
	otherStream, ok := other.call(1, "block", `{}`).next()
	if !ok {
		t.Fatal("no priming event")
	}
	<-f.started
	get := newSSE(t, c.do(http.MethodGet, ""))
	_ = get
	const list = `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	for _, tc := range []struct {
		name   string
		method string
		body   string
		hdr    []string
		status int
		code   int64 // 0: no JSON-RPC body checked
	}{
		{"method", http.MethodPut, list, nil, http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest},
		{"content type", http.MethodPost, list, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest},
		{"accept", http.MethodPost, list, []string{"Accept", "application/json"}, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest},
		{"too large", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("x", 2000) + `"}}`, nil, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest},
		{"not json", http.MethodPost, `{"jsonrpc":`, nil, http.StatusBadRequest, jsonrpc.CodeParseError},
		{"batch", http.MethodPost, "[" + list + "]", nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"not json-rpc", http.MethodPost, `{"foo":1}`, nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"version", http.MethodPost, list, []string{headerVersion, "1999-01-01"}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"no session", http.MethodPost, list, []string{headerSession, ""}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"unknown session", http.MethodPost, list, []string{headerSession, "nope"}, http.StatusNotFound, codeSessionNotFound},
		{"another's session", http.MethodPost, list, []string{headerSession, other.sid}, http.StatusNotFound, codeSessionNotFound},
		{"initialize in a session", http.MethodPost, init, nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"session at 2026-07-28", http.MethodPost, list, []string{headerVersion, "2026-07-28"}, http.StatusBadRequest, sdk.CodeUnsupportedProtocolVersion},
		{"Last-Event-ID on POST", http.MethodPost, list, []string{headerLastEvent, "a_1"}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"GET accept", http.MethodGet, "", []string{"Accept", "application/json"}, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest},
		{"GET no session", http.MethodGet, "", []string{headerSession, ""}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"second GET", http.MethodGet, "", nil, http.StatusConflict, jsonrpc.CodeInvalidRequest},
		{"malformed Last-Event-ID", http.MethodGet, "", []string{headerLastEvent, "nope"}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"unknown stream", http.MethodGet, "", []string{headerLastEvent, "NOPE_3"}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"another session's stream", http.MethodGet, "", []string{headerLastEvent, otherStream.ID}, http.StatusNotFound, codeSessionNotFound},
		{"GET another's session", http.MethodGet, "", []string{"X-Principal", "bob"}, http.StatusNotFound, codeSessionNotFound},
		{"DELETE no session", http.MethodDelete, "", []string{headerSession, ""}, http.StatusBadRequest, jsonrpc.CodeInvalidRequest},
		{"DELETE another's session", http.MethodDelete, "", []string{"X-Principal", "bob"}, http.StatusNotFound, codeSessionNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *c
			c.t = t
			resp := c.do(tc.method, tc.body, tc.hdr...)
			body := c.status(resp, tc.status)
			if tc.method == http.MethodPut && resp.Header.Get("Allow") != "GET, POST, DELETE" {
				t.Errorf("Allow = %q", resp.Header.Get("Allow"))
			}
			var msg struct {
				Error *jsonrpc.Error `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.Error == nil {
				t.Fatalf("body %q is not a JSON-RPC error", body)
			}
			if msg.Error.Code != tc.code {
				t.Errorf("code %d (%s), want %d", msg.Error.Code, msg.Error.Message, tc.code)
			}
		})
	}

	// A POST of notifications only is 202, with no body.
	if body := c.status(c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`), http.StatusAccepted); body != "" {
		t.Errorf("202 with body %q", body)
	}
	// DELETE ends the session: then it is 404.
	tr := f.transport(c.sid)
	c.status(c.do(http.MethodDelete, ""), http.StatusNoContent)
	<-tr.Done()
	c.status(c.do(http.MethodPost, list), http.StatusNotFound)
	c.status(c.do(http.MethodDelete, ""), http.StatusNotFound)
}

// TestDeleteSDKClient: the SDK client's Close deletes its session.
func TestDeleteSDKClient(t *testing.T) {
	f := newFixture(t, Options{})
	cs := f.connect(t, legacy, nil, nil)
	tr := f.transport(cs.ID())
	cs.Close()
	<-tr.Done()
	c := &rawClient{t: t, url: f.srv.URL, sid: cs.ID()}
	c.status(c.do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), http.StatusNotFound)
	if got := f.h.Sessions(); got != 0 {
		t.Errorf("Sessions() = %d after DELETE, want 0", got)
	}
}

// TestIdleTimeout: a session with no request for SessionTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	f := newFixture(t, Options{SessionTimeout: 50 * time.Millisecond})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	<-f.transport(c.sid).Done()
	c.status(c.do(http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), http.StatusNotFound)
}

// TestEventBound: the session keeps EventBytes of events; a Last-Event-ID
// whose successors were dropped is 400, not a silent skip.
func TestEventBound(t *testing.T) {
	f := newFixture(t, Options{EventBytes: 2000})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	// 20 notifications of some 250 bytes on the standalone stream, with no
	// GET to take them: only the latest are kept. (Sent from no call: a
	// call's stream whose events were not yet written would lose them to
	// the bound as well, and end with a gap.)
	tr := f.transport(c.sid)
	for i := range 20 {
		if err := tr.Notify(context.Background(), "notifications/test", map[string]any{"on": "standalone", "i": i, "pad": strings.Repeat("x", 150)}); err != nil {
			t.Fatal(err)
		}
	}
	get := newSSE(t, c.do(http.MethodGet, ""))
	first := get.until("standalone")
	stream, idx, ok := parseEventID(first.ID)
	if !ok || idx == 0 {
		t.Fatalf("first kept event %q: want a later one than _0, the oldest dropped", first.ID)
	}
	if i := message(t, first)["params"].(map[string]any)["i"]; i != float64(idx) {
		t.Errorf("event %s holds notification %v", first.ID, i)
	}
	c.status(c.do(http.MethodGet, "", headerLastEvent, stream+"_0"), http.StatusBadRequest)
	c.status(c.do(http.MethodGet, "", headerLastEvent, stream+"_999"), http.StatusBadRequest)
}

// TestConcurrent: 50 clients making 20 calls each are all answered.
func TestConcurrent(t *testing.T) {
	f := newFixture(t, Options{})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			cs := f.connect(t, legacy, nil, nil)
			defer cs.Close()
			for j := range 20 {
				want := fmt.Sprintf("%d/%d", i, j)
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
				if err != nil {
					t.Error(err)
					return
				}
				if got := textOf(t, res); got != want {
					t.Errorf("echo = %q, want %q", got, want)
				}
			}
		})
	}
	wg.Wait()
}

// TestClose: Handler.Close ends every session, a call in flight among
// them, and no goroutine is left.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFixture(t, Options{SessionTimeout: time.Hour})
	hc := &http.Client{Transport: &http.Transport{}}
	var sessions []*sdk.ClientSession
	for range 3 {
		sessions = append(sessions, f.connect(t, legacy, nil, hc))
	}
	called := make(chan error)
	go func() {
		_, err := sessions[0].CallTool(context.Background(), &sdk.CallToolParams{Name: "block", Arguments: map[string]any{}})
		called <- err
	}()
	<-f.started
	var trs []*Transport
	for _, cs := range sessions {
		trs = append(trs, f.transport(cs.ID()))
	}
	f.h.Close()
	for _, tr := range trs {
		<-tr.Done()
	}
	if f.h.Sessions() != 0 {
		t.Errorf("Sessions() = %d after Close", f.h.Sessions())
	}
	if err := <-called; err == nil {
		t.Error("the call in flight succeeded after Close")
	}
	for _, cs := range sessions {
		cs.Close()
	}
	f.srv.Close()
	hc.CloseIdleConnections()
	// Goroutines have no event to wait on for their end: poll.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		<-tick.C
	}
}

// TestEphemeral: the SDK's client at 2026-07-28 has no session: each of
// its requests is an exchange of its own.
func TestEphemeral(t *testing.T) {
	f := newFixture(t, Options{})
	cs := f.connect(t, "", nil, nil)
	defer cs.Close()
	if cs.ID() != "" {
		t.Errorf("session id %q, want none", cs.ID())
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "stateless"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "stateless" {
		t.Errorf("echo = %q", got)
	}
	if got := f.h.Sessions(); got != 0 {
		t.Errorf("Sessions() = %d, want 0", got)
	}

	// By hand: the headers and _meta SEP-2575 asks for.
	c := &rawClient{t: t, url: f.srv.URL}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"raw"},` + meta + `}}`
	hdr := []string{headerVersion, "2026-07-28", headerMethod, "tools/call", headerName, "echo"}
	evs := newSSE(t, c.do(http.MethodPost, call, hdr...)).all()
	if len(evs) != 1 || !strings.Contains(evs[0].Data, `"raw"`) || evs[0].ID != "" {
		t.Errorf("exchange events %+v, want one result, with no event id", evs)
	}
	c.status(c.do(http.MethodPost, call, headerVersion, "2026-07-28", headerMethod, "tools/list", headerName, "echo"), http.StatusBadRequest)
	c.status(c.do(http.MethodPost, strings.Replace(call, meta, `"_meta":{}`, 1), hdr...), http.StatusBadRequest)
	// The client going away ends the exchange, and cancels its call. (The
	// exchange's status waits for its first message: a protocol error
	// would be answered with its own. The progress is that message.)
	blockCall := strings.Replace(strings.Replace(call, `"echo"`, `"block"`, 1), `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)
	block := newSSE(t, c.do(http.MethodPost, blockCall, headerVersion, "2026-07-28", headerMethod, "tools/call", headerName, "block"))
	block.until("notifications/progress")
	<-f.started
	block.resp.Body.Close()
	<-f.cancelled
	// A method the server does not have is 404 (SEP-2575).
	nope := `{"jsonrpc":"2.0","id":5,"method":"nope/nope","params":{` + meta + `}}`
	c.status(c.do(http.MethodPost, nope, headerVersion, "2026-07-28", headerMethod, "nope/nope"), http.StatusNotFound)
}

// TestMarkRequest: the transport's _meta member is put in cheaply when
// there is no _meta, and replaces any a client sent.
func TestMarkRequest(t *testing.T) {
	for _, tc := range []struct{ params, want string }{
		{``, `{"_meta":{"io.toolhost/http":{"id":1}}}`},
		{`{}`, `{"_meta":{"io.toolhost/http":{"id":1}}}`},
		{`{"name":"x"}`, `{"_meta":{"io.toolhost/http":{"id":1}},"name":"x"}`},
		{`{"_meta":{"a":1,"io.toolhost/http":{"id":99}},"name":"x"}`, `{"_meta":{"a":1,"io.toolhost/http":{"id":1}},"name":"x"}`},
		{`{"name":"\u005fmeta","_meta":{"io.toolhost\/http":{"id":99}}}`, `{"_meta":{"io.toolhost/http":{"id":1}},"name":"\u005fmeta"}`},
	} {
		id, _ := jsonrpc.MakeID(float64(1))
		req := &jsonrpc.Request{ID: id, Method: "m", Params: json.RawMessage(tc.params)}
		markRequest(req)
		if string(req.Params) != tc.want {
			t.Errorf("markRequest(%s) = %s, want %s", tc.params, req.Params, tc.want)
		}
		var p struct {
			Meta map[string]any `json:"_meta"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			t.Fatal(err)
		}
		if got, ok := RequestID(p.Meta); !ok || got != id {
			t.Errorf("RequestID = %v, %v; want %v", got, ok, id)
		}
	}
}

// TestIdleCost: an idle session, the SDK's server session with it, costs
// well under 64 KiB.
func TestIdleCost(t *testing.T) {
	f := newFixture(t, Options{})
	const n = 100
	open := func() {
		for range n {
			c := &rawClient{t: t, url: f.srv.URL}
			c.open()
		}
	}
	open() // warm up: connections, pools, schemas
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g := runtime.NumGoroutine()
	open()
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	stacks := (int64(after.StackInuse) - int64(before.StackInuse)) / n
	t.Logf("per idle session: %d bytes of heap, %d of stacks, %.1f goroutines", heap, stacks, float64(runtime.NumGoroutine()-g)/n)
	if heap+stacks > 64<<10 {
		t.Errorf("an idle session costs %d bytes, want under 64 KiB", heap+stacks)
	}
	if got := f.h.Sessions(); got != 2*n {
		t.Errorf("Sessions() = %d, want %d", got, 2*n)
	}
}

// TestTakeOver: a GET resuming a stream that a POST still writes (its
// client gone, unknown to the server) takes it over: the rest goes on the
// GET alone.
func TestTakeOver(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	post := c.call(2, "block", `{}`)
	prime, ok := post.next()
	if !ok || prime.ID == "" {
		t.Fatalf("first event %+v, want a priming event", prime)
	}
	<-f.started
	get := newSSE(t, c.do(http.MethodGet, "", headerLastEvent, prime.ID))
	if evs := post.all(); len(evs) != 0 {
		t.Errorf("the POST given up got %+v", evs)
	}
	close(f.release)
	evs := get.all()
	if len(evs) != 1 || message(t, evs[0])["id"] != float64(2) {
		t.Errorf("the GET got %+v, want the result of 2", evs)
	}
}

// TestEphemeralRequest: an exchange refuses to send a request to the
// client, without breaking the connection (the SDK's ErrRejected code).
func TestEphemeralRequest(t *testing.T) {
	h := NewHandler(Options{})
	tr := h.newTransport("", "", true)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := tr.Connect(context.Background()); err == nil {
		t.Error("a second Connect succeeded")
	}
	id, _ := jsonrpc.MakeID(float64(1))
	err = c.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "elicitation/create", Params: json.RawMessage(`{}`)})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32005 {
		t.Errorf("Write of a request = %v, want an error of code -32005", err)
	}
	if !tr.SupportsProtocolVersion("2026-07-28") || tr.SupportsProtocolVersion("2025-11-25") {
		t.Error("an exchange should support 2026-07-28 alone")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Read(ctx); err != context.Canceled {
		t.Errorf("Read with its context ended = %v, want context.Canceled", err)
	}
	// Close may be called many times, concurrently; it ends a Read
	// waiting.
	read := make(chan error)
	go func() {
		_, err := c.Read(context.Background())
		read <- err
	}()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	if err := <-read; err != io.EOF {
		t.Errorf("Read ended by Close = %v, want io.EOF", err)
	}
	<-tr.Done()
	if err := c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/test"}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// TestResumeStandalone: the standalone stream is primed; a client that
// lost it comes back with Last-Event-ID and gets what was sent meanwhile.
func TestResumeStandalone(t *testing.T) {
	f := newFixture(t, Options{})
	c := &rawClient{t: t, url: f.srv.URL}
	c.open()
	get := newSSE(t, c.do(http.MethodGet, ""))
	prime, ok := get.next()
	if !ok || prime.ID == "" || prime.Data != "" {
		t.Fatalf("first event %+v, want a priming event", prime)
	}
	get.resp.Body.Close()
	if err := f.transport(c.sid).Notify(context.Background(), "notifications/test", map[string]any{"on": "meanwhile"}); err != nil {
		t.Fatal(err)
	}
	ev := newSSE(t, c.do(http.MethodGet, "", headerLastEvent, prime.ID)).until("notifications/test")
	if p := message(t, ev)["params"].(map[string]any); p["on"] != "meanwhile" {
		t.Errorf("resumed standalone stream got %s", ev.Data)
	}
}
