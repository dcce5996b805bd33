// Package demo plays a short toolhost session for a newcomer: it starts a
// server over in-memory pipes on a temporary workspace, calls every method
// the build serves and prints the traffic as it happens.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// Run plays the demo session and writes the traffic to w.
func Run(w io.Writer, cfg tools.Config, opts rpc.Options) error {
	root, err := os.MkdirTemp("", "toolhost-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	cfg.Root = root

	// Two pipes: client → server and server → client.
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	srv := tools.NewServer(cfg, opts)
	exit := make(chan int, 1)
	go func() { // owned by Run: it waits on exit
		exit <- srv.Serve(sin, sout)
		sout.Close()
	}()

	p := &printer{w: w}
	results := make(chan rpc.ToolResult, 8)
	conn := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(duplex{cin, cout}))
	conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		p.show("◆", req.Method(), req.Params())
		if req.Method() == rpc.NotifyToolResult {
			var r rpc.ToolResult
			if err := json.Unmarshal(req.Params(), &r); err == nil {
				results <- r
			}
		}
		return nil, nil
	})
	d := &session{conn: conn, p: p}

	p.say("toolhost demo: a session against the temporary workspace " + root)
	p.say("→ requests the client sends, ← answers, ◆ notifications the server pushes")

	rootURI := (&url.URL{Scheme: "file", Path: root}).String()
	if err := d.call("initialize", map[string]any{"processId": os.Getpid(), "rootUri": rootURI,
		"clientInfo": map[string]string{"name": "toolhost-demo"}}); err != nil {
		return err
	}
	if err := conn.Notify(context.Background(), "initialized", map[string]any{}); err != nil {
		return err
	}

	p.say("\nWrite a file, then read two of its lines back:")
	if err := d.call("writeFile", map[string]any{"path": "notes/hello.txt", "content": "one\ntwo\nthree\nfour\n", "createDirs": true}); err != nil {
		return err
	}
	if err := d.call("readFile", map[string]any{"path": "notes/hello.txt", "line": 2, "limit": 2}); err != nil {
		return err
	}
	p.say("\nA path that climbs out of the root is refused:")
	d.call("readFile", map[string]any{"path": "../../etc/passwd"})

	p.say("\nRun a command to completion (argv, never a shell):")
	if err := d.call("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo hello from $0; echo a warning >&2; exit 3"}}); err != nil {
		return err
	}

	p.say("\nRun a recipe of three steps behind a handle; its transitions arrive live:")
	if err := d.call("longRunning", map[string]any{"label": "build", "steps": []map[string]any{
		{"name": "fetch", "argv": []string{"sh", "-c", "echo fetching"}},
		{"name": "compile", "argv": []string{"sh", "-c", "echo compiling"}},
		{"name": "test", "argv": []string{"sh", "-c", "echo testing"}},
	}}); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}

	p.say("\nStart a long command with streamed output, look at it, then cancel it:")
	var started rpc.LongRunningResult
	if err := d.callInto("longRunning", map[string]any{"label": "sleepy", "streamOutput": true,
		"argv": []string{"sh", "-c", "echo started; exec sleep 300"}}, &started); err != nil {
		return err
	}
	if err := d.call("progress", map[string]any{}); err != nil {
		return err
	}
	if err := d.call("cancel", map[string]any{"handleId": started.HandleID, "graceMs": 500}); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}

	p.say("\nEnd the session:")
	if err := d.call("shutdown", nil); err != nil {
		return err
	}
	if err := conn.Notify(context.Background(), "exit", nil); err != nil {
		return err
	}
	select {
	case code := <-exit:
		p.say(fmt.Sprintf("server exited with code %d", code))
		cout.Close()
		if code != 0 {
			return fmt.Errorf("server exited with code %d", code)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("server did not exit")
	}
	return nil
}

// waitResult waits for one toolResult notification.
func waitResult(results <-chan rpc.ToolResult) error {
	select {
	case <-results:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no toolResult within 30s")
	}
}

// duplex joins two pipe ends into the connection a stream wants.
type duplex struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (d duplex) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d duplex) Write(p []byte) (int, error) { return d.w.Write(p) }
func (d duplex) Close() error                { d.r.Close(); return d.w.Close() }

// session is the demo's client.
type session struct {
	conn jsonrpc2.Conn
	p    *printer
}

// call sends a request and prints it and its answer. A JSON-RPC error is
// printed, not returned; a transport failure is returned.
func (s *session) call(method string, params any) error {
	return s.callInto(method, params, nil)
}

// callInto is call that also decodes the result into v.
func (s *session) callInto(method string, params, v any) error {
	b, _ := json.Marshal(params)
	if params == nil {
		b = nil
	}
	s.p.show("→", method, b)
	var raw json.RawMessage
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := s.conn.Call(ctx, method, json.RawMessage(b), &raw)
	if err != nil {
		var werr *jsonrpc2.Error
		if ok := asWire(err, &werr); ok {
			body, _ := json.Marshal(map[string]any{"code": werr.Code, "message": werr.Message, "data": json.RawMessage(orNull(werr.Data))})
			s.p.show("←", "error", body)
			return nil
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	s.p.show("←", method, raw)
	if v != nil {
		return json.Unmarshal(raw, v)
	}
	return nil
}

// asWire finds a JSON-RPC error in err.
func asWire(err error, target **jsonrpc2.Error) bool {
	for err != nil {
		if w, ok := err.(*jsonrpc2.Error); ok {
			*target = w
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// printer prints traffic readably, one message at a time.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) say(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, s)
}

// show prints one message with its params or result, indented and with
// long strings cut.
func (p *printer) show(arrow, method string, body []byte) {
	var v any
	text := ""
	if len(body) > 0 && json.Unmarshal(body, &v) == nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("    ", "  ")
		enc.Encode(shorten(v))
		text = " " + strings.TrimSpace(buf.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s %s%s\n", arrow, method, text)
}

// shorten cuts long strings and drops noisy paths' directories.
func shorten(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && strings.HasSuffix(k, "Path") && filepath.IsAbs(s) {
				x[k] = "…/" + filepath.Base(filepath.Dir(s)) + "/" + filepath.Base(s)
				continue
			}
			x[k] = shorten(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = shorten(e)
		}
		return x
	case string:
		if len(x) > 120 {
			return x[:117] + "…"
		}
	}
	return v
}
