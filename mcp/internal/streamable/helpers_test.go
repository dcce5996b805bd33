package streamable

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture is a Handler serving a real SDK server over an httptest.Server.
type fixture struct {
	h      *Handler
	srv    *httptest.Server
	server *sdk.Server
	// started receives a value each time the block tool starts; release
	// lets every blocked call return.
	started chan struct{}
	release chan struct{}
	// cancelled receives a value each time a blocked call is cancelled.
	cancelled chan struct{}
	// splice, if set, becomes each transport's Splice.
	splice func(t *Transport) func([]byte) ([]byte, []func())

	mu         sync.Mutex
	transports map[string]*Transport // sessions by id; guarded by mu
}

type echoIn struct {
	Text string `json:"text,omitempty"`
}

type notifyIn struct {
	Count int `json:"count,omitempty"`
	Size  int `json:"size,omitempty"`
}

type searchParams struct {
	sdk.ParamsBase
	Query string `json:"query"`
}

type searchResult struct {
	sdk.ResultBase
	Hits []string `json:"hits"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newFixture starts a server; opts.Open is set by it.
func newFixture(t *testing.T, opts Options) *fixture {
	f := &fixture{
		started:    make(chan struct{}, 100),
		cancelled:  make(chan struct{}, 100),
		release:    make(chan struct{}),
		transports: make(map[string]*Transport),
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	f.server = server
	server.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
				if id, ok := RequestID(p.GetMeta()); ok {
					ctx = WithRequest(ctx, id)
				}
			}
			return next(ctx, method, req)
		}
	})
	sdk.AddTool(server, &sdk.Tool{Name: "echo"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return text(in.Text), nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "progress"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		for i := range 3 {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3}); err != nil {
				return nil, nil, err
			}
		}
		return text("done"), nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "block"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1}); err != nil {
				return nil, nil, err
			}
		}
		f.started <- struct{}{}
		select {
		case <-f.release:
			return text("released"), nil, nil
		case <-ctx.Done():
			f.cancelled <- struct{}{}
			return nil, nil, ctx.Err()
		}
	})
	sdk.AddTool(server, &sdk.Tool{Name: "elicit"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{
			Message: in.Text,
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"answer": map[string]any{"type": "string"}},
			},
		})
		if err != nil {
			return nil, nil, err
		}
		return text(fmt.Sprintf("%s %v", res.Action, res.Content["answer"])), nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "notify"}, func(ctx context.Context, req *sdk.CallToolRequest, in notifyIn) (*sdk.CallToolResult, any, error) {
		tr := f.transport(req.Session.ID())
		if err := tr.Notify(ctx, "notifications/test", map[string]any{"on": "call"}); err != nil {
			return nil, nil, err
		}
		for i := range max(in.Count, 1) {
			if err := tr.Notify(context.Background(), "notifications/test", map[string]any{"on": "standalone", "i": i, "pad": strings.Repeat("x", in.Size)}); err != nil {
				return nil, nil, err
			}
		}
		return text("notified"), nil, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "big"}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return text("PLACEHOLDER"), nil, nil
	})
	if err := sdk.AddReceivingCustomMethod(server, "acme/search", func(ctx context.Context, ss *sdk.ServerSession, p *searchParams) (*searchResult, error) {
		return &searchResult{Hits: []string{"hit for " + p.Query}}, nil
	}); err != nil {
		t.Fatal(err)
	}

	opts.Open = func(tr *Transport) error {
		if f.splice != nil {
			tr.Splice = f.splice(tr)
		}
		if !tr.Ephemeral() {
			f.mu.Lock()
			f.transports[tr.ID()] = tr
			f.mu.Unlock()
		}
		_, err := server.Connect(context.Background(), tr, nil)
		return err
	}
	f.h = NewHandler(opts)
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(func() {
		f.h.Close()
		f.srv.Close()
	})
	return f
}

// transport returns the session id.
func (f *fixture) transport(id string) *Transport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.transports[id]
}

// connect connects the SDK's client at protocol version (the legacy
// handshake, a session, unless version is 2026-07-28 or "").
func (f *fixture) connect(t *testing.T, version string, opts *sdk.ClientOptions, hc *http.Client) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "v0"}, opts)
	if err := sdk.AddSendingCustomMethod[*searchParams, *searchResult](c, "acme/search"); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: f.srv.URL, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// textOf returns a tool result's text.
func textOf(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("result content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// rawClient speaks the protocol by hand.
type rawClient struct {
	t         *testing.T
	url       string
	sid       string
	principal string
	// hc is the client it sends with (nil: http.DefaultClient).
	hc *http.Client
}

// do sends a request with the headers a client sends, hdr (name, value
// pairs) set over them ("" removes one).
func (c *rawClient) do(method, body string, hdr ...string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	if c.sid != "" {
		req.Header.Set(headerSession, c.sid)
		req.Header.Set(headerVersion, "2025-11-25")
	}
	if c.principal != "" {
		req.Header.Set("X-Principal", c.principal)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// open initializes a session.
func (c *rawClient) open() {
	c.t.Helper()
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s := newSSE(c.t, resp)
	s.until(`"result"`)
	resp.Body.Close()
	c.sid = resp.Header.Get(headerSession)
	if c.sid == "" {
		c.t.Fatal("initialize answered without Mcp-Session-Id")
	}
	c.status(c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.StatusAccepted)
}

// call calls a tool and returns its stream.
func (c *rawClient) call(id int, tool string, args string) *sse {
	c.t.Helper()
	return newSSE(c.t, c.do(http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)))
}

// status checks resp's status and returns its body.
func (c *rawClient) status(resp *http.Response, want int) string {
	c.t.Helper()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		c.t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, want)
	}
	return string(b)
}

// sse reads an SSE response.
type sse struct {
	t    *testing.T
	resp *http.Response
	br   *bufio.Reader
}

type sseEvent struct {
	ID, Data string
}

func newSSE(t *testing.T, resp *http.Response) *sse {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("got %d %s (%s), want an SSE stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sse{t: t, resp: resp, br: bufio.NewReader(resp.Body)}
}

// next returns the next event; false at the end of the stream.
func (s *sse) next() (sseEvent, bool) {
	var ev sseEvent
	seen := false
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return ev, false
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if seen {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.ID, seen = line[len("id: "):], true
		case strings.HasPrefix(line, "data:"):
			ev.Data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			seen = true
		}
	}
}

// until returns the first event whose data holds sub.
func (s *sse) until(sub string) sseEvent {
	s.t.Helper()
	for {
		ev, ok := s.next()
		if !ok {
			s.t.Fatalf("stream ended before an event with %s", sub)
		}
		if strings.Contains(ev.Data, sub) {
			return ev
		}
	}
}

// all reads the stream to its end.
func (s *sse) all() []sseEvent {
	var evs []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

// message decodes an event's data.
func message(t *testing.T, ev sseEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		t.Fatalf("event %q: %v", ev.Data, err)
	}
	return m
}
