// Package integration builds the toolhost binary once and drives it over
// real pipes, in both framings, the way an editor or an agent does: with
// the Go client of package client, and with raw bytes where a test is about
// the wire itself.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// binary is the toolhost binary under test, built once by TestMain, with
// -race when the tests run with it. plainBinary is built without -race,
// for tests that measure memory (the race detector multiplies it).
var binary, plainBinary string

// update rewrites the expectations of the txtar scripts.
var update = flag.Bool("update", false, "rewrite the expected server messages of testdata/*.txtar")

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "toolhost-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "toolhost")
	plainBinary = binary
	builds := [][]string{{"build", "-o", binary}}
	if raceEnabled {
		builds[0] = append(builds[0], "-race") // the server's own races fail the tests too
		plainBinary = filepath.Join(dir, "toolhost-plain")
		builds = append(builds, []string{"build", "-o", plainBinary})
	}
	for _, args := range builds {
		build := exec.Command("go", append(args, "..")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building toolhost:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// framings are the framings every protocol test runs in.
var framings = []string{"header", "ndjson"}

// waitLimit bounds every wait on an event, so that a broken server fails a
// test instead of hanging it.
const waitLimit = 60 * time.Second

// msg is one message from the server as it was on the wire, for the tests
// that look at the wire itself: transcripts, the order of messages, the
// names of fields.
type msg struct {
	raw    json.RawMessage
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *protocol.Error `json:"error"`
	batch  []msg
}

// server is a running toolhost with a client on its pipes. The client
// (package client) makes the requests and answers the server's; every frame
// it reads is also recorded in msgs, in wire order, for the tests that look
// at the wire, and raw bytes can be written beside the client's messages.
type server struct {
	t       testing.TB
	c       *client.Client
	cmd     *exec.Cmd
	framing string
	root    string // the workspace root (real path)
	// stdin is shared by the client and the raw writes, one frame a write.
	stdin *lockedWriter
	// frames frames raw bodies in the server's framing, onto stdin.
	frames frameWriter
	stderr *lockedBuffer

	mu      sync.Mutex
	cond    *sync.Cond
	msgs    []msg // every message received, in order; guarded by mu
	paused  bool  // the client's read loop stops before the next message; guarded by mu
	readErr error // why no more messages come; guarded by mu

	exited chan struct{} // closed when the process has exited
	exit   int           // the exit code, set before exited is closed
}

// lockedWriter serialises writes to w. On the server's stdin it keeps the
// client's frames and a test's raw writes whole: a pipe write over
// PIPE_BUF is not atomic.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Read has nothing to read: the stream that frames raw writes only writes.
func (l *lockedWriter) Read([]byte) (int, error) { return 0, io.EOF }

// Close closes w.
func (l *lockedWriter) Close() error { return l.w.(io.Closer).Close() }

// lockedBuffer is a goroutine-safe buffer for stderr.
type lockedBuffer struct {
	lockedWriter
	buf bytes.Buffer // guarded by mu
}

func newLockedBuffer() *lockedBuffer {
	b := &lockedBuffer{}
	b.w = &b.buf
	return b
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// frameWriter is the part of the library's streams that frames given bytes.
type frameWriter interface {
	WriteFrame(ctx context.Context, data []byte) (int64, error)
}

// options configure start.
type options struct {
	framing string   // the client's framing; "" is header
	args    []string // more flags; --root is added unless noRoot
	noRoot  bool
	root    string   // the root; "" is a new temporary directory
	env     []string // the server's environment; nil is a minimal one
	plain   bool     // run the binary built without -race (for memory figures)
}

// start starts toolhost and a client on its pipes. The process is killed
// at the test's end if it is still running.
func start(t testing.TB, o options) *server {
	t.Helper()
	if o.framing == "" {
		o.framing = "header"
	}
	root := o.root
	if root == "" {
		root = t.TempDir()
	}
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--log-level", "debug"}, o.args...)
	if !o.noRoot {
		args = append(args, "--root", root)
	}
	bin := binary
	if o.plain {
		bin = plainBinary
	}
	cmd := exec.Command(bin, args...)
	if o.env != nil {
		cmd.Env = o.env
	} else {
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	}
	s := &server{t: t, cmd: cmd, framing: o.framing, root: root, stderr: newLockedBuffer(), exited: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	cmd.Stderr = s.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.stdin = &lockedWriter{w: stdin}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stream := jsonrpc2.NewHeaderStream(s.stdin)
	if o.framing == "ndjson" {
		stream = jsonrpc2.NewNDJSONStream(s.stdin)
	}
	s.frames = stream.(frameWriter)
	s.c = client.New(stdout, s.stdin, &client.Options{Framing: client.Framing(o.framing), OnRead: s.record, CancelWait: waitLimit})
	go s.reap() // owned by the server: the cleanup waits on exited
	t.Cleanup(func() {
		s.resume() // a paused client would never see the end
		s.cmd.Process.Kill()
		<-s.exited
		s.c.Close()
		if t.Failed() {
			all := s.stderr.String()
			if i := strings.Index(all, "WARNING: DATA RACE"); i >= 0 {
				// The race detector's report, whatever followed it.
				t.Logf("server race report:\n%s", all[i:min(len(all), i+20000)])
			}
			t.Logf("server stderr:\n%s", tail(all, 8000))
		}
	})
	return s
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// record keeps a frame the client read, on the client's read loop: while
// the server is paused it waits there, so the client reads no further.
func (s *server) record(frame []byte) {
	m, err := decodeMsg(frame)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.paused {
		s.cond.Wait()
	}
	if err != nil {
		if s.readErr == nil {
			s.readErr = fmt.Errorf("undecodable message from the server: %v: %q", err, frame)
		}
	} else {
		s.msgs = append(s.msgs, m)
	}
	s.cond.Broadcast()
}

// reap waits for the client to see the end of the server's output, then
// for the process.
func (s *server) reap() {
	<-s.c.Done()
	werr := s.cmd.Wait()
	code := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	s.mu.Lock()
	if s.readErr == nil {
		s.readErr = s.c.Err()
	}
	s.exit = code
	s.cond.Broadcast()
	s.mu.Unlock()
	close(s.exited)
}

// decodeMsg decodes a message or a batch of them.
func decodeMsg(body []byte) (msg, error) {
	m := msg{raw: append(json.RawMessage(nil), body...)}
	if len(body) > 0 && body[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(body, &raws); err != nil {
			return m, err
		}
		for _, r := range raws {
			sub, err := decodeMsg(r)
			if err != nil {
				return m, err
			}
			m.batch = append(m.batch, sub)
		}
		return m, nil
	}
	err := json.Unmarshal(body, &m)
	m.raw = append(json.RawMessage(nil), body...)
	return m, err
}

// write writes bytes to the server's stdin as they are.
func (s *server) write(b []byte) {
	s.t.Helper()
	if _, err := s.stdin.Write(b); err != nil {
		s.t.Fatalf("writing to the server: %v", err)
	}
}

// send frames a message body in the server's framing and writes it.
func (s *server) send(body []byte) {
	s.t.Helper()
	if _, err := s.frames.WriteFrame(context.Background(), body); err != nil {
		s.t.Fatalf("writing to the server: %v", err)
	}
}

// limit returns a context that ends after waitLimit, and its cancel.
func limit() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), waitLimit)
}

// request sends a request through the client and returns it in flight.
func (s *server) request(method string, params any) *client.Pending {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	p, err := s.c.Send(ctx, method, params)
	if err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
	return p
}

// answer waits for a request's answer, decodes its result into out (if not
// nil) and returns the error answer, if any. Anything else fails the test.
func (s *server) answer(p *client.Pending, out any) *protocol.Error {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	return s.rpcError(p.Wait(ctx, out))
}

// rpcError returns err as an error answer; any other error fails the test.
func (s *server) rpcError(err error) *protocol.Error {
	s.t.Helper()
	var e *protocol.Error
	if err == nil || errors.As(err, &e) {
		return e
	}
	s.t.Fatalf("%v", err)
	return nil
}

// call sends a request and waits for its answer, as answer does.
func (s *server) call(method string, params, out any) *protocol.Error {
	s.t.Helper()
	return s.answer(s.request(method, params), out)
}

// mustCall is call that fails the test on an error answer.
func (s *server) mustCall(method string, params, out any) {
	s.t.Helper()
	if err := s.call(method, params, out); err != nil {
		s.t.Fatalf("%s: %v (data %+v)", method, err, err.Data)
	}
}

// notify sends a notification through the client.
func (s *server) notify(method string, params any) {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	if err := s.c.Notify(ctx, method, params); err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
}

// initialize runs the initialize handshake (nil params: none).
func (s *server) initialize(params *protocol.InitializeParams) protocol.InitializeResult {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	res, err := s.c.Initialize(ctx, params)
	if err != nil {
		s.t.Fatalf("initialize: %v", err)
	}
	if err := s.c.Initialized(ctx); err != nil {
		s.t.Fatalf("initialized: %v", err)
	}
	return *res
}

// waitFor waits until a message received at or after index from matches,
// and returns it and its index. It fails the test if the server stops or
// waitLimit passes.
func (s *server) waitFor(from int, what string, match func(msg) bool) (msg, int) {
	s.t.Helper()
	deadline := time.AfterFunc(waitLimit, func() {
		s.mu.Lock()
		if s.readErr == nil {
			s.readErr = fmt.Errorf("timed out after %v", waitLimit)
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer deadline.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := from; ; {
		for ; i < len(s.msgs); i++ {
			if match(s.msgs[i]) {
				return s.msgs[i], i
			}
		}
		if s.readErr != nil {
			s.t.Fatalf("waiting for %s: %v", what, s.readErr)
		}
		s.cond.Wait()
	}
}

// response waits for the answer with the raw id (its JSON text) on the
// wire.
func (s *server) response(id string) msg {
	s.t.Helper()
	m, _ := s.responseAt(id)
	return m
}

// responseAt waits for the answer with the raw id on the wire and returns
// it and its index.
func (s *server) responseAt(id string) (msg, int) {
	s.t.Helper()
	return s.waitFor(0, "the response to "+id, func(m msg) bool { return m.Method == "" && string(m.ID) == id })
}

// wireErrorData returns the data of an error answer as it was on the wire.
func wireErrorData(t testing.TB, m msg) json.RawMessage {
	t.Helper()
	var w struct {
		Error *struct {
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.raw, &w); err != nil || w.Error == nil {
		t.Fatalf("%s is no error answer (%v)", m.raw, err)
	}
	return w.Error.Data
}

// cancelRequest cancels a request through its context, so that the client
// sends $/cancelRequest, and returns the answer, which must be an error.
func (s *server) cancelRequest(p *client.Pending) *protocol.Error {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return s.rpcError(p.Wait(ctx, nil))
}

// wireID returns the raw id of a request the client sent.
func wireID(p *client.Pending) string { return fmt.Sprint(p.ID()) }

// notification waits for the n-th (1-based) notification with method whose
// params satisfy match (nil matches all), and decodes its params into out.
func (s *server) notification(method string, n int, match func(json.RawMessage) bool, out any) {
	s.t.Helper()
	seen := 0
	m, _ := s.waitFor(0, fmt.Sprintf("notification %s #%d", method, n), func(m msg) bool {
		if m.Method != method || m.ID != nil || (match != nil && !match(m.Params)) {
			return false
		}
		seen++
		return seen == n
	})
	if out != nil {
		if err := json.Unmarshal(m.Params, out); err != nil {
			s.t.Fatalf("decoding %s: %v", method, err)
		}
	}
}

// notifications returns the params of every notification with method
// received so far.
func (s *server) notifications(method string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []json.RawMessage
	for _, m := range s.msgs {
		if m.Method == method && m.ID == nil {
			out = append(out, m.Params)
		}
	}
	return out
}

// count returns how many messages were received so far.
func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

// pause makes the client stop reading the server's stdout, as a slow
// client does: the pipe fills and the server's writes block.
func (s *server) pause() {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
}

// resume makes the client read again.
func (s *server) resume() {
	s.mu.Lock()
	s.paused = false
	s.cond.Broadcast()
	s.mu.Unlock()
}

// memory returns a field of the server's /proc status in bytes: "VmRSS"
// (now) or "VmHWM" (the peak).
func (s *server) memory(field string) int64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatalf("reading the server's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				s.t.Fatalf("parsing %s %q: %v", field, v, err)
			}
			return kb << 10
		}
	}
	s.t.Fatalf("no %s in the server's status", field)
	return 0
}

// closeStdin closes the server's stdin.
func (s *server) closeStdin() { s.stdin.Close() }

// wait waits for the server to exit and returns its exit code.
func (s *server) wait() int {
	s.t.Helper()
	select {
	case <-s.exited:
		return s.exit
	case <-time.After(waitLimit):
		s.t.Fatalf("server did not exit within %v", waitLimit)
		return -1
	}
}

// shutdown runs shutdown and exit and waits for exit code 0.
func (s *server) shutdown() {
	s.t.Helper()
	ctx, cancel := limit()
	defer cancel()
	if err := s.c.Shutdown(ctx); err != nil {
		s.t.Fatalf("shutdown: %v", err)
	}
	if err := s.c.Exit(ctx); err != nil {
		s.t.Fatalf("exit: %v", err)
	}
	if code := s.wait(); code != 0 {
		s.t.Fatalf("exit code %d after shutdown, want 0", code)
	}
}

// forEachFraming runs f as a subtest per framing.
func forEachFraming(t *testing.T, f func(t *testing.T, framing string)) {
	for _, fr := range framings {
		t.Run(fr, func(t *testing.T) {
			t.Parallel()
			f(t, fr)
		})
	}
}
