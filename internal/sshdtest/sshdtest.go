// Package sshdtest starts a throwaway OpenSSH server on loopback for the
// tests and benchmarks that need a real ssh destination: keys made for it,
// no password, no PAM, a free port on 127.0.0.1, and root let in with the
// key it made. It imports only the standard library and
// internal/daemontest (which owns the running sshd), so that tests and
// programs (the bench is one) can both use it.
package sshdtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/internal/daemontest"
)

// Path is where Debian's openssh-server puts the daemon.
const Path = "/usr/sbin/sshd"

// ErrNotInstalled says that sshd, ssh or ssh-keygen is missing from this
// machine: the caller skips rather than fails, unless it must not.
var ErrNotInstalled = errors.New("openssh is not installed (apt-get install openssh-server)")

// errPortTaken says another process took the port between choosing it and
// sshd's bind.
var errPortTaken = errors.New("the port was taken")

const (
	// startLimit bounds the wait for sshd to listen, so that a broken sshd
	// fails Start instead of hanging it.
	startLimit = 60 * time.Second
	// stopLimit bounds the wait for sshd to end after SIGTERM before it is
	// killed, and the reading of its log after it has ended (the sessions
	// it forked may hold the log's pipe a while longer).
	stopLimit = 10 * time.Second
	// portTries is how many ports Start tries when the one it chose is
	// taken before sshd binds it.
	portTries = 5
	// logKeep is how much of sshd's log LogTail returns, in bytes.
	logKeep = 2000
)

// Server is a running sshd on 127.0.0.1. On Linux it has Pdeathsig, from a
// thread that lives as long as it does, so it ends with the process that
// started it even when Stop is never called (see EndsWithProcess).
type Server struct {
	// Port is the port it listens on, on 127.0.0.1.
	Port int
	// Key is the private key of a user it lets in as root.
	Key string

	d *daemontest.Daemon // sshd, its log, and when it has exited
}

// Start makes keys and a configuration in dir (created if need be) and
// starts sshd in the foreground on a free loopback port, trying another
// port if the one chosen is taken meanwhile. It returns once sshd listens
// and a real `ssh … true` has got in as root. An error wrapping
// ErrNotInstalled says OpenSSH is missing; other errors carry the tail of
// sshd's log where there is one.
func Start(dir string) (*Server, error) {
	return start(dir, FreePort)
}

// start is Start with the choice of port given, for tests.
func start(dir string, pick func() (int, error)) (*Server, error) {
	if _, err := os.Stat(Path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
	}
	if err := writeKeys(dir); err != nil {
		return nil, err
	}
	// The privilege separation directory sshd insists on.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshd needs /run/sshd: %w", err)
	}
	var err error
	for range portTries {
		port, perr := pick()
		if perr != nil {
			return nil, fmt.Errorf("choosing a port for sshd: %w", perr)
		}
		var s *Server
		s, err = run(dir, port)
		if !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
	return nil, fmt.Errorf("sshd: no free port in %d tries: %w", portTries, err)
}

// writeKeys makes dir, a host key and a user key in it, and an
// authorized_keys file that lets the user key in.
func writeKeys(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, k := range []string{"hostkey", "userkey"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "toolhost-test", "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ssh-keygen: %w: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "userkey.pub"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
}

// config is sshd's configuration for port, with the keys in dir.
func config(dir string, port int) string {
	return strings.Join([]string{
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
		// Tests in parallel, and the bench, connect many sessions at once.
		"MaxStartups 200:30:400",
		"MaxSessions 200",
		"LogLevel INFO",
	}, "\n") + "\n"
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts sshd on port with the keys in dir and returns once it
// listens and lets the key in as root. errPortTaken says sshd could not
// bind port.
func run(dir string, port int) (*Server, error) {
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(config(dir, port)), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(Path, "-D", "-e", "-f", conf)
	cmd.SysProcAttr = procAttr()
	d, listening, err := daemontest.Start(cmd, "Server listening on 127.0.0.1 port "+strconv.Itoa(port)+".", logKeep, stopLimit)
	if err != nil {
		return nil, fmt.Errorf("starting sshd: %w", err)
	}
	s := &Server{Port: port, Key: filepath.Join(dir, "userkey"), d: d}
	timer := time.NewTimer(startLimit)
	defer timer.Stop()
	select {
	case <-listening:
	case <-d.Exited:
		if strings.Contains(s.LogTail(), "Address already in use") {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("sshd exited: %s", s.LogTail())
	case <-timer.C:
		s.Stop()
		return nil, fmt.Errorf("sshd did not listen within %v: %s", startLimit, s.LogTail())
	}
	// Listening is not yet letting the key in: one real session says it
	// does.
	if out, err := exec.Command("ssh", append(s.SSHArgs(), "true")...).CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("ssh to the new sshd: %w: %s\nsshd log:\n%s", err, out, s.LogTail())
	}
	return s, nil
}

// SSHArgs are the arguments of ssh(1) to this server up to the remote
// command (see the function SSHArgs).
func (s *Server) SSHArgs() []string {
	return SSHArgs(s.Key, s.Port)
}

// SSHArgs are the arguments of ssh(1) to root@127.0.0.1 on port with key,
// up to the remote command: no terminal, no host key checks, no prompts,
// errors only, and a bounded connect.
func SSHArgs(key string, port int) []string {
	return []string{"-T", "-i", key, "-p", strconv.Itoa(port),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20",
		"root@127.0.0.1"}
}

// Argv is the command that runs remote as root on this server: ssh, its
// arguments, then remote. A destination's transport is Argv followed by
// the far toolhost's command line.
func (s *Server) Argv(remote ...string) []string {
	return append(append([]string{"ssh"}, s.SSHArgs()...), remote...)
}

// LogTail returns the last part of sshd's log (its stderr), for failures.
func (s *Server) LogTail() string {
	return s.d.LogTail()
}

// Stop ends sshd, with SIGTERM and after stopLimit SIGKILL, and waits for
// it and for the reading of its log. Calling it again does nothing.
func (s *Server) Stop() {
	s.d.Stop(stopLimit)
}
