package sshdtest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// need starts a Server in a temporary directory with pick choosing its
// ports, and stops it when the test ends. Without OpenSSH the test skips
// with the reason, or fails when CI=true: CI installs openssh-server
// (scripts/check.sh).
func need(t *testing.T, pick func() (int, error)) *Server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the fixture's sshd lets its key in as root, which it can only do when it runs as root")
	}
	s, err := start(t.TempDir(), pick)
	if errors.Is(err, ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sshd fixture's tests need OpenSSH, and CI=true: %v", err)
		}
		t.Skipf("skipped: the sshd fixture's tests need OpenSSH (with CI=true this fails): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop) // before TempDir's removal: cleanups run last first
	return s
}

// TestEchoHello runs a command as root through a real sshd.
func TestEchoHello(t *testing.T) {
	t.Parallel()
	s := need(t, FreePort)
	argv := s.Argv("echo hello; id -un")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || string(out) != "hello\nroot\n" {
		t.Fatalf("ssh … 'echo hello; id -un': %q (%v), want hello and root\nsshd log:\n%s", out, err, s.LogTail())
	}
	if want := "Server listening on 127.0.0.1 port " + strconv.Itoa(s.Port); !strings.Contains(s.LogTail(), want) {
		t.Errorf("sshd's log does not say %q:\n%s", want, s.LogTail())
	}
}

// TestStop ends sshd: its port refuses connections once Stop returns, and
// a second Stop returns too.
func TestStop(t *testing.T) {
	t.Parallel()
	s := need(t, FreePort)
	s.Stop()
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))); err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Stop", s.Port)
	}
	if s.d.Cmd.ProcessState == nil {
		t.Errorf("Stop returned before sshd was reaped")
	}
	s.Stop()
}

// TestPortTaken starts sshd on a port a listener holds: sshd cannot bind
// it, and Start tries another port, which works.
func TestPortTaken(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	var picked []int
	pick := func() (int, error) {
		if len(picked) == 0 {
			picked = append(picked, taken)
			return taken, nil
		}
		p, err := FreePort()
		picked = append(picked, p)
		return p, err
	}
	s := need(t, pick)
	if len(picked) != 2 || s.Port != picked[1] {
		t.Errorf("ports tried %v, listening on %d: want the taken %d, then another", picked, s.Port, taken)
	}
	if out, err := exec.Command("ssh", append(s.SSHArgs(), "true")...).CombinedOutput(); err != nil {
		t.Errorf("ssh to the second port: %v: %s", err, out)
	}
}

// TestSSHArgs pins ssh's options: the integration tests' destinations and
// the bench's ssh figure both run through them.
func TestSSHArgs(t *testing.T) {
	want := []string{"-T", "-i", "/k", "-p", "2222",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20",
		"root@127.0.0.1"}
	if got := SSHArgs("/k", 2222); !slices.Equal(got, want) {
		t.Errorf("SSHArgs:\n got %q\nwant %q", got, want)
	}
	s := &Server{Port: 2222, Key: "/k"}
	if got := s.Argv("echo", "hello"); !slices.Equal(got, slices.Concat([]string{"ssh"}, want, []string{"echo", "hello"})) {
		t.Errorf("Argv: %q", got)
	}
}
