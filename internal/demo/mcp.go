package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// RunMCP plays an MCP session, as an agent's MCP client would, against
// toolhost's MCP server on a temporary workspace, and writes the traffic
// to w. The client is the official Go SDK's.
func RunMCP(w io.Writer, cfg tools.Config, opts rpc.Options, version string) error {
	root, remove, err := demoWorkspace(&cfg, "toolhost-demo-mcp-")
	if err != nil {
		return err
	}
	defer remove()

	cin, cout, exit := servePiped(cfg, opts, version)

	p := &printer{w: w}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "toolhost-demo", Version: version}, nil)
	c.AddRoots(&sdk.Root{URI: (&url.URL{Scheme: "file", Path: root}).String(), Name: "demo workspace"})

	p.say("toolhost demo --mcp: an MCP session (the official Go SDK's client) against the temporary workspace " + root)
	p.say("→ what the client sends, ← what the server answers or pushes")
	p.say("\nConnect: the client discovers the server and negotiates the protocol version:")
	cs, err := c.Connect(ctx, tracing{t: &sdk.IOTransport{Reader: cin, Writer: cout}, p: traceWriter{p}}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return err
	}

	call := func(name string, args any, meta sdk.Meta) error {
		params := &sdk.CallToolParams{Name: name, Arguments: args}
		if meta != nil {
			params.Meta = meta
		}
		_, err := cs.CallTool(ctx, params)
		return err
	}
	p.say("\nThe first tool call opens the workspace: the server asks for the client's roots, which may narrow --root.")
	p.say("Write a file, then read two of its lines back:")
	if err := call("write_file", map[string]any{"path": "notes/hello.txt", "content": "one\ntwo\nthree\nfour\n", "createDirs": true}, nil); err != nil {
		return err
	}
	if err := call("read_file", map[string]any{"path": "notes/hello.txt", "line": 2, "limit": 2}, nil); err != nil {
		return err
	}
	p.say("\nA path that climbs out of the root is a tool error (isError), not a protocol error:")
	if err := call("read_file", map[string]any{"path": "../../etc/passwd"}, nil); err != nil {
		return err
	}
	p.say("\nRun a command; a non-zero exit is a result. The full output is a resource_link:")
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{
		"argv": []string{"sh", "-c", "echo hello from $0; echo a warning >&2; exit 3"}}})
	if err != nil {
		return err
	}
	p.say("\nRead the linked artifact back with resources/read:")
	for _, content := range res.Content {
		if link, ok := content.(*sdk.ResourceLink); ok {
			if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: link.URI}); err != nil {
				return err
			}
			break
		}
	}
	p.say("\nA command that reports steps (marker lines on stderr), with a progress token: each step arrives as notifications/progress:")
	if err := call("run_command", map[string]any{"argv": []string{"sh", "-c",
		`i=0; for s in fetch compile test; do echo "[STEP 0$i/03] $s" >&2; echo "$s..."; echo "  ✓ $s" >&2; i=$((i+1)); done`}},
		sdk.Meta{"progressToken": "demo-build"}); err != nil {
		return err
	}
	if err := mcpSnapshots(ctx, p, cs); err != nil {
		return err
	}
	p.say("\nStart a command in the background, read its output as it comes, then cancel it (its whole tree ends):")
	started, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "start_command", Arguments: map[string]any{
		"argv": []string{"sh", "-c", "echo started; exec sleep 300"}, "label": "sleepy"}})
	if err != nil {
		return err
	}
	var handle struct {
		HandleID string `json:"handleId"`
	}
	b, _ := json.Marshal(started.StructuredContent)
	if err := json.Unmarshal(b, &handle); err != nil || handle.HandleID == "" {
		return fmt.Errorf("start_command gave no handleId: %s", b)
	}
	if err := call("read_output", map[string]any{"handleId": handle.HandleID, "waitMs": 5000}, nil); err != nil {
		return err
	}
	if err := call("list_commands", map[string]any{}, nil); err != nil {
		return err
	}
	if err := call("cancel_command", map[string]any{"handleId": handle.HandleID, "graceMs": 500}, nil); err != nil {
		return err
	}

	p.say("\nThe client closes stdin: the server ends every process and exits.")
	if err := cs.Close(); err != nil {
		return err
	}
	if err := awaitExit(p, exit); err != nil {
		return err
	}
	return runTasks(ctx, p, cfg, opts, version)
}

// taskProtocol is the MCP version whose experimental tasks the demo shows.
const taskProtocol = "2025-11-25"

// runTasks plays MCP tasks on a second session over the same workspace, at
// MCP 2025-11-25: a command started as a task, the task listed, and its
// result fetched with tasks/result. The Go SDK's client has no task
// support, so this client writes its JSON-RPC requests itself, over the
// SDK's connection (traced as the first session is).
func runTasks(ctx context.Context, p *printer, cfg tools.Config, opts rpc.Options, version string) error {
	cin, cout, exit := servePiped(cfg, opts, version)

	p.say("\nTasks (MCP " + taskProtocol + "): a second session on the same workspace. The Go SDK's client has no task support,")
	p.say("so this client writes its requests itself. The client negotiates " + taskProtocol + "; the server declares capabilities.tasks:")
	conn, err := tracing{t: &sdk.IOTransport{Reader: cin, Writer: cout}, p: traceWriter{p}}.Connect(ctx)
	if err != nil {
		return err
	}
	c := &rawClient{conn: conn}
	defer c.conn.Close()
	var ini struct {
		Capabilities struct {
			Tasks json.RawMessage `json:"tasks"`
		} `json:"capabilities"`
	}
	if err := c.call(ctx, "initialize", map[string]any{"protocolVersion": taskProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolhost-demo", "version": version}}, &ini); err != nil {
		return err
	}
	if ini.Capabilities.Tasks == nil {
		return fmt.Errorf("initialize at %s declared no tasks capability", taskProtocol)
	}
	if err := c.notify(ctx, "notifications/initialized", map[string]any{}); err != nil {
		return err
	}

	p.say("\nStart a command as a task (params.task): the server answers at once with the task, working; the command runs on:")
	var created struct {
		Task taskRef `json:"task"`
	}
	if err := c.call(ctx, "tools/call", map[string]any{"name": "start_command",
		"arguments": map[string]any{"argv": []string{"sh", "-c", "echo compiling; sleep 0.5; echo built"}, "label": "build"},
		"task":      map[string]any{"ttl": 600000}}, &created); err != nil {
		return err
	}
	id := created.Task.TaskID
	if id == "" {
		return fmt.Errorf("start_command as a task gave no taskId")
	}

	p.say("\nList the session's tasks:")
	var list struct {
		Tasks []taskRef `json:"tasks"`
	}
	if err := c.call(ctx, "tasks/list", map[string]any{}, &list); err != nil {
		return err
	}
	if !slices.Contains(list.Tasks, taskRef{TaskID: id}) {
		return fmt.Errorf("tasks/list does not list task %s", id)
	}

	p.say("\nFetch its result: tasks/result waits for the command's end and answers what run_command would have;")
	p.say("notifications/tasks/status tells the task's terminal state:")
	var result struct {
		Meta struct {
			RelatedTask taskRef `json:"io.modelcontextprotocol/related-task"`
		} `json:"_meta"`
	}
	if err := c.call(ctx, "tasks/result", map[string]any{"taskId": id}, &result); err != nil {
		return err
	}
	if result.Meta.RelatedTask.TaskID != id {
		return fmt.Errorf("tasks/result of %s names task %q", id, result.Meta.RelatedTask.TaskID)
	}
	if err := c.awaitNotification(ctx, "notifications/tasks/status"); err != nil {
		return err
	}

	p.say("\nThe client closes stdin: the server exits.")
	if err := c.conn.Close(); err != nil {
		return err
	}
	return awaitExit(p, exit)
}

// taskRef is the part of a task the demo reads: its id.
type taskRef struct {
	TaskID string `json:"taskId"`
}

// rawClient writes JSON-RPC requests on an MCP connection and reads until
// their answers, one request at a time; it is used by one goroutine.
type rawClient struct {
	conn   sdk.Connection
	nextID int
	// seen counts the notifications read, by method.
	seen map[string]int
}

// call sends a request and decodes its result into result.
func (c *rawClient) call(ctx context.Context, method string, params, result any) error {
	c.nextID++
	id, err := jsonrpc.MakeID(float64(c.nextID))
	if err != nil {
		return err
	}
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if err := c.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: b}); err != nil {
		return err
	}
	for {
		m, err := c.read(ctx)
		if err != nil {
			return err
		}
		r, ok := m.(*jsonrpc.Response)
		if !ok || r.ID != id {
			continue
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %w", method, r.Error)
		}
		return json.Unmarshal(r.Result, result)
	}
}

// notify sends a notification.
func (c *rawClient) notify(ctx context.Context, method string, params any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.conn.Write(ctx, &jsonrpc.Request{Method: method, Params: b})
}

// awaitNotification reads until a notification of method has been read,
// now or before.
func (c *rawClient) awaitNotification(ctx context.Context, method string) error {
	for c.seen[method] == 0 {
		if _, err := c.read(ctx); err != nil {
			return fmt.Errorf("waiting for %s: %w", method, err)
		}
	}
	return nil
}

// read reads one message and counts it if it is a notification; a request
// from the server is an error, since this client declares no capability
// the server could ask it about.
func (c *rawClient) read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok := m.(*jsonrpc.Request); ok {
		if r.IsCall() {
			return nil, fmt.Errorf("unexpected request from the server: %s", r.Method)
		}
		if c.seen == nil {
			c.seen = map[string]int{}
		}
		c.seen[r.Method]++
	}
	return m, nil
}

// servePiped runs an MCP server in this process over a pair of pipes: the
// client reads cin and writes cout, and exit receives the server's exit
// code once it has served. The serving goroutine is owned by the caller,
// which waits on exit.
func servePiped(cfg tools.Config, opts rpc.Options, version string) (cin io.ReadCloser, cout io.WriteCloser, exit <-chan int) {
	cr, sout := io.Pipe()
	sin, cw := io.Pipe()
	srv := mcp.New(cfg, opts, mcp.Options{Version: version})
	done := make(chan int, 1)
	go func() {
		done <- srv.Serve(sin, sout)
		sout.Close()
	}()
	return cr, cw, done
}

// tracing is a transport that prints every message, a write before it is
// written and a read as soon as it is read, so that the trace is in order.
type tracing struct {
	t sdk.Transport
	p traceWriter
}

func (t tracing) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tracingConn{Connection: c, p: t.p}, nil
}

// tracingConn prints what passes through a connection.
type tracingConn struct {
	sdk.Connection
	p traceWriter
}

func (c *tracingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		if b, err := jsonrpc.EncodeMessage(m); err == nil {
			c.p.line("read: " + string(b))
		}
	}
	return m, err
}

func (c *tracingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if b, err := jsonrpc.EncodeMessage(m); err == nil {
		c.p.line("write: " + string(b))
	}
	return c.Connection.Write(ctx, m)
}

// traceWriter prints messages readably, one at a time.
type traceWriter struct{ p *printer }

// line prints one logged message.
func (t traceWriter) line(line string) {
	arrow, body, ok := strings.Cut(line, ": ")
	if !ok {
		return
	}
	switch arrow {
	case "write":
		arrow = "→"
	case "read":
		arrow = "←"
	default:
		return
	}
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil {
		return
	}
	name := "result"
	payload := m["result"]
	switch {
	case m["method"] != nil:
		name, _ = m["method"].(string)
		payload = m["params"]
	case m["error"] != nil:
		name, payload = "error", m["error"]
	}
	payload = trimMeta(payload)
	if r, ok := payload.(map[string]any); ok && r["tools"] != nil {
		// The tools' schemas are long: name them only.
		var names []string
		for _, tool := range r["tools"].([]any) {
			names = append(names, tool.(map[string]any)["name"].(string))
		}
		r["tools"] = strings.Join(names, ", ") + " (schemas left out)"
	}
	b, _ := json.Marshal(payload)
	t.p.show(arrow, name, b)
}

// keptMeta are the protocol's _meta keys the trace keeps: they tie a
// result to its task, and say what a task's creation tells the model.
var keptMeta = map[string]bool{
	"io.modelcontextprotocol/related-task":             true,
	"io.modelcontextprotocol/model-immediate-response": true,
}

// trimMeta drops the protocol's own _meta keys (protocol version, client
// and server info on every message of MCP 2026-07-28) but those of
// keptMeta, to keep the trace readable.
func trimMeta(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if meta, ok := m["_meta"].(map[string]any); ok {
		for k := range meta {
			if strings.HasPrefix(k, "io.modelcontextprotocol/") && !keptMeta[k] {
				delete(meta, k)
			}
		}
		if len(meta) == 0 {
			delete(m, "_meta")
		}
	}
	return m
}
