package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/internal/sshdtest"
)

// The test binary's sshd (package sshdtest), started by the first
// needSSHD. It runs as a child of the test binary with Pdeathsig, so it
// ends when the binary does, whichever way it ends; its files are in the
// harness's temporary directory, which TestMain removes.
var (
	sshdOnce   sync.Once
	sshdShared *sshdtest.Server
	sshdErr    error
)

// needSSHD returns the test binary's sshd, starting it on first use.
// Where it cannot run, the test skips with the reason, or fails when
// CI=true: CI installs openssh-server (scripts/check.sh).
func needSSHD(t testing.TB) *sshdtest.Server {
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

// startSSHD starts the test binary's sshd, which is never stopped: only
// where it ends with the binary.
func startSSHD() (*sshdtest.Server, error) {
	if !sshdtest.EndsWithProcess {
		return nil, errors.New("the sshd fixture needs Linux (Pdeathsig ends it with the test binary)")
	}
	// In the directory TestMain removes once the tests have run.
	return sshdtest.Start(filepath.Join(filepath.Dir(binary), "sshd"))
}

// destinationArgv is the command that reaches a toolhost on sshd d: the
// binary under test, run by root over ssh, on root.
func destinationArgv(d *sshdtest.Server, root string, extra ...string) []string {
	return d.Argv(append([]string{binary, "--root", root}, extra...)...)
}
