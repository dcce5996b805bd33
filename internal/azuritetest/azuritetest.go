// Package azuritetest starts a throwaway Azurite, Microsoft's Azure Storage
// emulator, for the tests that need a real Blob service (objstore/azblob):
// its blob service alone, on a port of 127.0.0.1 it chooses itself, with
// its data in memory, telemetry off, and the emulator's well-known
// development account.
//
// Azurite is an npm package, pinned in this directory's package.json and
// package-lock.json (3.34.0, the last release that runs on Node 20). Its
// node_modules are not committed: `npm ci` in this directory installs them
// (scripts/check.sh does). Without them, or without node, Start skips the
// test with that reason, or fails it when CI=true.
package azuritetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/daemontest"
)

// The emulator's development account, the one every Azurite has
// (learn.microsoft.com, "Use the Azurite emulator": "Connection strings").
const (
	AccountName = "devstoreaccount1"
	AccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

const (
	// startLimit bounds the wait for Azurite to listen (about 1 s on an
	// idle machine, 5 s on a loaded one).
	startLimit = 60 * time.Second
	// stopLimit bounds the wait for Azurite to end after SIGTERM before
	// its process group is killed.
	stopLimit = 10 * time.Second
	// logKeep is how much of Azurite's output LogTail returns, in bytes.
	logKeep = 4000
)

// listening is the line Azurite prints once its blob service accepts
// connections, with the port it was given (it binds port 0 itself, so no
// other process can take the port between a choice and the bind).
var listening = regexp.MustCompile(`Azurite Blob service successfully listens on http://127\.0\.0\.1:(\d+)`)

// Server is a running Azurite blob service on 127.0.0.1.
type Server struct {
	// Port is the port it listens on, on 127.0.0.1.
	Port int
	// Endpoint is its blob endpoint with the account in its path:
	// http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string
	// AccountName and AccountKey are the development account's.
	AccountName, AccountKey string

	d *daemontest.Daemon
}

// Dir is the directory of this package's sources, where package.json is
// and `npm ci` puts node_modules: found from this file's path, or else
// from the module's root above the working directory.
func Dir() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		if dir := filepath.Dir(file); exists(filepath.Join(dir, "package.json")) {
			return dir
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "internal/azuritetest"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if exists(filepath.Join(dir, "go.mod")) {
			return filepath.Join(dir, "internal", "azuritetest")
		}
		if filepath.Dir(dir) == dir {
			return filepath.Join(wd, "internal", "azuritetest")
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ErrNotInstalled says that node or Azurite's npm package is missing.
var ErrNotInstalled = errors.New("azurite is not installed")

// Start starts Azurite's blob service for the test and stops it when the
// test ends. Without node or node_modules it skips the test with the
// reason, or fails it when the environment variable CI is "true" (CI runs
// `npm ci` here: scripts/check.sh).
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartIn(t.TempDir())
	if errors.Is(err, ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Azure Blob tests need Azurite, and CI=true: %v", err)
		}
		t.Skipf("skipped: the Azure Blob tests need Azurite (with CI=true this fails): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop) // before TempDir's removal: cleanups run last first
	return s
}

// StartIn starts Azurite's blob service in the directory dir (its data is
// in memory) and returns once it accepts connections. An error wrapping ErrNotInstalled says
// node or the npm package is missing; the caller ends the Server with
// Stop.
func StartIn(dir string) (*Server, error) {
	bin := filepath.Join(Dir(), "node_modules", ".bin", "azurite-blob")
	if !exists(bin) {
		return nil, fmt.Errorf("%w: no %s (run `npm ci` in %s)", ErrNotInstalled, bin, Dir())
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("%w: %w (Azurite 3.34 runs on Node 20 or later)", ErrNotInstalled, err)
	}
	cmd := exec.Command(bin,
		"--blobHost", "127.0.0.1", "--blobPort", "0",
		"--disableTelemetry", // it would phone home otherwise
		// Blobs and their metadata in memory, which halves the time of
		// a request (Azurite refuses --location with it): nothing is
		// written, and dir is only its working directory.
		"--inMemoryPersistence",
	)
	cmd.Dir = dir
	cmd.SysProcAttr = procAttr()
	d, heard, err := daemontest.Start(cmd, "Azurite Blob service successfully listens on", logKeep, stopLimit)
	if err != nil {
		return nil, fmt.Errorf("starting azurite-blob: %w", err)
	}
	s := &Server{AccountName: AccountName, AccountKey: AccountKey, d: d}
	timer := time.NewTimer(startLimit)
	defer timer.Stop()
	select {
	case <-heard:
	case <-d.Exited:
		return nil, fmt.Errorf("azurite-blob exited before it listened: %s", s.LogTail())
	case <-timer.C:
		s.Stop()
		return nil, fmt.Errorf("azurite-blob did not listen within %v: %s", startLimit, s.LogTail())
	}
	m := listening.FindStringSubmatch(s.LogTail())
	if m == nil {
		s.Stop()
		return nil, fmt.Errorf("azurite-blob said it listens, but not where: %s", s.LogTail())
	}
	s.Port, _ = strconv.Atoi(m[1])
	s.Endpoint = "http://127.0.0.1:" + m[1] + "/" + AccountName
	// The line comes once the socket is bound; a connection says it
	// accepts.
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", m[1]), 10*time.Second)
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("azurite-blob said it listens on %s, but: %w\n%s", m[1], err, s.LogTail())
	}
	c.Close()
	return s, nil
}

// LogTail returns the last part of Azurite's output (its access log
// among it), for failures.
func (s *Server) LogTail() string {
	return s.d.LogTail()
}

// Stop ends Azurite: SIGTERM to its process group and, after stopLimit,
// SIGKILL; it returns once Azurite is reaped. Calling it again does
// nothing.
func (s *Server) Stop() {
	select {
	case <-s.d.Exited:
		return
	default:
	}
	pid := s.d.Cmd.Process.Pid
	// The group's id is Azurite's pid, which stays reserved until it is
	// reaped (Exited).
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	timer := time.NewTimer(stopLimit)
	defer timer.Stop()
	select {
	case <-s.d.Exited:
	case <-timer.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.d.Exited
	}
}
