//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/netproxy"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test at once.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// origin is an HTTP server on the host's loopback that answers every
// request "from the origin".
func origin(t *testing.T) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "from the origin\n")
	}))
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

// proxied is what a command confined with the proxy option did.
type proxied struct {
	out    string
	report Report
	// listener is the proxy listener's address, "" without one.
	listener string
	stats    netproxy.Stats
}

// runProxied starts cmd confined by spec, serves a netproxy allowing
// allow on the sandbox's proxy listener (if it made one) while cmd runs,
// and closes the proxy before Finish, as package process does.
func runProxied(t *testing.T, spec Spec, cmd *exec.Cmd, allow netproxy.AllowList, log *slog.Logger) proxied {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	spec.ProxyEnv = netproxy.Env
	sb, err := Start(cmd, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var r proxied
	px := netproxy.New(netproxy.Config{Allow: allow, ID: "h-7", Log: log})
	var serving sync.WaitGroup // owns Serve; waited below
	if l := sb.ProxyListener(); l != nil {
		r.listener = l.Addr().String()
		serving.Go(func() { _ = px.Serve(l) })
	}
	_ = cmd.Wait()
	_ = px.Close()
	serving.Wait()
	r.stats = px.Stats()
	if _, err := sb.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	r.out, r.report = out.String(), sb.Report()
	return r
}

// helperEnviron is the environment of a script that runs the helper.
func helperEnviron() []string {
	return append(os.Environ(), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// proxyScript tries the ways out of a namespace whose only way out is the
// proxy. $1 is the origin's port on the host's loopback (allowed by the
// proxy as 127.0.0.1:$1), $2 the helper (this test binary), $3 a UDP
// listener's port on the host's loopback.
const proxyScript = `
echo "proxy: $HTTP_PROXY $https_proxy $ALL_PROXY no_proxy=[$NO_PROXY]"
echo "through the proxy: $(curl -sS -m 10 "http://127.0.0.1:$1/" 2>&1)"
echo "CONNECT through the proxy: $(curl -sS -m 10 -p "http://127.0.0.1:$1/" 2>&1)"
curl -sS -m 10 --noproxy '*' "http://127.0.0.1:$1/" >/dev/null 2>&1
echo "direct: curl exit $?"
echo "a name for loopback: $(curl -sS -m 10 -w ' (%{http_code})' "http://localhost:$1/" 2>&1 | tr -d '\n')"
echo "socks5 to a denied host: $(curl -sS -m 10 -x "$ALL_PROXY" "http://127.0.0.2:$1/" 2>&1)"
echo "direct connect: $(SANDBOX_TEST_HELPER=1 "$2" tcp-connect "127.0.0.1:$1")"
echo "udp to the host's loopback: $(SANDBOX_TEST_HELPER=1 "$2" udp-send "127.0.0.1:$3" from-child)"
echo "udp out: $(SANDBOX_TEST_HELPER=1 "$2" udp-send 192.0.2.1:53 from-child)"
echo "own server: $(SANDBOX_TEST_HELPER=1 "$2" tcp-bind)"
`

// TestProxyNamespace checks the proxy option end to end with a real
// netproxy and curl: the command reaches an allowed origin on the host's
// loopback through the proxy (plain HTTP and CONNECT), and only through
// it: direct TCP to the same address reaches the namespace's own loopback
// (nothing listens there), UDP gets nowhere, a loopback name and a denied
// host are refused with the proxy's text and counted, the refusals are
// logged with the handle id, and the command may listen on its own
// loopback. The Report says netns+proxy, with the network false.
func TestProxyNamespace(t *testing.T) {
	caps := probed(t, "netns-unshare", "landlock4")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	_, oport := origin(t)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	allow, err := netproxy.ParseAllowList(fmt.Sprintf("127.0.0.1:%d", oport))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	d := newDirs(t)
	p := d.policy()
	p.Network, p.Proxy = false, true
	cmd := exec.Command("sh", "-c", proxyScript, "sh", strconv.Itoa(oport), helperBin, strconv.Itoa(udp.LocalAddr().(*net.UDPAddr).Port))
	cmd.Env = helperEnviron()
	r := runProxied(t, Spec{Policy: p, Caps: &caps, Require: true}, cmd, allow, slog.New(slog.NewTextHandler(&logs, nil)))

	px := "http://" + r.listener
	want := []string{
		fmt.Sprintf("proxy: %s %s socks5h://%s no_proxy=[]", px, px, r.listener),
		"through the proxy: from the origin",
		"CONNECT through the proxy: from the origin",
		"direct: curl exit 7",
		fmt.Sprintf("a name for loopback: toolhost: localhost:%d is not in this command's network allow-list (403)", oport),
		// 2: SOCKS5's "connection not allowed by ruleset".
		"socks5 to a denied host: curl: (97) Can't complete SOCKS5 connection to 127.0.0.2. (2)",
		"direct connect: connect: ECONNREFUSED",
		"udp to the host's loopback: sendto: ok",
		"udp out: sendto: ENETUNREACH",
		"own server: bind: ok",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// The datagram went to the namespace's loopback, not the host's.
	if err := udp.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, _, err := udp.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("the host's UDP listener got %d bytes from inside", n)
	}

	wantStats := netproxy.Stats{
		Allowed: []netproxy.AllowedStat{{Host: "127.0.0.1", Port: oport, Connections: 2}},
		Denied: []netproxy.DeniedStat{
			{Host: "127.0.0.2", Port: oport, Attempts: 1},
			{Host: "localhost", Port: oport, Attempts: 1},
		},
	}
	if diff := cmp.Diff(wantStats, r.stats, cmpopts.IgnoreFields(netproxy.AllowedStat{}, "BytesOut", "BytesIn")); diff != "" {
		t.Errorf("stats mismatch (-want +got):\n%s", diff)
	}
	if a := r.stats.Allowed; len(a) == 1 && (a[0].BytesOut == 0 || a[0].BytesIn == 0) {
		t.Errorf("allowed bytes not counted: %+v", a[0])
	}
	for _, host := range []string{"localhost", "127.0.0.2"} {
		if !strings.Contains(logs.String(), fmt.Sprintf("id=h-7 protocol=%s host=%s port=%d", map[string]string{"localhost": "http", "127.0.0.2": "socks5"}[host], host, oport)) {
			t.Errorf("no refusal of %s logged with the handle id:\n%s", host, logs.String())
		}
	}
	if !r.report.Proxy || r.report.Network || !strings.Contains(r.report.EnforcedBy, "+netns+proxy") {
		t.Errorf("report %+v, want proxy true, network false, enforced by netns+proxy", r.report)
	}
}

// TestProxyLoopbackCongestion checks that a connection the command makes
// to the proxy's listener is accepted with the first congestion control of
// loopbackCongestion this kernel lets a socket take, whatever the
// machine's default (BBR, whose pacing costs a loopback leg a third of its
// speed): the connections the listener accepts inherit it.
func TestProxyLoopbackCongestion(t *testing.T) {
	caps := probed(t, "netns-unshare", "landlock4")
	probe, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(probe)
	want := ""
	for _, cc := range loopbackCongestion {
		if unix.SetsockoptString(probe, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) == nil {
			want = cc
			break
		}
	}
	if want == "" {
		t.Skipf("this kernel takes none of %v", loopbackCongestion)
	}

	d := newDirs(t)
	p := d.policy()
	p.Network, p.Proxy = false, true
	cmd := exec.Command("sh", "-c", `a=${HTTP_PROXY#http://}; SANDBOX_TEST_HELPER=1 "$0" tcp-connect "${a%/}"`, helperBin)
	cmd.Env = helperEnviron()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	sb, err := Start(cmd, Spec{Policy: p, Caps: &caps, Require: true, ProxyEnv: netproxy.Env})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		_ = cmd.Wait()
		if _, err := sb.Finish(); err != nil {
			t.Errorf("Finish: %v", err)
		}
		if diff := cmp.Diff([]string{"connect: ok"}, lines(out.String())); diff != "" {
			t.Errorf("command's output mismatch (-want +got):\n%s", diff)
		}
	}()
	c, err := sb.ProxyListener().Accept()
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatalf("TCP_CONGESTION: %v", gerr)
	}
	if got != want {
		t.Errorf("the accepted connection's congestion control is %q, want %q", got, want)
	}
}

// TestProxyUnavailable checks that where no network namespace can host
// the proxy's listener, Require refuses naming it, and otherwise the
// command runs with the network off (never on), without a listener or the
// proxy variables, and NotEnforced says so.
func TestProxyUnavailable(t *testing.T) {
	caps := probed(t, "landlock4")
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	d := newDirs(t)
	p := d.policy()
	p.Network, p.Proxy = false, true
	for _, tc := range []struct {
		name        string
		need        string
		netns       NetNSMethod
		seccomp     bool
		by, connect string
	}{
		// seccomp stays available in both, for the unix sockets (Landlock ABI < 9).
		{"user namespace", "userns", NetNSUserNS, true, "landlock-abi-7+mntns+pidns+userns-netns+seccomp-unix+capdrop", "connect: EACCES"},
		{"seccomp", "seccomp", NetNSNone, true, "landlock-abi-7+mntns+pidns+seccomp+seccomp-unix+capdrop", "socket: EACCES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed(t, tc.need, "ptrace", "mountns")
			c := caps
			c.NetNS, c.Seccomp = tc.netns, tc.seccomp
			c.Reasons = map[string]string{"netns": "no network namespace: EPERM"}
			cmd := exec.Command("true")
			sb, err := Start(cmd, Spec{Policy: p, Caps: &c, Require: true, ProxyEnv: netproxy.Env})
			if err == nil {
				_ = cmd.Wait()
				_, _ = sb.Finish()
			}
			var ue *UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || len(ue.Missing) != 1 || !strings.HasPrefix(ue.Missing[0], "network allow-list") {
				t.Fatalf("Start with Require: %v, want ErrUnavailable naming the network allow-list", err)
			}

			cmd = exec.Command("sh", "-c", `echo "proxy=${HTTP_PROXY-unset}"; SANDBOX_TEST_HELPER=1 "$0" tcp-connect "$1"`, helperBin, tcp.Addr().String())
			cmd.Env = helperEnviron()
			r := runProxied(t, Spec{Policy: p, Caps: &c}, cmd, netproxy.AllowList{}, nil)
			if diff := cmp.Diff([]string{"proxy=unset", tc.connect}, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			want := Report{Filesystem: WorkspaceWrite, Network: false, EnforcedBy: tc.by, NotEnforced: ue.Missing}
			if diff := cmp.Diff(want, r.report); diff != "" {
				t.Errorf("report mismatch (-want +got):\n%s", diff)
			}
			if r.listener != "" {
				t.Errorf("a proxy listener at %s", r.listener)
			}
		})
	}
}

// TestProxyWhereLandlockHandlesTCP checks the proxy where nothing but
// Landlock's TCP rights would put the command in a Landlock domain (full
// mode on a kernel of ABI 4 or 5, faked): TCP stays handled, so the
// command cannot listen, and a rule lets it connect to the proxy's port.
func TestProxyWhereLandlockHandlesTCP(t *testing.T) {
	caps := probed(t, "netns-unshare", "landlock4")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	caps.LandlockABI = 4
	// Without a PID namespace, whose /proc needs a mount namespace and
	// which puts the command in a Landlock domain of its own.
	caps.PIDNS, caps.PIDNSProc = false, false
	_, oport := origin(t)
	allow, err := netproxy.ParseAllowList(fmt.Sprintf("127.0.0.1:%d", oport))
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Filesystem: Full, Proxy: true}
	cmd := exec.Command("sh", "-c", `curl -sS -m 10 "http://127.0.0.1:$1/"; SANDBOX_TEST_HELPER=1 "$0" tcp-bind`, helperBin, strconv.Itoa(oport))
	cmd.Env = helperEnviron()
	r := runProxied(t, Spec{Policy: p, Caps: &caps, Require: true}, cmd, allow, nil)
	if diff := cmp.Diff([]string{"from the origin", "bind: EACCES"}, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if r.report.EnforcedBy != "landlock-abi-4+netns+proxy" {
		t.Errorf("enforced by %q, want landlock-abi-4+netns+proxy", r.report.EnforcedBy)
	}
}

// TestEnterNetNS checks that a thread entered into a confined command's
// network namespace (network off) connects to a server the command
// listens with on its own loopback, and that Close ends it.
func TestEnterNetNS(t *testing.T) {
	caps := probed(t, "netns-unshare", "landlock4")
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	cmd := helperCmd("tcp-listen")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Start(cmd, Spec{Policy: p, Caps: &caps, Require: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		if _, err := sb.Finish(); err != nil {
			t.Errorf("Finish: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("the helper said %q, %v", line, err)
	}

	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := EnterNetNS(f)
	f.Close()
	if err != nil {
		t.Fatalf("EnterNetNS: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ns.Dial(ctx, "tcp4", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("Dial inside: %v", err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "inside\n" {
		t.Errorf("read %q, %v; want the helper's answer", got, err)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Dial(ctx, "tcp4", "127.0.0.1:"+port); !errors.Is(err, errNetNSClosed) {
		t.Errorf("Dial after Close: %v, want %v", err, errNetNSClosed)
	}

	// A file that is not a namespace is refused, and the thread is gone.
	if ns, err := EnterNetNS(regularFile(t)); err == nil {
		ns.Close()
		t.Error("EnterNetNS of a regular file worked")
	}
}

// regularFile returns an open regular file, closed at the end of the test.
func regularFile(t *testing.T) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "not-a-namespace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// BenchmarkStartProxy measures a confined true with the proxy option, the
// proxy served on its listener and closed after, against a confined true
// with the network off, interleaved in the same run (the machines are
// shared), and reports the medians and their ratio. The target is at most
// 1.5 times.
func BenchmarkStartProxy(b *testing.B) {
	caps := probed(b, "netns-unshare", "landlock4")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	d := newDirs(b)
	off := d.policy()
	off.Network = false
	proxy := off
	proxy.Proxy = true
	allow, err := netproxy.ParseAllowList("registry.example")
	if err != nil {
		b.Fatal(err)
	}
	once := func(spec Spec) time.Duration {
		t0 := time.Now()
		cmd := exec.Command(truePath)
		sb, err := Start(cmd, spec)
		if err != nil {
			b.Fatal(err)
		}
		var px *netproxy.Proxy
		var serving sync.WaitGroup // owns Serve; waited below
		if l := sb.ProxyListener(); l != nil {
			px = netproxy.New(netproxy.Config{Allow: allow, ID: "h-bench"})
			serving.Go(func() { _ = px.Serve(l) })
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if px != nil {
			_ = px.Close()
			serving.Wait()
		}
		if _, err := sb.Finish(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var offs, proxies []time.Duration
	for b.Loop() {
		offs = append(offs, once(Spec{Policy: off, Caps: &caps}))
		proxies = append(proxies, once(Spec{Policy: proxy, Caps: &caps, ProxyEnv: netproxy.Env}))
	}
	mo, mp := median(offs), median(proxies)
	b.ReportMetric(float64(mo.Nanoseconds())/1e3, "off-us")
	b.ReportMetric(float64(mp.Nanoseconds())/1e3, "proxy-us")
	b.ReportMetric(float64(mp)/float64(mo), "ratio")
	Drain()
}
