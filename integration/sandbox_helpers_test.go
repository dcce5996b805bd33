//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/protocol"
)

// This file holds what the sandbox corpus (sandbox_escape_test.go) needs
// beside the harness: snapshots of what lies outside the root, peers on
// the loopback and in the abstract socket namespace that must hear nothing
// from a confined command, and a process outside the sandbox that must
// survive it.

// sbEntry is what a snapshot keeps of one entry: enough to see a write, a
// truncate, a touch, a chmod, a new link or a swap of a symlink.
type sbEntry struct {
	Mode   string    // type and permission bits; "absent" for a path that is gone
	Size   int64     // bytes
	MTime  time.Time // the modification time
	Links  uint64    // the hard link count
	SHA256 string    // a regular file's content hash
	Target string    // a symlink's target
}

// sbSnapshot describes every entry under each of paths, skipping the
// subtree at skip (when not ""). A path that does not exist is recorded as
// absent, so that its appearance shows as a change.
func sbSnapshot(t testing.TB, skip string, paths ...string) map[string]sbEntry {
	t.Helper()
	snap := map[string]sbEntry{}
	for _, top := range paths {
		if _, err := os.Lstat(top); errors.Is(err, fs.ErrNotExist) {
			snap[top] = sbEntry{Mode: "absent"}
			continue
		}
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == skip {
				return filepath.SkipDir
			}
			e, err := sbDescribe(p)
			snap[p] = e
			return err
		})
		if err != nil {
			t.Fatalf("snapshot of %s: %v", top, err)
		}
	}
	return snap
}

// sbDescribe returns the snapshot entry of the path p.
func sbDescribe(p string) (sbEntry, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return sbEntry{}, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return sbEntry{}, err
	}
	e := sbEntry{Mode: fi.Mode().String(), Size: st.Size, MTime: time.Unix(st.Mtim.Unix()), Links: uint64(st.Nlink)}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Target, err = os.Readlink(p)
	case fi.Mode().IsRegular():
		var b []byte
		b, err = os.ReadFile(p)
		sum := sha256.Sum256(b)
		e.SHA256 = hex.EncodeToString(sum[:])
	}
	return e, err
}

// sbPython returns the path of the real python3 interpreter, not a shim:
// a pyenv shim needs variables the command's allowlisted environment
// lacks. It skips the test when there is none.
func sbPython(t testing.TB) string {
	t.Helper()
	py, err := sbPythonOnce()
	if err != nil {
		t.Skipf("the corpus drives some escapes with python3, which is not usable here: %v", err)
	}
	return py
}

// sbPythonOnce asks the python3 on PATH for its interpreter, once.
var sbPythonOnce = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", err
	}
	py := strings.TrimSpace(string(out))
	if py == "" {
		return "", errors.New("python3 names no interpreter")
	}
	return py, nil
})

// sbKernelABI returns the Landlock ABI version of the running kernel, or 0
// and why there is none.
func sbKernelABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// sbNoConnectionBefore checks, once the command has ended, that l
// accepted no connection from it. The test connects to l itself and sends
// one byte: a connection the command made was queued before the test's,
// so the first connection l accepts must be the test's, which carries the
// byte (the command's, closed with its process, reads as EOF).
func sbNoConnectionBefore(t *testing.T, l net.Listener) {
	t.Helper()
	ours, err := net.DialTimeout(l.Addr().Network(), l.Addr().String(), waitLimit)
	if err != nil {
		t.Fatalf("the test's own connection to %s: %v", l.Addr(), err)
	}
	defer ours.Close()
	if _, err := ours.Write([]byte("S")); err != nil {
		t.Fatalf("writing to the test's own connection: %v", err)
	}
	if err := l.(interface{ SetDeadline(time.Time) error }).SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatalf("accepting on %s: %v", l.Addr(), err)
	}
	defer first.Close()
	first.SetReadDeadline(time.Now().Add(waitLimit))
	b := make([]byte, 1)
	n, err := io.ReadFull(first, b)
	if n != 1 || b[0] != 'S' {
		t.Errorf("%s accepted a connection from the confined command before the test's own (it read %q, %v)", l.Addr(), b[:n], err)
	}
}

// sbUDPPeer is a UDP socket on 127.0.0.1 that records every datagram it
// receives and may answer each.
type sbUDPPeer struct {
	conn *net.UDPConn
	got  chan []byte   // the datagrams received, in order (the first 64)
	done chan struct{} // closed when serve returns
}

// sbStartUDPPeer listens on 127.0.0.1 and answers every datagram d with
// reply(d) (a nil reply, or a nil answer: nothing). The peer is closed at
// the test's end, which waits for its goroutine.
func sbStartUDPPeer(t *testing.T, reply func(d []byte) []byte) *sbUDPPeer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &sbUDPPeer{conn: conn, got: make(chan []byte, 64), done: make(chan struct{})}
	go p.serve(reply) // owned by the test: the cleanup closes conn and waits for done
	t.Cleanup(func() {
		conn.Close()
		<-p.done
	})
	return p
}

// port returns the peer's port.
func (p *sbUDPPeer) port() int { return p.conn.LocalAddr().(*net.UDPAddr).Port }

// serve receives datagrams until the socket is closed.
func (p *sbUDPPeer) serve(reply func(d []byte) []byte) {
	defer close(p.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := p.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		d := append([]byte(nil), buf[:n]...)
		if reply != nil {
			if r := reply(d); r != nil {
				_, _ = p.conn.WriteToUDP(r, from)
			}
		}
		select {
		case p.got <- d:
		default: // a flood: the first datagrams are the ones that count
		}
	}
}

// sbDNSAnswer answers the DNS query q as a resolver that knows every name:
// with one A record, 192.0.2.1, for its first question.
func sbDNSAnswer(q []byte) []byte {
	if len(q) < 12 {
		return nil // no query: the sentinel
	}
	a := append([]byte(nil), q...)
	a[2] |= 0x80                          // a response
	a[6], a[7] = 0, 1                     // one answer
	a[8], a[9], a[10], a[11] = 0, 0, 0, 0 // no authority, no additional
	a = append(a, 0xc0, 0x0c)             // the name: the question's
	a = append(a, 0, 1, 0, 1)             // type A, class IN
	a = append(a, 0, 0, 0, 60, 0, 4)      // TTL 60, 4 bytes
	return append(a, 192, 0, 2, 1)        // 192.0.2.1
}

// noDatagramBefore checks, once the command has ended, that the peer
// received nothing from it: the test sends a sentinel datagram itself, and
// the first datagram the peer received must be that one, since any the
// command sent arrived before.
func (p *sbUDPPeer) noDatagramBefore(t *testing.T) {
	t.Helper()
	const sentinel = "toolhost-sentinel"
	c, err := net.DialUDP("udp", nil, p.conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(sentinel)); err != nil {
		t.Fatalf("sending the sentinel datagram: %v", err)
	}
	select {
	case d := <-p.got:
		if string(d) != sentinel {
			t.Errorf("127.0.0.1:%d received a datagram from the confined command before the test's sentinel: %q", p.port(), d)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the sentinel datagram did not arrive within %v", waitLimit)
	}
}

// sbOutsider is a process the test runs outside any sandbox. It answers
// SIGWINCH with a line "WINCH"; SIGTERM kills it.
type sbOutsider struct {
	cmd *exec.Cmd
	out *os.File // its stdout
	r   *bufio.Reader
}

// sbStartOutsider starts the outside process and waits until it has set
// its handler. It is killed and reaped at the test's end.
func sbStartOutsider(t *testing.T, py string) *sbOutsider {
	t.Helper()
	cmd := exec.Command(py, "-c", `import signal
signal.signal(signal.SIGWINCH, lambda n, f: print("WINCH", flush=True))
print("READY", flush=True)
while True:
    signal.pause()
`)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	o := &sbOutsider{cmd: cmd, out: pr, r: bufio.NewReader(pr)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		pr.Close()
	})
	if line := o.line(t); line != "READY" {
		t.Fatalf("the outside process said %q, want READY", line)
	}
	return o
}

// pid returns the outside process's pid.
func (o *sbOutsider) pid() int { return o.cmd.Process.Pid }

// line reads the process's next line; "" at its end.
func (o *sbOutsider) line(t *testing.T) string {
	t.Helper()
	o.out.SetReadDeadline(time.Now().Add(waitLimit))
	s, err := o.r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("reading the outside process: %v", err)
	}
	return strings.TrimSuffix(s, "\n")
}

// sbNice returns the nice value of pid (field 19 of /proc/<pid>/stat).
func sbNice(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))[16]
}

// checkAlive checks, once the command has ended, that the process is still
// alive and got no SIGTERM: the test sends it SIGWINCH, which it answers.
// Had the command's SIGTERM reached it, it would be dead, or, were both
// still pending, SIGTERM (15) would be acted on before SIGWINCH (28): the
// kernel delivers the lowest pending signal first.
func (o *sbOutsider) checkAlive(t *testing.T) {
	t.Helper()
	if err := o.cmd.Process.Signal(syscall.SIGWINCH); err != nil {
		t.Errorf("the outside process is gone: %v", err)
		return
	}
	if line := o.line(t); line != "WINCH" {
		state := "still running"
		if err := o.cmd.Wait(); err != nil {
			state = err.Error()
		}
		t.Errorf("the outside process did not answer SIGWINCH (read %q): the confined command killed it (%s)", line, state)
	}
}

// sbRun runs sh -c script through runCommand, in cwd (relative to the
// root), with env and confined to filesystem and no network, and returns
// its result. A refusal, or no answer at all, fails the test.
func sbRun(t *testing.T, s *server, filesystem protocol.SandboxFilesystem, cwd, script string, env map[string]any, timeout time.Duration) protocol.ToolResult {
	t.Helper()
	params := map[string]any{
		"argv":      []string{"sh", "-c", script},
		"cwd":       cwd,
		"env":       env,
		"sandbox":   map[string]any{"filesystem": filesystem, "network": false},
		"timeoutMs": timeout.Milliseconds(),
	}
	p := s.request("runCommand", params)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit+timeout)
	defer cancel()
	var res protocol.ToolResult
	err := p.Wait(ctx, &res)
	var e *protocol.Error
	switch {
	case errors.As(err, &e):
		data, _ := json.Marshal(e.Data)
		t.Fatalf("runCommand answered an error: %v (data %s)", e, data)
	case err != nil:
		t.Fatalf("runCommand got no answer, the server is gone or stuck: %v", err)
	}
	return res
}
