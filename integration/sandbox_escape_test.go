//go:build linux

package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// This file is the escape corpus for commands (issue 12, BRIEF.md Part 2
// "Confined commands"), through the binary: every case runs sh -c under
// runCommand confined to workspace-write (or read-only) with network
// false, and asserts that its attempt failed, by the command's own
// account, and that nothing outside the root changed, by snapshots taken
// before and after. Each script prints TRYING right before its attempt, so
// that a case cannot pass because its script never got that far, and
// ESCAPED when the attempt succeeded.
//
// The scripts see $OUT, the case's own directory beside the root, holding
// victim.txt (mtime in 2001) and dir/, and $PY, python3. Each runs in
// root/cases/<name>.

// sbTimeout bounds each command of the corpus: a case whose descendant
// never reports fails on it instead of hanging.
const sbTimeout = 30 * time.Second

// sbFixture is a parent directory holding the root and, beside it, what
// the escapes aim at:
//
//	parent/root/cases/<name>/    each case's working directory
//	parent/root/ro/readonly.txt  a read root nested inside the root
//	parent/readroot/readonly.txt a read root beside the root
//	parent/outside/<name>/       each case's outside directory: victim.txt, dir/
type sbFixture struct {
	parent, root        string
	readRootIn, readOut string    // the read roots, inside and beside the root
	py                  string    // python3
	victimTime          time.Time // every victim.txt's mtime, long past, so that a touch shows
}

// newSBFixture lays out the parent directory.
func newSBFixture(t *testing.T) *sbFixture {
	t.Helper()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &sbFixture{
		parent:     parent,
		root:       filepath.Join(parent, "root"),
		readRootIn: filepath.Join(parent, "root", "ro"),
		readOut:    filepath.Join(parent, "readroot"),
		py:         sbPython(t),
		victimTime: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	wsWrite(t, filepath.Join(f.readRootIn, "readonly.txt"), "read root inside\n")
	wsWrite(t, filepath.Join(f.readOut, "readonly.txt"), "read root beside\n")
	return f
}

// sbCase is one case of the corpus.
type sbCase struct {
	name string
	// readOnly confines the case to read-only instead of workspace-write.
	readOnly bool
	// script is run by sh -c; see the file comment.
	script string
	// layout lays out more files before the snapshots (nil: none).
	layout func(t *testing.T, c *sbCaseRun)
	// live starts what the case aims at (a listener, a process), adds to
	// the case's env, and returns the check to run once the command has
	// ended (nil: none). It runs in the subtest.
	live func(t *testing.T, c *sbCaseRun) func(t *testing.T)
	// ownServer runs the case against a server of its own: for cases that
	// aim at the server itself.
	ownServer bool
	// watch names more paths that must not change (nil: none).
	watch func(c *sbCaseRun) []string
}

// sbCaseRun is a case laid out in a fixture.
type sbCaseRun struct {
	f   *sbFixture
	s   *server        // the server the command runs on; set by the subtest
	dir string         // root/cases/<name>, the command's working directory
	out string         // outside/<name>
	env map[string]any // the command's env; each subtest adds to a copy of its own
}

// layoutCase lays out the case's directories and returns its run.
func (f *sbFixture) layoutCase(t *testing.T, c sbCase) *sbCaseRun {
	t.Helper()
	r := &sbCaseRun{
		f:   f,
		dir: filepath.Join(f.root, "cases", c.name),
		out: filepath.Join(f.parent, "outside", c.name),
	}
	r.env = map[string]any{"OUT": r.out, "PY": f.py}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.out, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(r.out, "victim.txt")
	wsWrite(t, victim, "victim\n")
	if err := os.Chtimes(victim, f.victimTime, f.victimTime); err != nil {
		t.Fatal(err)
	}
	if c.layout != nil {
		c.layout(t, r)
	}
	return r
}

// inDir writes a file of the case's working directory.
func (r *sbCaseRun) inDir(t *testing.T, name, content string) {
	t.Helper()
	wsWrite(t, filepath.Join(r.dir, name), content)
}

// symlinkInDir makes a symlink in the case's working directory.
func (r *sbCaseRun) symlinkInDir(t *testing.T, name, target string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(r.dir, name)); err != nil {
		t.Fatal(err)
	}
}

// sbMachineAddress returns an IPv4 address of this machine beyond the
// loopback that the test can listen on, and skips t where there is none.
func sbMachineAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		l, err := net.Listen("tcp4", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		l.Close()
		return ipn.IP.String()
	}
	t.Skip("this machine has no IPv4 address beyond the loopback to listen on")
	return ""
}

// sbPy is a python3 invocation for a script: the code goes in single
// quotes, so it uses only double quotes. The code prints TRYING itself,
// right before its attempt, so that a python error before it cannot pass
// for a refusal.
func sbPy(code string) string { return `"$PY" -c '` + code + `' && echo ESCAPED` }

// sbEscapes are the cases of the corpus.
var sbEscapes = []sbCase{
	// Writes out of the root.
	{name: "write_new_file_outside", script: `echo TRYING; echo x > "$OUT/new.txt" && echo ESCAPED`},
	{name: "overwrite_outside_file", script: `echo TRYING; echo x > "$OUT/victim.txt" && echo ESCAPED`},
	{name: "cp_out", script: `echo TRYING; cp in.txt "$OUT/" && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.inDir(t, "in.txt", "copied\n") }},
	{name: "mv_out", script: `echo TRYING; mv moved.txt "$OUT/" && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.inDir(t, "moved.txt", "moved\n") }},
	{name: "ln_out", script: `echo TRYING; ln in.txt "$OUT/hard.txt" && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.inDir(t, "in.txt", "linked\n") }},
	{name: "ln_s_out", script: `echo TRYING; ln -s /etc/hostname "$OUT/sym" && echo ESCAPED`},
	// Landlock governs no metadata (machine.md): a touch, like a chmod,
	// needs the read-only mount of what lies outside.
	{name: "touch_outside_file", script: `echo TRYING; touch "$OUT/victim.txt" && echo ESCAPED`},
	// truncate(2) on a path: the truncate right of Landlock ABI 3, with no
	// open for writing before it.
	{name: "truncate_outside_file", script: sbPy(`import os; print("TRYING", flush=True); os.truncate(os.environ["OUT"] + "/victim.txt", 0)`)},
	// rename(2) itself, where mv would fall back to a copy.
	{name: "rename_from_root_to_outside", script: sbPy(`import os; print("TRYING", flush=True); os.rename("renamed.txt", os.environ["OUT"] + "/renamed.txt")`),
		layout: func(t *testing.T, r *sbCaseRun) { r.inDir(t, "renamed.txt", "renamed\n") }},
	{name: "write_through_symlink_to_outside_file", script: `echo TRYING; echo x >> link && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.symlinkInDir(t, "link", filepath.Join(r.out, "victim.txt")) }},
	{name: "write_through_symlink_to_outside_dir", script: `echo TRYING; echo x > linkdir/new.txt && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.symlinkInDir(t, "linkdir", filepath.Join(r.out, "dir")) }},
	{name: "write_through_proc_self_root", script: `echo TRYING; echo x > "/proc/self/root$OUT/new.txt" && echo ESCAPED`},
	// The working directory is root/cases/<name>: three levels up is the
	// parent, where outside/<name> is.
	{name: "write_through_proc_self_cwd_dotdot", script: `echo TRYING; echo x > "/proc/self/cwd/../../../outside/${OUT##*/}/new.txt" && echo ESCAPED`},
	{name: "write_into_read_root_inside_root", script: `echo TRYING; echo x >> "$RO/readonly.txt" && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.env["RO"] = r.f.readRootIn },
		watch:  func(r *sbCaseRun) []string { return []string{r.f.readRootIn} }},
	{name: "write_into_read_root_beside_root", script: `echo TRYING; echo x >> "$RO/readonly.txt" && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.env["RO"] = r.f.readOut },
		watch:  func(r *sbCaseRun) []string { return []string{r.f.readOut} }},
	{name: "mkdir_outside", script: `echo TRYING; mkdir "$OUT/newdir" && echo ESCAPED`},
	{name: "chmod_outside_file", script: `echo TRYING; chmod 0777 "$OUT/victim.txt" && echo ESCAPED`},
	{name: "hard_link_in_root_to_outside_file_then_write", script: `echo TRYING; ln "$OUT/victim.txt" hardlink && echo x >> hardlink && echo ESCAPED`},
	// The attempt starts at socket(): with the network off, a kernel
	// without Landlock ABI 9 refuses every unix socket there.
	{name: "unix_socket_outside", script: sbPy(`import os, socket; print("TRYING", flush=True); s = socket.socket(socket.AF_UNIX); s.bind(os.environ["OUT"] + "/sock")`)},
	{name: "connect_unix_socket_outside",
		script: sbPy(`import os, socket; print("TRYING", flush=True); s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SOCK"])`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			// A stand-in for a Docker socket or an ssh-agent, outside
			// the root and the corpus's snapshots.
			path := filepath.Join(t.TempDir(), "agent.sock")
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			r.env["SOCK"] = path
			return func(t *testing.T) { sbNoConnectionBefore(t, l) }
		}},

	// Network.
	{name: "tcp_connect_to_test_listener",
		script: sbPy(`import os, socket; print("TRYING", flush=True); socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=10)`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			r.env["PORT"] = fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
			return func(t *testing.T) { sbNoConnectionBefore(t, l) }
		}},
	// Listening where the machine is reached. The namespace's own loopback
	// is the command's (issue 25: a dev server listens there, and the
	// server forwards a port of its own loopback to it), so the attempt
	// binds an address of the machine beyond the loopback, which a
	// namespace of the command's own does not have.
	{name: "tcp_bind_machine_address",
		script: sbPy(`import os, socket; s = socket.socket(); print("TRYING", flush=True); s.bind((os.environ["ADDR"], 0)); s.listen(1); print(s.getsockname())`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			addr := sbMachineAddress(t)
			r.env["ADDR"] = addr
			return nil
		}},
	// The datagram must not reach the test's peer. Sent on a socket of
	// the command's own network, it may leave without error: so the
	// command counts it as sent only when the peer's echo comes back (the
	// socket is connected, so that a refusal comes back at once), and the
	// peer checks that it received nothing.
	{name: "udp_sendto_test_listener",
		script: sbPy(`import os, socket
peer = ("127.0.0.1", int(os.environ["PORT"]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
print("TRYING", flush=True)
s.connect(peer)
s.sendto(b"escaped", peer)
print(s.recv(64))`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			p := sbStartUDPPeer(t, func(d []byte) []byte { return append([]byte("echo: "), d...) })
			r.env["PORT"] = fmt.Sprint(p.port())
			return p.noDatagramBefore
		}},
	// The system's resolver: this machine has no network beyond the
	// loopback, so the lookup fails confined or not; the next case and the
	// TCP and UDP ones are what can show an escape.
	{name: "dns_lookup_system_resolver", script: `echo TRYING; getent hosts example.com && echo ESCAPED`},
	// A lookup through a resolver the test runs on the loopback, which
	// knows every name: only the confinement can make it fail. The UDP
	// socket is connected, so that a refusal comes back at once.
	{name: "dns_lookup_test_resolver",
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
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			p := sbStartUDPPeer(t, sbDNSAnswer)
			r.env["PORT"] = fmt.Sprint(p.port())
			return p.noDatagramBefore
		}},

	// Other processes and the server.
	{name: "kill_server", ownServer: true,
		script: `echo TRYING; kill -TERM "$SERVER_PID" && echo ESCAPED`,
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			r.env["SERVER_PID"] = fmt.Sprint(r.s.cmd.Process.Pid)
			return func(t *testing.T) { sbServerAnswers(t, r.s) }
		}},
	{name: "kill_outside_process",
		script: `echo TRYING; kill -TERM "$TARGET_PID" && echo ESCAPED`,
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			o := sbStartOutsider(t, r.f.py)
			r.env["TARGET_PID"] = fmt.Sprint(o.pid())
			return o.checkAlive
		}},
	{name: "renice_outside_process",
		script: `echo TRYING; renice -n 5 -p "$TARGET_PID" && echo ESCAPED`,
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			o := sbStartOutsider(t, r.f.py)
			r.env["TARGET_PID"] = fmt.Sprint(o.pid())
			return func(t *testing.T) {
				if nice := sbNice(t, o.pid()); nice != "0" {
					t.Errorf("the outside process has nice %s, want 0", nice)
				}
			}
		}},
	{name: "read_proc_of_outside_process",
		script: `echo TRYING; cat "/proc/$TARGET_PID/cmdline" && echo ESCAPED`,
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			o := sbStartOutsider(t, r.f.py)
			r.env["TARGET_PID"] = fmt.Sprint(o.pid())
			return nil
		}},
	{name: "connect_abstract_unix_socket",
		script: sbPy(`import os, socket; print("TRYING", flush=True); s = socket.socket(socket.AF_UNIX); s.connect("\0" + os.environ["SOCK"])`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			name := fmt.Sprintf("toolhost-sandbox-%s-%d", tokenSalt, tokenSeq.Add(1))
			l, err := net.Listen("unix", "@"+name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			r.env["SOCK"] = name
			return func(t *testing.T) { sbNoConnectionBefore(t, l) }
		}},
	{name: "ptrace_attach_outside_process",
		script: sbPy(`import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
print("TRYING", flush=True)
r = libc.ptrace(16, int(os.environ["TARGET_PID"]), None, None)
assert r == 0, os.strerror(ctypes.get_errno())`),
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			o := sbStartOutsider(t, r.f.py)
			r.env["TARGET_PID"] = fmt.Sprint(o.pid())
			return nil
		}},
	// A whole, well-framed message forged on the server's stdout: the
	// client must never see it, and the stream must go on.
	{name: "write_server_stdout_via_proc_fd", ownServer: true,
		script: `echo TRYING; printf '%s' "$FRAME" > "/proc/$SERVER_PID/fd/1" && echo ESCAPED`,
		live: func(t *testing.T, r *sbCaseRun) func(t *testing.T) {
			body := `{"jsonrpc":"2.0","method":"sandbox/forged","params":{}}`
			r.env["SERVER_PID"] = fmt.Sprint(r.s.cmd.Process.Pid)
			r.env["FRAME"] = fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
			return func(t *testing.T) {
				// The frame would have been on the pipe before the
				// runCommand answer, so the client has read it by now.
				if forged := r.s.notifications("sandbox/forged"); len(forged) > 0 {
					t.Errorf("the client read %d messages the confined command forged on the server's stdout", len(forged))
				}
				sbServerAnswers(t, r.s)
			}
		}},

	// Descendants: each reports its status through a FIFO in the root that
	// the command reads, since the server ends what a command leaves
	// behind when it exits.
	{name: "setsid_child_writes_outside",
		script: `mkfifo status && setsid -f sh -c 'echo TRYING; echo x > "$OUT/new.txt" && echo ESCAPED; echo $? > status' && read rc < status && exit $rc`},
	{name: "nohup_grandchild_writes_outside",
		script: `mkfifo status && (nohup sh -c 'echo TRYING; echo x > "$OUT/new.txt" && echo ESCAPED; echo $? > status' &) && read rc < status && exit $rc`},

	// read-only mode.
	{name: "read_only_write_inside_root", readOnly: true,
		script: `echo TRYING; echo x > new.txt && echo ESCAPED`,
		layout: func(t *testing.T, r *sbCaseRun) { r.inDir(t, "kept.txt", "kept\n") },
		watch:  func(r *sbCaseRun) []string { return []string{r.dir} }},
}

// sbServerAnswers checks that the server still runs and answers a request.
func sbServerAnswers(t *testing.T, s *server) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("the server exited (code %d)", s.exit)
	default:
	}
	res := sbRun(t, s, protocol.SandboxWorkspaceWrite, "", "echo alive", nil, sbTimeout)
	if res.Stdout != "alive\n" {
		t.Errorf("the server answered a command after the case with stdout %q, want %q", res.Stdout, "alive\n")
	}
}

// sbAttemptFailed checks the command's own account of its attempt: it got
// as far as TRYING, the attempt failed (no ESCAPED, a non-zero exit code),
// and not because a program was missing.
func sbAttemptFailed(t *testing.T, res protocol.ToolResult) {
	t.Helper()
	if res.Status != protocol.StatusCompleted {
		t.Fatalf("the command did not complete: status %s; stdout %q, stderr %q", res.Status, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "TRYING") {
		t.Fatalf("the command never reached its attempt: exit %v; stdout %q, stderr %q", sbCode(res), res.Stdout, res.Stderr)
	}
	code := sbCode(res)
	switch {
	case strings.Contains(res.Stdout, "ESCAPED"):
		t.Errorf("the escape succeeded: exit %s; stdout %q, stderr %q", code, res.Stdout, res.Stderr)
	case code == "0":
		t.Errorf("the attempt exited 0; stdout %q, stderr %q", res.Stdout, res.Stderr)
	case code == "126" || code == "127":
		t.Errorf("a program of the attempt could not run (exit %s): stderr %q", code, res.Stderr)
	}
}

// sbCode returns a result's exit code, or its signal, as text.
func sbCode(res protocol.ToolResult) string {
	switch {
	case res.ExitCode != nil:
		return fmt.Sprint(*res.ExitCode)
	case res.Signal != nil:
		return *res.Signal
	}
	return "none"
}

// TestSandboxEscapes runs the corpus, each case a parallel subtest against
// one server (two cases aim at the server and have their own), and checks
// at the end that nothing beside the root changed at all.
func TestSandboxEscapes(t *testing.T) {
	t.Parallel()
	f := newSBFixture(t)
	runs := make([]*sbCaseRun, len(sbEscapes))
	for i, c := range sbEscapes {
		runs[i] = f.layoutCase(t, c)
	}
	// Sanity of the layout the /proc/self/cwd case relies on.
	for _, r := range runs {
		if got := filepath.Join(r.dir, "../../../outside", filepath.Base(r.out)); got != r.out {
			t.Fatalf("the layout moved: %s is not %s", got, r.out)
		}
	}
	before := sbSnapshot(t, f.root, f.parent)
	shared := start(t, options{root: f.root, args: []string{"--read-root", f.readRootIn, "--read-root", f.readOut}})
	shared.initialize(nil)
	// Cleanups run after every parallel subtest, in reverse: this one
	// before the servers are killed.
	t.Cleanup(func() {
		if diff := cmp.Diff(before, sbSnapshot(t, f.root, f.parent)); diff != "" {
			t.Errorf("beside the root, something changed: mismatch (-want +got):\n%s", diff)
		}
	})
	for i, c := range sbEscapes {
		r := *runs[i]
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r.s = shared
			if c.ownServer {
				r.s = start(t, options{root: f.root})
				r.s.initialize(nil)
			}
			r.env = maps.Clone(r.env)
			var after func(t *testing.T)
			if c.live != nil {
				after = c.live(t, &r)
			}
			watch := []string{r.out}
			if c.watch != nil {
				watch = append(watch, c.watch(&r)...)
			}
			was := sbSnapshot(t, "", watch...)
			fs := protocol.SandboxWorkspaceWrite
			if c.readOnly {
				fs = protocol.SandboxReadOnly
			}
			res := sbRun(t, r.s, fs, filepath.Join("cases", c.name), c.script, r.env, sbTimeout)
			sbAttemptFailed(t, res)
			if after != nil {
				after(t)
			}
			if diff := cmp.Diff(was, sbSnapshot(t, "", watch...)); diff != "" {
				t.Errorf("outside the root (or in what the case may not write), something changed: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// sbAllowed is what a confined command must still do.
type sbAllowed struct {
	name   string
	script string // run by sh -c in root/<name>
	// layout lays out files in root/<name> (nil: none).
	layout func(t *testing.T, dir string)
	// env adds to the command's environment (nil: nothing).
	env func(t *testing.T) map[string]any
	// timeout bounds the command (0: sbTimeout).
	timeout time.Duration
	// check checks the successful result; dir is root/<name>.
	check func(t *testing.T, res protocol.ToolResult, dir string)
}

// sbOutputIs checks a command's stdout.
func sbOutputIs(want string) func(t *testing.T, res protocol.ToolResult, dir string) {
	return func(t *testing.T, res protocol.ToolResult, dir string) {
		t.Helper()
		if diff := cmp.Diff(want, res.Stdout); diff != "" {
			t.Errorf("stdout: mismatch (-want +got):\n%s", diff)
		}
	}
}

// sbAllowedWork is what a command confined to workspace-write with network
// false must still do: write in the root, its temporary directory and the
// session's cache directory, build a Go module, commit with git, read the
// system's files.
var sbAllowedWork = []sbAllowed{
	{name: "write_inside_root", script: `echo inside > written.txt`,
		check: func(t *testing.T, _ protocol.ToolResult, dir string) {
			got, err := os.ReadFile(filepath.Join(dir, "written.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("inside\n", string(got)); diff != "" {
				t.Errorf("the file written in the root: mismatch (-want +got):\n%s", diff)
			}
		}},
	{name: "write_in_tmpdir", script: `test -n "$TMPDIR" || { echo "TMPDIR is not set" >&2; exit 3; }
f="$TMPDIR/toolhost-sandbox-$$" && echo tmp > "$f" && cat "$f" && rm "$f"`,
		check: sbOutputIs("tmp\n")},
	{name: "write_in_cache_dir", script: `test -n "$XDG_CACHE_HOME" || { echo "XDG_CACHE_HOME is not set" >&2; exit 3; }
d="$XDG_CACHE_HOME/toolhost-sandbox-$$" && mkdir -p "$d" && echo cache > "$d/f" && cat "$d/f" && rm -r "$d"`,
		check: sbOutputIs("cache\n")},
	// GOCACHE and GOMODCACHE are the server's to set; a cold cache builds
	// the runtime: some seconds.
	{name: "go_build_module", script: `go build -o hello . && ./hello 2>&1`, timeout: 2 * time.Minute,
		layout: func(t *testing.T, dir string) {
			wsWrite(t, filepath.Join(dir, "go.mod"), "module example.com/hello\n\ngo 1.26\n")
			wsWrite(t, filepath.Join(dir, "main.go"), "package main\n\nfunc main() { println(\"built and ran\") }\n")
		},
		env:   sbGoEnv,
		check: sbOutputIs("built and ran\n")},
	{name: "go_test_module", script: `go test ./... 2>&1`, timeout: 2 * time.Minute,
		layout: func(t *testing.T, dir string) {
			wsWrite(t, filepath.Join(dir, "go.mod"), "module example.com/tested\n\ngo 1.26\n")
			wsWrite(t, filepath.Join(dir, "add.go"), "package tested\n\nfunc Add(a, b int) int { return a + b }\n")
			wsWrite(t, filepath.Join(dir, "add_test.go"), "package tested\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n")
		},
		env:   sbGoEnv,
		check: sbOutputHas("ok  \texample.com/tested"),
	},
	{name: "npm_ci", script: `npm ci --no-audit --no-fund --offline 2>&1 && test -d node_modules && echo installed`,
		layout: func(t *testing.T, dir string) {
			if _, err := exec.LookPath("npm"); err != nil {
				t.Skipf("no npm on PATH: %v", err)
			}
			wsWrite(t, filepath.Join(dir, "package.json"), `{"name":"sandboxed","version":"1.0.0","dependencies":{"local-dep":"file:dep"}}`)
			wsWrite(t, filepath.Join(dir, "dep", "package.json"), `{"name":"local-dep","version":"1.0.0"}`)
			wsWrite(t, filepath.Join(dir, "package-lock.json"), `{"name":"sandboxed","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"sandboxed","version":"1.0.0","dependencies":{"local-dep":"file:dep"}},"dep":{"name":"local-dep","version":"1.0.0"},"node_modules/local-dep":{"resolved":"dep","link":true}}}`)
		},
		check: sbOutputHas("installed"),
	},
	{name: "pip_install_target", script: `/usr/bin/python3 -m pip install --no-index --target lib ./sandboxed_mod-1.0-py3-none-any.whl 2>&1 && test -f lib/sandboxed_mod.py && echo installed`, timeout: time.Minute,
		layout: func(t *testing.T, dir string) {
			if exec.Command("/usr/bin/python3", "-m", "pip", "--version").Run() != nil {
				t.Skip("/usr/bin/python3 has no pip here")
			}
			sbWriteWheel(t, filepath.Join(dir, "sandboxed_mod-1.0-py3-none-any.whl"))
		},
		check: sbOutputHas("installed"),
	},
	{name: "git_init_add_commit", script: `git init -q . && echo hello > a.txt && git add a.txt &&
git -c user.name=toolhost -c user.email=toolhost@example.invalid -c commit.gpgsign=false commit -q -m first &&
git log --format=%s`,
		check: sbOutputIs("first\n")},
	{name: "read_etc_hosts", script: `cat /etc/hosts`,
		check: func(t *testing.T, res protocol.ToolResult, dir string) {
			want, err := os.ReadFile("/etc/hosts")
			if err != nil {
				t.Skipf("this machine has no /etc/hosts: %v", err)
			}
			sbOutputIs(string(want))(t, res, dir)
		}},
}

// TestSandboxAllows runs sbAllowedWork, each a parallel subtest against one
// server.
func TestSandboxAllows(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	for _, c := range sbAllowedWork {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(s.root, c.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if c.layout != nil {
				c.layout(t, dir)
			}
			var env map[string]any
			if c.env != nil {
				env = c.env(t)
			}
			timeout := c.timeout
			if timeout == 0 {
				timeout = sbTimeout
			}
			res := sbRun(t, s, protocol.SandboxWorkspaceWrite, c.name, c.script, env, timeout)
			if !res.Success {
				t.Fatalf("the command failed: status %s, exit %s; stdout %q, stderr %q", res.Status, sbCode(res), res.Stdout, res.Stderr)
			}
			c.check(t, res, dir)
		})
	}
}

// TestSandboxReports checks what the server says of its confinement:
// initialize gives the kernel's Landlock ABI, and a confined command's
// result what was applied.
func TestSandboxReports(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	ir := s.initialize(nil)
	caps := ir.Capabilities.Sandbox
	t.Run("initialize_reports_landlock", func(t *testing.T) {
		abi, err := sbKernelABI()
		if abi == 0 {
			t.Skipf("this kernel offers no Landlock (landlock_create_ruleset: %v)", err)
		}
		got := struct {
			Available bool
			ABI       int
		}{caps.Available, caps.ABI}
		want := got
		want.Available, want.ABI = true, abi
		if diff := cmp.Diff(want, got); diff != "" {
			raw, _ := json.Marshal(caps)
			t.Errorf("capabilities.sandbox on a kernel with Landlock ABI %d: mismatch (-want +got):\n%s\n(all of it: %s)", abi, diff, raw)
		}
	})
	t.Run("result_says_what_was_applied", func(t *testing.T) {
		res := sbRun(t, s, protocol.SandboxWorkspaceWrite, "", "true", nil, sbTimeout)
		if res.Sandbox == nil {
			t.Fatalf("the result of a confined command has no sandbox field")
		}
		want := protocol.SandboxApplied{Filesystem: protocol.SandboxWorkspaceWrite, Network: false}
		got := protocol.SandboxApplied{Filesystem: res.Sandbox.Filesystem, Network: res.Sandbox.Network}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the sandbox applied: mismatch (-want +got):\n%s", diff)
		}
		if !caps.Available {
			t.Skipf("capabilities.sandbox.available is false (%q): no Landlock layer to report", caps.Reason)
		}
		if !strings.Contains(res.Sandbox.EnforcedBy, "landlock-abi-") {
			t.Errorf("enforcedBy = %q, want a landlock-abi-N layer", res.Sandbox.EnforcedBy)
		}
	})
}

// sbGoEnv is the environment of a go command in the sandbox: go's own
// directory on PATH, and no toolchain download.
func sbGoEnv(t *testing.T) map[string]any {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go on PATH: %v", err)
	}
	return map[string]any{"GOTOOLCHAIN": "local", "PATH": filepath.Dir(goBin) + ":" + os.Getenv("PATH")}
}

// sbOutputHas checks the command's stdout holds want.
func sbOutputHas(want string) func(*testing.T, protocol.ToolResult, string) {
	return func(t *testing.T, res protocol.ToolResult, _ string) {
		t.Helper()
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout %q does not hold %q", res.Stdout, want)
		}
	}
}

// sbWriteWheel writes a pure-Python wheel of one module, so that pip
// installs it without building anything or reaching an index.
func sbWriteWheel(t *testing.T, path string) {
	t.Helper()
	files := []struct{ name, body string }{
		{"sandboxed_mod.py", "X = 1\n"},
		{"sandboxed_mod-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: sandboxed-mod\nVersion: 1.0\n"},
		{"sandboxed_mod-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: toolhost-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("sandboxed_mod-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("sandboxed_mod-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	wsWrite(t, path, buf.String())
}
