//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
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

// probed returns this machine's capabilities (measured once), and skips t
// with the probe's reason when one it needs is missing. The facts were
// checked in /work/shared/notes/machine.md: Landlock ABI 7, root, network
// and mount namespaces, v1 pids and memory hierarchies.
func probed(t testing.TB, need ...string) Capabilities {
	t.Helper()
	c := DefaultCapabilities()
	for _, n := range need {
		var ok bool
		key := n
		switch n {
		case "landlock4":
			ok, key = c.LandlockABI >= 4, "landlock"
		case "landlock6":
			ok, key = c.LandlockABI >= 6, "landlock"
		case "mountns":
			ok = c.MountNS
		case "netns-unshare":
			ok, key = c.NetNS == NetNSUnshare, "netns"
		case "userns":
			// As root a user namespace works wherever unshare does.
			ok, key = c.NetNS != NetNSNone, "netns"
		case "seccomp":
			ok = c.Seccomp
		case "pids":
			ok = c.Pids.Version != 0
		case "memory":
			ok = c.Memory.Version != 0
		case "ptrace":
			ok = c.PtraceStop
		case "pidns":
			// With a /proc of its own.
			ok, key = c.PIDNS && c.PIDNSProc && c.MountNS, "proc"
			if !c.PIDNS {
				key = "pidns"
			}
		case "masks":
			ok = c.Masks
		default:
			t.Fatalf("unknown need %q", n)
		}
		if !ok {
			t.Skipf("this machine lacks %s: %s", n, c.Reasons[key])
		}
	}
	return c
}

// dirs is a workspace layout for one test: every directory exists, and
// outside holds a file "existing" with "orig" in it, mode 0644.
type dirs struct {
	root, tmp, cache, extra, outside string
}

func newDirs(t testing.TB) dirs {
	t.Helper()
	base := t.TempDir()
	d := dirs{
		root:    filepath.Join(base, "root"),
		tmp:     filepath.Join(base, "tmp"),
		cache:   filepath.Join(base, "cache"),
		extra:   filepath.Join(base, "extra"),
		outside: filepath.Join(base, "outside"),
	}
	for _, p := range []string{d.root, d.tmp, d.cache, d.extra, d.outside} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.outside, "existing"), []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// policy is the workspace-write policy of d.
func (d dirs) policy() Policy {
	return Policy{Filesystem: WorkspaceWrite, Network: true, Root: d.root, TempDir: d.tmp, CacheDir: d.cache, Writable: []string{d.extra}}
}

// result is what a confined command did.
type result struct {
	out     string
	waitErr error
	state   *os.ProcessState
	report  Report
	hit     Limit
}

// run starts cmd confined by spec, waits for it and finishes the sandbox.
func run(t *testing.T, spec Spec, cmd *exec.Cmd) result {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	sb, err := Start(cmd, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	werr := cmd.Wait()
	hit, err := sb.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return result{out: out.String(), waitErr: werr, state: cmd.ProcessState, report: sb.Report(), hit: hit}
}

// shell runs script with sh -c confined by spec; args are $1, $2, ...
func shell(t *testing.T, spec Spec, script string, args ...string) result {
	t.Helper()
	return run(t, spec, exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...))
}

// helperCmd is this test binary as a helper performing one operation.
// Under -race the runtime would sleep a second at exit (atexit_sleep_ms).
func helperCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(helperBin, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	return cmd
}

// helperRun runs the helper confined by spec and returns its answer.
func helperRun(t *testing.T, spec Spec, args ...string) string {
	t.Helper()
	r := run(t, spec, helperCmd(args...))
	return strings.TrimSpace(r.out)
}

// lines splits output into its lines.
func lines(s string) []string {
	return strings.Split(strings.TrimSpace(s), "\n")
}

// tryWrites is a shell script that tries each kind of write and prints one
// line per attempt, "<name> ok" or "<name> refused". $1 is the workspace
// root, $2 the temporary directory, $3 the cache, $4 the extra writable
// directory, $5 a directory outside with a file "existing".
const tryWrites = `
try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try "write root" sh -c 'echo x > "$0/f"' "$1"
try "write tmp" sh -c 'echo x > "$0/f"' "$2"
try "write cache" sh -c 'echo x > "$0/f"' "$3"
try "write extra" sh -c 'echo x > "$0/f"' "$4"
try "dev null" sh -c 'echo x > /dev/null'
try "read /etc/hosts" cat /etc/hosts
try "write outside" sh -c 'echo x > "$0/new"' "$5"
try "truncate outside" sh -c ': > "$0/existing"' "$5"
try "mkdir outside" mkdir "$5/dir"
try "symlink outside" ln -s x "$5/sym"
try "hard link outside" ln "$1/f" "$5/hard"
try "copy out" cp "$1/f" "$5/copy"
try "rename out" mv "$1/f" "$5/moved"
try "link outside file in" ln "$5/existing" "$1/in"
try "write through /proc/self/root" sh -c 'echo x > "/proc/self/root$0/viaproc"' "$5"
try "write through /proc/self/cwd/.." sh -c 'cd "$0" && echo x > /proc/self/cwd/../viacwd' "$1"
try "write through a symlink out" sh -c 'echo x > "$0/out/viasymlink"' "$1"
try "setsid descendant writes outside" setsid -w sh -c 'echo x > "$0/bysetsid"' "$5"
try "nohup descendant writes outside" nohup sh -c 'echo x > "$0/bynohup"' "$5"
try "chmod outside" chmod 600 "$5/existing"
try "touch outside" touch "$5/existing"
`

// TestWorkspaceWrite checks that a workspace-write command writes in its
// writable directories only, with both layers (Landlock and the mount
// namespace) and with Landlock alone, whose gap on metadata the report
// must own up to.
func TestWorkspaceWrite(t *testing.T) {
	caps := probed(t, "landlock4")
	for _, tc := range []struct {
		name     string
		mountNS  bool
		metadata string // what chmod and touch of an outside file do
		by       string
	}{
		{"landlock+mntns", true, "refused", "landlock-abi-7+mntns"},
		{"landlock only", false, "ok", "landlock-abi-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mountNS {
				probed(t, "mountns")
			}
			c := caps
			c.MountNS = tc.mountNS
			c.CapDrop, c.PIDNS = false, false // this test is about the filesystem layers
			d := newDirs(t)
			if err := os.Symlink(d.outside, filepath.Join(d.root, "out")); err != nil {
				t.Fatal(err)
			}
			r := shell(t, Spec{Policy: d.policy(), Caps: &c}, tryWrites, d.root, d.tmp, d.cache, d.extra, d.outside)
			want := []string{
				"write root ok", "write tmp ok", "write cache ok", "write extra ok", "dev null ok", "read /etc/hosts ok",
				"write outside refused", "truncate outside refused", "mkdir outside refused", "symlink outside refused",
				"hard link outside refused", "copy out refused", "rename out refused", "link outside file in refused",
				"write through /proc/self/root refused", "write through /proc/self/cwd/.. refused",
				"write through a symlink out refused", "setsid descendant writes outside refused",
				"nohup descendant writes outside refused",
				"chmod outside " + tc.metadata, "touch outside " + tc.metadata,
			}
			if diff := cmp.Diff(want, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if r.report.EnforcedBy != tc.by || r.report.Filesystem != WorkspaceWrite {
				t.Errorf("report %+v, want filesystem workspace-write enforced by %s", r.report, tc.by)
			}
			metadataGap := slices.ContainsFunc(r.report.NotEnforced, func(s string) bool { return strings.HasPrefix(s, "metadata") })
			if metadataGap == tc.mountNS {
				t.Errorf("report lists the metadata gap: %v, want %v: %q", metadataGap, !tc.mountNS, r.report.NotEnforced)
			}
			if got := helperRun(t, Spec{Policy: d.policy(), Caps: &c}, "unix-bind", filepath.Join(d.outside, "sock")); got == "bind: ok" {
				t.Errorf("a unix socket was made outside")
			}
			if got := helperRun(t, Spec{Policy: d.policy(), Caps: &c}, "unix-bind", filepath.Join(d.root, "sock")); got != "bind: ok" {
				t.Errorf("a unix socket in the root: %s", got)
			}
			// Nothing outside changed but, without the mount namespace,
			// the mode and times.
			ents, _ := os.ReadDir(d.outside)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if diff := cmp.Diff([]string{"existing"}, names); diff != "" {
				t.Errorf("outside directory: mismatch (-want +got):\n%s", diff)
			}
			if b, _ := os.ReadFile(filepath.Join(d.outside, "existing")); string(b) != "orig" {
				t.Errorf("outside file holds %q, want %q", b, "orig")
			}
			if fi, err := os.Stat(filepath.Join(d.outside, "existing")); err != nil || (tc.mountNS && fi.Mode().Perm() != 0o644) {
				t.Errorf("outside file: %v, %v; want mode 0644", fi.Mode(), err)
			}
		})
	}
}

// TestReadOnly checks that a read-only command writes its temporary
// directory only, and still reads.
func TestReadOnly(t *testing.T) {
	caps := probed(t, "landlock4")
	d := newDirs(t)
	p := d.policy()
	p.Filesystem = ReadOnly
	r := shell(t, Spec{Policy: p, Caps: &caps}, `
try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try "write root" sh -c 'echo x > "$0/f"' "$1"
try "write cache" sh -c 'echo x > "$0/f"' "$3"
try "write extra" sh -c 'echo x > "$0/f"' "$4"
try "write tmp" sh -c 'echo x > "$0/f"' "$2"
try "read /etc/hosts" cat /etc/hosts
`, d.root, d.tmp, d.cache, d.extra)
	want := []string{"write root refused", "write cache refused", "write extra refused", "write tmp ok", "read /etc/hosts ok"}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if r.report.Filesystem != ReadOnly {
		t.Errorf("report %+v, want filesystem read-only", r.report)
	}
}

// TestReadRootInsideWorkspace checks that a read root nested in the
// workspace stays read-only (mount namespace), that Plan refuses it where
// no mount namespace can be made, and that without Require the report says
// it is not enforced, and it is not.
func TestReadRootInsideWorkspace(t *testing.T) {
	caps := probed(t, "landlock4")
	d := newDirs(t)
	vendor := filepath.Join(d.root, "vendor")
	if err := os.Mkdir(vendor, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vendor, "lib"), []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := d.policy()
	p.ReadRoots = []string{vendor}
	script := `
try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try "write root" sh -c 'echo x > "$0/f"' "$1"
try "write read root" sh -c 'echo x > "$0/vendor/lib"' "$1"
try "chmod read root" chmod 600 "$1/vendor/lib"
`
	t.Run("mount namespace", func(t *testing.T) {
		probed(t, "mountns")
		r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, script, d.root)
		want := []string{"write root ok", "write read root refused", "chmod read root refused"}
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
	})
	noMount := caps
	noMount.MountNS = false
	noMount.Reasons = map[string]string{"mountns": "no mount namespace: faked"}
	t.Run("required without mount namespace", func(t *testing.T) {
		cmd := exec.Command("true")
		_, err := Start(cmd, Spec{Policy: p, Caps: &noMount, Require: true})
		var ue *UnavailableError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) {
			t.Fatalf("Start: %v, want ErrUnavailable", err)
		}
		want := []string{"read root " + vendor + " inside a writable directory stays writable: no mount namespace: faked"}
		if diff := cmp.Diff(want, ue.Missing); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
		if cmd.Process != nil {
			t.Errorf("the command started")
		}
	})
	t.Run("degraded without mount namespace", func(t *testing.T) {
		r := shell(t, Spec{Policy: p, Caps: &noMount}, script, d.root)
		want := []string{"write root ok", "write read root ok", "chmod read root ok"}
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
		if !slices.Contains(r.report.NotEnforced, "read root "+vendor+" inside a writable directory stays writable: no mount namespace: faked") {
			t.Errorf("report does not own up to the writable read root: %q", r.report.NotEnforced)
		}
	})
}

// TestFullModeKeepsReadRoots checks that full mode writes anywhere but in
// a read root.
func TestFullModeKeepsReadRoots(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	ro := filepath.Join(d.outside, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	p := Policy{Filesystem: Full, Network: true, Root: d.root, ReadRoots: []string{ro}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, `
try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try "write outside" sh -c 'echo x > "$0/new"' "$1"
try "write read root" sh -c 'echo x > "$0/ro/new"' "$1"
try "unmount read root" umount "$1/ro"
try "write read root" sh -c 'echo x > "$0/ro/new"' "$1"
`, d.outside)
	want := []string{"write outside ok", "write read root refused", "unmount read root refused", "write read root refused"}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if r.report.Filesystem != Full {
		t.Errorf("report %+v, want filesystem full", r.report)
	}
}

// threadState describes what each thread of the test process carries:
// no_new_privs, seccomp, namespaces and cgroups.
func threadState(t *testing.T) map[string][]string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]string)
	for _, task := range tasks {
		var st []string
		status, err := os.ReadFile(task + "/status")
		if err != nil {
			continue // the thread exited meanwhile
		}
		for l := range strings.SplitSeq(string(status), "\n") {
			if strings.HasPrefix(l, "NoNewPrivs:") || strings.HasPrefix(l, "Seccomp:") || strings.HasPrefix(l, "CapBnd:") {
				st = append(st, strings.Join(strings.Fields(l), " "))
			}
		}
		for _, ns := range []string{"mnt", "net", "user", "pid_for_children"} {
			l, _ := os.Readlink(task + "/ns/" + ns)
			st = append(st, l)
		}
		cg, _ := os.ReadFile(task + "/cgroup")
		st = append(st, strings.Fields(string(cg))...)
		out[filepath.Base(task)] = st
	}
	return out
}

// waitThreadGone waits until thread tid of the test process has exited
// (a pidfd of one thread, Linux 6.9, is readable then).
func waitThreadGone(t *testing.T, tid string) {
	t.Helper()
	n, _ := strconv.Atoi(tid)
	const pidfdThread = unix.O_EXCL
	fd, err := unix.PidfdOpen(n, pidfdThread)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Skipf("cannot wait for a thread to exit: pidfd_open(PIDFD_THREAD): %v", err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// TestServerStaysUnconfined checks that after confined commands ran (with
// every layer and limits), every thread of the test process is as the main
// thread: no no_new_privs, no seccomp, the same namespaces, bounding set and
// cgroups; and that the test writes outside and reaches the network, itself
// and through an unconfined child.
func TestServerStaysUnconfined(t *testing.T) {
	caps := probed(t, "landlock4")
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	limits := Limits{}
	if caps.Pids.Version != 0 {
		limits.Pids = 32
	}
	if caps.Memory.Version != 0 {
		limits.MemoryBytes = 256 << 20
	}
	limits.CPU = 10e9
	for range 3 {
		r := shell(t, Spec{Policy: p, Limits: limits, Caps: &caps}, `echo x > "$1/f" && echo done`, d.outside)
		if strings.Contains(r.out, "done") {
			t.Fatalf("the confined command wrote outside: %q", r.out)
		}
	}
	// The runtime ends the confining threads once their goroutines have
	// returned: wait for both, the threads' exits through pidfds of them.
	Drain()
	main := threadState(t)[strconv.Itoa(os.Getpid())]
	for tid, st := range threadState(t) {
		if !cmp.Equal(main, st) {
			waitThreadGone(t, tid)
		}
	}
	for tid, st := range threadState(t) {
		if diff := cmp.Diff(main, st); diff != "" {
			t.Errorf("thread %s differs from the main thread: mismatch (-want +got):\n%s", tid, diff)
		}
	}
	if !slices.Contains(main, "NoNewPrivs: 0") || !slices.Contains(main, "Seccomp: 0") {
		t.Errorf("the main thread is confined: %q", main)
	}
	if err := os.WriteFile(filepath.Join(d.outside, "by-test"), []byte("x"), 0o644); err != nil {
		t.Errorf("the test cannot write outside: %v", err)
	}
	out, err := exec.Command("sh", "-c", `echo x > "$1/by-child" && echo written`, "sh", d.outside).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "written" {
		t.Errorf("an unconfined child cannot write outside: %q, %v", out, err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if out, err := helperCmd("tcp-connect", ln.Addr().String()).Output(); err != nil || strings.TrimSpace(string(out)) != "connect: ok" {
		t.Errorf("an unconfined child cannot connect: %q, %v", out, err)
	}
}

// TestNetworkOff checks, for each way of cutting the network, that TCP
// connect to a listener of the test fails, that bind is refused where no
// namespace with a loopback of its own is the boundary, and that a UDP
// datagram to a listener of the test does not arrive; and that with the network on the same connect
// works, so the test can fail.
func TestNetworkOff(t *testing.T) {
	caps := probed(t, "landlock4")
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	// udpArrived sends a marker from the test after the child has exited and
	// reports whether the first datagram the listener holds came before it.
	udpArrived := func() string {
		c, err := net.Dial("udp4", udp.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("marker")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, _, err := udp.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	d := newDirs(t)
	for _, tc := range []struct {
		name  string
		need  string
		netns NetNSMethod
		by    string
		want  []string
	}{
		// The namespace is the boundary: Landlock leaves TCP alone, so the
		// command listens on its own loopback, where nothing of the
		// test's is.
		{"netns", "netns-unshare", NetNSUnshare, "netns", []string{"connect: ECONNREFUSED", "bind: ok", "sendto: ok"}},
		{"user namespace", "userns", NetNSUserNS, "userns-netns", []string{"connect: EACCES", "bind: EACCES", "sendto: ENETUNREACH"}},
		{"seccomp", "seccomp", NetNSNone, "seccomp", []string{"socket: EACCES", "socket: EACCES", "socket: EACCES"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed(t, tc.need)
			c := caps
			c.NetNS = tc.netns // the seccomp filter is only for no namespace
			p := d.policy()
			p.Network = false
			spec := Spec{Policy: p, Caps: &c, Require: true}
			got := []string{
				helperRun(t, spec, "tcp-connect", tcp.Addr().String()),
				helperRun(t, spec, "tcp-bind"),
				helperRun(t, spec, "udp-send", udp.LocalAddr().String(), "from-child"),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if first := udpArrived(); first != "marker" {
				t.Errorf("the listener got %q before the marker", first)
			}
			r := run(t, spec, helperCmd("tcp-bind"))
			if r.report.Network || !strings.Contains(r.report.EnforcedBy, tc.by) {
				t.Errorf("report %+v, want network false enforced by %s", r.report, tc.by)
			}
		})
	}
	t.Run("network on", func(t *testing.T) {
		spec := Spec{Policy: d.policy(), Caps: &caps, Require: true}
		got := []string{
			helperRun(t, spec, "tcp-connect", tcp.Addr().String()),
			helperRun(t, spec, "udp-send", udp.LocalAddr().String(), "from-child"),
		}
		if diff := cmp.Diff([]string{"connect: ok", "sendto: ok"}, got); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
		if first := udpArrived(); first != "from-child" {
			t.Errorf("the listener got %q first, want the child's datagram", first)
		}
	})
}

// TestSignalsScoped checks that a confined command cannot signal the test
// process or another process outside its sandbox, trace it, or write to
// the test's stdout through /proc, and still signals its own children:
// Landlock's scoping alone, without the PID namespace that would hide
// those processes (TestPIDNamespace).
func TestSignalsScoped(t *testing.T) {
	caps := probed(t, "landlock6")
	caps.PIDNS = false
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = outside.Process.Kill()
		_ = outside.Wait()
	}()
	d := newDirs(t)
	spec := Spec{Policy: d.policy(), Caps: &caps, Require: true}
	got := []string{
		helperRun(t, spec, "kill", strconv.Itoa(os.Getpid()), "0"),
		helperRun(t, spec, "kill", strconv.Itoa(outside.Process.Pid), strconv.Itoa(int(unix.SIGKILL))),
		helperRun(t, spec, "ptrace-attach", strconv.Itoa(outside.Process.Pid)),
		helperRun(t, spec, "open-write", fmt.Sprintf("/proc/%d/fd/1", os.Getpid())),
	}
	if diff := cmp.Diff([]string{"kill: EPERM", "kill: EPERM", "ptrace: EPERM", "open: EACCES"}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// The outside process has not exited (WNOWAIT leaves it be).
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, outside.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil || info.Signo != 0 {
		t.Errorf("the outside process changed state: %v, signo %d", err, info.Signo)
	}
	// Inside the sandbox signals work.
	r := shell(t, spec, `sleep 60 & kill $!; wait $!; echo $?`)
	if l := lines(r.out); l[len(l)-1] != "143" {
		t.Errorf("killing its own child: %q, want 143", r.out)
	}
	// The test itself can signal the process the child could not.
	if got := outcome("kill", unix.Kill(outside.Process.Pid, 0)); got != "kill: ok" {
		t.Errorf("the test cannot signal: %s", got)
	}
}

// TestAbstractUnixScoped checks that a confined command cannot connect to
// an abstract unix socket of the test (Landlock scoping, the network being
// on so that no namespace hides the name), while an unconfined one can.
func TestAbstractUnixScoped(t *testing.T) {
	caps := probed(t, "landlock6")
	name := fmt.Sprintf("toolhost-sandbox-test-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := newDirs(t)
	got := helperRun(t, Spec{Policy: d.policy(), Caps: &caps, Require: true}, "abstract-connect", name)
	if got != "connect: EPERM" {
		t.Errorf("confined connect: %s, want connect: EPERM", got)
	}
	out, err := helperCmd("abstract-connect", name).Output()
	if err != nil || strings.TrimSpace(string(out)) != "connect: ok" {
		t.Errorf("unconfined connect: %q, %v", out, err)
	}
}

// TestForkBombContained checks that a fork bomb under pids 64 never holds
// more than 64 tasks, is killed whole as soon as a fork is refused, and is
// reported; and that the test can still fork.
func TestForkBombContained(t *testing.T) {
	caps := probed(t, "landlock4", "pids")
	d := newDirs(t)
	hits := make(chan Limit, 1)
	cmd := exec.Command("sh", "-c", `f() { f | f & }; f; wait`)
	sb, err := Start(cmd, Spec{Policy: d.policy(), Limits: Limits{Pids: 64}, Caps: &caps, OnLimit: func(l Limit) { hits <- l }})
	if err != nil {
		t.Fatal(err)
	}
	if l := <-hits; l != LimitPids {
		t.Errorf("OnLimit(%q), want pids", l)
	}
	_ = cmd.Wait() // the bomb's shell was killed with the rest
	var g *group
	for _, x := range sb.sys.groups {
		if x.has("pids") {
			g = x
		}
	}
	// The peak counts the forking thread while it was in the group.
	if b, err := os.ReadFile(filepath.Join(g.dir, "pids.peak")); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n > 64 {
			t.Errorf("the group held %d tasks, more than 64", n)
		}
	}
	hit, err := sb.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if hit != LimitPids {
		t.Errorf("Finish says %q, want pids", hit)
	}
	if _, err := os.Stat(g.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the group is still there: %v", err)
	}
	if sb.Report().Limits[LimitPids] == "" {
		t.Errorf("report %+v lists no pids limit", sb.Report())
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the test cannot fork: %v", err)
	}
}

// TestPidsOne checks that a pids limit of 1 lets the command run but not
// fork: the forking thread cannot share the group with it, so the child
// is put there while it is stopped at its exec.
func TestPidsOne(t *testing.T) {
	caps := probed(t, "landlock4", "pids", "ptrace")
	d := newDirs(t)
	// The refused fork ends the command (the monitor kills the group), so
	// whether the shell says so first is a race; that it never forked is
	// not.
	r := shell(t, Spec{Policy: d.policy(), Limits: Limits{Pids: 1}, Caps: &caps}, `echo alone; if /bin/true 2>/dev/null; then echo forked; else echo "fork refused"; fi`)
	if got := lines(r.out); got[0] != "alone" || slices.Contains(got, "forked") {
		t.Errorf("output %q, want alone and no fork", got)
	}
	if r.hit != LimitPids {
		t.Errorf("Finish says %q, want pids", r.hit)
	}
}

// TestMemoryHogKilled checks that a command allocating past its memory
// limit is killed, that OnLimit says so while it runs, and that Finish
// reports it.
func TestMemoryHogKilled(t *testing.T) {
	caps := probed(t, "landlock4", "memory")
	d := newDirs(t)
	hits := make(chan Limit, 1)
	cmd := helperCmd("alloc")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	sb, err := Start(cmd, Spec{Policy: d.policy(), Limits: Limits{MemoryBytes: 128 << 20}, Caps: &caps, OnLimit: func(l Limit) { hits <- l }})
	if err != nil {
		t.Fatal(err)
	}
	if l := <-hits; l != LimitMemory {
		t.Errorf("OnLimit(%q), want memory", l)
	}
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the hog ended with %v, want SIGKILL; output %q", cmd.ProcessState, out.String())
	}
	hit, err := sb.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if hit != LimitMemory {
		t.Errorf("Finish says %q, want memory", hit)
	}
}

// TestCPULimit checks that RLIMIT_CPU is in place when the program starts
// (set while it is stopped at its exec, or right after it without ptrace),
// and that a spinning command is stopped and reported.
func TestCPULimit(t *testing.T) {
	caps := probed(t, "landlock4")
	d := newDirs(t)
	for _, ptrace := range []bool{true, false} {
		t.Run(fmt.Sprintf("ptrace=%v", ptrace), func(t *testing.T) {
			if ptrace {
				probed(t, "ptrace")
			}
			c := caps
			c.PtraceStop = ptrace
			r := run(t, Spec{Policy: d.policy(), Limits: Limits{CPU: 500e6}, Caps: &c}, helperCmd("rlimit-cpu"))
			if got := strings.TrimSpace(r.out); got != "cpu 1 2" {
				t.Errorf("the program saw %q, want cpu 1 2", got)
			}
			gap := slices.ContainsFunc(r.report.NotEnforced, func(s string) bool { return strings.HasPrefix(s, "cpu limit") })
			if gap == ptrace {
				t.Errorf("report lists the cpu gap: %v, want %v", gap, !ptrace)
			}
		})
	}
	t.Run("spin", func(t *testing.T) {
		r := shell(t, Spec{Policy: d.policy(), Limits: Limits{CPU: 1e9}, Caps: &caps}, `while :; do :; done`)
		if r.hit != LimitCPU {
			t.Errorf("Finish says %q, want cpu (%v)", r.hit, r.state)
		}
		if ws := r.state.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGXCPU {
			t.Errorf("the spinner ended with %v, want SIGXCPU", r.state)
		}
	})
}

// TestUnavailable fakes a kernel without Landlock, namespaces, seccomp or
// cgroups: a required sandbox refuses with ErrUnavailable naming what is
// missing and starts nothing; an optional one runs and says that nothing
// was enforced.
func TestUnavailable(t *testing.T) {
	fake := Capabilities{Reasons: map[string]string{
		"landlock": "no Landlock: faked",
		"netns":    "no network namespace: faked",
		"seccomp":  "no seccomp: faked",
		"pids":     "no cgroup pids controller: faked",
	}}
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	spec := Spec{Policy: p, Limits: Limits{Pids: 10}, Caps: &fake, Require: true}
	cmd := exec.Command("sh", "-c", `echo x > "$1/f"`, "sh", d.outside)
	_, err := Start(cmd, spec)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Start: %v, want ErrUnavailable", err)
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("Start: %T, want *UnavailableError", err)
	}
	want := []string{
		"filesystem confinement: no Landlock: faked",
		"network cut off: no network namespace: faked, no seccomp: faked",
		"pathname unix sockets outside the writable directories cut off: no Landlock: faked, no seccomp: faked",
		"pids limit: no cgroup pids controller: faked",
	}
	if diff := cmp.Diff(want, ue.Missing); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if cmd.Process != nil {
		t.Errorf("the command started")
	}

	spec.Require = false
	r := run(t, spec, exec.Command("sh", "-c", `echo x > "$1/f" && echo wrote`, "sh", d.outside))
	if strings.TrimSpace(r.out) != "wrote" {
		t.Errorf("the unconfined command: %q", r.out)
	}
	if r.report.Filesystem != Full || !r.report.Network || r.report.EnforcedBy != "" || r.report.Limits != nil {
		t.Errorf("report %+v claims confinement", r.report)
	}
	for _, m := range want {
		if !slices.Contains(r.report.NotEnforced, m) {
			t.Errorf("report does not say %q: %q", m, r.report.NotEnforced)
		}
	}
}

// TestDevicesUsable checks that a confined command opens /dev/null,
// /dev/zero and a pseudo-terminal it gets from /dev/ptmx, with ioctls on
// them (Landlock ABI 5 guards device ioctls).
func TestDevicesUsable(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	p := d.policy()
	p.Network = false
	r := shell(t, Spec{Policy: p, Caps: &caps}, `
head -c 4 /dev/zero > /dev/null && echo "null and zero ok"
stty -a < /dev/ptmx > /dev/null 2>&1; echo "ioctl on ptmx: $?"
: > /dev/null && echo "truncating open of /dev/null ok"
`)
	want := []string{"null and zero ok", "ioctl on ptmx: 0", "truncating open of /dev/null ok"}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestGroupFiles checks what the package writes to and reads from cgroup
// files, on a directory standing in for cgroupfs (the v2 controllers are
// not delegated on these machines): the limits of v1 and v2 groups, the
// controllers enabled down to a caller's v2 group, and which counters mean
// a limit was hit.
func TestGroupFiles(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parent := t.TempDir()
	l := Limits{MemoryBytes: 64 << 20, Pids: 7}

	v1, err := newGroup(1, parent, []string{"pids"}, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(v1.dir, "pids.max")); got != "7" {
		t.Errorf("v1 pids.max %q, want 7", got)
	}

	v2, err := newGroup(2, parent, []string{"memory", "pids"}, l)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range []string{"pids.max", "memory.max", "memory.oom.group"} {
		got[f] = read(filepath.Join(v2.dir, f))
	}
	want := map[string]string{"pids.max": "7", "memory.max": "67108864", "memory.oom.group": "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}

	write(filepath.Join(v2.dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\noom_group_kill 0\n")
	write(filepath.Join(v2.dir, "pids.events"), "max 0\n")
	if l := v2.exceeded(); l != "" {
		t.Errorf("exceeded %q with no OOM kill and no refused fork", l)
	}
	write(filepath.Join(v2.dir, "pids.events"), "max 3\n")
	if l := v2.exceeded(); l != LimitPids {
		t.Errorf("exceeded %q, want pids", l)
	}
	write(filepath.Join(v2.dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
	if l := v2.exceeded(); l != LimitMemory {
		t.Errorf("exceeded %q, want memory", l)
	}
	write(filepath.Join(v1.dir, "pids.events"), "max 1\n")
	if l := v1.exceeded(); l != LimitPids {
		t.Errorf("v1 exceeded %q, want pids", l)
	}

	cmdDir := filepath.Join(parent, "session", "cmd")
	if err := os.MkdirAll(cmdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cg, err := callerGroup(parent, cmdDir, []string{"memory", "pids"}, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(parent, "session", "cgroup.subtree_control")); got != "+memory +pids" {
		t.Errorf("session subtree_control %q, want +memory +pids", got)
	}
	if cg.own || read(filepath.Join(cmdDir, "pids.max")) != "7" {
		t.Errorf("caller group %+v: own, or pids.max not written", cg)
	}
	if _, err := callerGroup(parent, t.TempDir(), []string{"pids"}, l); err == nil {
		t.Errorf("callerGroup accepted a directory outside the delegated parent")
	}
}

// BenchmarkStart measures starting and waiting for true confined in the
// ways the server would, each run interleaved with an unconfined one (the
// machines are shared, so both see the same load), and reports the
// medians and their ratio; the limit groups are made and removed each
// time. The target is at most 1.1 times the unconfined cost
// through the whole server, whose own work (artifacts, pipes, the JSON-RPC
// exchange) the unconfined baseline here does not include.
func BenchmarkStart(b *testing.B) {
	caps := probed(b, "landlock4")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	d := newDirs(b)
	landlockOnly := caps
	landlockOnly.MountNS, landlockOnly.CapDrop = false, false
	off := d.policy()
	off.Network = false
	for _, bc := range []struct {
		name string
		spec Spec
		need []string
	}{
		{"scoping only (full, network on)", Spec{Policy: Policy{Filesystem: Full, Network: true}, Caps: &caps}, nil},
		{"landlock only", Spec{Policy: d.policy(), Caps: &landlockOnly}, nil},
		{"workspace-write", Spec{Policy: d.policy(), Caps: &caps}, nil},
		{"workspace-write network off", Spec{Policy: off, Caps: &caps}, nil},
		{"workspace-write pids", Spec{Policy: d.policy(), Caps: &caps, Limits: Limits{Pids: 256}}, []string{"pids"}},
		{"workspace-write memory", Spec{Policy: d.policy(), Caps: &caps, Limits: Limits{MemoryBytes: 1 << 30}}, []string{"memory"}},
		{"workspace-write cpu", Spec{Policy: d.policy(), Caps: &caps, Limits: Limits{CPU: 60e9}}, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			probed(b, bc.need...)
			var base, conf []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := exec.Command(truePath).Run(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				cmd := exec.Command(truePath)
				sb, err := Start(cmd, bc.spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Finish(); err != nil {
					b.Fatal(err)
				}
				base, conf = append(base, t1.Sub(t0)), append(conf, time.Since(t1))
			}
			mb, mc := median(base), median(conf)
			b.ReportMetric(float64(mb.Nanoseconds())/1e3, "unconfined-us")
			b.ReportMetric(float64(mc.Nanoseconds())/1e3, "confined-us")
			b.ReportMetric(float64(mc)/float64(mb), "ratio")
		})
	}
	Drain()
}

// BenchmarkLayers measures, each alone on a throwaway thread as Start
// applies it, what a workspace-write confinement costs before the fork:
// the thread itself (made, locked, ended), the capability drop, the mount
// namespace (unshare, every mount a read-only slave, the writable
// directories bound read-write) and the Landlock ruleset (built and
// applied); then the fork and exec of true from a thread so confined
// against one from an ordinary goroutine, each waited for. It reports the
// medians in microseconds: the floor of a confined command's extra cost,
// which the bench program quotes.
func BenchmarkLayers(b *testing.B) {
	caps := probed(b, "landlock4", "mountns")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	d := newDirs(b)
	pol, fds, err := openPolicy(d.policy())
	if err != nil {
		b.Fatal(err)
	}
	defer fds.close()
	ly, _, err := plan(pol, Limits{}, caps)
	if err != nil {
		b.Fatal(err)
	}
	ly.fds = fds
	var thread, capDrop, mntns, landlock, confined, plain []time.Duration
	onThread := func(f func()) {
		done := make(chan struct{})
		goLocked(func() {
			defer close(done)
			f()
		})
		<-done
	}
	for b.Loop() {
		t0 := time.Now()
		onThread(func() {})
		thread = append(thread, time.Since(t0))
		var run time.Duration
		onThread(func() {
			t := time.Now()
			if err := dropCaps(); err != nil {
				b.Error(err)
			}
			t1 := time.Now()
			if err := applyMountNS(ly); err != nil {
				b.Error(err)
			}
			t2 := time.Now()
			if err := restrictThread(ly); err != nil {
				b.Error(err)
			}
			t3 := time.Now()
			if err := exec.Command(truePath).Run(); err != nil {
				b.Error(err)
			}
			run = time.Since(t3)
			capDrop, mntns, landlock = append(capDrop, t1.Sub(t)), append(mntns, t2.Sub(t1)), append(landlock, t3.Sub(t2))
		})
		confined = append(confined, run)
		t0 = time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(t0))
	}
	us := func(d []time.Duration) float64 { return float64(median(d).Nanoseconds()) / 1e3 }
	b.ReportMetric(us(thread), "thread-us")
	b.ReportMetric(us(capDrop), "capdrop-us")
	b.ReportMetric(us(mntns), "mntns-us")
	b.ReportMetric(us(landlock), "landlock-us")
	b.ReportMetric(us(confined), "confined-exec-us")
	b.ReportMetric(us(plain), "exec-us")
	Drain()
}

// median returns the median of d.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
