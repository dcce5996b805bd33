// Package integration builds the toolhost binary once and drives it over
// real pipes, in both framings, the way an editor or an agent does.
package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
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

// msg is one message from the server, decoded.
type msg struct {
	raw    json.RawMessage
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`
	batch  []msg
}

// wireError is a JSON-RPC error object.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *wireError) Error() string { return fmt.Sprintf("%d %s %s", e.Code, e.Message, e.Data) }

// server is a running toolhost with a client on its pipes.
type server struct {
	t       testing.TB
	cmd     *exec.Cmd
	framing string
	root    string // the workspace root (real path)
	stdin   io.WriteCloser
	stderr  *lockedBuffer

	mu      sync.Mutex
	cond    *sync.Cond
	msgs    []msg // every message received, in order; guarded by mu
	paused  bool  // the reader stops reading stdout; guarded by mu
	readErr error // why the reader stopped; guarded by mu
	nextID  int

	exited chan struct{} // closed when the process has exited
	exit   int           // the exit code, set before exited is closed
}

// lockedBuffer is a goroutine-safe buffer for stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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

// start starts toolhost and a reader of its stdout. The process is killed
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
	s := &server{t: t, cmd: cmd, framing: o.framing, root: root, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	cmd.Stderr = s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go s.read(stdout) // owned by the server: it ends when stdout closes, before exited
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("server stderr:\n%s", tail(s.stderr.String(), 8000))
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

// read reads the server's messages in its framing until stdout closes,
// then waits for the process.
func (s *server) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var err error
	for {
		s.mu.Lock()
		for s.paused {
			s.cond.Wait()
		}
		s.mu.Unlock()
		var body []byte
		body, err = readFrame(br, s.framing)
		if err != nil {
			break
		}
		m, derr := decodeMsg(body)
		if derr != nil {
			err = fmt.Errorf("undecodable message from the server: %v: %q", derr, body)
			break
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, m)
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	werr := s.cmd.Wait()
	code := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	s.mu.Lock()
	s.readErr = err
	s.exit = code
	s.cond.Broadcast()
	s.mu.Unlock()
	close(s.exited)
}

// readFrame reads one message body in a framing.
func readFrame(br *bufio.Reader, framing string) ([]byte, error) {
	if framing == "ndjson" {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		return bytes.TrimSpace(line), nil
	}
	length := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			length, _ = strconv.Atoi(v)
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("a frame without Content-Length")
	}
	body := make([]byte, length)
	_, err := io.ReadFull(br, body)
	return body, err
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

// frame wraps a body in the server's framing.
func (s *server) frame(body []byte) []byte {
	if s.framing == "ndjson" {
		return append(append([]byte(nil), body...), '\n')
	}
	return append([]byte(fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))), body...)
}

// write writes bytes to the server's stdin.
func (s *server) write(b []byte) {
	s.t.Helper()
	if _, err := s.stdin.Write(b); err != nil {
		s.t.Fatalf("writing to the server: %v", err)
	}
}

// send frames and writes a message body.
func (s *server) send(body []byte) { s.t.Helper(); s.write(s.frame(body)) }

// request sends a request and returns its id.
func (s *server) request(method string, params any) int {
	s.t.Helper()
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	s.send(encode(s.t, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
	return id
}

// notify sends a notification.
func (s *server) notify(method string, params any) {
	s.t.Helper()
	s.send(encode(s.t, map[string]any{"jsonrpc": "2.0", "method": method, "params": params}))
}

// encode marshals v.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// response waits for the response to id.
func (s *server) response(id int) msg {
	s.t.Helper()
	want := strconv.Itoa(id)
	m, _ := s.waitFor(0, "the response to "+want, func(m msg) bool { return m.Method == "" && string(m.ID) == want })
	return m
}

// call sends a request and waits for its result, decoded into out (if not
// nil). It returns the error response, if any.
func (s *server) call(method string, params, out any) *wireError {
	s.t.Helper()
	m := s.response(s.request(method, params))
	if m.Error != nil {
		return m.Error
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			s.t.Fatalf("%s: decoding %s: %v", method, m.Result, err)
		}
	}
	return nil
}

// mustCall is call that fails the test on an error response.
func (s *server) mustCall(method string, params, out any) {
	s.t.Helper()
	if err := s.call(method, params, out); err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
}

// initialize runs the initialize handshake.
func (s *server) initialize(params map[string]any) map[string]any {
	s.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	var res map[string]any
	s.mustCall("initialize", params, &res)
	s.notify("initialized", map[string]any{})
	return res
}

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

// pid returns the server's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

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
	s.mustCall("shutdown", nil, nil)
	s.notify("exit", nil)
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
