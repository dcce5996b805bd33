package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.lsp.dev/jsonrpc2"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// waitLimit bounds every wait of these tests, so that a broken client fails
// a test instead of hanging it.
const waitLimit = 30 * time.Second

// session is a toolhost server served in this process over pipes, with a
// client on the other ends.
type session struct {
	c    *client.Client
	root string
	exit chan int // receives Serve's exit code
}

// serve starts a server on a new root and a client in framing.
func serve(t *testing.T, framing client.Framing, opts *client.Options) *session {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	srv := tools.NewServer(tools.Config{Root: root, KillGrace: 300 * time.Millisecond, Env: os.Environ(), DisableCgroups: true, DebugMethods: true}, rpc.Options{})
	s := &session{root: root, exit: make(chan int, 1)}
	go func() { // owned by the test: its cleanup waits on exit
		code := srv.Serve(sin, sout)
		sout.Close()
		s.exit <- code
	}()
	if opts == nil {
		opts = &client.Options{}
	}
	opts.Framing = framing
	s.c = client.New(cin, cout, opts)
	t.Cleanup(func() {
		s.c.Close()
		select {
		case <-s.exit:
		case <-time.After(waitLimit):
			t.Errorf("the server did not end within %v of the client's Close", waitLimit)
		}
	})
	return s
}

// ctx returns a context that ends with the test's wait limit.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return c
}

// initialize runs the handshake.
func (s *session) initialize(t *testing.T, p *protocol.InitializeParams) *protocol.InitializeResult {
	t.Helper()
	res, err := s.c.Initialize(ctx(t), p)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := s.c.Initialized(ctx(t)); err != nil {
		t.Fatalf("initialized: %v", err)
	}
	return res
}

// forEachFraming runs f in both framings.
func forEachFraming(t *testing.T, f func(t *testing.T, framing client.Framing)) {
	for _, fr := range []client.Framing{client.FramingHeader, client.FramingNDJSON} {
		t.Run(string(fr), func(t *testing.T) {
			t.Parallel()
			f(t, fr)
		})
	}
}

// results collects the toolResults of a session by handle.
type results struct {
	mu sync.Mutex
	// got holds every toolResult by handle; guarded by mu.
	got  map[string][]protocol.ToolResult
	more chan struct{} // a token after each toolResult
}

// collectResults subscribes to toolResult.
func collectResults(c *client.Client) *results {
	r := &results{got: map[string][]protocol.ToolResult{}, more: make(chan struct{}, 1)}
	client.OnNotification(c, protocol.ToolResultNotification, func(res *protocol.ToolResult) {
		r.mu.Lock()
		r.got[res.HandleID] = append(r.got[res.HandleID], *res)
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
	})
	return r
}

// of waits for the toolResult of handle.
func (r *results) of(t *testing.T, handle string) protocol.ToolResult {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		r.mu.Lock()
		got := r.got[handle]
		r.mu.Unlock()
		if len(got) > 0 {
			return got[0]
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("no toolResult for %s within %v", handle, waitLimit)
		}
	}
}

// TestSession plays a whole session through the typed methods, in both
// framings: every request the protocol has, the toolResult of a handle,
// and an exit with code 0 after shutdown.
func TestSession(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing client.Framing) {
		s := serve(t, framing, nil)
		res := s.initialize(t, &protocol.InitializeParams{ClientInfo: &protocol.ClientInfo{Name: "client-test"}})
		if res.Workspace.Root != s.root || res.Capabilities.Framing != string(framing) {
			t.Errorf("initialize: root %q framing %q, want %q %q", res.Workspace.Root, res.Capabilities.Framing, s.root, framing)
		}
		results := collectResults(s.c)
		c := ctx(t)

		w, err := s.c.WriteFile(c, &protocol.WriteFileParams{Path: "a/b.txt", Content: "one\ntwo\nthree\n", CreateDirs: true})
		if err != nil || w.Size != 14 || w.Path != filepath.Join(s.root, "a", "b.txt") {
			t.Fatalf("writeFile = %+v, %v", w, err)
		}
		r, err := s.c.ReadFile(c, &protocol.ReadFileParams{Path: "a/b.txt", Line: 2, Limit: 1})
		if err != nil || r.Content != "two\n" || r.TotalLines != 3 {
			t.Fatalf("readFile = %+v, %v", r, err)
		}
		run, err := s.c.RunCommand(c, &protocol.RunCommandParams{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if err != nil {
			t.Fatalf("runCommand: %v", err)
		}
		want := protocol.ToolResult{Status: protocol.StatusCompleted, ExitCode: ptr(3), Stdout: "out\n", Stderr: "err\n"}
		if diff := cmp.Diff(want, ending(run)); diff != "" {
			t.Errorf("runCommand mismatch (-want +got):\n%s", diff)
		}

		done, err := s.c.LongRunning(c, &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"echo", "done"}}, Label: "quick"})
		if err != nil {
			t.Fatalf("longRunning: %v", err)
		}
		if got := results.of(t, done.HandleID); got.Stdout != "done\n" || !got.Success {
			t.Errorf("toolResult of %s: %+v", done.HandleID, got)
		}
		sleepy, err := s.c.LongRunning(c, &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"sleep", "60"}}})
		if err != nil {
			t.Fatalf("longRunning: %v", err)
		}
		one, err := s.c.Progress(c, &protocol.ProgressParams{HandleID: sleepy.HandleID})
		if err != nil || one.One == nil || one.One.Status != protocol.StatusRunning {
			t.Fatalf("progress of %s = %+v, %v", sleepy.HandleID, one, err)
		}
		all, err := s.c.Progress(c, nil)
		if err != nil || all.List == nil || len(all.List.Handles) != 2 {
			t.Fatalf("progress = %+v, %v; want a list of 2 handles", all, err)
		}
		cancelled, err := s.c.Cancel(c, &protocol.CancelParams{HandleID: sleepy.HandleID})
		if err != nil || cancelled.Status != protocol.StatusCancelled {
			t.Fatalf("cancel = %+v, %v", cancelled, err)
		}
		// The notification alone carries the session's seq.
		if diff := cmp.Diff(*cancelled, results.of(t, sleepy.HandleID), cmpopts.IgnoreFields(protocol.ToolResult{}, "Seq")); diff != "" {
			t.Errorf("toolResult differs from cancel's answer: mismatch (-want +got):\n%s", diff)
		}

		if err := s.c.Shutdown(c); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if err := s.c.Exit(c); err != nil {
			t.Fatalf("exit: %v", err)
		}
		if code := <-s.exit; code != 0 {
			t.Errorf("exit code %d after shutdown and exit, want 0", code)
		}
		s.exit <- 0 // for the cleanup
		select {
		case <-s.c.Done():
		case <-time.After(waitLimit):
			t.Fatal("the client did not see the end of the server's output")
		}
		if err := s.c.Err(); !errors.Is(err, client.ErrClosed) {
			t.Errorf("Err() = %v, want ErrClosed", err)
		}
		if _, err := s.c.Progress(c, nil); !errors.Is(err, client.ErrClosed) {
			t.Errorf("a call after the end: %v, want ErrClosed", err)
		}
		results.mu.Lock()
		defer results.mu.Unlock()
		for h, rs := range results.got {
			if len(rs) != 1 {
				t.Errorf("%s: %d toolResults, want 1", h, len(rs))
			}
		}
	})
}

// ending is the part of a ToolResult that says how a command ended.
func ending(r *protocol.ToolResult) protocol.ToolResult {
	return protocol.ToolResult{Status: r.Status, ExitCode: r.ExitCode, Signal: r.Signal, Success: r.Success, Stdout: r.Stdout, Stderr: r.Stderr}
}

func ptr[T any](v T) *T { return &v }

// TestErrorsAreRPCErrors checks an error answer comes back as an *protocol.Error
// with its data decoded, matched by code with errors.Is.
func TestErrorsAreRPCErrors(t *testing.T) {
	t.Parallel()
	s := serve(t, client.FramingHeader, nil)
	s.initialize(t, nil)
	c := ctx(t)
	_, err := s.c.Cancel(c, &protocol.CancelParams{HandleID: "h-404"})
	var e *protocol.Error
	if !errors.Is(err, protocol.ErrHandleNotFound) || !errors.As(err, &e) {
		t.Fatalf("cancel of an unknown handle: %v, want ErrHandleNotFound", err)
	}
	if e.Data == nil || e.Data.HandleID != "h-404" {
		t.Errorf("error data %+v, want the handle named", e.Data)
	}
	_, err = s.c.ReadFile(c, &protocol.ReadFileParams{Path: "../outside"})
	if !errors.Is(err, protocol.ErrPathOutsideWorkspace) || errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("readFile outside: %v, want ErrPathOutsideWorkspace only", err)
	}
	err = s.c.Call(c, "no/such/method", map[string]any{}, nil)
	if !errors.Is(err, protocol.ErrMethodNotFound) {
		t.Errorf("an unknown method: %v, want ErrMethodNotFound", err)
	}
	// A result that does not fit the caller's type is an error of its own.
	var wrong struct{ Handles int }
	if err := s.c.Call(c, protocol.MethodProgress, struct{}{}, &wrong); err == nil || errors.As(err, &e) {
		t.Errorf("decoding a list into an int: %v, want a decoding error", err)
	}
}

// TestCancelSendsCancelRequest cancels a running runCommand through its
// context: the server is told with $/cancelRequest, ends the command, and
// the call returns its -32800 answer with the partial result.
func TestCancelSendsCancelRequest(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing client.Framing) {
		s := serve(t, framing, nil)
		s.initialize(t, nil)
		started := make(chan struct{})
		var once sync.Once
		client.OnNotification(s.c, protocol.StepTransitionNotification, func(p *protocol.StepTransitionParams) {
			if p.Step == "ready" {
				once.Do(func() { close(started) })
			}
		})
		c, cancel := context.WithCancel(ctx(t))
		go func() { // owned by the test: the call below returns only after it cancelled
			<-started
			cancel()
		}()
		tok := protocol.NewStringToken("tok")
		_, err := s.c.RunCommand(c, &protocol.RunCommandParams{
			Argv:          []string{"sh", "-c", `echo partial; echo '{"type":"step_transition","step":"ready","status":"start"}' >&2; exec sleep 60`},
			WorkDoneToken: &tok,
		})
		var e *protocol.Error
		if !errors.Is(err, protocol.ErrRequestCancelled) || !errors.As(err, &e) {
			t.Fatalf("cancelled runCommand: %v, want -32800", err)
		}
		if e.Data == nil || e.Data.Partial == nil || e.Data.Partial.Status != protocol.StatusCancelled || e.Data.Partial.Stdout != "partial\n" {
			t.Errorf("the -32800 answer's data %+v, want the partial result", e.Data)
		}
		if _, err := s.c.Progress(ctx(t), nil); err != nil {
			t.Errorf("the session after a cancel: %v", err)
		}
	})
}

// TestCancelWaitGivesUp checks a call whose context ends returns the
// context's error when the answer to $/cancelRequest does not come.
func TestCancelWaitGivesUp(t *testing.T) {
	t.Parallel()
	fs := newFakeServer(t, &client.Options{CancelWait: 50 * time.Millisecond})
	c, cancel := context.WithCancel(ctx(t))
	p, err := fs.c.Send(c, "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	call := fs.read(t).(*jsonrpc2.Call)
	cancel()
	if err := p.Wait(c, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	n := fs.read(t).(*jsonrpc2.Notification)
	if n.Method() != protocol.MethodCancelRequest || string(n.Params()) != fmt.Sprintf(`{"id":%v}`, call.ID()) {
		t.Errorf("sent %s %s, want $/cancelRequest of %v", n.Method(), n.Params(), call.ID())
	}
	// A late answer to the request given up on is dropped: the next
	// request gets its own answer.
	fs.write(t, jsonrpc2.NewResponse(call.ID(), jsonrpc2.RawMessage(`1`), nil))
	next, err := fs.c.Send(ctx(t), "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.write(t, jsonrpc2.NewResponse(fs.read(t).(*jsonrpc2.Call).ID(), jsonrpc2.RawMessage(`2`), nil))
	var n2 int
	if err := next.Wait(ctx(t), &n2); err != nil || n2 != 2 {
		t.Errorf("the next request = %d, %v; want its own answer 2", n2, err)
	}
}

// TestNotificationsInOrder streams a command's output and checks that every
// output notification reaches the handlers, in order, and that the
// every-notification hook sees each method with its raw params.
func TestNotificationsInOrder(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing client.Framing) {
		s := serve(t, framing, nil)
		s.initialize(t, nil)
		var mu sync.Mutex
		var seqs []int64
		var text strings.Builder
		methods := map[string]int{}
		client.OnNotification(s.c, protocol.OutputNotification, func(o *protocol.OutputParams) {
			mu.Lock()
			defer mu.Unlock()
			seqs = append(seqs, o.Seq)
			text.WriteString(o.Data)
		})
		s.c.OnEveryNotification(func(method string, params json.RawMessage) {
			if !json.Valid(params) {
				t.Errorf("%s with invalid params %q", method, params)
			}
			mu.Lock()
			methods[method]++
			mu.Unlock()
		})
		results := collectResults(s.c)
		h, err := s.c.LongRunning(ctx(t), &protocol.LongRunningParams{
			RunCommandParams: protocol.RunCommandParams{Argv: []string{"sh", "-c", `i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done`}},
			StreamOutput:     true,
		})
		if err != nil {
			t.Fatal(err)
		}
		res := results.of(t, h.HandleID)
		b, err := os.ReadFile(res.Artifacts.StdoutPath)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("output #%d has seq %d: out of order", i+1, seq)
			}
		}
		if text.String() != string(b) {
			t.Errorf("the output notifications hold %d bytes, the artifact %d", text.Len(), len(b))
		}
		if methods[protocol.NotifyOutput] != len(seqs) || methods[protocol.NotifyToolResult] != 1 {
			t.Errorf("every-notification hook saw %v, want %d output and 1 toolResult", methods, len(seqs))
		}
	})
}

// TestConcurrentCalls makes calls from many goroutines at once.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := serve(t, client.FramingNDJSON, nil)
	s.initialize(t, nil)
	if _, err := s.c.WriteFile(ctx(t), &protocol.WriteFileParams{Path: "f.txt", Content: "x\n"}); err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() { // owned by the test: it waits on wg
			defer wg.Done()
			for j := range 50 {
				r, err := s.c.ReadFile(c, &protocol.ReadFileParams{Path: "f.txt"})
				if err != nil || r.Content != "x\n" {
					t.Errorf("goroutine %d call %d: %+v, %v", i, j, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestServerCreatesProgressToken advertises window.workDoneProgress: the
// server asks for a token, the client answers (null by default, or through
// a handler), and $/progress follows on that token.
func TestServerCreatesProgressToken(t *testing.T) {
	for _, handled := range []bool{false, true} {
		t.Run(fmt.Sprintf("handler %v", handled), func(t *testing.T) {
			t.Parallel()
			s := serve(t, client.FramingHeader, nil)
			tokens := make(chan protocol.ProgressToken, 1)
			if handled {
				client.OnRequest(s.c, protocol.WorkDoneProgressCreateRequest, func(_ context.Context, p *protocol.WorkDoneProgressCreateParams) (*protocol.Null, error) {
					tokens <- p.Token
					return nil, nil
				})
			}
			begun := make(chan protocol.ProgressToken, 1)
			client.OnNotification(s.c, protocol.WorkDoneProgressNotification, func(p *protocol.ProgressNotification) {
				if v, ok := p.Value.(map[string]any); ok && v["kind"] == "begin" {
					begun <- p.Token
				}
			})
			results := collectResults(s.c)
			s.initialize(t, &protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Window: &protocol.WindowClientCapabilities{WorkDoneProgress: true}}})
			h, err := s.c.LongRunning(ctx(t), &protocol.LongRunningParams{RunCommandParams: protocol.RunCommandParams{Argv: []string{"sleep", "60"}}})
			if err != nil {
				t.Fatal(err)
			}
			var tok protocol.ProgressToken
			select {
			case tok = <-begun:
			case <-time.After(waitLimit):
				t.Fatal("no $/progress begin: the create request was not answered")
			}
			if handled {
				if created := <-tokens; created != tok {
					t.Errorf("the handler got token %v, $/progress names %v", created, tok)
				}
			}
			if err := s.c.WorkDoneProgressCancel(ctx(t), tok); err != nil {
				t.Fatal(err)
			}
			if res := results.of(t, h.HandleID); res.Status != protocol.StatusCancelled {
				t.Errorf("after window/workDoneProgress/cancel: %s, want cancelled", res.Status)
			}
		})
	}
}

// fakeServer is the far end of a client's pipes, driven by hand with the
// library's stream, for what toolhost never sends.
type fakeServer struct {
	c      *client.Client
	stream jsonrpc2.Stream
	toCli  *io.PipeWriter
	// sent receives each message the client writes, encoded; the reader
	// goroutine closes it when the client's side of the pipe ends.
	sent chan []byte
}

// newFakeServer connects a client in header framing to a fake server whose
// reader takes the client's messages as they are written (pipes do not
// buffer).
func newFakeServer(t *testing.T, opts *client.Options) *fakeServer {
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	fs := &fakeServer{c: client.New(cin, cout, opts), stream: jsonrpc2.NewHeaderStream(duplex{sin, sout}), toCli: sout, sent: make(chan []byte, 16)}
	go func() { // owned by the fake server: the cleanup waits for sent to close
		defer close(fs.sent)
		for {
			m, _, err := fs.stream.Read(context.Background())
			if err != nil {
				return
			}
			b, err := jsonrpc2.EncodeMessage(m) // m borrows the stream's buffer
			if err != nil {
				return
			}
			fs.sent <- b
		}
	}()
	t.Cleanup(func() {
		fs.c.Close() // closes the client's ends, so the reader ends
		sout.Close()
		for range fs.sent {
		}
	})
	return fs
}

// duplex joins two pipe ends.
type duplex struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (d duplex) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d duplex) Write(p []byte) (int, error) { return d.w.Write(p) }
func (d duplex) Close() error                { d.r.Close(); return d.w.Close() }

// read returns the client's next message.
func (fs *fakeServer) read(t *testing.T) jsonrpc2.Message {
	t.Helper()
	select {
	case b, ok := <-fs.sent:
		if !ok {
			t.Fatal("the client's output ended")
		}
		m, err := jsonrpc2.DecodeMessage(b)
		if err != nil {
			t.Fatalf("decoding the client's message %s: %v", b, err)
		}
		return m
	case <-time.After(waitLimit):
		t.Fatalf("the client sent nothing within %v", waitLimit)
		return nil
	}
}

// write writes a message to the client.
func (fs *fakeServer) write(t *testing.T, m jsonrpc2.Message) {
	t.Helper()
	if _, err := fs.stream.Write(ctx(t), m); err != nil {
		t.Fatal(err)
	}
}

// writeRaw writes bytes to the client as they are.
func (fs *fakeServer) writeRaw(t *testing.T, b string) {
	t.Helper()
	if _, err := fs.toCli.Write([]byte(b)); err != nil {
		t.Fatal(err)
	}
}

// TestServerRequestsAnswered checks what the client answers the server's
// requests: null for the protocol's without a handler, -32601 for unknown
// ones, and a handler's result or coded error.
func TestServerRequestsAnswered(t *testing.T) {
	t.Parallel()
	fs := newFakeServer(t, nil)
	fs.c.OnRequestRaw("custom/ok", func(_ context.Context, params json.RawMessage) (any, error) {
		return map[string]json.RawMessage{"echo": params}, nil
	})
	fs.c.OnRequestRaw("custom/fail", func(context.Context, json.RawMessage) (any, error) {
		return nil, protocol.NewError(protocol.CodeConflict, &protocol.ErrorData{Reason: "no"}, "conflict here")
	})
	stop := fs.c.OnRequestRaw("custom/gone", func(context.Context, json.RawMessage) (any, error) { return 1, nil })
	stop()
	cases := []struct{ method, want string }{
		{protocol.MethodWorkDoneProgressCreate, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"custom/ok", `{"jsonrpc":"2.0","id":2,"result":{"echo":{"a":1}}}`},
		{"custom/fail", `{"jsonrpc":"2.0","id":3,"error":{"code":-32009,"message":"conflict here","data":{"reason":"no"}}}`},
		{"custom/gone", `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found: custom/gone"}}`},
	}
	for i, c := range cases {
		fs.write(t, jsonrpc2.NewCall(jsonrpc2.NewNumberID(int64(i+1)), c.method, jsonrpc2.RawMessage(`{"a":1}`)))
		got, err := jsonrpc2.EncodeMessage(fs.read(t))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, string(got)); diff != "" {
			t.Errorf("%s: answer mismatch (-want +got):\n%s", c.method, diff)
		}
	}
}

// TestBatchesAndStrangersAreSkipped checks the client passes every frame to
// OnRead, skips batches and answers to no request of its own, and answers
// its own requests whatever came between.
func TestBatchesAndStrangersAreSkipped(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var frames []string
	fs := newFakeServer(t, &client.Options{OnRead: func(f []byte) {
		mu.Lock()
		frames = append(frames, string(f))
		mu.Unlock()
	}})
	p, err := fs.c.Send(ctx(t), "ping", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	call := fs.read(t).(*jsonrpc2.Call)
	if string(call.Params()) != `{"n":1}` || call.ID() != p.ID() {
		t.Fatalf("sent %v %s, want id %v and the params", call.ID(), call.Params(), p.ID())
	}
	stranger := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`
	batch := `[{"jsonrpc":"2.0","id":"x","result":1}]`
	answer := `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`
	for _, f := range []string{stranger, batch, answer} {
		fs.writeRaw(t, fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(f), f))
	}
	var got struct{ Pong bool }
	if err := p.Wait(ctx(t), &got); err != nil || !got.Pong {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{stranger, batch, answer}, frames); diff != "" {
		t.Errorf("OnRead frames mismatch (-want +got):\n%s", diff)
	}
}

// TestBadMessageEndsTheTransport checks a frame that is no message ends the
// transport: calls in flight and after fail with ErrClosed saying why.
func TestBadMessageEndsTheTransport(t *testing.T) {
	t.Parallel()
	fs := newFakeServer(t, nil)
	p, err := fs.c.Send(ctx(t), "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.read(t)
	fs.writeRaw(t, "Content-Length: 9\r\n\r\n{garbage}")
	err = p.Wait(ctx(t), nil)
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "{garbage}") {
		t.Errorf("Wait = %v, want ErrClosed naming the frame", err)
	}
	<-fs.c.Done()
	if err := fs.c.Call(ctx(t), "ping", nil, nil); !errors.Is(err, client.ErrClosed) {
		t.Errorf("a call after the end: %v, want ErrClosed", err)
	}
}

// TestStartReportsExit starts a process that fails at once: the transport
// error names its exit status and its stderr, and Close returns the exit
// error.
func TestStartReportsExit(t *testing.T) {
	t.Parallel()
	c, err := client.Start(ctx(t), exec.Command("sh", "-c", "echo something broke >&2; exit 3"), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("the client did not see the process end")
	}
	err = c.Err()
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "something broke") {
		t.Errorf("Err() = %v, want ErrClosed with the exit status and stderr", err)
	}
	var ee *exec.ExitError
	if err := c.Close(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Close() = %v, want exit status 3", err)
	}
}

// TestStartClosesTheProcess runs the toolhost binary through Start: a
// session, then Close after exit returns nil, and Close without shutdown
// returns the exit status 1 the server gives.
func TestStartClosesTheProcess(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "toolhost")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("building toolhost: %v\n%s", err, out)
	}
	for _, shutdown := range []bool{true, false} {
		cmd := exec.Command(bin, "--root", t.TempDir(), "--framing", "ndjson")
		c, err := client.Start(ctx(t), cmd, &client.Options{Framing: client.FramingNDJSON})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx(t), nil); err != nil {
			t.Fatalf("initialize: %v", err)
		}
		r, err := c.RunCommand(ctx(t), &protocol.RunCommandParams{Argv: []string{"echo", "hi"}})
		if err != nil || r.Stdout != "hi\n" {
			t.Fatalf("runCommand = %+v, %v", r, err)
		}
		if shutdown {
			if err := c.Shutdown(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if err := c.Exit(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close after exit: %v, want nil", err)
			}
			continue
		}
		var ee *exec.ExitError
		if err := c.Close(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("Close without shutdown: %v, want exit status 1", err)
		}
	}
}
