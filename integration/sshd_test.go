package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sshdPath is where Debian's openssh-server puts the daemon.
const sshdPath = "/usr/sbin/sshd"

// sshd is a real OpenSSH server on a free loopback port, started once per
// test binary (on first use) with keys made for it: no password, no PAM.
// It runs as a child of the test binary with Pdeathsig, forked from a
// thread that lives as long as the binary, so it ends when the binary
// does, whichever way it ends; its files are in the harness's temporary
// directory, which TestMain removes.
type sshd struct {
	// Port is the port it listens on, on 127.0.0.1.
	Port int
	// Key is the private key of a user allowed in as root.
	Key string
	// log is its stderr (-e), for failures.
	log *lockedBuffer
}

// The test binary's sshd, started by the first needSSHD.
var (
	sshdOnce   sync.Once
	sshdShared *sshd
	sshdErr    error
)

// needSSHD returns the test binary's sshd, starting it on first use.
// Where it cannot run, the test skips with the reason, or fails when
// CI=true: CI installs openssh-server (scripts/check.sh).
func needSSHD(t testing.TB) *sshd {
	t.Helper()
	sshdOnce.Do(func() { sshdShared, sshdErr = startSSHD() })
	if sshdErr != nil {
		noSSH(t, sshdErr)
	}
	return sshdShared
}

// needSSHClient skips (or, with CI=true, fails) a test without ssh(1).
func needSSHClient(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		noSSH(t, err)
	}
}

// noSSH fails the test when CI=true, else skips it, with the reason.
func noSSH(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("the destination tests need a real sshd (apt-get install openssh-server), and CI=true: %v", err)
	}
	t.Skipf("skipped: the destination tests need a real sshd (apt-get install openssh-server; with CI=true this fails): %v", err)
}

// errPortTaken says another process took the port between choosing it and
// sshd's bind.
var errPortTaken = errors.New("the port was taken")

// startSSHD makes the keys and configuration and starts sshd, trying
// another port if the one chosen was taken meanwhile.
func startSSHD() (*sshd, error) {
	if _, err := sshdAttr(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(sshdPath); err != nil {
		return nil, fmt.Errorf("no %s: %w", sshdPath, err)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, err
		}
	}
	// In the directory TestMain removes once the tests have run.
	dir := filepath.Join(filepath.Dir(binary), "sshd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, k := range []string{"hostkey", "userkey"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "toolhost-test", "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "userkey.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	// The privilege separation directory sshd insists on.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshd needs /run/sshd: %w", err)
	}
	for range 5 {
		d, err := runSSHD(dir)
		if errors.Is(err, errPortTaken) {
			continue
		}
		return d, err
	}
	return nil, fmt.Errorf("sshd: no free port in 5 tries")
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runSSHD starts sshd in the foreground on a free port and returns once it
// listens and lets the test key in as root.
func runSSHD(dir string) (*sshd, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "sshd_config")
	config := strings.Join([]string{
		"Port " + strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(dir, "hostkey"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"PidFile none",
		"StrictModes no",
		"UsePAM no",
		"UseDNS no",
		"PrintMotd no",
		// Tests in parallel connect many sessions at once.
		"MaxStartups 200:30:400",
		"MaxSessions 200",
		"LogLevel INFO",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		return nil, err
	}
	d := &sshd{Port: port, Key: filepath.Join(dir, "userkey"), log: newLockedBuffer()}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", conf)
	cmd.Stdout, cmd.Stderr = w, w
	// Pdeathsig: sshd gets SIGTERM when the thread that forked it ends,
	// which is when the test binary exits (the thread is locked below).
	cmd.SysProcAttr, _ = sshdAttr() // startSSHD checked it
	listening := make(chan struct{})
	exited := make(chan struct{})
	started := make(chan error, 1)
	// The reader of sshd's log: owned by the goroutine below, which waits
	// for it once sshd has exited.
	readLog := func() {
		sc := bufio.NewScanner(r)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.log.Write([]byte(line + "\n"))
			if strings.Contains(line, "Server listening on 127.0.0.1 port "+strconv.Itoa(port)) {
				once.Do(func() { close(listening) })
			}
		}
		r.Close()
	}
	// This goroutine is sshd's owner: it starts sshd on a thread it keeps
	// locked (never unlocked, so the thread, and with it Pdeathsig, lasts
	// until the binary exits), reaps it, and waits for its log reader before closing exited. It
	// ends when sshd does: at the binary's exit, or when sshd fails to
	// start.
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		w.Close() // sshd and its children hold the pipe's write end now
		started <- err
		if err != nil {
			r.Close()
			return
		}
		var logDone sync.WaitGroup
		logDone.Go(readLog)
		_ = cmd.Wait()
		logDone.Wait() // the whole log is read before exited says so
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting sshd: %w", err)
	}
	select {
	case <-listening:
	case <-exited:
		if strings.Contains(d.log.String(), "Address already in use") {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("sshd exited: %s", tail(d.log.String(), 2000))
	case <-time.After(waitLimit):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("sshd did not listen within %v: %s", waitLimit, tail(d.log.String(), 2000))
	}
	// Listening is not yet letting the test's key in: one real session
	// says it does.
	check := exec.Command("ssh", append(d.sshArgs(), "true")...)
	if out, err := check.CombinedOutput(); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("ssh to the test's sshd: %v: %s\nsshd log:\n%s", err, out, tail(d.log.String(), 2000))
	}
	return d, nil
}

// sshArgs are the arguments of ssh(1) up to the remote command: the test
// key, the port, no host key checks, no prompts.
func (d *sshd) sshArgs() []string {
	return sshArgsTo(d.Key, d.Port)
}

// sshArgsTo are the arguments of ssh(1) to root@127.0.0.1:port with key,
// up to the remote command.
func sshArgsTo(key string, port int) []string {
	return []string{"-T", "-i", key, "-p", strconv.Itoa(port),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20",
		"root@127.0.0.1"}
}

// destinationArgv is the command that reaches a toolhost on this sshd:
// the binary under test, run by root over ssh, on root.
func (d *sshd) destinationArgv(root string, extra ...string) []string {
	argv := append([]string{"ssh"}, d.sshArgs()...)
	argv = append(argv, binary, "--root", root)
	return append(argv, extra...)
}
