//go:build linux

package process

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/sandbox"
)

// needNetNS skips t unless the forking thread can unshare a network
// namespace and Landlock handles TCP: the machine's notes
// (/work/shared/notes/machine.md) say both hold on these machines.
func needNetNS(t *testing.T) {
	t.Helper()
	c := sandbox.DefaultCapabilities()
	if c.NetNS != sandbox.NetNSUnshare {
		t.Skipf("no network namespace by unshare here (%s): the proxy and forwards need one", c.Reasons["netns"])
	}
	if c.LandlockABI < 4 {
		t.Skipf("Landlock ABI %d: the confinement these tests use needs 4", c.LandlockABI)
	}
}

// logBuffer collects a Manager's logs for a test, which also sees them in
// its own log.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ourGoroutines returns the stacks of the goroutines of the proxy, the
// port forwards and the namespace threads still alive.
// ourGoroutinesGone waits until no goroutine of the proxies is left, and
// returns those still there after a bound: a handler's goroutine has
// called the proxy's WaitGroup's Done, which Close waits for, a moment
// before it has returned, so that one may still be seen, ending, right
// after the command. It yields between looks; it never sleeps.
func ourGoroutinesGone() []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		g := ourGoroutines()
		if len(g) == 0 || time.Now().After(deadline) {
			return g
		}
		runtime.Gosched()
	}
}

func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "toolhost/netproxy.") || strings.Contains(g, "process.(*forward)") ||
			strings.Contains(g, "sandbox.(*NetNS)") {
			out = append(out, g)
		}
	}
	return out
}

// socketFDs lists the test process's socket descriptors.
func socketFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			out[e.Name()] = l
		}
	}
	return out
}

// hostOrigin is an HTTP server on the host's loopback answering "from the
// origin", and its port.
func hostOrigin(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "from the origin\n")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// stepScript tries the allowed origin on the host's loopback through the
// proxy, the same address directly, and a loopback name. $1 is the
// origin's port.
const stepScript = `echo "via the proxy: $(curl -sS -m 10 "http://127.0.0.1:$1/" 2>&1)"
curl -sS -m 10 --noproxy '*' "http://127.0.0.1:$1/" >/dev/null 2>&1; echo "direct: curl exit $?"
echo "by name: $(curl -sS -m 10 -w ' (%{http_code})' "http://localhost:$1/" 2>&1 | tr -d '\n')"`

// TestNetworkAllowList runs a recipe of two steps with a network
// allow-list that names an origin on the host's loopback as an IP
// literal: each step reaches it only through its own proxy, is refused a
// loopback name with 403 and the proxy's text, and the Result counts both
// steps' connections and refusals; the refusals are logged with the
// handle id, and nothing of the proxies is left once the command is done.
func TestNetworkAllowList(t *testing.T) {
	needNetNS(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	oport := hostOrigin(t)
	allow, err := netproxy.ParseAllowList(fmt.Sprintf("127.0.0.1:%d", oport))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{t: t}
	m := newTestManager(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	root := t.TempDir()
	fdsBefore := socketFDs(t)
	step := Step{Argv: []string{"sh", "-c", stepScript, "sh", strconv.Itoa(oport)}}
	c, err := m.Start(Spec{Dir: root, Handle: true, Steps: []Step{step, step},
		Confine: &Confinement{Policy: sandbox.Policy{Filesystem: sandbox.WorkspaceWrite, Network: true, Root: root}, Require: true, Network: &allow},
	}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	res := waitDone(t, c, 30*time.Second)

	one := fmt.Sprintf("via the proxy: from the origin\ndirect: curl exit 7\nby name: toolhost: localhost:%d is not in this command's network allow-list (403)\n", oport)
	if diff := cmp.Diff(one+one, res.Output.Stdout); diff != "" {
		t.Errorf("stdout mismatch (-want +got):\n%s", diff)
	}
	want := &netproxy.Stats{
		Allowed: []netproxy.AllowedStat{{Host: "127.0.0.1", Port: oport, Connections: 2}},
		Denied:  []netproxy.DeniedStat{{Host: "localhost", Port: oport, Attempts: 2}},
	}
	if diff := cmp.Diff(want, res.Network, cmpopts.IgnoreFields(netproxy.AllowedStat{}, "BytesOut", "BytesIn")); diff != "" {
		t.Errorf("network mismatch (-want +got):\n%s", diff)
	}
	if n := res.Network; n != nil && len(n.Allowed) == 1 && (n.Allowed[0].BytesIn == 0 || n.Allowed[0].BytesOut == 0) {
		t.Errorf("bytes not counted: %+v", n.Allowed[0])
	}
	for i, s := range res.Steps {
		if s.Sandbox == nil || !s.Sandbox.Proxy || s.Sandbox.Network || !strings.Contains(s.Sandbox.EnforcedBy, "+netns+proxy") {
			t.Errorf("step %d's report %+v, want the proxy, the network false, netns+proxy", i+1, s.Sandbox)
		}
	}
	refusal := fmt.Sprintf(`msg="netproxy: connection refused" command=%s id=%s protocol=http host=localhost port=%d`, c.ID(), c.HandleID(), oport)
	if n := strings.Count(logs.String(), refusal); n != 2 {
		t.Errorf("%d refusals logged as %q, want 2", n, refusal)
	}
	if g := ourGoroutinesGone(); len(g) > 0 {
		t.Errorf("goroutines of the proxies left after the command:\n%s", strings.Join(g, "\n\n"))
	}
	if diff := cmp.Diff(fdsBefore, socketFDs(t)); diff != "" {
		t.Errorf("sockets left after the command (-before +after):\n%s", diff)
	}
}

// askScript fetches, through the step's proxy, the origin on port $1 by
// each protocol (absolute-URI HTTP, CONNECT, SOCKS5), the origin on port
// $2, and a loopback name; none of them is in the allow-list.
const askScript = `echo "http: $(curl -sS -m 10 "http://127.0.0.1:$1/" 2>&1)"
echo "connect: $(curl -sS -m 10 -p "http://127.0.0.1:$1/" 2>&1)"
echo "socks5: $(curl -sS -m 10 -x "$ALL_PROXY" "http://127.0.0.1:$1/" 2>&1)"
echo "denied: $(curl -sS -m 10 -w ' (%{http_code})' "http://127.0.0.1:$2/" 2>&1 | tr -d '\n')"
echo "by name: $(curl -sS -m 10 -w ' (%{http_code})' "http://localhost:$1/" 2>&1 | tr -d '\n')"`

// TestNetworkAsk runs curl in a confined command whose allow-list names
// nothing, with a NetworkAsk that allows one origin on the host's
// loopback and denies the rest: the allowed origin is reached by each
// protocol, each connection asked about with the command's handle id;
// the denied one gets the 403 with the reason; a loopback name is
// refused without asking; and the Result counts what the asks decided.
func TestNetworkAsk(t *testing.T) {
	needNetNS(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	allowed, denied := hostOrigin(t), hostOrigin(t)
	nothing, err := netproxy.ParseAllowList()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string // "id host:port", guarded by mu
	ask := func(ctx context.Context, id, host string, port int) netproxy.Verdict {
		mu.Lock()
		asked = append(asked, fmt.Sprintf("%s %s:%d", id, host, port))
		mu.Unlock()
		if host == "127.0.0.1" && port == allowed {
			return netproxy.Verdict{Allow: true}
		}
		return netproxy.Verdict{Reason: "denied by the user"}
	}
	m := newTestManager(t, Config{})
	root := t.TempDir()
	c, err := m.Start(Spec{Dir: root, Handle: true, Argv: []string{"sh", "-c", askScript, "sh", strconv.Itoa(allowed), strconv.Itoa(denied)},
		Confine: &Confinement{Policy: sandbox.Policy{Filesystem: sandbox.WorkspaceWrite, Network: true, Root: root}, Require: true, Network: &nothing, NetworkAsk: ask},
	}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	res := waitDone(t, c, 30*time.Second)

	want := fmt.Sprintf("http: from the origin\nconnect: from the origin\nsocks5: from the origin\n"+
		"denied: toolhost: 127.0.0.1:%d is not in this command's network allow-list: denied by the user (403)\n"+
		"by name: toolhost: localhost:%d is not in this command's network allow-list: localhost resolved to ", denied, allowed)
	if !strings.HasPrefix(res.Output.Stdout, want) || !strings.HasSuffix(res.Output.Stdout, " (403)\n") {
		t.Errorf("stdout:\n%s\nwant it to begin:\n%s", res.Output.Stdout, want)
	}
	id := c.HandleID()
	one := fmt.Sprintf("%s 127.0.0.1:%d", id, allowed)
	mu.Lock()
	got := append([]string(nil), asked...)
	mu.Unlock()
	if diff := cmp.Diff([]string{one, one, one, fmt.Sprintf("%s 127.0.0.1:%d", id, denied)}, got); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	wantStats := &netproxy.Stats{
		Allowed: []netproxy.AllowedStat{{Host: "127.0.0.1", Port: allowed, Connections: 3}},
		Denied:  []netproxy.DeniedStat{{Host: "127.0.0.1", Port: denied, Attempts: 1}, {Host: "localhost", Port: allowed, Attempts: 1}},
	}
	if diff := cmp.Diff(wantStats, res.Network, cmpopts.IgnoreFields(netproxy.AllowedStat{}, "BytesOut", "BytesIn")); diff != "" {
		t.Errorf("network mismatch (-want +got):\n%s", diff)
	}
	if g := ourGoroutinesGone(); len(g) > 0 {
		t.Errorf("goroutines of the proxy left after the command:\n%s", strings.Join(g, "\n\n"))
	}
}

// portEvents collects a command's port events for a test to wait on.
type portEvents chan PortEvent

func (ch portEvents) next(t *testing.T) PortEvent {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case ev := <-ch:
		return ev
	case <-timer.C:
		t.Fatal("no port event in 10s")
		return PortEvent{}
	}
}

// TestPortForwardIntoNamespace checks that a dev server a confined command
// (the network off, or allow-listed) starts on its namespace's loopback is
// reached from this machine through a forward from the server's loopback:
// portOpened names the host side and the port inside; the host cannot
// reach the port inside directly; portClosed, when the server stops,
// comes after the forward is closed; and nothing of the forward is left
// once the command is done.
func TestPortForwardIntoNamespace(t *testing.T) {
	needNetNS(t)
	empty, err := netproxy.ParseAllowList()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		allow *netproxy.AllowList
	}{{"network off", nil}, {"allow-listed", &empty}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Config{})
			root := t.TempDir()
			fdsBefore := socketFDs(t)
			events := make(portEvents, 8)
			spec := helperSpec("serve-http")
			spec.Env["GORACE"] = ptr(os.Getenv("GORACE") + " atexit_sleep_ms=0")
			spec.Dir, spec.Handle, spec.OpenStdin, spec.WatchPorts, spec.StreamOutput = root, true, true, true, true
			spec.Confine = &Confinement{Policy: sandbox.Policy{Filesystem: sandbox.WorkspaceWrite, Root: root}, Require: true, Network: tc.allow}
			said := newOutputRecorder("listening ")
			c, err := m.Start(spec, Observer{OnPort: func(ev PortEvent) { events <- ev }, OnOutput: said.onOutput})
			if err != nil {
				t.Fatal(err)
			}
			write := func(s string, eof bool) {
				t.Helper()
				turn, err := c.InputTurn()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.WriteInput(context.Background(), turn, []byte(s), eof); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				write("", true)
				waitDone(t, c, 20*time.Second)
				if g := ourGoroutinesGone(); len(g) > 0 {
					t.Errorf("goroutines of the forward left after the command:\n%s", strings.Join(g, "\n\n"))
				}
				if diff := cmp.Diff(fdsBefore, socketFDs(t)); diff != "" {
					t.Errorf("sockets left after the command (-before +after):\n%s", diff)
				}
			}()

			opened := events.next(t)
			said.wait(t)
			said.mu.Lock()
			inside, _ := strconv.Atoi(strings.Fields(strings.SplitN(said.buf.String(), "listening ", 2)[1])[0])
			said.mu.Unlock()
			want := PortEvent{Open: true, Port: Port{Address: "127.0.0.1", PID: c.PID(), InsidePort: inside, InsideAddress: "127.0.0.1"}}
			if diff := cmp.Diff(want, opened, cmpopts.IgnoreFields(Port{}, "Port")); diff != "" {
				t.Errorf("portOpened mismatch (-want +got):\n%s", diff)
			}
			if opened.Port.Port == 0 || opened.Port.Port == inside {
				t.Errorf("host side port %d (inside %d)", opened.Port.Port, inside)
			}
			host := net.JoinHostPort(opened.Address, strconv.Itoa(opened.Port.Port))

			client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
			for range 3 {
				resp, err := client.Get("http://" + host + "/")
				if err != nil {
					t.Fatalf("through the forward: %v", err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != "hello from inside\n" {
					t.Errorf("through the forward: %q", body)
				}
			}
			// The same port on the host's loopback is not the server inside
			// (it is most likely nothing at all).
			if resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(inside) + "/"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) == "hello from inside\n" {
					t.Errorf("the server inside is reached on the host's 127.0.0.1:%d directly", inside)
				}
			}
			if snap := c.Snapshot(); len(snap.Ports) != 1 || snap.Ports[0] != opened.Port {
				t.Errorf("snapshot ports %+v, want %+v", snap.Ports, opened.Port)
			}

			write("stop\n", false)
			closed := events.next(t)
			if diff := cmp.Diff(PortEvent{Open: false, Port: opened.Port}, closed); diff != "" {
				t.Errorf("portClosed mismatch (-want +got):\n%s", diff)
			}
			if c, err := net.Dial("tcp4", host); err == nil {
				c.Close()
				t.Errorf("the forward's port %s still accepts after portClosed", host)
			}
		})
	}
}
