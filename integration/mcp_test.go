package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// mcpSession is an MCP session with the toolhost binary, driven by the
// official Go SDK's client over the binary's stdin and stdout.
type mcpSession struct {
	t    *testing.T
	cs   *sdk.ClientSession
	root string

	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams // guarded by mu
	// progressed is signalled (without blocking) at each progress.
	progressed chan struct{}
	// logs receives the notifications/message.
	logs chan *sdk.LoggingMessageParams
}

// mcpOptions configure startMCP.
type mcpOptions struct {
	args    []string // the binary's arguments; default: mcp --root <root>
	roots   []string // file roots the client offers
	version string   // the protocol version the client asks for; default the SDK's latest
	env     []string // the binary's environment; default quickExitEnv()
	extra   []string // more arguments, after args (or the default ones)
}

// startMCP starts the binary and connects the SDK's client to it; the
// session is closed at the test's end.
func startMCP(t *testing.T, o mcpOptions) *mcpSession {
	t.Helper()
	s := &mcpSession{t: t, root: t.TempDir(), progressed: make(chan struct{}, 1), logs: make(chan *sdk.LoggingMessageParams, 64)}
	args := o.args
	if args == nil {
		args = []string{"mcp", "--root", s.root}
	}
	args = append(slices.Clone(args), o.extra...)
	cmd := exec.Command(binary, append(args, "--log-level", "warn", "--kill-grace", "500ms")...)
	cmd.Stderr, cmd.Env = &testLogWriter{t: t}, quickExitEnv()
	if o.env != nil {
		cmd.Env = o.env
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolhost-integration", Version: "1"}, &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			select {
			case s.logs <- req.Params:
			default:
				t.Errorf("log message dropped: %v", req.Params.Data)
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.progress = append(s.progress, req.Params)
			s.mu.Unlock()
			select {
			case s.progressed <- struct{}{}:
			default:
			}
		},
	})
	for _, r := range o.roots {
		c.AddRoots(&sdk.Root{URI: (&url.URL{Scheme: "file", Path: r}).String()})
	}
	ctx, cancel := limit()
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		t.Fatalf("connecting to toolhost: %v", err)
	}
	s.cs = cs
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing the MCP session: %v", err)
		}
	})
	return s
}

// quickExitEnv is the environment of a server under test: the race
// detector's runtime otherwise sleeps a second at every exit
// (atexit_sleep_ms), which each MCP session ends with.
func quickExitEnv() []string {
	return append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// testLogWriter passes the server's stderr to the test log.
type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.t.Logf("server: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// call calls a tool and returns its result; a protocol error fails the
// test.
func (s *mcpSession) call(name string, args any) *sdk.CallToolResult {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured content
// into out.
func (s *mcpSession) ok(name string, args, out any) *sdk.CallToolResult {
	s.t.Helper()
	res := s.call(name, args)
	if res.IsError {
		s.t.Fatalf("%s: isError: %s", name, text(res))
	}
	decodeStructured(s.t, res, out)
	return res
}

// toolErr calls a tool that must fail and returns its error.
func (s *mcpSession) toolErr(name string, args any) toolError {
	s.t.Helper()
	res := s.call(name, args)
	if !res.IsError {
		s.t.Fatalf("%s: want isError, got %s", name, text(res))
	}
	var e toolError
	decodeStructured(s.t, res, &e)
	return e
}

// toolError is the structured content of an isError result.
type toolError struct {
	Error struct {
		Code    int                `json:"code"`
		Message string             `json:"message"`
		Data    protocol.ErrorData `json:"data"`
	} `json:"error"`
}

func decodeStructured(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	if out == nil {
		return
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// text returns the text contents of a result.
func text(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// firstText returns the first content of a result, which must be text:
// the bytes read_file and read_output read.
func firstText(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("a result without content")
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("the first content is %T, not text", res.Content[0])
	}
	return tc.Text
}

// links returns the resource links of a result by name's last word.
func links(res *sdk.CallToolResult) map[string]*sdk.ResourceLink {
	out := map[string]*sdk.ResourceLink{}
	for _, c := range res.Content {
		if l, ok := c.(*sdk.ResourceLink); ok {
			out[l.Name[strings.LastIndexByte(l.Name, ' ')+1:]] = l
		}
	}
	return out
}

// readAll reads a resource page by page, following _meta.nextUri, and
// returns its bytes and the number of pages.
func (s *mcpSession) readAll(uri string) ([]byte, int) {
	s.t.Helper()
	var all []byte
	pages := 0
	for uri != "" {
		ctx, cancel := limit()
		res, err := s.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		cancel()
		if err != nil {
			s.t.Fatalf("resources/read %s: %v", uri, err)
		}
		pages++
		if len(res.Contents) != 1 {
			s.t.Fatalf("resources/read %s: %d contents", uri, len(res.Contents))
		}
		c := res.Contents[0]
		all = append(all, c.Text...)
		all = append(all, c.Blob...)
		uri, _ = c.Meta["nextUri"].(string)
	}
	return all, pages
}

// TestMCPVersions negotiates every protocol version the SDK speaks, with
// plain toolhost (whose first message decides) and with toolhost mcp.
func TestMCPVersions(t *testing.T) {
	for _, v := range sdk.SupportedProtocolVersions() {
		for _, sub := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mcp=%v", v, sub), func(t *testing.T) {
				root := t.TempDir()
				args := []string{"--root", root}
				if sub {
					args = append([]string{"mcp"}, args...)
				}
				s := startMCP(t, mcpOptions{args: args, version: v})
				if got := s.cs.InitializeResult().ProtocolVersion; got != v {
					t.Errorf("negotiated %q, want %q", got, v)
				}
				var res protocol.ToolResult
				s.ok("run_command", map[string]any{"argv": []string{"pwd"}}, &res)
				if got, want := strings.TrimSpace(res.Stdout), root; !sameDir(got, want) {
					t.Errorf("pwd = %q, want the root %q", got, want)
				}
			})
		}
	}
}

// sameDir compares two directories by what they resolve to.
func sameDir(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// TestMCPTools drives every tool through one session.
func TestMCPTools(t *testing.T) {
	s := startMCP(t, mcpOptions{})

	tools, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks a description or a schema", tool.Name)
		}
		if a := tool.Annotations; a == nil || a.Title != tool.Title || a.Title == "" {
			t.Errorf("tool %s: annotations %+v, want its own title %q", tool.Name, a, tool.Title)
		}
	}
	want := []string{"cancel_command", "diff_snapshot", "list_commands", "read_file", "read_output", "restore_snapshot", "run_command", "snapshot_workspace", "start_command", "wait_command", "write_file", "write_input"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tools mismatch (-want +got):\n%s", diff)
	}

	t.Run("write_file and read_file", func(t *testing.T) {
		var w protocol.WriteFileResult
		s.ok("write_file", map[string]any{"path": "dir/a.txt", "content": "one\ntwo\nthree\n", "createDirs": true}, &w)
		if w.Size != 14 || len(w.Sha256) != 64 {
			t.Errorf("write_file = %+v", w)
		}
		var r protocol.ReadFileResult
		res := s.ok("read_file", map[string]any{"path": "dir/a.txt", "line": 2, "limit": 1}, &r)
		r.Content = firstText(t, res)
		got := struct {
			Content         string
			Start, End, Tot int
			Truncated       bool
		}{r.Content, r.StartLine, r.EndLine, r.TotalLines, r.Truncated}
		want := struct {
			Content         string
			Start, End, Tot int
			Truncated       bool
		}{"two\n", 2, 2, 3, true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("read_file mismatch (-want +got):\n%s", diff)
		}
		e := s.toolErr("write_file", map[string]any{"path": "dir/a.txt", "content": "x", "expectedSha256": strings.Repeat("0", 64)})
		if e.Error.Code != protocol.CodeConflict {
			t.Errorf("write_file over an existing file with expectedSha256 of zeros: code %d, want Conflict", e.Error.Code)
		}
	})

	t.Run("run_command and its artifacts", func(t *testing.T) {
		script := `i=0; while [ $i -lt 300 ]; do echo "line $i of the output"; i=$((i+1)); done; echo warned >&2; exit 3`
		var res protocol.ToolResult
		out := s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", script}}, &res)
		if res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 3 || res.Stderr != "warned\n" {
			t.Fatalf("run_command = status %s exit %v stderr %q", res.Status, res.ExitCode, res.Stderr)
		}
		if txt := text(out); !strings.Contains(txt, "exit code 3") || !strings.Contains(txt, "line 299 of the output") {
			t.Errorf("the text for the model lacks the exit code or the tail:\n%s", txt)
		}
		ls := links(out)
		for stream, path := range map[string]string{"output": res.Artifacts.OutputPath, "stdout": res.Artifacts.StdoutPath, "stderr": res.Artifacts.StderrPath} {
			l := ls[stream]
			if l == nil {
				t.Errorf("no resource_link for %s", stream)
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Small pages, so that the read goes over several.
			got, pages := s.readAll(l.URI + "?maxBytes=1000")
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s read back mismatch (-want +got):\n%s", l.URI, diff)
			}
			if stream != "stderr" && pages < 5 {
				t.Errorf("%s was read in %d pages of 1000 bytes, want several", l.URI, pages)
			}
		}
		// Bytes that are not UTF-8 come back as a blob, equal too.
		var bin protocol.ToolResult
		out = s.ok("run_command", map[string]any{"argv": []string{"printf", `\377\376 not text\n`}}, &bin)
		want, err := os.ReadFile(bin.Artifacts.StdoutPath)
		if err != nil || len(want) != 12 {
			t.Fatalf("the binary artifact: %q, %v", want, err)
		}
		if got, _ := s.readAll(links(out)["stdout"].URI); string(got) != string(want) {
			t.Errorf("binary artifact read back as %q, want %q", got, want)
		}
		ctx, cancel := limit()
		defer cancel()
		_, err = s.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "toolhost://artifacts/cmd-999/output"})
		if err == nil {
			t.Errorf("reading the artifact of a command that never ran succeeded")
		}
	})

	t.Run("start, read_output, list, wait", func(t *testing.T) {
		var started protocol.LongRunningResult
		s.ok("start_command", map[string]any{"argv": []string{"sh", "-c", "echo first; read x < /dev/null; echo second"}, "label": "two lines"}, &started)
		if started.HandleID == "" {
			t.Fatal("start_command gave no handleId")
		}
		var done protocol.ToolResult
		s.ok("wait_command", map[string]any{"handleId": started.HandleID, "timeoutMs": 30000}, &done)
		if done.Status != protocol.StatusCompleted || done.Stdout != "first\nsecond\n" {
			t.Errorf("wait_command = %s %q", done.Status, done.Stdout)
		}
		var ro protocol.ReadOutputResult
		res := s.ok("read_output", map[string]any{"handleId": started.HandleID, "stream": "stdout"}, &ro)
		ro.Data = firstText(t, res)
		if ro.Data != "first\nsecond\n" || !ro.EOF || ro.NextOffset != 13 {
			t.Errorf("read_output = %+v", ro)
		}
		var list protocol.ProgressList
		s.ok("list_commands", map[string]any{}, &list)
		found := false
		for _, h := range list.Handles {
			if h.HandleID == started.HandleID {
				found = h.Label == "two lines" && h.Status == protocol.StatusCompleted
			}
		}
		if !found {
			t.Errorf("list_commands lacks the finished handle %s: %+v", started.HandleID, list.Handles)
		}
		e := s.toolErr("wait_command", map[string]any{"handleId": "h-nope"})
		if e.Error.Code != protocol.CodeHandleNotFound || e.Error.Data.HandleID != "h-nope" {
			t.Errorf("wait_command on an unknown handle: %+v", e.Error)
		}
	})

	t.Run("write_input", func(t *testing.T) {
		var started protocol.LongRunningResult
		s.ok("start_command", map[string]any{"argv": []string{"cat"}, "openStdin": true}, &started)
		res := s.call("write_input", map[string]any{"handleId": started.HandleID, "data": "typed\n", "eof": true})
		if res.IsError {
			s.ok("cancel_command", map[string]any{"handleId": started.HandleID}, nil)
			t.Fatalf("write_input: %s", text(res))
		}
		var done protocol.ToolResult
		s.ok("wait_command", map[string]any{"handleId": started.HandleID, "timeoutMs": 30000}, &done)
		if done.Stdout != "typed\n" {
			t.Errorf("cat echoed %q, want what write_input typed", done.Stdout)
		}
	})

	t.Run("a shell in a terminal", func(t *testing.T) {
		var started protocol.LongRunningResult
		s.ok("start_command", map[string]any{"argv": []string{"sh", "-i"}, "pty": true, "ptyRows": 30, "ptyCols": 100}, &started)
		s.ok("write_input", map[string]any{"handleId": started.HandleID, "data": "echo hi-$((6*7)); stty size\r"}, nil)
		var seen string
		offset := int64(0)
		for !strings.Contains(seen, "30 100") {
			var out protocol.ReadOutputResult // the bytes are the first text content
			res := s.ok("read_output", map[string]any{"handleId": started.HandleID, "stream": "stdout", "offset": offset, "waitMs": 30000}, &out)
			if out.NextOffset == offset && !out.Running {
				t.Fatalf("the shell ended; it printed %q", seen)
			}
			seen += res.Content[0].(*sdk.TextContent).Text
			offset = out.NextOffset
		}
		if !strings.Contains(seen, "hi-42") {
			t.Errorf("the terminal shows %q, want hi-42 and the size", seen)
		}
		s.ok("cancel_command", map[string]any{"handleId": started.HandleID}, nil)
	})

	t.Run("cancel_command ends the tree", func(t *testing.T) {
		mk := newMarker()
		var started protocol.LongRunningResult
		s.ok("start_command", map[string]any{"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & sleep " + mk.Sleep + "; wait"}, "env": mk.env()}, &started)
		var res protocol.ToolResult
		s.ok("cancel_command", map[string]any{"handleId": started.HandleID, "graceMs": 100}, &res)
		if res.Status != protocol.StatusCancelled {
			t.Errorf("cancel_command: status %s", res.Status)
		}
		assertNoneLeft(t, mk, "", "after cancel_command answered")
	})
}

// TestMCPProgress gives a progress token to a command that reports its
// steps, and to a wait on a recipe: each step comes as
// notifications/progress, with progress and total taken from the steps.
func TestMCPProgress(t *testing.T) {
	s := startMCP(t, mcpOptions{})
	script := `i=0; for s in fetch build test; do echo "[STEP 0$i/03] $s" >&2; echo "$s"; echo "  ✓ $s" >&2; i=$((i+1)); done`
	ctx, cancel := limit()
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": []string{"sh", "-c", script}},
		Meta: sdk.Meta{"progressToken": "tok-1"}})
	if err != nil || res.IsError {
		t.Fatalf("run_command: %v %v", err, res)
	}
	want := []string{
		"step 1/3: fetch", "step 1/3: fetch (done)", "step 2/3: build", "step 2/3: build (done)", "step 3/3: test", "step 3/3: test (done)",
	}
	got := s.awaitProgress(len(want))
	var msgs []string
	last := -1.0
	for _, p := range got {
		msgs = append(msgs, p.Message)
		if p.ProgressToken != "tok-1" || p.Total != 3 || p.Progress <= last || p.Progress > 3 {
			t.Errorf("progress %+v after %v: want token tok-1, total 3 and a progress that grows", p, last)
		}
		last = p.Progress
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("progress messages mismatch (-want +got):\n%s", diff)
	}
	if last != 3 {
		t.Errorf("the last progress is %v, want 3 of 3", last)
	}

	// A recipe started in the background, then waited for with a token:
	// its first step heartbeats until the test has seen progress, then
	// the other steps run during the wait.
	gate := filepath.Join(s.root, "gate")
	var started protocol.LongRunningResult
	s.ok("start_command", map[string]any{"steps": []map[string]any{
		{"name": "hold", "argv": []string{"sh", "-c", `while [ ! -e gate ]; do echo '{"type":"heartbeat"}' >&3; sleep 0.05; done`}},
		{"name": "two", "argv": []string{"true"}},
		{"name": "three", "argv": []string{"true"}},
	}}, &started)
	s.mu.Lock()
	s.progress = nil
	s.mu.Unlock()
	waited := make(chan *sdk.CallToolResult, 1)
	go func() { // owned by the test: it receives from waited
		res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "wait_command", Arguments: map[string]any{"handleId": started.HandleID, "timeoutMs": 60000},
			Meta: sdk.Meta{"progressToken": 7}})
		if err != nil {
			t.Errorf("wait_command: %v", err)
		}
		waited <- res
	}()
	s.awaitProgress(1) // a heartbeat of "hold": the wait is watching
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-waited; res == nil || res.IsError {
		t.Fatalf("wait_command failed: %v", res)
	}
	// The server sends every progress before the answer; the SDK's client
	// may hand them to the handler after CallTool has returned.
	got = s.awaitProgressFunc(func(ps []*sdk.ProgressNotificationParams) bool {
		return len(ps) > 0 && ps[len(ps)-1].Message == "step 3/3: three (done)"
	})
	var steps []string
	for _, p := range got {
		if !strings.Contains(p.Message, "alive") {
			steps = append(steps, p.Message)
		}
		if p.ProgressToken != float64(7) {
			t.Errorf("progress token %v, want 7", p.ProgressToken)
		}
	}
	if len(steps) > 0 && steps[0] == "step 1/3: hold" {
		// The recipe's start may reach the server after the wait began.
		steps = steps[1:]
	}
	wantSteps := []string{"step 1/3: hold (done)", "step 2/3: two", "step 2/3: two (done)", "step 3/3: three", "step 3/3: three (done)"}
	if diff := cmp.Diff(wantSteps, steps); diff != "" {
		t.Errorf("recipe progress mismatch (-want +got):\n%s", diff)
	}
}

// awaitProgress waits until n progress notifications have arrived and
// returns them all.
func (s *mcpSession) awaitProgress(n int) []*sdk.ProgressNotificationParams {
	s.t.Helper()
	return s.awaitProgressFunc(func(ps []*sdk.ProgressNotificationParams) bool { return len(ps) >= n })
}

// awaitProgressFunc waits until the progress notifications that arrived
// satisfy done, and returns them all.
func (s *mcpSession) awaitProgressFunc(done func([]*sdk.ProgressNotificationParams) bool) []*sdk.ProgressNotificationParams {
	s.t.Helper()
	deadline := time.After(waitLimit)
	for {
		s.mu.Lock()
		got := append([]*sdk.ProgressNotificationParams(nil), s.progress...)
		s.mu.Unlock()
		if done(got) {
			return got
		}
		select {
		case <-s.progressed:
		case <-deadline:
			var msgs []string
			for _, p := range got {
				msgs = append(msgs, p.Message)
			}
			s.t.Fatalf("progress notifications after %v: %q, not what the test waits for", waitLimit, msgs)
		}
	}
}

// TestMCPCancel cancels a call mid-command with notifications/cancelled:
// the command's whole tree ends, with and without a progress token (a
// runCommand, and a handle).
func TestMCPCancel(t *testing.T) {
	s := startMCP(t, mcpOptions{})
	for _, withToken := range []bool{false, true} {
		t.Run(fmt.Sprintf("token=%v", withToken), func(t *testing.T) {
			mk := newMarker()
			// The command says it has started both sleeps by opening a
			// FIFO the test reads.
			fifo := filepath.Join(s.root, fmt.Sprintf("started-%v", withToken))
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			params := &sdk.CallToolParams{Name: "run_command", Arguments: map[string]any{
				"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & setsid sleep " + mk.Sleep + " & echo started > " + filepath.Base(fifo) + "; wait"}, "env": mk.env()}}
			if withToken {
				params.Meta = sdk.Meta{"progressToken": "cancel-me"}
			}
			done := make(chan error, 1)
			go func() { // owned by the subtest: it receives from done
				_, err := s.cs.CallTool(ctx, params)
				done <- err
			}()
			started := make(chan error, 1)
			go func() { // owned by the subtest: it receives from started
				_, err := os.ReadFile(fifo) // returns once the command has written and closed it
				started <- err
			}()
			select {
			case err := <-started:
				if err != nil {
					t.Fatal(err)
				}
			case err := <-done:
				t.Fatalf("the call ended before the command started: %v", err)
			case <-time.After(waitLimit):
				t.Fatal("the command never started")
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("the cancelled call returned %v", err)
			}
			awaitGone(t, mk, "", 10*time.Second)
			// The session goes on.
			var res protocol.ToolResult
			s.ok("run_command", map[string]any{"argv": []string{"true"}}, &res)
		})
	}
}

// TestMCPEscape refuses paths outside the workspace as tool errors.
func TestMCPEscape(t *testing.T) {
	s := startMCP(t, mcpOptions{})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "../../../../etc/passwd"}},
		{"read_file", map[string]any{"path": "/etc/passwd"}},
		{"write_file", map[string]any{"path": "../escaped.txt", "content": "x"}},
		{"run_command", map[string]any{"argv": []string{"true"}, "cwd": ".."}},
	} {
		e := s.toolErr(c.tool, c.args)
		if e.Error.Code != protocol.CodePathOutsideWorkspace {
			t.Errorf("%s %v: code %d (%s), want PathOutsideWorkspace", c.tool, c.args, e.Error.Code, e.Error.Message)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.root), "escaped.txt")); err == nil {
		t.Errorf("write_file wrote outside the root")
	}
}

// TestMCPRoots narrows the workspace with the client's roots, and never
// widens it.
func TestMCPRoots(t *testing.T) {
	top := t.TempDir()
	sub := filepath.Join(top, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "secret.txt"), []byte("top"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("narrow", func(t *testing.T) {
		for _, v := range []string{"", "2025-06-18"} { // roots by input request, and by roots/list
			s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", top}, roots: []string{sub}, version: v})
			var res protocol.ToolResult
			s.ok("run_command", map[string]any{"argv": []string{"pwd"}}, &res)
			if !sameDir(strings.TrimSpace(res.Stdout), sub) {
				t.Errorf("%s: pwd = %q, want the client's root %s", v, res.Stdout, sub)
			}
			if e := s.toolErr("read_file", map[string]any{"path": "../secret.txt"}); e.Error.Code != protocol.CodePathOutsideWorkspace {
				t.Errorf("%s: reading above the narrowed root: code %d", v, e.Error.Code)
			}
		}
	})
	t.Run("never widen", func(t *testing.T) {
		s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", sub}, roots: []string{top}})
		var res protocol.ToolResult
		s.ok("run_command", map[string]any{"argv": []string{"pwd"}}, &res)
		if !sameDir(strings.TrimSpace(res.Stdout), sub) {
			t.Errorf("pwd = %q, want --root %s (a wider client root must not widen it)", res.Stdout, sub)
		}
		if e := s.toolErr("read_file", map[string]any{"path": "../secret.txt"}); e.Error.Code != protocol.CodePathOutsideWorkspace {
			t.Errorf("reading above --root: code %d", e.Error.Code)
		}
	})
	t.Run("outside", func(t *testing.T) {
		other := t.TempDir()
		s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", sub}, roots: []string{other}})
		e := s.toolErr("run_command", map[string]any{"argv": []string{"true"}})
		if e.Error.Code != protocol.CodePathOutsideWorkspace {
			t.Errorf("a client root outside --root: code %d (%s), want PathOutsideWorkspace", e.Error.Code, e.Error.Message)
		}
	})
}

// TestMCPLogMessages passes toolhost's warnings on as notifications/message
// to a client that set a log level: artifacts evicted over the cap.
func TestMCPLogMessages(t *testing.T) {
	root := t.TempDir()
	s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", root, "--artifacts-cap-bytes", "4096"}, version: "2025-06-18"})
	ctx, cancel := limit()
	defer cancel()
	if err := s.cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", "head -c 8000 /dev/zero | tr '\\0' x"}}, nil)
	}
	select {
	case m := <-s.logs:
		if m.Level != "warning" || m.Logger != "toolhost" || !strings.Contains(fmt.Sprint(m.Data), "evicted command artifacts") {
			t.Errorf("log message %+v, want the eviction's warning", m)
		}
	case <-time.After(waitLimit):
		t.Fatal("no notifications/message for the eviction")
	}
}

// TestMCPBadInput sends bad input on the raw wire: each gets a clear error
// and the session goes on.
func TestMCPBadInput(t *testing.T) {
	r := startRawMCP(t)
	send, next := r.send, r.next
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"x"}}}`)
	if m := next(); errCode(m) != -32002 || m["id"] != float64(1) {
		t.Errorf("tools/call before initialize: %v, want error -32002", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file",`)
	if m := next(); errCode(m) != -32700 || m["id"] != nil {
		t.Errorf("malformed JSON: %v, want a parse error -32700 with a null id", m)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if m := next(); errCode(m) != -32602 || !strings.Contains(fmt.Sprint(m["error"]), "no_such_tool") {
		t.Errorf("unknown tool: %v, want -32602 naming it", m)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_command","arguments":{"argv":"echo hi","timeoutMs":"soon"}}}`)
	m := next()
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	e, _ := sc["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if res["isError"] != true || e["code"] != float64(-32602) || (data["field"] != "argv" && data["field"] != "timeoutMs") {
		t.Errorf("bad arguments: %v, want isError with -32602 naming the field", m)
	}
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_command","arguments":{"argv":["echo","still here"]}}}`)
	m = next()
	res, _ = m["result"].(map[string]any)
	if m["id"] != float64(6) || res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "still here") {
		t.Errorf("the session did not go on: %v", m)
	}
	r.stdin.Close()
	for range r.lines {
	}
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("the server exited with %v after its input ended, want 0", err)
	}
}

// rawMCP is toolhost mcp on the raw wire: lines written, messages read.
type rawMCP struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// lines carries the server's messages, decoded, until its output ends.
	lines chan map[string]any
}

// startRawMCP starts toolhost mcp on a root of its own.
func startRawMCP(t *testing.T) *rawMCP {
	t.Helper()
	cmd := exec.Command(binary, "mcp", "--root", t.TempDir(), "--log-level", "warn")
	cmd.Stderr, cmd.Env = &testLogWriter{t: t}, quickExitEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // after a failure; harmless once it has exited
	r := &rawMCP{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 64)}
	go func() { // owned by the test: it drains lines until stdout ends
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the server wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			r.lines <- m
		}
	}()
	return r
}

// send writes one line.
func (r *rawMCP) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, s+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// nextAny returns the next message, whatever it is.
func (r *rawMCP) nextAny() map[string]any {
	r.t.Helper()
	select {
	case m, ok := <-r.lines:
		if !ok {
			r.t.Fatal("the server's output ended")
		}
		return m
	case <-time.After(waitLimit):
		r.t.Fatal("no message")
	}
	return nil
}

// next returns the next answer, skipping notifications.
func (r *rawMCP) next() map[string]any {
	r.t.Helper()
	for {
		if m := r.nextAny(); m["method"] == nil {
			return m
		}
	}
}

// TestMCPProgressOnTheWire checks on the wire that every progress
// notification of a call comes before its answer: a client may drop those
// that come after.
func TestMCPProgressOnTheWire(t *testing.T) {
	r := startRawMCP(t)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.next()
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	script := `i=0; for s in a b c d; do echo "[STEP 0$i/04] $s" >&2; echo "  ✓ $s" >&2; i=$((i+1)); done`
	for id := 2; id < 12; id++ {
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		r.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":%d},"name":"run_command","arguments":%s}}`, id, id, args))
		n := 0
		for {
			m := r.nextAny()
			if m["method"] == "notifications/progress" {
				n++
				continue
			}
			if m["id"] != float64(id) {
				t.Fatalf("call %d: unexpected %v", id, m)
			}
			break
		}
		if n != 8 {
			t.Errorf("call %d: %d progress notifications before the answer, want the 8 of 4 steps", id, n)
		}
	}
}
