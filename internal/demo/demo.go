// Package demo plays a short toolhost session for a newcomer: it starts a
// server over in-memory pipes on a temporary workspace, calls every method
// the build serves and prints the traffic as it happens.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// Run plays the demo session and writes the traffic to w.
func Run(w io.Writer, cfg tools.Config, opts rpc.Options) error {
	root, remove, err := demoWorkspace(&cfg, "toolhost-demo-")
	if err != nil {
		return err
	}
	defer remove()
	farRoot, err := os.MkdirTemp("", "toolhost-demo-far-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(farRoot)
	far, err := localDestination(farRoot)
	if err != nil {
		return err
	}
	cfg.Destinations = append(cfg.Destinations, far)

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
	c := client.New(cin, cout, nil)
	defer c.Close()
	c.OnEveryNotification(func(method string, params json.RawMessage) { p.show("◆", method, params) })
	results := make(chan *protocol.ToolResult, 8)
	client.OnNotification(c, protocol.ToolResultNotification, func(r *protocol.ToolResult) { results <- r })
	d := &session{c: c, p: p}

	p.say("toolhost demo: a session against the temporary workspace " + root)
	p.say("→ requests the client sends, ← answers, ◆ notifications the server pushes")

	rootURI := (&url.URL{Scheme: "file", Path: root}).String()
	pid := os.Getpid()
	if err := d.call(protocol.MethodInitialize, protocol.InitializeParams{ProcessID: &pid, RootURI: &rootURI,
		ClientInfo: &protocol.ClientInfo{Name: "toolhost-demo"}}, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Initialized(ctx); err != nil {
		return err
	}

	p.say("\nWrite a file, then read two of its lines back:")
	if err := d.call(protocol.MethodWriteFile, protocol.WriteFileParams{Path: "notes/hello.txt", Content: "one\ntwo\nthree\nfour\n", CreateDirs: true}, nil); err != nil {
		return err
	}
	if err := d.call(protocol.MethodReadFile, protocol.ReadFileParams{Path: "notes/hello.txt", Line: 2, Limit: 2}, nil); err != nil {
		return err
	}
	p.say("\nA path that climbs out of the root is refused:")
	if err := d.call(protocol.MethodReadFile, protocol.ReadFileParams{Path: "../../etc/passwd"}, nil); err != nil {
		return err
	}

	p.say("\nRun a command to completion (argv, never a shell):")
	if err := d.call(protocol.MethodRunCommand, protocol.RunCommandParams{Argv: []string{"sh", "-c", "echo hello from $0; echo a warning >&2; exit 3"}}, nil); err != nil {
		return err
	}

	p.say("\nCommands are confined by the kernel: this one may write in the root, not outside it,")
	p.say("and its result says which layers enforced that:")
	outside := filepath.Join(os.TempDir(), fmt.Sprintf("toolhost-demo-outside-%d", os.Getpid()))
	defer os.Remove(outside)
	if err := d.call(protocol.MethodRunCommand, protocol.RunCommandParams{
		Argv:    []string{"sh", "-c", `echo inside > inside.txt && echo wrote inside.txt; echo outside > "$0" && echo wrote "$0"`, outside},
		Sandbox: &protocol.Sandbox{Filesystem: protocol.SandboxWorkspaceWrite},
	}, nil); err != nil {
		return err
	}

	if err := d.snapshots(); err != nil {
		return err
	}

	if err := networkDemo(d, p); err != nil {
		return err
	}

	p.say("\nRun a recipe of three steps behind a handle; its transitions arrive live:")
	if err := d.call(protocol.MethodLongRunning, protocol.LongRunningParams{Label: "build", Steps: []protocol.StepSpec{
		{Name: "fetch", Argv: []string{"sh", "-c", "echo fetching"}},
		{Name: "compile", Argv: []string{"sh", "-c", "echo compiling"}},
		{Name: "test", Argv: []string{"sh", "-c", "echo testing"}},
	}}, nil); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}

	p.say("\nAt an agent's pace: run a command but wait at most 300 ms for it; it outlives that,")
	p.say("so the answer is a snapshot (status running) with a handle, and the command goes on:")
	yield := int64(300)
	var snap protocol.ToolResult
	if err := d.call(protocol.MethodRunCommand, protocol.RunCommandParams{Argv: []string{"sh", "-c", "echo part 1; sleep 1; echo part 2"}, YieldMs: &yield}, &snap); err != nil {
		return err
	}
	p.say("Read its output from where the snapshot stopped; the read waits for new bytes and answers")
	p.say("as soon as they arrive, then wait for the end:")
	from, waitMs := snap.Artifacts.ByteCount, int64(10000)
	if err := d.call(protocol.MethodReadOutput, protocol.ReadOutputParams{HandleID: snap.HandleID, Offset: &from, WaitMs: &waitMs}, nil); err != nil {
		return err
	}
	if err := d.call(protocol.MethodWait, protocol.WaitParams{HandleID: snap.HandleID, TimeoutMs: &waitMs}, nil); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}

	p.say("\nStart a long command with streamed output, look at it, then cancel it:")
	var started protocol.LongRunningResult
	if err := d.call(protocol.MethodLongRunning, protocol.LongRunningParams{Label: "sleepy", StreamOutput: true,
		RunCommandParams: protocol.RunCommandParams{Argv: []string{"sh", "-c", "echo started; exec sleep 300"}}}, &started); err != nil {
		return err
	}
	if err := d.call(protocol.MethodProgress, protocol.ProgressParams{}, nil); err != nil {
		return err
	}
	grace := int64(500)
	if err := d.call(protocol.MethodCancel, protocol.CancelParams{HandleID: started.HandleID, GraceMs: &grace}, nil); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}

	if err := d.ptyShell(ctx, results); err != nil {
		return err
	}
	if err := d.destination(ctx, results); err != nil {
		return err
	}

	p.say("\nEnd the session:")
	if err := d.call(protocol.MethodShutdown, nil, nil); err != nil {
		return err
	}
	if err := c.Exit(ctx); err != nil {
		return err
	}
	return awaitExit(p, exit)
}

// awaitExit waits for the server's exit code and says it; anything but 0,
// or no exit within 30 seconds, is an error.
func awaitExit(p *printer, exit <-chan int) error {
	select {
	case code := <-exit:
		p.say(fmt.Sprintf("server exited with code %d", code))
		if code != 0 {
			return fmt.Errorf("server exited with code %d", code)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("server did not exit")
	}
	return nil
}

// waitResult waits for one toolResult notification.
func waitResult(results <-chan *protocol.ToolResult) error {
	select {
	case <-results:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no toolResult within 30s")
	}
}

// session is the demo's client, which prints what it sends and receives.
type session struct {
	c *client.Client
	p *printer
}

// call sends a request, prints it and its answer, and decodes the result
// into v (unless nil). An error answer is printed, not returned; a
// transport failure is returned.
func (s *session) call(method string, params, v any) error {
	var b []byte
	if params != nil {
		b, _ = json.Marshal(params)
	}
	s.p.show("→", method, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var raw json.RawMessage
	err := s.c.Call(ctx, method, params, &raw)
	var e *protocol.Error
	if errors.As(err, &e) {
		body, _ := json.Marshal(map[string]any{"code": e.Code, "message": e.Message, "data": e.Data})
		s.p.show("←", "error", body)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	s.p.show("←", method, raw)
	if v != nil {
		return json.Unmarshal(raw, v)
	}
	return nil
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

// networkDemo runs curl under a network allow-list that names one of two
// servers the demo starts on this machine's loopback: the proxy lets the
// first through and refuses the second, and the result counts both. It
// says so and goes on where curl is not installed.
func networkDemo(d *session, p *printer) error {
	p.say("\nA network by name: this command may reach only the hosts of its allow-list, through")
	p.say("toolhost's proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY); any other gets a 403 that says why:")
	if _, err := exec.LookPath("curl"); err != nil {
		p.say("(curl is not installed here: skipped)")
		return nil
	}
	var servers [2]*http.Server
	var addrs [2]string
	var served sync.WaitGroup // owned by networkDemo, which waits for both servers
	defer served.Wait()
	for i, body := range []string{"hello from the allowed host\n", "you should not see this\n"} {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs[i] = l.Addr().String()
		servers[i] = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
		srv := servers[i]
		served.Go(func() { _ = srv.Serve(l) })
		defer srv.Close()
	}
	script := `curl -sS http://` + addrs[0] + `/; curl -sS -o /dev/null -w '%{http_code} ' http://` + addrs[1] + `/; curl -sS http://` + addrs[1] + `/`
	return d.call(protocol.MethodRunCommand, protocol.RunCommandParams{
		Argv:    []string{"sh", "-c", script},
		Sandbox: &protocol.Sandbox{Network: &protocol.Network{Allow: []string{addrs[0]}}},
	}, nil)
}
