//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// startOutside starts a sleep outside any sandbox, which the test ends.
func startOutside(t *testing.T) *exec.Cmd {
	t.Helper()
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = outside.Process.Kill()
		_ = outside.Wait()
	})
	return outside
}

// niceOf reads the nice value of pid (field 19 of /proc/<pid>/stat).
func niceOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	return f[16]
}

// tryEach is the shell's try: one line per attempt, "<name> ok" or
// "<name> refused".
const tryEach = `try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
`

// TestPIDNamespaceHidesProcessesOutside checks that a confined shell cannot
// signal, renice, read /proc/<pid> of or trace a process outside its
// sandbox, which its PID namespace does not hold; and that without the
// namespace renice, the escape Landlock does not cover, works, so the
// test can fail.
func TestPIDNamespaceHidesProcessesOutside(t *testing.T) {
	caps := probed(t, "landlock6", "pidns")
	outside := startOutside(t)
	pid := strconv.Itoa(outside.Process.Pid)
	d := newDirs(t)
	p := d.policy()
	p.IsolatePIDs = true
	spec := Spec{Policy: p, Caps: &caps, Require: true}
	r := shell(t, spec, tryEach+`
try "kill -0" kill -0 "$1"
try "renice" renice -n 5 -p "$1"
try "cat cmdline" cat "/proc/$1/cmdline"
`, pid)
	got := append(lines(r.out), helperRun(t, spec, "ptrace-attach", pid), helperRun(t, spec, "setpriority", pid))
	want := []string{"kill -0 refused", "renice refused", "cat cmdline refused", "ptrace: ESRCH", "setpriority: ESRCH"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if n := niceOf(t, outside.Process.Pid); n != "0" {
		t.Errorf("the outside process has nice %s, want 0", n)
	}
	if !strings.Contains(r.report.EnforcedBy, "pidns") {
		t.Errorf("enforcedBy %q names no pidns", r.report.EnforcedBy)
	}

	c := caps
	c.PIDNS = false
	spec = Spec{Policy: d.policy(), Caps: &c}
	if got := helperRun(t, spec, "setpriority", pid); got != "setpriority: ok" {
		t.Errorf("without a PID namespace: %s, want setpriority: ok", got)
	}
}

// TestPIDNamespaceListsOnlyItsOwnProcesses checks what ps and /proc show a
// confined shell: the namespace's init, itself and its children.
func TestPIDNamespaceListsOnlyItsOwnProcesses(t *testing.T) {
	caps := probed(t, "landlock4", "pidns")
	startOutside(t)
	d := newDirs(t)
	r := shell(t, Spec{Policy: d.policy(), Caps: &caps, Require: true}, `echo "$$"; ps -e -o pid=,comm=; echo /proc/[0-9]*`)
	var got []string
	for _, l := range lines(r.out) {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	want := []string{"2", "1 toolhost-init", "2 sh", "3 ps", "/proc/1 /proc/2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// startReady starts cmd confined by spec, with its stdin and stdout
// pipes, and waits for it to print a line "ready". It returns the rest of
// stdout, which must be read to its end before cmd.Wait.
func startReady(t *testing.T, spec Spec, cmd *exec.Cmd) (*Sandbox, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Start(cmd, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		// A test that failed half-way leaves no sandbox unfinished (Drain
		// would wait for it); the others have finished theirs already.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_, _ = sb.Finish()
	})
	rest := bufio.NewReader(stdout)
	line, err := rest.ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the command printed %q (%v), want ready", line, err)
	}
	return sb, stdin, rest
}

// TestPIDNamespaceDeliversTermToTheCommand checks that the command, which
// is not its namespace's pid 1, gets SIGTERM from the server as the kill
// ladder sends it (to its process group): a trapping shell runs its trap,
// and a plain sleep, which has no handler, dies of it.
func TestPIDNamespaceDeliversTermToTheCommand(t *testing.T) {
	caps := probed(t, "landlock4", "pidns")
	d := newDirs(t)
	for _, tc := range []struct {
		name   string
		script string
		check  func(*testing.T, *os.ProcessState, string)
	}{
		{"trap", `trap 'echo "got TERM"; exit 3' TERM; echo ready; read x`, func(t *testing.T, ps *os.ProcessState, out string) {
			if ps.ExitCode() != 3 || out != "got TERM\n" {
				t.Errorf("the trap: %v, output %q; want exit status 3 and got TERM", ps, out)
			}
		}},
		{"plain sleep", `echo ready; exec sleep 60`, func(t *testing.T, ps *os.ProcessState, _ string) {
			if ws := ps.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
				t.Errorf("the sleep ended with %v, want SIGTERM", ps)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			sb, stdin, stdout := startReady(t, Spec{Policy: d.policy(), Caps: &caps, Require: true}, cmd)
			defer stdin.Close()
			if err := unix.Kill(-cmd.Process.Pid, unix.SIGTERM); err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(stdout)
			_ = cmd.Wait()
			if _, err := sb.Finish(); err != nil {
				t.Fatal(err)
			}
			tc.check(t, cmd.ProcessState, string(out))
		})
	}
}

// TestPIDNamespaceRunsACommandWithPdeathsig checks that a command asking
// for a parent-death signal, as the server's do, runs in its namespace:
// Go's fork would kill it, its parent being outside (Start clears it; the
// init's ends the namespace instead).
func TestPIDNamespaceRunsACommandWithPdeathsig(t *testing.T) {
	caps := probed(t, "landlock4", "pidns")
	d := newDirs(t)
	cmd := exec.Command("sh", "-c", "echo ran")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r := run(t, Spec{Policy: d.policy(), Caps: &caps, Require: true}, cmd)
	if r.waitErr != nil || r.out != "ran\n" {
		t.Errorf("the command: %v, output %q; want ran", r.waitErr, r.out)
	}
}

// orphans starts a confined shell that leaves two orphans (sleep 60 and
// sleep 61, each in a session of its own) and waits for it to be ready,
// by when both are orphans. It returns their pids outside the namespace.
func orphans(t *testing.T, spec Spec) (*Sandbox, *exec.Cmd, io.WriteCloser, []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `(setsid sleep 60 &); (setsid sleep 61 &); echo ready; read x`)
	sb, stdin, _ := startReady(t, spec, cmd)
	init := strconv.Itoa(sb.sys.init.Pid)
	b, err := os.ReadFile("/proc/" + init + "/task/" + init + "/children")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		kids = append(kids, pid)
	}
	if len(kids) != 2 {
		t.Fatalf("the init has children %v, want the two orphans", kids)
	}
	return sb, cmd, stdin, kids
}

// pidfdOf opens a pidfd of pid, which the test closes.
func pidfdOf(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

// exited reports whether the process of pidfd has exited, waiting up to
// ms milliseconds (-1: for good).
func exited(t *testing.T, pidfd, ms int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
}

// TestPIDNamespaceReapsOrphans checks that an orphan of the command, which
// the kernel re-parents to the namespace's init, is reaped as it exits:
// never a zombie, which would keep its process group alive for the kill
// ladder.
func TestPIDNamespaceReapsOrphans(t *testing.T) {
	caps := probed(t, "landlock4", "pidns")
	d := newDirs(t)
	sb, cmd, stdin, kids := orphans(t, Spec{Policy: d.policy(), Caps: &caps, Require: true})
	orphan := kids[0]
	fd := pidfdOf(t, orphan)
	if err := unix.Kill(orphan, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exited(t, fd, -1)
	// Reaped as it exits, it is gone or on its way out (X), never a
	// zombie (Z).
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(orphan) + "/stat"); err == nil {
		if state := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))[0]; state == "Z" {
			t.Errorf("the orphan is a zombie: its init does not reap it")
		}
	}
	_ = stdin.Close()
	_ = cmd.Wait()
	if _, err := sb.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestPIDNamespaceEndsOrphansWithTheCommand checks that an orphan that left
// the command's process group and session is gone once Finish returns:
// the namespace ends with its init.
func TestPIDNamespaceEndsOrphansWithTheCommand(t *testing.T) {
	caps := probed(t, "landlock4", "pidns")
	d := newDirs(t)
	sb, cmd, stdin, kids := orphans(t, Spec{Policy: d.policy(), Caps: &caps, Require: true})
	fds := []int{pidfdOf(t, kids[0]), pidfdOf(t, kids[1])}
	_ = stdin.Close() // the shell's read returns: it exits
	_ = cmd.Wait()
	if _, err := sb.Finish(); err != nil {
		t.Fatal(err)
	}
	for i, fd := range fds {
		if !exited(t, fd, 0) {
			t.Errorf("orphan %d still runs after Finish", i)
		}
	}
}

// TestInitProgram checks the namespace's init as it runs: named
// toolhost-init, SIGCHLD ignored (so that the kernel reaps its children),
// and no descriptor left open, inherited ones included (a pipe it held
// reaches EOF once it is set up).
func TestInitProgram(t *testing.T) {
	exe, err := initExe()
	if err != nil {
		t.Skipf("no init here: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := os.StartProcess(exe, []string{initName}, &os.ProcAttr{Files: []*os.File{nil, nil, nil, w}})
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.Kill()
		_, _ = p.Wait()
	}()
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Name:") || strings.HasPrefix(l, "SigIgn:") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(p.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, "fds: "+strconv.Itoa(len(fds)))
	// The init ignores SIGCHLD (bit 16); what this process ignores it
	// inherits too, as exec keeps ignored signals ignored (a shell or make
	// above the test may have ignored some).
	own, err := sigIgn(strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Name: toolhost-init", fmt.Sprintf("SigIgn: %016x", own|1<<(int(unix.SIGCHLD)-1)), "fds: 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// unixLayer returns the layer that cuts a confined command with the
// network off from unix sockets outside, and what connecting to one
// gives there.
func unixLayer(caps Capabilities) (by, refused string) {
	if caps.LandlockABI >= 9 {
		return "landlock-abi-9", "connect: EACCES"
	}
	return "seccomp-unix", "socket: EACCES"
}

// listenUnix listens on a pathname unix socket at path until the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
}

// TestUnixSocketOutsideRefusedWithNetworkOff checks that a command with
// the network off cannot connect to a pathname unix socket outside its
// writable directories (a stand-in for a Docker socket or an ssh-agent),
// which an unconfined process reaches, and that the report names the
// layer.
func TestUnixSocketOutsideRefusedWithNetworkOff(t *testing.T) {
	caps := probed(t, "landlock4", "seccomp")
	d := newDirs(t)
	sock := filepath.Join(d.outside, "agent.sock")
	listenUnix(t, sock)
	p := d.policy()
	p.Network = false
	by, refused := unixLayer(caps)
	r := run(t, Spec{Policy: p, Caps: &caps, Require: true}, helperCmd("unix-connect", sock))
	if got := strings.TrimSpace(r.out); got != refused {
		t.Errorf("confined: %s, want %s", got, refused)
	}
	if !strings.Contains(r.report.EnforcedBy, by) {
		t.Errorf("enforcedBy %q, want %s in it", r.report.EnforcedBy, by)
	}
	if out, err := helperCmd("unix-connect", sock).Output(); err != nil || strings.TrimSpace(string(out)) != "connect: ok" {
		t.Errorf("unconfined: %q, %v", out, err)
	}
}

// TestUnixSocketOutsideReachableWithNetworkOn checks that with the network
// on the same socket is reached: nothing is cut off then.
func TestUnixSocketOutsideReachableWithNetworkOn(t *testing.T) {
	caps := probed(t, "landlock4")
	d := newDirs(t)
	sock := filepath.Join(d.outside, "agent.sock")
	listenUnix(t, sock)
	r := run(t, Spec{Policy: d.policy(), Caps: &caps, Require: true}, helperCmd("unix-connect", sock))
	if got := strings.TrimSpace(r.out); got != "connect: ok" {
		t.Errorf("confined with the network on: %s, want connect: ok", got)
	}
	if strings.Contains(r.report.EnforcedBy, "seccomp-unix") {
		t.Errorf("enforcedBy %q: a unix filter with the network on", r.report.EnforcedBy)
	}
}

// TestSocketpairWorksWithNetworkOff checks that a stream socketpair, which
// has no address, still works with the network off; a datagram one, which
// could sendto(2) any pathname, is refused by the seccomp layer.
func TestSocketpairWorksWithNetworkOff(t *testing.T) {
	caps := probed(t, "landlock4", "seccomp")
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	spec := Spec{Policy: p, Caps: &caps, Require: true}
	got := []string{helperRun(t, spec, "socketpair", "stream"), helperRun(t, spec, "socketpair", "dgram")}
	want := []string{"socketpair: ok", "socketpair: EACCES"}
	if by, _ := unixLayer(caps); by != "seccomp-unix" {
		want[1] = "socketpair: ok"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestUnixSocketInsideRootWithNetworkOff checks a unix socket server and
// its client, both in the command, on a socket in the root: they talk
// under Landlock ABI 9; under the seccomp layer of older kernels no unix
// socket can be made, as documented.
func TestUnixSocketInsideRootWithNetworkOff(t *testing.T) {
	caps := probed(t, "landlock4", "seccomp")
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	want := "echo: ok"
	if by, _ := unixLayer(caps); by == "seccomp-unix" {
		want = "socket: EACCES"
	}
	if got := helperRun(t, Spec{Policy: p, Caps: &caps, Require: true}, "unix-echo", filepath.Join(d.root, "server.sock")); got != want {
		t.Errorf("server and client in the root: %s, want %s", got, want)
	}
}

// gitRepo makes a git repository with one commit in dir, from outside any
// sandbox, with a post-commit hook that says it ran.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v", err)
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"config", "user.email", "t@example.com"}, {"config", "user.name", "T"},
		{"config", "commit.gpgsign", "false"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", "post-commit"), []byte("#!/bin/sh\necho hook ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestProtectedPathsStayReadOnlyWhileGitCommits checks that with .git/hooks
// and .git/config protected a workspace-write command commits (and git
// runs the hook), but cannot change, replace or move them, nor the .git
// above them.
func TestProtectedPathsStayReadOnlyWhileGitCommits(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	gitRepo(t, d.root)
	hooks, config := filepath.Join(d.root, ".git", "hooks"), filepath.Join(d.root, ".git", "config")
	before := sbConfig(t, config)
	p := d.policy()
	p.Protect = []string{hooks, config, filepath.Join(d.root, "absent")}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
cd "$1"
echo x > f && git add f && git commit -q -m one && echo committed
try "write a hook" sh -c 'echo evil > .git/hooks/pre-commit'
try "change a hook" sh -c 'echo evil >> .git/hooks/post-commit'
try "chmod a hook" chmod 644 .git/hooks/post-commit
try "write config" sh -c 'echo evil >> .git/config'
try "git config" git config core.hooksPath /tmp
try "replace config" sh -c 'echo evil > c && mv c .git/config'
try "remove hooks" rm -rf .git/hooks
try "move .git" mv .git .git-old
try "write .git/info" sh -c 'echo x > .git/info/y'
`, d.root)
	want := []string{
		"hook ran", "committed",
		"write a hook refused", "change a hook refused", "chmod a hook refused",
		"write config refused", "git config refused", "replace config refused",
		"remove hooks refused", "move .git refused", "write .git/info ok",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{hooks, config}, r.report.Protect); diff != "" {
		t.Errorf("report's protect: mismatch (-want +got):\n%s", diff)
	}
	if after := sbConfig(t, config); after != before {
		t.Errorf(".git/config changed:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(hooks, "pre-commit")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pre-commit hook appeared: %v", err)
	}
}

// sbConfig reads a file.
func sbConfig(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProtectedPathsNeedAMountNamespace checks that where no mount
// namespace can be made a required sandbox refuses a protected path inside
// the root, and an optional one says it stays writable.
func TestProtectedPathsNeedAMountNamespace(t *testing.T) {
	caps := probed(t, "landlock4")
	caps.MountNS, caps.PIDNS, caps.Masks = false, false, false
	caps.Reasons = map[string]string{"mountns": "no mount namespace: faked"}
	d := newDirs(t)
	hooks := filepath.Join(d.root, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	p := d.policy()
	p.Protect = []string{hooks}
	cmd := exec.Command("true")
	_, err := Start(cmd, Spec{Policy: p, Caps: &caps, Require: true})
	var ue *UnavailableError
	if !errors.As(err, &ue) || cmd.Process != nil {
		t.Fatalf("Start: %v (started: %v), want ErrUnavailable and nothing started", err, cmd.Process != nil)
	}
	gap := "protected path " + hooks + " stays writable: no mount namespace: faked"
	if diff := cmp.Diff([]string{gap}, ue.Missing); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	r := shell(t, Spec{Policy: p, Caps: &caps}, `echo x > "$1/f" && echo wrote`, hooks)
	if strings.TrimSpace(r.out) != "wrote" || !slices.Contains(r.report.NotEnforced, gap) || len(r.report.Protect) != 0 {
		t.Errorf("degraded: output %q, report %+v; want the write, and the gap owned up to", r.out, r.report)
	}
}

// secrets makes, outside the workspace, a directory like ~/.ssh with a key
// in it and a file like ~/.netrc, and a symlink to the directory.
func secrets(t *testing.T, d dirs) (dir, file, link string) {
	t.Helper()
	dir, file, link = filepath.Join(d.outside, ".ssh"), filepath.Join(d.outside, ".netrc"), filepath.Join(d.outside, "ssh-link")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{filepath.Join(dir, "id_ed25519"): "KEY", file: "machine example.com password SECRET"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	return dir, file, link
}

// TestDeniedPathsReadEmpty checks that a denied directory lists empty and
// its files are gone, through a symlink too; that a denied file reads
// empty; that both keep their mode and cannot be written; that a denied
// path which does not exist is left alone; and that the report lists what
// was masked.
func TestDeniedPathsReadEmpty(t *testing.T) {
	caps := probed(t, "landlock4", "masks")
	d := newDirs(t)
	dir, file, link := secrets(t, d)
	p := d.policy()
	p.DenyRead = []string{dir, file, filepath.Join(d.outside, ".aws")}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "dir: $(ls -A "$1")"
echo "file: $(cat "$2")"
echo "link: $(ls -A "$3")"
stat -c '%F %a' "$1" "$2"
try "read the key" cat "$1/id_ed25519"
try "write in dir" sh -c 'echo x > "$0/new"' "$1"
try "write the file" sh -c 'echo x > "$0"' "$2"
try "unmount" umount "$1"
`, dir, file, link)
	want := []string{
		"dir: ", "file: ", "link: ", "directory 700", "regular empty file 600",
		"read the key refused", "write in dir refused", "write the file refused", "unmount refused",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{dir, file}, r.report.DenyRead); diff != "" {
		t.Errorf("report's denyRead: mismatch (-want +got):\n%s", diff)
	}
	if got := sbConfig(t, filepath.Join(dir, "id_ed25519")); got != "KEY" {
		t.Errorf("the key outside holds %q", got)
	}
}

// TestDeniedPathsMaskBlockDevices checks that when anything is denied, a
// block device the command could read, whose raw bytes hold every file of
// its file system, is masked by an empty file and reads empty.
func TestDeniedPathsMaskBlockDevices(t *testing.T) {
	caps := probed(t, "landlock4", "masks")
	var dev string
	ents, _ := os.ReadDir("/dev")
	for _, e := range ents {
		if e.Type()&os.ModeDevice == 0 || e.Type()&os.ModeCharDevice != 0 {
			continue
		}
		if f, err := os.Open("/dev/" + e.Name()); err == nil {
			n, _ := f.Read(make([]byte, 512))
			_ = f.Close()
			if n == 512 {
				dev = "/dev/" + e.Name()
				break
			}
		}
	}
	if dev == "" {
		t.Skip("no block device this test can read (a device cgroup may forbid them): the command cannot read one either, and none needs a mask")
	}
	d := newDirs(t)
	dir, _, _ := secrets(t, d)
	p := d.policy()
	p.DenyRead = []string{dir}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, `stat -c %F "$1"; head -c 512 "$1" | wc -c`, dev)
	want := []string{"regular empty file", "0"}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("%s: mismatch (-want +got):\n%s", dev, diff)
	}
}

// TestReopenRefusesSwappedPath checks that a path swapped for a symlink (to
// another directory) after the policy was opened is refused rather than
// mounted over.
func TestReopenRefusesSwappedPath(t *testing.T) {
	d := newDirs(t)
	hooks := filepath.Join(d.root, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(hooks, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if got, _, err := reopen(hooks, fd); err != nil {
		t.Fatalf("reopen of the same directory: %v", err)
	} else {
		_ = unix.Close(got)
	}
	if err := os.Rename(hooks, filepath.Join(d.root, "hooks.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d.outside, hooks); err != nil {
		t.Fatal(err)
	}
	if got, _, err := reopen(hooks, fd); err == nil {
		_ = unix.Close(got)
		t.Errorf("reopen followed the swapped symlink")
	}
}

// BenchmarkIsolation measures what each layer of this file costs a
// confined true, in one run: each iteration starts and waits for true
// confined without the layer and with it, so that both see the same load
// (the machines are shared), and reports the medians and their
// difference. The limit groups and the like are left out.
func BenchmarkIsolation(b *testing.B) {
	caps := probed(b, "landlock4")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	d := newDirs(b)
	noPIDNS := caps
	noPIDNS.PIDNS = false
	off := d.policy()
	off.Network = false
	noUnixFilter := caps
	noUnixFilter.Seccomp = false // the network namespace cuts TCP and UDP
	agents := d.policy()
	for _, dir := range []string{filepath.Join(d.root, ".git", "hooks"), filepath.Join(d.outside, ".ssh")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(d.root, ".git", "config"), filepath.Join(d.outside, ".netrc")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// The agents' defaults: two protected paths, seven denied of which two
	// exist.
	agents.Protect = []string{filepath.Join(d.root, ".git", "hooks"), filepath.Join(d.root, ".git", "config")}
	for _, n := range []string{".ssh", ".aws", ".config/gcloud", ".kube", ".docker", ".netrc", ".git-credentials"} {
		agents.DenyRead = append(agents.DenyRead, filepath.Join(d.outside, n))
	}
	for _, bc := range []struct {
		name          string
		without, with Spec
		need          []string
	}{
		{"PID namespace", Spec{Policy: d.policy(), Caps: &noPIDNS}, Spec{Policy: d.policy(), Caps: &caps}, []string{"pidns"}},
		{"unix filter (network off)", Spec{Policy: off, Caps: &noUnixFilter}, Spec{Policy: off, Caps: &caps}, []string{"seccomp"}},
		{"agents' protect and denyRead", Spec{Policy: d.policy(), Caps: &caps}, Spec{Policy: agents, Caps: &caps}, []string{"masks"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			probed(b, bc.need...)
			var without, with []time.Duration
			one := func(spec Spec) time.Duration {
				t0 := time.Now()
				cmd := exec.Command(truePath)
				sb, err := Start(cmd, spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Finish(); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			for b.Loop() {
				without, with = append(without, one(bc.without)), append(with, one(bc.with))
			}
			mw, m := median(without), median(with)
			b.ReportMetric(float64(mw.Nanoseconds())/1e3, "without-us")
			b.ReportMetric(float64(m.Nanoseconds())/1e3, "with-us")
			b.ReportMetric(float64((m-mw).Nanoseconds())/1e3, "cost-us")
		})
	}
	Drain()
}

// sigIgn reads the mask of ignored signals of process pid.
func sigIgn(pid string) (uint64, error) {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no SigIgn in /proc/" + pid + "/status")
}
