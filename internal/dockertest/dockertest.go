// Package dockertest runs a real Docker for the tests that need a docker
// destination: a dockerd, an image holding a static toolhost and busybox,
// built offline with docker import, and containers without a network.
//
// # The daemon
//
// Start uses a dockerd that already answers on /var/run/docker.sock, and
// otherwise starts one of its own, as a child of the test binary: its own
// data-root and exec-root in a temporary directory, its own socket there,
// its own configuration file (which only moves its trust key out of
// /etc/docker), no bridge and no
// iptables rules, so that it neither reads nor disturbs a user's docker
// and never touches the machine's network. It uses the vfs storage driver
// (see StorageDriver). Every docker command the fixture runs is given the
// daemon's address in DOCKER_HOST, and the commands it hands out for
// destinations carry it as -H, since a server under test gets only a
// minimal environment. The dockerd it started ends when the test's
// cleanups run (SIGTERM, then SIGKILL; it waits until dockerd and the
// containerd it ran are gone, by pid), and on Linux also when the test
// binary ends without cleanups (Pdeathsig), like sshdtest's sshd.
//
// Where Docker cannot run (no docker client, no dockerd, containerd or
// runc, not root, not Linux, no static busybox), the test skips with the
// reason, unless the environment variable CI is set: then it fails, since
// CI installs docker.io and busybox-static (scripts/check.sh).
//
// Start-up on the machines of this project (2 cores shared with other
// tests, Docker 20.10, vfs): dockerd answers in 0.3-0.8 s, Image takes
// 0.4-1.2 s and Run 0.5-1.2 s; BuildToolhost 1.5-4.5 s with a warm build
// cache (about 11 s cold); stopping dockerd and containerd about 1.2 s.
// Each step logs what it took.
//
// # The image and the container
//
// Image writes a tarball, with toolhost at /usr/local/bin/toolhost (it must
// be static: BuildToolhost builds one with CGO_ENABLED=0), busybox at
// /bin/busybox with a symlink for each applet where `busybox --list-full`
// puts it (so /bin/sh, /bin/ps, /bin/sleep), /tmp, /root, the workspace
// /ws, and MarkerFile, a file only the image has, and imports it. Run
// starts a container of it with --network none and --hostname set to its
// name, kept alive by a shell that reaps the orphans it adopts as pid 1,
// as an init would; its cleanup removes it (docker rm -f) and waits until
// its processes are gone.
//
// (*Container).ToolhostArgv and ExecCommand give the command of a
// destination in that container:
//
//	docker -H unix:///tmp/dockertest-…/docker.sock exec -i NAME /usr/local/bin/toolhost --root /ws
//
// and (*Container).Exec runs a command in the container for checks (ps).
//
// # Killing the link mid-command
//
// For the tests of a docker link that dies under a session:
// (*Container).TransportPIDs(parent) lists the `docker … exec -i NAME …`
// clients that are children of parent (the server under test's pid: a
// hub starts each destination's transport as its own child), found in
// /proc by their command name (docker) and their argv (exec and the
// container's name); KillTransport SIGKILLs the one child there must be
// and returns its pid. What follows, as measured here (the fixture's
// TestKillTransportClosesStdin checks the first part): killing the client
// ends the exec's attach, and dockerd closes the exec'd process's stdin;
// Docker itself does not kill an exec'd process when its client goes
// (checked once: an exec of `sleep` lived on). So the far toolhost ends because it
// reads EOF on stdin, and ends its commands as it does at any EOF. Measured
// once through a hub: its handle's toolResult said lost 6 ms after the
// kill, the far toolhost and the command's processes were gone from the
// container 31 ms after it, and the next request started a new `docker
// exec` (a new far toolhost in the same container, whose files under /ws
// are still there) and ran.
package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/daemontest"
)

const (
	// SystemSocket is where a system dockerd listens.
	SystemSocket = "/var/run/docker.sock"
	// StorageDriver is the storage driver of the dockerd Start starts.
	// vfs copies each layer instead of overlaying it, which costs a few
	// tens of megabytes per container of this small image, and works on
	// any backing filesystem. overlay2 works on these machines (ext4),
	// but fails where the temporary directory is itself on overlayfs (a
	// CI job in a container) or on a filesystem without d_type; the tests
	// gain nothing from it.
	StorageDriver = "vfs"

	// startLimit bounds the wait for dockerd to listen.
	startLimit = 60 * time.Second
	// stopLimit bounds the wait for dockerd (and for containerd, and a
	// container's processes) to end before they are killed.
	stopLimit = 20 * time.Second
	// commandLimit bounds each docker command the fixture runs, so that a
	// stuck daemon fails a test instead of hanging it.
	commandLimit = 2 * time.Minute
	// logKeep is how much of dockerd's log LogTail returns, in bytes.
	logKeep = 4000
)

// Daemon is a dockerd the tests can use: one of the system's, or one
// Start started.
type Daemon struct {
	// Host is its address for docker -H and DOCKER_HOST: unix:///….
	Host string
	// Own says Start started it (false: a system dockerd was running).
	Own bool
	// Client is the docker client's path.
	Client string

	dir  string             // the temporary directory of its data, state and socket
	d    *daemontest.Daemon // dockerd, its log, and when it has exited; nil for a system one
	stop sync.Once
}

// Start returns a dockerd for the test: the system's if one answers on
// SystemSocket, else a new one, which the test's cleanup stops. Where
// Docker cannot run it skips the test with the reason, or fails it when CI
// is set; a dockerd that is there but fails to start fails the test.
func Start(t testing.TB) *Daemon {
	t.Helper()
	t0 := time.Now()
	if runtime.GOOS != "linux" {
		Unavailable(t, "dockerd runs only on Linux, not %s", runtime.GOOS)
	}
	client, err := exec.LookPath("docker")
	if err != nil {
		Unavailable(t, "no docker client (apt-get install docker.io): %v", err)
	}
	if d := system(client); d != nil {
		t.Logf("dockertest: using the system dockerd on %s", d.Host)
		return d
	}
	var bins []string
	for _, b := range []string{"dockerd", "containerd", "runc"} {
		p, err := lookPath(b)
		if err != nil {
			Unavailable(t, "no %s (apt-get install docker.io): %v", b, err)
		}
		bins = append(bins, p)
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "no dockerd answers on %s, and starting one needs root", SystemSocket)
	}
	d, err := start(client, bins[0])
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dockerd's log:\n%s", d.LogTail())
		}
		t0 := time.Now()
		d.Stop()
		t.Logf("dockertest: dockerd and its containerd stopped in %v", time.Since(t0).Round(time.Millisecond))
	})
	t.Logf("dockertest: dockerd (storage driver %s) ready on %s in %v", StorageDriver, d.Host, time.Since(t0).Round(time.Millisecond))
	return d
}

// Unavailable skips the test because Docker cannot run here, with the
// reason, or fails it when the environment variable CI is set.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("the docker tests need a working Docker, and CI is set (CI installs docker.io and busybox-static, scripts/check.sh): %s", reason)
	}
	t.Skipf("skipped: the docker tests need a working Docker (apt-get install docker.io busybox-static; with CI set this fails): %s", reason)
}

// lookPath finds a daemon's binary on PATH or in /usr/sbin, where Debian
// puts dockerd and runc and which a user's PATH may lack.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", err
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// system returns the system dockerd when one answers on SystemSocket.
func system(client string) *Daemon {
	if fi, err := os.Stat(SystemSocket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	d := &Daemon{Host: "unix://" + SystemSocket, Client: client}
	if _, err := d.run(context.Background(), 10*time.Second, "version", "--format", "{{.Server.Version}}"); err != nil {
		return nil
	}
	return d
}

// start starts a dockerd of its own in a new temporary directory and
// returns once it answers.
func start(client, dockerd string) (*Daemon, error) {
	// A short path: containerd's socket lies beneath the exec-root, and a
	// unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "dockertest-")
	if err != nil {
		return nil, err
	}
	// A configuration of its own: the system's daemon.json may set what the
	// flags below set too, which dockerd refuses. It only moves the trust
	// key, which dockerd 20.10 would write into /etc/docker, and which has
	// no flag.
	conf := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(conf, []byte(`{"deprecated-key-path": "`+filepath.Join(dir, "key.json")+`"}`+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sock := filepath.Join(dir, "docker.sock")
	d := &Daemon{Host: "unix://" + sock, Own: true, Client: client, dir: dir}
	cmd := exec.Command(dockerd,
		"--host", d.Host,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"--config-file", conf,
		"--storage-driver", StorageDriver,
		// Containers run with --network none: no bridge, and no rules
		// added to the machine's iptables.
		"--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
		// A container Stop ends is stopped with SIGKILL (Run), at once.
		"--shutdown-timeout", "2",
	)
	cmd.SysProcAttr = procAttr()
	dd, listening, err := daemontest.Start(cmd, "API listen on "+sock, logKeep, stopLimit)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting dockerd: %w", err)
	}
	d.d = dd
	timer := time.NewTimer(startLimit)
	defer timer.Stop()
	select {
	case <-listening:
	case <-dd.Exited:
		d.Stop()
		return nil, fmt.Errorf("dockerd exited: %s", d.LogTail())
	case <-timer.C:
		d.Stop()
		return nil, fmt.Errorf("dockerd did not listen within %v: %s", startLimit, d.LogTail())
	}
	// Listening is not yet answering: one real request says it does.
	if out, err := d.run(context.Background(), commandLimit, "version", "--format", "{{.Server.Version}}"); err != nil {
		d.Stop()
		return nil, fmt.Errorf("docker version against the new dockerd: %w: %s\ndockerd's log:\n%s", err, out, d.LogTail())
	}
	return d, nil
}

// LogTail returns the last part of the log of a dockerd Start started.
func (d *Daemon) LogTail() string {
	if d.d == nil {
		return "(a system dockerd: its log is not the fixture's)"
	}
	return d.d.LogTail()
}

// Stop ends a dockerd Start started, with SIGTERM and after stopLimit
// SIGKILL, waits until it and the containerd it ran are gone, and removes
// its directory. For a system dockerd, and when called again, it does
// nothing. The test's cleanup calls it.
func (d *Daemon) Stop() {
	if !d.Own {
		return
	}
	d.stop.Do(func() {
		children := childPIDs(d.d.Cmd.Process.Pid)
		d.d.Stop(stopLimit)
		for _, pid := range children {
			if !awaitGone(pid, stopLimit) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				awaitGone(pid, stopLimit)
			}
		}
		_ = os.RemoveAll(d.dir)
	})
}

// stopped says Stop has stopped a dockerd Start started.
func (d *Daemon) stopped() bool {
	if !d.Own {
		return false
	}
	select {
	case <-d.d.Exited:
		return true
	default:
		return false
	}
}

// Docker runs the docker client against the daemon with args and returns
// its stdout; a failure fails the test, with its stderr.
func (d *Daemon) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.run(context.Background(), commandLimit, args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, d.LogTail())
	}
	return out
}

// run runs the docker client against the daemon, within limit, and
// returns its stdout, or an error with its stderr.
func (d *Daemon) run(ctx context.Context, limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.Client, args...)
	cmd.Env = d.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// env is this process's environment with DOCKER_HOST naming the daemon,
// and nothing else that would choose another daemon.
func (d *Daemon) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "DOCKER_HOST="+d.Host)
}

// randomHex returns n random bytes in hex, for names.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// procStat returns a process's parent, command name and state from
// /proc/PID/stat.
func procStat(pid int) (ppid int, comm string, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", 0, err
	}
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return 0, "", 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, "", 0, errors.New("malformed stat")
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, string(b[open+1 : end]), fields[0][0], err
}

// pids lists the processes in /proc.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// childPIDs lists parent's children.
func childPIDs(parent int) []int {
	var out []int
	for _, pid := range pids() {
		if ppid, _, _, err := procStat(pid); err == nil && ppid == parent {
			out = append(out, pid)
		}
	}
	return out
}

// alive says pid runs: it is in /proc and no zombie.
func alive(pid int) bool {
	_, _, state, err := procStat(pid)
	return err == nil && state != 'Z' && state != 'X'
}

// awaitGone waits up to limit for pid to stop running, polling /proc (a
// process not our child gives no event to wait on), and says whether it
// did.
func awaitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
