package integration

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// httpFront is a front of `toolhost mcp --persist --http` under test.
type httpFront struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// endpoint is the line the front printed, or "" if it exited first;
	// stderr all it wrote once it has exited.
	endpoint string
	stderr   *lockedBuffer
}

// startHTTPFront starts a front on p's root with the env's flags, the
// token file, --http 127.0.0.1:0 and args, and waits for its endpoint
// line or its exit.
func (p *persistEnv) startHTTPFront(t *testing.T, tokenFile string, args ...string) *httpFront {
	t.Helper()
	all := append(append([]string{"mcp", "--root", p.root}, p.flags()...), "--log-level", "warn", "--kill-grace", "500ms",
		"--http", "127.0.0.1:0", "--http-token-file", tokenFile)
	f := &httpFront{cmd: exec.Command(binary, append(all, args...)...), exited: make(chan struct{}), stderr: newLockedBuffer()}
	f.cmd.Env = p.env()
	pr, pw := io.Pipe()
	f.cmd.Stderr = pw
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() { // ends with the front's stderr, which the front's exit closes
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			f.stderr.Write([]byte(sc.Text() + "\n"))
			t.Logf("front: %s", sc.Text())
			if ep, ok := strings.CutPrefix(sc.Text(), "toolhost: serving MCP at "); ok {
				ready <- ep
			}
		}
	}()
	go func() { // owned by the test, which waits on exited (cleanup)
		f.cmd.Wait()
		pw.Close()
		close(f.exited)
	}()
	t.Cleanup(func() {
		f.cmd.Process.Kill()
		<-f.exited
	})
	ctx, cancel := limit()
	defer cancel()
	select {
	case f.endpoint = <-ready:
	case <-f.exited:
	case <-ctx.Done():
		t.Fatalf("the front neither served nor exited: %s", f.stderr.String())
	}
	return f
}

// TestMCPHTTPPersist: with --persist, the holder serves HTTP. A task
// made over HTTP goes on when its front is killed, and its result is
// fetched over the same endpoint; a later front of the same command line
// reaches the same listener; one of another command line is refused,
// naming it; a stdio front of the same other flags shares the server but
// not the HTTP principal's task.
func TestMCPHTTPPersist(t *testing.T) {
	p := newPersistEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	first := p.startHTTPFront(t, tokenFile)
	if first.endpoint == "" {
		t.Fatalf("the front did not serve: %s", first.stderr.String())
	}
	h := &httpMCP{t: t, root: p.root, endpoint: first.endpoint, token: strings.TrimSpace(readFileString(tokenFile))}
	a := h.openRaw(h.token)
	id := a.startTask("run_command", map[string]any{
		"argv": []string{"sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; echo persisted"}})

	// The front goes; the holder serves on.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	b := h.openRaw(h.token)
	if res, rerr := b.call("tasks/get", map[string]any{"taskId": id}); rerr != nil || !strings.Contains(string(res), `"working"`) {
		t.Fatalf("tasks/get once the front is gone: %s %+v, want it working", res, rerr)
	}

	// A later front of the same command line reaches the same listener.
	again := p.startHTTPFront(t, tokenFile)
	if again.endpoint != first.endpoint {
		t.Errorf("a later front serves at %q, want the holder's %q", again.endpoint, first.endpoint)
	}
	// One of another command line is refused, naming it.
	other := p.startHTTPFront(t, tokenFile, "--default-timeout", "1h")
	<-other.exited
	if other.endpoint != "" || other.cmd.ProcessState.ExitCode() != 2 || !strings.Contains(other.stderr.String(), first.endpoint) {
		t.Errorf("a front of another command line: served %q, exit %d, %q; want exit 2 naming %s", other.endpoint, other.cmd.ProcessState.ExitCode(), other.stderr.String(), first.endpoint)
	}

	// A stdio front of the same other flags: the same server, another
	// principal.
	s := p.mcpPersist(t, true)
	s.init2025()
	if e := s.callErr("tasks/get", map[string]any{"taskId": id}, -32602); e == nil {
		t.Errorf("the stdio front got the HTTP principal's task")
	}

	if _, rerr := b.call("tools/call", map[string]any{"name": "write_file", "arguments": map[string]any{"path": "go", "content": ""}}); rerr != nil {
		t.Fatalf("write_file: %+v", rerr)
	}
	res, rerr := b.call("tasks/result", map[string]any{"taskId": id})
	if rerr != nil || !strings.Contains(string(res), "persisted") {
		t.Errorf("tasks/result after the front was killed: %s %+v", res, rerr)
	}
}
