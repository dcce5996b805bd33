//go:build linux

package integration

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/protocol"
)

// This file is the escape corpus of issue 25 (BRIEF.md Part 3, "A network
// by name; nothing outside to reach"), through the binary, in the style of
// sandbox_escape_test.go: each case runs sh -c under runCommand, confined
// to workspace-write with a network allow-list (or the network off, for
// the cases about processes and paths), prints TRYING right before its
// attempt and ESCAPED if it succeeded, and the test checks the command's
// own account, what the case aimed at (a listener that must have accepted
// nothing, a process that must be untouched, a refusal's exact text) and
// that nothing outside the root changed.
//
// The scripts see $PY (python3), $PROBE (netProbe, below), $OUT (the
// case's directory beside the root) and what the case's live part adds.
// Each runs in root/netcases/<name>.

// netProbe is a python3 program the scripts drive the network with, so
// that what was sent and answered is exact:
//
//	connect HOST PORT  HTTP CONNECT through $HTTPS_PROXY; prints the answer
//	get URL            an absolute-URI GET through $HTTP_PROXY; prints the answer
//	direct HOST PORT   a TCP connection that skips the proxy
//	relay HOST PORT    starts a CONNECT relay of its own on its loopback, and
//	                   asks it for HOST:PORT, then GET /
//
// Each prints TRYING before its attempt and ESCAPED when it got through
// (a 2xx answer, an established tunnel, a connection), and then exits 0;
// otherwise it exits 1 (3 when the proxy variable is missing).
const netProbe = `import os, socket, sys, threading, urllib.parse

def say(*a):
    print(*a, flush=True)

def proxy(var):
    v = os.environ.get(var) or os.environ.get(var.lower())
    if not v:
        say("no", var, "in the environment")
        sys.exit(3)
    u = urllib.parse.urlsplit(v)
    return u.hostname, u.port

def hostport(host, port):
    return ("[%s]:%s" % (host, port)) if ":" in host else ("%s:%s" % (host, port))

def response(s, tunnel):
    s.settimeout(20)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    words = lines[0].split()
    code = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
    if not (tunnel and code == 200):
        length = None
        for l in lines[1:]:
            k, _, v = l.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        try:
            while length is None or len(body) < length:
                b = s.recv(65536)
                if not b:
                    break
                body += b
        except socket.timeout:
            pass
    say(head.decode("latin-1"))
    say("")
    say(body.decode("latin-1"))
    return code

def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

def relay_one(c):
    data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d:
            return
        data += d
    target = data.split(b" ")[1].decode()
    host, _, port = target.rpartition(":")
    try:
        u = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
    except OSError as e:
        msg = ("relay: %s: %s" % (target, e)).encode()
        c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg)
        c.close()
        return
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
    pipe(c, u)

def relay_serve(l):
    while True:
        c, _ = l.accept()
        threading.Thread(target=relay_one, args=(c,), daemon=True).start()

def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "connect":
        ph, pp = proxy("HTTPS_PROXY")
        say("TRYING")
        s = socket.create_connection((ph, pp), timeout=20)
        hp = hostport(args[0], args[1])
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp, hp)).encode())
        if response(s, True) == 200:
            say("ESCAPED")
            return 0
        return 1
    if cmd == "get":
        ph, pp = proxy("HTTP_PROXY")
        say("TRYING")
        s = socket.create_connection((ph, pp), timeout=20)
        u = urllib.parse.urlsplit(args[0])
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (args[0], u.netloc)).encode())
        if 200 <= response(s, False) < 300:
            say("ESCAPED")
            return 0
        return 1
    if cmd == "direct":
        say("TRYING")
        try:
            socket.create_connection((args[0], int(args[1])), timeout=10)
        except OSError as e:
            say("direct:", e)
            return 1
        say("ESCAPED")
        return 0
    if cmd == "relay":
        l = socket.socket()
        l.bind(("127.0.0.1", 0))
        l.listen(8)
        threading.Thread(target=relay_serve, args=(l,), daemon=True).start()
        say("relay on", l.getsockname())
        say("TRYING")
        s = socket.create_connection(l.getsockname(), timeout=20)
        hp = hostport(args[0], args[1])
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (hp, hp)).encode())
        if response(s, True) != 200:
            return 1
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        if 200 <= response(s, False) < 300:
            say("ESCAPED")
            return 0
        return 1
    say("unknown probe", cmd)
    return 2

sys.exit(main())
`

// netCase is one case of the corpus.
type netCase struct {
	name string
	// script is run by sh -c; see the file comment.
	script string
	// sandbox returns the request's sandbox member (nil: workspace-write
	// with the allow-list the live part set in r.allow).
	sandbox func(r *netCaseRun) map[string]any
	// layout lays out more files before the snapshots (nil: none).
	layout func(t *testing.T, r *netCaseRun)
	// live starts what the case aims at, sets r.env and r.allow, and
	// returns the check to run on the result once the command has ended
	// (nil: none).
	live func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult)
	// watch names more paths that must not change (nil: none).
	watch func(r *netCaseRun) []string
}

// netCaseRun is a case laid out in a fixture.
type netCaseRun struct {
	*sbCaseRun
	rel   string   // the case's directory, relative to the root
	allow []string // the allow-list of the case's command
}

// netCasesDir is the directory of the corpus's cases under the root.
const netCasesDir = "netcases"

// netLayoutCase lays out a case's directories, as the sandbox corpus does.
func netLayoutCase(t *testing.T, f *sbFixture, c netCase) *netCaseRun {
	t.Helper()
	rel := filepath.Join(netCasesDir, c.name)
	r := &netCaseRun{sbCaseRun: f.layoutCase(t, sbCase{name: c.name}), rel: rel}
	// layoutCase puts the working directory under cases/; the corpus's
	// is under netcases/.
	if err := os.Remove(r.dir); err != nil {
		t.Fatal(err)
	}
	r.dir = filepath.Join(f.root, rel)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.env["PROBE"] = filepath.Join(f.root, "netprobe.py")
	if c.layout != nil {
		c.layout(t, r)
	}
	return r
}

// netRefusedWith checks the command's output holds each refusal text.
func netRefusedWith(texts ...string) func(t *testing.T, res protocol.ToolResult) {
	return func(t *testing.T, res protocol.ToolResult) {
		t.Helper()
		for _, text := range texts {
			if !strings.Contains(res.Stdout+res.Stderr, text) {
				t.Errorf("the output does not hold the proxy's refusal %q: stdout %q, stderr %q", text, res.Stdout, res.Stderr)
			}
		}
	}
}

// netNoConnection is a live part's check that l accepted nothing from the
// command, followed by more checks.
func netNoConnection(l net.Listener, more ...func(t *testing.T, res protocol.ToolResult)) func(t *testing.T, res protocol.ToolResult) {
	return func(t *testing.T, res protocol.ToolResult) {
		t.Helper()
		sbNoConnectionBefore(t, l)
		for _, m := range more {
			m(t, res)
		}
	}
}

// netAllowedServer starts an HTTP server on 127.0.0.1 that answers every
// request with body, and returns it; it is closed at the test's end.
func netAllowedServer(t *testing.T, body string) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

// netNetworkOff is the sandbox of the cases about processes and paths:
// workspace-write, the network off.
func netNetworkOff(*netCaseRun) map[string]any {
	return map[string]any{"filesystem": "workspace-write", "network": false}
}

// netOutsider starts a process outside the sandbox and puts its pid in
// TARGET_PID.
func netOutsider(t *testing.T, r *netCaseRun) *sbOutsider {
	t.Helper()
	o := sbStartOutsider(t, r.f.py)
	r.env["TARGET_PID"] = fmt.Sprint(o.pid())
	return o
}

// netProtectLayout lays out a repository's .git in the case's directory,
// hooks and config, for the cases that write to protected paths.
func netProtectLayout(t *testing.T, r *netCaseRun) {
	t.Helper()
	wsWrite(t, filepath.Join(r.dir, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\nexit 0\n")
	wsWrite(t, filepath.Join(r.dir, ".git", "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
	wsWrite(t, filepath.Join(r.dir, ".git", "HEAD"), "ref: refs/heads/main\n")
}

// netProtectSandbox protects the case's .git/hooks and .git/config, the
// agents' default list, on top of the network off.
func netProtectSandbox(r *netCaseRun) map[string]any {
	sb := netNetworkOff(r)
	sb["protect"] = []string{filepath.Join(r.rel, ".git", "hooks"), filepath.Join(r.rel, ".git", "config")}
	return sb
}

// netProtectWatch is the case's .git, which must not change.
func netProtectWatch(r *netCaseRun) []string { return []string{filepath.Join(r.dir, ".git")} }

// netSecret is the content of the files a case may not read; the checks
// look for it in everything the command printed.
func netSecret(r *netCaseRun) string { return "toolhost-secret-" + filepath.Base(r.dir) }

// netDenyLayout lays out the secrets: $OUT/secret/id_rsa and $OUT/token.txt
// beside the root, and .env in the case's directory; $TOKEN is the secret
// text, which the scripts grep for.
func netDenyLayout(t *testing.T, r *netCaseRun) {
	t.Helper()
	secret := netSecret(r)
	wsWrite(t, filepath.Join(r.out, "secret", "id_rsa"), secret+"\n")
	wsWrite(t, filepath.Join(r.out, "token.txt"), secret+"\n")
	wsWrite(t, filepath.Join(r.dir, ".env"), "API_KEY="+secret+"\n")
	r.env["TOKEN"] = secret
}

// netDenySandbox denies the three secrets, on top of the network off.
func netDenySandbox(r *netCaseRun) map[string]any {
	sb := netNetworkOff(r)
	sb["denyRead"] = []string{filepath.Join(r.out, "secret"), filepath.Join(r.out, "token.txt"), filepath.Join(r.dir, ".env")}
	return sb
}

// netDenyLive checks the secret text appears nowhere in the output.
func netDenyLive(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
	secret := netSecret(r)
	return func(t *testing.T, res protocol.ToolResult) {
		t.Helper()
		if strings.Contains(res.Stdout+res.Stderr, secret) {
			t.Errorf("the command printed the denied secret %q: stdout %q, stderr %q", secret, res.Stdout, res.Stderr)
		}
	}
}

// netEscapes are the cases of the corpus.
var netEscapes = []netCase{
	// The proxy is the only way out.
	{name: "direct_connection_to_allowed_literal_skipping_proxy",
		script: `unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; "$PY" "$PROBE" direct 127.0.0.1 "$PORT"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			l, port := netListen(t, "tcp")
			r.env["PORT"] = fmt.Sprint(port)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", port)}
			return netNoConnection(l)
		}},
	{name: "direct_connection_to_allowed_host_ip_skipping_proxy",
		script: `unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; "$PY" "$PROBE" direct "$IP" "$PORT"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			entry := netGoProxyEntry(t)
			host, port, _ := net.SplitHostPort(entry)
			ips, err := net.LookupHost(host)
			if err != nil || len(ips) == 0 {
				t.Skipf("%s does not resolve on this machine (%v): a connection to its address that fails inside would prove nothing", host, err)
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort(ips[0], port), waitLimit)
			if err != nil {
				t.Skipf("this machine cannot reach %s (%s) itself (%v): a connection that fails inside would prove nothing", entry, ips[0], err)
			}
			c.Close()
			r.env["IP"], r.env["PORT"] = ips[0], port
			r.allow = []string{entry}
			return nil
		}},
	{name: "connect_to_allowed_host_on_another_port",
		script: `"$PY" "$PROBE" connect 127.0.0.1 "$DENIED_PORT"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			_, allowed := netAllowedServer(t, "allowed")
			l, denied := netListen(t, "tcp")
			r.env["DENIED_PORT"] = fmt.Sprint(denied)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", allowed)}
			return netNoConnection(l, func(t *testing.T, res protocol.ToolResult) {
				if !strings.Contains(res.Stdout, "HTTP/1.1 403") {
					t.Errorf("CONNECT to a port not in the list: the proxy's answer is not 403: %q", res.Stdout)
				}
			}, netRefusedWith(netRefusal("127.0.0.1", denied)))
		}},
	{name: "plain_http_to_denied_host",
		script: `echo TRYING; curl -sS -i --max-time 20 "http://127.0.0.1:$DENIED_PORT/" && echo; "$PY" "$PROBE" get "http://127.0.0.1:$DENIED_PORT/"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			netNeedTool(t, "curl", false)
			_, allowed := netAllowedServer(t, "allowed")
			l, denied := netListen(t, "tcp")
			r.env["DENIED_PORT"] = fmt.Sprint(denied)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", allowed)}
			return netNoConnection(l, func(t *testing.T, res protocol.ToolResult) {
				if n := strings.Count(res.Stdout, "HTTP/1.1 403"); n != 2 {
					t.Errorf("plain HTTP to a host not in the list, by curl and by the probe: %d answers 403, want 2: %q", n, res.Stdout)
				}
			}, netRefusedWith(netRefusal("127.0.0.1", denied)))
		}},
	{name: "socks5_to_denied_host",
		script: `echo TRYING; curl -sS --max-time 20 --socks5-hostname "${ALL_PROXY#socks5h://}" "http://127.0.0.1:$DENIED_PORT/" && echo ESCAPED; curl -sS --max-time 20 --socks5-hostname "${ALL_PROXY#socks5h://}" "http://denied.invalid:$DENIED_PORT/" && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			netNeedTool(t, "curl", false)
			_, allowed := netAllowedServer(t, "allowed")
			l, denied := netListen(t, "tcp")
			r.env["DENIED_PORT"] = fmt.Sprint(denied)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", allowed)}
			return netNoConnection(l, func(t *testing.T, res protocol.ToolResult) {
				// curl says the SOCKS5 server refused (reply 2, not
				// allowed by ruleset); the text is in the ToolResult's
				// network member and the log.
				if !strings.Contains(res.Stderr, "SOCKS") {
					t.Errorf("curl does not report a SOCKS refusal: stderr %q", res.Stderr)
				}
			})
		}},
	{name: "ipv6_literals",
		script: `"$PY" "$PROBE" connect ::1 "$PORT6"; "$PY" "$PROBE" connect 2001:db8::1 443; "$PY" "$PROBE" direct ::1 "$PORT6"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			l, err := net.Listen("tcp6", "[::1]:0")
			if err != nil {
				t.Skipf("this machine has no IPv6 loopback to aim at: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			port := l.Addr().(*net.TCPAddr).Port
			_, allowed := netAllowedServer(t, "allowed")
			r.env["PORT6"] = fmt.Sprint(port)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", allowed)}
			return netNoConnection(l, netRefusedWith(netRefusal("::1", port), netRefusal("2001:db8::1", 443)))
		}},
	// The datagram must not reach the test's peer; see the sandbox
	// corpus's udp_sendto_test_listener.
	{name: "udp_to_test_peer",
		script: sbPy(`import os, socket
peer = ("127.0.0.1", int(os.environ["PORT"]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
print("TRYING", flush=True)
s.connect(peer)
s.send(b"escaped")
print(s.recv(64))`),
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			p := sbStartUDPPeer(t, func(d []byte) []byte { return append([]byte("echo: "), d...) })
			r.env["PORT"] = fmt.Sprint(p.port())
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", p.port())}
			return func(t *testing.T, _ protocol.ToolResult) { p.noDatagramBefore(t) }
		}},
	// A resolver the test runs, which knows every name: only the
	// confinement can make the lookup fail.
	{name: "dns_to_test_resolver",
		script: sbPy(`import os, socket, struct
q = struct.pack(">HHHHHH", 0x5342, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
print("TRYING", flush=True)
s.connect(("127.0.0.1", int(os.environ["PORT"])))
s.send(q)
a = s.recv(512)
assert struct.unpack(">H", a[6:8])[0] > 0, "no answer"
print("example.com is", socket.inet_ntoa(a[-4:]))`),
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			p := sbStartUDPPeer(t, sbDNSAnswer)
			r.env["PORT"] = fmt.Sprint(p.port())
			r.allow = []string{"example.com"}
			return func(t *testing.T, _ protocol.ToolResult) { p.noDatagramBefore(t) }
		}},
	// The system's resolver, for a name in the list that resolves here:
	// names are the proxy's to resolve, and a lookup inside is a way out.
	{name: "dns_system_resolver_for_allowed_name",
		script: `echo TRYING; getent hosts "$NAME" && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			netNeedTool(t, "getent", false)
			entry := netGoProxyEntry(t)
			host, _, _ := net.SplitHostPort(entry)
			if out, err := exec.Command("getent", "hosts", host).Output(); err != nil {
				t.Skipf("getent hosts %s fails on this machine too (%v, %q): its failing inside would prove nothing", host, err, out)
			}
			r.env["NAME"] = host
			r.allow = []string{entry}
			return nil
		}},
	// A relay of the command's own, on its loopback, asked for a host
	// outside the list: its connection does not go through toolhost's
	// proxy, so it has nowhere to go.
	{name: "relay_started_inside",
		script: `"$PY" "$PROBE" relay 127.0.0.1 "$DENIED_PORT"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			_, allowed := netAllowedServer(t, "allowed")
			l, denied := netListen(t, "tcp")
			r.env["DENIED_PORT"] = fmt.Sprint(denied)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", allowed)}
			return netNoConnection(l)
		}},
	// The same relay asked for the allowed host: still no way out but
	// the proxy, whose own loopback address is the namespace's.
	{name: "relay_started_inside_to_allowed_literal",
		script: `"$PY" "$PROBE" relay 127.0.0.1 "$PORT"`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			l, port := netListen(t, "tcp")
			r.env["PORT"] = fmt.Sprint(port)
			r.allow = []string{fmt.Sprintf("127.0.0.1:%d", port)}
			return netNoConnection(l)
		}},

	// Processes outside: a confined command sees only its own.
	{name: "kill_outside_process", sandbox: netNetworkOff,
		script: `echo TRYING; kill -TERM "$TARGET_PID" && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			o := netOutsider(t, r)
			return func(t *testing.T, _ protocol.ToolResult) { o.checkAlive(t) }
		}},
	{name: "setpriority_outside_process", sandbox: netNetworkOff,
		script: `echo TRYING; renice -n 19 -p "$TARGET_PID" && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			netNeedTool(t, "renice", false)
			o := netOutsider(t, r)
			before, err := unix.Getpriority(unix.PRIO_PROCESS, o.pid())
			if err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T, _ protocol.ToolResult) {
				after, err := unix.Getpriority(unix.PRIO_PROCESS, o.pid())
				if err != nil || after != before {
					t.Errorf("the outside process's priority went from %d to %d (%v)", before, after, err)
				}
			}
		}},
	{name: "ptrace_outside_process", sandbox: netNetworkOff,
		// strace attaches and stays until timeout's SIGTERM, exit 124:
		// an attach that worked. A refused one exits 1 at once.
		script: `echo TRYING; if command -v strace >/dev/null; then timeout 5 strace -o /dev/null -e trace=none -p "$TARGET_PID"; [ $? = 124 ] && echo ESCAPED; exit 1; fi
"$PY" -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
r = libc.ptrace(16, int(os.environ["TARGET_PID"]), None, None)
assert r == 0, os.strerror(ctypes.get_errno())' && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			o := netOutsider(t, r)
			return func(t *testing.T, _ protocol.ToolResult) { o.checkAlive(t) }
		}},
	// The outside process's command line names SIGWINCH: a command that
	// read it would print it.
	{name: "proc_pid_of_outside_process", sandbox: netNetworkOff,
		script: `echo TRYING; ls "/proc/$TARGET_PID/" >/dev/null && tr '\0' ' ' < "/proc/$TARGET_PID/cmdline" && grep -aqF SIGWINCH "/proc/$TARGET_PID/cmdline" && echo ESCAPED`,
		live: func(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
			netOutsider(t, r)
			return func(t *testing.T, res protocol.ToolResult) {
				if strings.Contains(res.Stdout, "SIGWINCH") {
					t.Errorf("the command read the outside process's command line: %q", res.Stdout)
				}
			}
		}},

	// A pathname unix socket outside the root, such as an ssh-agent's.
	{name: "unix_socket_outside_allow_listed",
		script: netUnixConnectScript,
		live:   netUnixOutside},
	{name: "unix_socket_outside_network_off", sandbox: netNetworkOff,
		script: netUnixConnectScript,
		live:   netUnixOutside},

	// Writes to the protected .git/hooks and .git/config.
	{name: "protect_write_hook", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo ESCAPED`},
	{name: "protect_append_config", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; printf '[core]\n\thooksPath = /tmp\n' >> .git/config && echo ESCAPED`},
	{name: "protect_rename_over_config", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; printf '[core]\n\thooksPath = /tmp\n' > new-config && mv -f new-config .git/config && echo ESCAPED`},
	{name: "protect_remove_hooks", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; rm -rf .git/hooks; test ! -e .git/hooks/pre-commit.sample && echo ESCAPED`},
	{name: "protect_hard_link_config_then_write", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; ln .git/config linked-config && echo x >> linked-config && echo ESCAPED`},
	{name: "protect_write_through_proc_self_root", sandbox: netProtectSandbox, layout: netProtectLayout, watch: netProtectWatch,
		script: `echo TRYING; echo x >> "/proc/self/root$PWD/.git/config" && echo ESCAPED`},
	// The protected paths themselves are bound read-only; their parent
	// is not. Moving .git aside and making a new one changes what
	// .git/config is for the next git run outside.
	{name: "protect_rename_parent_and_replace", sandbox: netProtectSandbox, layout: netProtectLayout,
		watch: func(r *netCaseRun) []string {
			return []string{filepath.Join(r.dir, ".git"), filepath.Join(r.dir, ".git-aside")}
		},
		script: `echo TRYING; mv .git .git-aside && mkdir -p .git/hooks && cp .git-aside/HEAD .git/ && printf '[core]\n\thooksPath = /tmp\n' > .git/config && echo ESCAPED`},

	// Reads of denied paths: a file and a directory beside the root, and a
	// file in the root.
	{name: "deny_read_file", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; cat "$OUT/token.txt"; grep -qF "$TOKEN" "$OUT/token.txt" && echo ESCAPED`},
	{name: "deny_read_dir", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; ls -A "$OUT/secret"; cat "$OUT/secret/id_rsa"; grep -rqF "$TOKEN" "$OUT/secret" && echo ESCAPED`},
	{name: "deny_read_file_in_root", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; cat .env; grep -qF "$TOKEN" .env && echo ESCAPED`},
	{name: "deny_read_through_symlink", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; ln -s "$OUT/token.txt" link && cat link; grep -qF "$TOKEN" link && echo ESCAPED`},
	{name: "deny_read_through_proc_self_root", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; cat "/proc/self/root$OUT/secret/id_rsa"; grep -qF "$TOKEN" "/proc/self/root$OUT/secret/id_rsa" && echo ESCAPED`},
	{name: "deny_read_copy_into_root", sandbox: netDenySandbox, layout: netDenyLayout, live: netDenyLive,
		script: `echo TRYING; cp -r "$OUT/secret" copied; cp "$OUT/token.txt" copied.txt; grep -rqF "$TOKEN" copied copied.txt && echo ESCAPED`},
}

// netUnixConnectScript connects to $SOCK. It prints TRYING before it
// makes the socket: where a layer refuses socket(AF_UNIX) itself (seccomp,
// on kernels whose Landlock cannot scope pathname sockets), that refusal
// is the attempt failing.
var netUnixConnectScript = sbPy(`import os, socket; print("TRYING", flush=True); s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SOCK"])`)

// netUnixOutside listens on a pathname unix socket in a directory outside
// the root (short, for sun_path), allows a host the command never asks
// for, and checks nothing connected.
func netUnixOutside(t *testing.T, r *netCaseRun) func(t *testing.T, res protocol.ToolResult) {
	t.Helper()
	dir, err := os.MkdirTemp("", "th-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.env["SOCK"] = filepath.Join(dir, "agent.sock")
	r.allow = []string{"example.com"}
	return netNoConnection(l)
}

// TestNetworkEscapes runs the corpus, each case a parallel subtest against
// one server whose network is on, so that each request gives its own
// allow-list, and checks at the end that nothing beside the root changed.
func TestNetworkEscapes(t *testing.T) {
	t.Parallel()
	f := newSBFixture(t)
	shared := start(t, options{root: f.root})
	ir := shared.initialize(nil)
	needNetEnforcement(t, ir.Capabilities.Sandbox.Layers)
	wsWrite(t, filepath.Join(f.root, "netprobe.py"), netProbe)
	runs := make([]*netCaseRun, len(netEscapes))
	for i, c := range netEscapes {
		runs[i] = netLayoutCase(t, f, c)
	}
	before := sbSnapshot(t, f.root, f.parent)
	t.Cleanup(func() {
		if diff := cmp.Diff(before, sbSnapshot(t, f.root, f.parent)); diff != "" {
			t.Errorf("beside the root, something changed: mismatch (-want +got):\n%s", diff)
		}
	})
	for i, c := range netEscapes {
		r := *runs[i]
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r.sbCaseRun = &sbCaseRun{f: r.f, s: shared, dir: r.dir, out: r.out, env: maps.Clone(r.env)}
			var after func(t *testing.T, res protocol.ToolResult)
			if c.live != nil {
				after = c.live(t, &r)
			}
			sandbox := netAllow(r.allow...)
			if c.sandbox != nil {
				sandbox = c.sandbox(&r)
			}
			watch := []string{r.out}
			if c.watch != nil {
				watch = append(watch, c.watch(&r)...)
			}
			was := sbSnapshot(t, "", watch...)
			res := netRun(t, shared, sandbox, r.rel, c.script, r.env, sbTimeout)
			sbAttemptFailed(t, res)
			if after != nil {
				after(t, res)
			}
			if diff := cmp.Diff(was, sbSnapshot(t, "", watch...)); diff != "" {
				t.Errorf("outside the root (or in what the case may not write), something changed: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNetworkLoopbackNameRefusedLiteralAllowed runs a server on the host's
// 127.0.0.1: a command allowed localhost:PORT is refused it, since the
// name resolves to a loopback address no IP-literal entry names, and the
// server hears nothing; a command allowed 127.0.0.1:PORT reaches it.
func TestNetworkLoopbackNameRefusedLiteralAllowed(t *testing.T) {
	t.Parallel()
	py := sbPython(t)
	s := start(t, options{})
	needNetEnforcement(t, s.initialize(nil).Capabilities.Sandbox.Layers)
	probe := netWriteFile(t, s.root, "netprobe.py", netProbe)
	const body = "reached the host's loopback"
	hits := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Host
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	env := map[string]any{"PY": py, "PROBE": probe, "PORT": fmt.Sprint(port)}

	byName := netRun(t, s, netAllow(fmt.Sprintf("localhost:%d", port)), "", `"$PY" "$PROBE" get "http://localhost:$PORT/"; "$PY" "$PROBE" connect localhost "$PORT"`, env, sbTimeout)
	sbAttemptFailed(t, byName)
	netRefusedWith(netRefusal("localhost", port), "loopback")(t, byName)
	select {
	case h := <-hits:
		t.Errorf("the server on the host's loopback was reached (Host %q) through an entry that names localhost", h)
	default:
	}

	byLiteral := netRun(t, s, netAllow(fmt.Sprintf("127.0.0.1:%d", port)), "", `"$PY" "$PROBE" get "http://127.0.0.1:$PORT/"`, env, sbTimeout)
	if !byLiteral.Success || !strings.Contains(byLiteral.Stdout, body) {
		t.Errorf("through the entry 127.0.0.1:%d, the server was not reached: exit %s, stdout %q, stderr %q", port, sbCode(byLiteral), byLiteral.Stdout, byLiteral.Stderr)
	}
}

// TestMCPDefaultDeniesCredentials runs a default toolhost mcp whose $HOME
// holds an ssh key, a .netrc and cloud credentials: a command reads none
// of them, by path or through ~.
func TestMCPDefaultDeniesCredentials(t *testing.T) {
	t.Parallel()
	needNetEnforcementOfBinary(t)
	home := t.TempDir()
	const secret = "toolhost-home-secret"
	for _, p := range []string{".ssh/id_rsa", ".netrc", ".aws/credentials", ".config/gcloud/credentials.db", ".kube/config", ".docker/config.json", ".git-credentials"} {
		wsWrite(t, filepath.Join(home, p), secret+" "+p+"\n")
	}
	env := append(quickExitEnv(), "HOME="+home)
	s := startMCP(t, mcpOptions{env: env})
	var res protocol.ToolResult
	out := s.call("run_command", map[string]any{"argv": []string{"sh", "-c", `cd "$1" && cat .ssh/id_rsa .netrc .aws/credentials .config/gcloud/credentials.db .kube/config .docker/config.json .git-credentials; cat ~/.ssh/id_rsa`, "sh", home}})
	decodeStructured(t, out, &res)
	if strings.Contains(text(out)+res.Stdout+res.Stderr, secret) {
		t.Errorf("a default toolhost mcp let a command read the credentials in $HOME: stdout %q", res.Stdout)
	}
	if res.Success {
		t.Errorf("reading the credentials succeeded (exit 0): stdout %q", res.Stdout)
	}
}
