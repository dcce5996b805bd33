package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/capture"
)

// helperEnv switches the test binary into a helper program (see
// TestHelperProcess) instead of running tests.
const helperEnv = "TOOLHOST_PROCESS_TEST_HELPER"

// TestHelperProcess is not a test: run as a child with helperEnv set, the
// test binary becomes a small program whose behaviour a test needs exactly.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process only")
	}
	switch mode {
	case "ignore-term":
		// Ignores SIGTERM, says so, then waits forever.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		// A pending timer keeps the runtime's deadlock detector quiet,
		// which a bare select {} trips when no other goroutine exists.
		for {
			<-time.After(time.Hour)
		}
	case "abandon":
		// Starts a Manager and a sleep, prints the sleep's pid, and dies
		// without Shutdown: Pdeathsig must take the sleep with it.
		m, err := NewManager(Config{ArtifactsDir: os.Args[len(os.Args)-1], BaseEnv: os.Environ()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c, err := m.Start(Spec{Argv: []string{"sleep", os.Args[len(os.Args)-2]}}, Observer{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(c.PID())
		os.Exit(0)
	case "serve-http":
		serveHTTPHelper() // network_linux_test.go
		os.Exit(0)
	}
	os.Exit(3)
}

// helperArgv runs the test binary as helper mode; the env switch goes in
// through Spec.Env, since children see only the allowlist.
func helperSpec(mode string, args ...string) Spec {
	argv := append([]string{helperBin, "-test.run=^TestHelperProcess$", "--"}, args...)
	return Spec{Argv: argv, Env: map[string]*string{helperEnv: ptr(mode)}}
}

func ptr[T any](v T) *T { return &v }

// testLogger sends the package's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestManager returns a Manager with a short grace and the test's
// environment, shut down (and checked) at the end of the test.
func newTestManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if cfg.ArtifactsDir == "" {
		cfg.ArtifactsDir = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// uniqueMark returns a per-test token that tagged processes carry, in
// their environment (TEST_MARK) and in a sleep duration ("1000.<digits>"),
// so a census finds them even when they cleared their environment.
type uniqueMark struct {
	token string // hex digits
	sleep string // a sleep argument unique to the test
}

func newMark(t *testing.T) uniqueMark {
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := uint64(0)
	for _, x := range b {
		n = n<<8 | uint64(x)
	}
	return uniqueMark{token: hex.EncodeToString(b[:]), sleep: fmt.Sprintf("1000.%d", n%1_000_000_000_000)}
}

// env returns a Spec.Env that tags processes with the mark.
func (u uniqueMark) env() map[string]*string {
	return map[string]*string{"TEST_MARK": ptr(u.token)}
}

// census lists live (non-zombie) processes that carry the mark in their
// environment or command line, as "pid cmdline".
func (u uniqueMark) census() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		envb, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		cmdb, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if !bytes.Contains(envb, []byte("TEST_MARK="+u.token)) && !bytes.Contains(cmdb, []byte(u.sleep)) {
			continue
		}
		if procGone(pid) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdb), "\x00", " ")))
	}
	return out
}

// waitFor polls cond until it holds or d passes, and reports whether it
// held. It is an event wait: a ticker loop with a deadline.
func waitFor(d time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// waitCensus waits until at least n tagged processes run.
func waitCensus(t *testing.T, u uniqueMark, n int) {
	t.Helper()
	if !waitFor(10*time.Second, func() bool { return len(u.census()) >= n }) {
		t.Fatalf("want %d tagged processes running, have %q", n, u.census())
	}
}

// assertNoneLeft waits (bounded) for every tagged process to be gone.
func assertNoneLeft(t *testing.T, u uniqueMark) {
	t.Helper()
	var left []string
	if !waitFor(5*time.Second, func() bool { left = u.census(); return len(left) == 0 }) {
		t.Errorf("processes left behind: %q", left)
	}
}

// ourZombies lists zombie children of the test process outside our group
// (orphans the reaper should have collected).
func ourZombies() []int {
	self := os.Getpid()
	own := syscall.Getpgrp()
	var out []int
	for _, pid := range childrenOf(self) {
		if pi, err := readStat(pid); err == nil && pi.state == 'Z' && pi.pgid != own && !isExec(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// waitDone waits (bounded) for c to finish and returns its Result.
func waitDone(t *testing.T, c *Command, d time.Duration) Result {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-c.Done():
		return c.Result()
	case <-timer.C:
		t.Fatalf("command %s (%q) not done after %v", c.ID(), c.steps[0].Argv, d)
		return Result{}
	}
}

// run starts spec and waits for its Result.
func run(t *testing.T, m *Manager, spec Spec) Result {
	t.Helper()
	c, err := m.Start(spec, Observer{})
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Argv, err)
	}
	return waitDone(t, c, 20*time.Second)
}

// outputRecorder collects streamed output and signals when a substring
// shows up.
type outputRecorder struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newOutputRecorder(want string) *outputRecorder {
	return &outputRecorder{want: want, seen: make(chan struct{})}
}

func (r *outputRecorder) onOutput(stream string, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Write(p)
	if strings.Contains(r.buf.String(), r.want) {
		r.once.Do(func() { close(r.seen) })
	}
}

func (r *outputRecorder) wait(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-r.seen:
	case <-timer.C:
		t.Fatalf("output %q never arrived", r.want)
	}
}

func intp(n int) *int { return &n }

func TestStartResults(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	tests := []struct {
		name string
		spec Spec
		want Result
	}{
		{"exit zero", Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2"}},
			Result{Status: StatusCompleted, ExitCode: intp(0), Output: capture.Output{Stdout: "out\n", Stderr: "err\n"}}},
		{"exit code", Spec{Argv: []string{"sh", "-c", "exit 3"}},
			Result{Status: StatusCompleted, ExitCode: intp(3)}},
		{"killed by a signal", Spec{Argv: []string{"sh", "-c", "kill -KILL $$"}},
			Result{Status: StatusCompleted, Signal: "SIGKILL"}},
		{"stdin text", Spec{Argv: []string{"cat"}, Stdin: "hello\n"},
			Result{Status: StatusCompleted, ExitCode: intp(0), Output: capture.Output{Stdout: "hello\n"}}},
		{"stdin empty, never the server's", Spec{Argv: []string{"cat"}, Timeout: 10 * time.Second},
			Result{Status: StatusCompleted, ExitCode: intp(0)}},
		{"dir", Spec{Argv: []string{"pwd"}, Dir: "/"},
			Result{Status: StatusCompleted, ExitCode: intp(0), Output: capture.Output{Stdout: "/\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, m, tt.spec)
			got = Result{Status: got.Status, ExitCode: got.ExitCode, Signal: got.Signal,
				Output: capture.Output{Stdout: got.Output.Stdout, Stderr: got.Output.Stderr}}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResultFields(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Start(Spec{Argv: []string{"echo", "hi"}, Handle: true, Label: "greet"}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitDone(t, c, 10*time.Second)
	if r.CommandID != c.ID() || r.HandleID != c.HandleID() || c.HandleID() == "" {
		t.Errorf("ids: result %q/%q, command %q/%q", r.CommandID, r.HandleID, c.ID(), c.HandleID())
	}
	if !r.StartedAt.Equal(c.StartedAt()) || r.EndedAt.Before(r.StartedAt) || r.Duration != r.EndedAt.Sub(r.StartedAt) {
		t.Errorf("times: started %v ended %v duration %v", r.StartedAt, r.EndedAt, r.Duration)
	}
	if r.Output.OutputPath == "" || r.Output.ByteCount != 3 {
		t.Errorf("output: %+v", r.Output)
	}
	if c.PID() <= 0 || c.PGID() != c.PID() {
		t.Errorf("pid %d pgid %d: want a group led by the child", c.PID(), c.PGID())
	}
	snap := c.Snapshot()
	want := Snapshot{HandleID: c.HandleID(), CommandID: c.ID(), Label: "greet", Status: StatusCompleted,
		PID: c.PID(), Elapsed: r.Duration, UpdatedAt: r.EndedAt, OutputBytes: 3, ExitCode: intp(0)}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("snapshot mismatch (-want +got):\n%s", diff)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noExec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{})
	tests := []struct {
		name      string
		spec      Spec
		sentinel  error
		wantArgv0 string
		reason    string
	}{
		{"empty argv", Spec{}, ErrInvalid, "", ""},
		{"empty argv0", Spec{Argv: []string{""}}, ErrInvalid, "", ""},
		{"argv and steps", Spec{Argv: []string{"true"}, Steps: []Step{{Argv: []string{"true"}}}}, ErrInvalid, "", ""},
		{"empty step argv", Spec{Steps: []Step{{Name: "a"}}}, ErrInvalid, "", ""},
		{"bad env name", Spec{Argv: []string{"true"}, Env: map[string]*string{"A=B": ptr("x")}}, ErrInvalid, "", ""},
		{"relative dir", Spec{Argv: []string{"true"}, Dir: "rel"}, ErrInvalid, "", ""},
		{"missing dir", Spec{Argv: []string{"true"}, Dir: filepath.Join(dir, "missing")}, ErrNotFound, "", ""},
		{"not found", Spec{Argv: []string{"no-such-program-toolhost"}}, ErrSpawn, "no-such-program-toolhost", "not found in the child's PATH"},
		{"not found by path", Spec{Argv: []string{filepath.Join(dir, "missing")}}, ErrSpawn, filepath.Join(dir, "missing"), "not found: file does not exist"},
		{"not executable", Spec{Argv: []string{noExec}}, ErrSpawn, noExec, "not executable"},
		{"a directory", Spec{Argv: []string{dir}}, ErrSpawn, dir, "is a directory"},
		{"relative to dir", Spec{Argv: []string{"./noexec"}, Dir: dir}, ErrSpawn, "./noexec", "not executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := m.Start(tt.spec, Observer{})
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("Start: got %v (command %v), want %v", err, c, tt.sentinel)
			}
			if tt.sentinel != ErrSpawn {
				return
			}
			var se *SpawnError
			if !errors.As(err, &se) {
				t.Fatalf("Start: %v is not a *SpawnError", err)
			}
			if diff := cmp.Diff([]string{tt.wantArgv0, tt.reason}, []string{se.Argv0, se.Reason}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if n := m.runningCount(); n != 0 {
		t.Errorf("failed starts left %d commands running", n)
	}
}

func TestArgv0LookedUpInChildPath(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	tool := filepath.Join(bin, "toolhost-test-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho from-tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{BaseEnv: []string{"PATH=/usr/bin:/bin"}})
	// The server's PATH lacks bin; the child's has it.
	r := run(t, m, Spec{Argv: []string{"toolhost-test-tool"}, Env: map[string]*string{"PATH": ptr(bin + ":/usr/bin:/bin")}})
	if r.Output.Stdout != "from-tool\n" {
		t.Errorf("stdout %q, want from-tool", r.Output.Stdout)
	}
	if _, err := m.Start(Spec{Argv: []string{"toolhost-test-tool"}}, Observer{}); !errors.Is(err, ErrSpawn) {
		t.Errorf("without the child PATH: got %v, want ErrSpawn", err)
	}
	// The server's PATH has sh; a child whose PATH does not cannot run it.
	if _, err := m.Start(Spec{Argv: []string{"sh", "-c", "true"}, Env: map[string]*string{"PATH": ptr(bin)}}, Observer{}); !errors.Is(err, ErrSpawn) {
		t.Errorf("sh outside the child's PATH: got %v, want ErrSpawn", err)
	}
	if _, err := m.Start(Spec{Argv: []string{"sh"}, Env: map[string]*string{"PATH": nil}}, Observer{}); !errors.Is(err, ErrSpawn) {
		t.Errorf("PATH unset: got %v, want ErrSpawn", err)
	}
}

func TestMaxProcesses(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	m := newTestManager(t, Config{MaxProcesses: 2})
	var cmds []*Command
	for range 2 {
		c, err := m.Start(Spec{Argv: []string{"sleep", u.sleep}, Env: u.env()}, Observer{})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	waitCensus(t, u, 2)
	third := newMark(t)
	if _, err := m.Start(Spec{Argv: []string{"sleep", third.sleep}, Env: third.env()}, Observer{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("third Start: got %v, want ErrBusy", err)
	}
	if got := third.census(); len(got) != 0 {
		t.Errorf("a refused Start left processes: %q", got)
	}
	cmds[0].Cancel(0)
	waitDone(t, cmds[0], 10*time.Second)
	c, err := m.Start(Spec{Argv: []string{"true"}}, Observer{})
	if err != nil {
		t.Fatalf("Start after a slot freed: %v", err)
	}
	waitDone(t, c, 10*time.Second)
	cmds[1].Cancel(0)
	waitDone(t, cmds[1], 10*time.Second)
	assertNoneLeft(t, u)
}

func TestHandlesRegistry(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{RecentHandles: 2})
	var ids []string
	for i := range 3 {
		c, err := m.Start(Spec{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(i)}, Handle: true}, Observer{})
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, c, 10*time.Second)
		ids = append(ids, c.HandleID())
	}
	plain, err := m.Start(Spec{Argv: []string{"true"}}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, plain, 10*time.Second)
	if plain.HandleID() != "" {
		t.Errorf("a plain command got handle %q", plain.HandleID())
	}
	u := newMark(t)
	live, err := m.Start(Spec{Argv: []string{"sleep", u.sleep}, Env: u.env(), Handle: true}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Lookup(ids[0]); ok {
		t.Errorf("oldest finished handle %s still queryable beyond RecentHandles", ids[0])
	}
	for i, id := range ids[1:] {
		c, ok := m.Lookup(id)
		if !ok {
			t.Fatalf("Lookup(%s) failed", id)
		}
		if code := c.Result().ExitCode; code == nil || *code != i+1 {
			t.Errorf("handle %s exit code %v, want %d", id, code, i+1)
		}
	}
	if c, ok := m.Lookup(live.HandleID()); !ok || c != live || c.Snapshot().Status != StatusRunning {
		t.Errorf("running handle not found as running")
	}
	var got []string
	for _, c := range m.Handles() {
		got = append(got, c.HandleID())
	}
	if diff := cmp.Diff([]string{ids[1], ids[2], live.HandleID()}, got); diff != "" {
		t.Errorf("Handles mismatch (-want +got):\n%s", diff)
	}
	live.Cancel(0)
	if r := waitDone(t, live, 10*time.Second); r.Status != StatusCancelled || r.Signal != "SIGTERM" {
		t.Errorf("cancelled sleep: status %q signal %q", r.Status, r.Signal)
	}
	assertNoneLeft(t, u)
}

func TestShutdownIdempotentAndClosed(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	dir := t.TempDir()
	arts := filepath.Join(dir, "arts")
	m, err := NewManager(Config{ArtifactsDir: arts, KillGrace: 200 * time.Millisecond, BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Start(Spec{Argv: []string{"sleep", u.sleep}, Env: u.env(), Handle: true}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	waitCensus(t, u, 1)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = m.Shutdown(context.Background()) })
	}
	wg.Wait()
	if diff := cmp.Diff([]error{nil, nil, nil}, errs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("Shutdown errors mismatch (-want +got):\n%s", diff)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Shutdown returned before the command was done")
	}
	if r := c.Result(); r.Status != StatusCancelled {
		t.Errorf("status %q, want cancelled", r.Status)
	}
	if _, err := m.Start(Spec{Argv: []string{"true"}}, Observer{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(arts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("artifacts directory left behind: %v", err)
	}
	assertNoneLeft(t, u)
}

func TestShutdownKeepArtifacts(t *testing.T) {
	t.Parallel()
	arts := filepath.Join(t.TempDir(), "arts")
	m, err := NewManager(Config{ArtifactsDir: arts, KeepArtifacts: true, BaseEnv: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Start(Spec{Argv: []string{"echo", "kept"}}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitDone(t, c, 10*time.Second)
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.Output.OutputPath)
	if err != nil || string(b) != "kept\n" {
		t.Errorf("kept output: %q, %v", b, err)
	}
	// Only the command's directory is kept: the spares prepared for the
	// next commands are gone.
	entries, err := os.ReadDir(arts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{filepath.Base(filepath.Dir(r.Output.OutputPath))}, names); diff != "" {
		t.Errorf("kept artifacts dir (-want +got):\n%s", diff)
	}
}

// TestShutdownContextExpired: a context that ends during the grace cuts
// the grace short; Shutdown still leaves nothing behind and says why.
func TestShutdownContextExpired(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	m, err := NewManager(Config{ArtifactsDir: t.TempDir(), KillGrace: time.Minute, BaseEnv: []string{"PATH=" + os.Getenv("PATH")}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(Spec{Argv: []string{"sh", "-c", "trap '' TERM; sleep " + u.sleep}, Env: u.env()}, Observer{}); err != nil {
		t.Fatal(err)
	}
	waitCensus(t, u, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Shutdown took %v despite its context", d)
	}
	assertNoneLeft(t, u)
}

func TestCancelAfterExitStaysCompleted(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, Config{})
	c, err := m.Start(Spec{Argv: []string{"sh", "-c", "exit 0"}}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	// The process has exited on its own; the supervisor may not have seen
	// it yet when the Cancel lands.
	<-c.procs[0].exited
	c.Cancel(0)
	r := waitDone(t, c, 10*time.Second)
	if r.Status != StatusCompleted || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("status %q exit %v, want completed 0", r.Status, r.ExitCode)
	}
	c.Cancel(0) // idempotent, and harmless after the end
	if got := c.Result().Status; got != StatusCompleted {
		t.Errorf("status after a late Cancel: %q", got)
	}
}

// TestPdeathsig: a server that dies without Shutdown takes its direct
// children with it.
func TestPdeathsig(t *testing.T) {
	t.Parallel()
	u := newMark(t)
	spec := helperSpec("abandon", u.sleep, t.TempDir())
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=abandon")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	if pid <= 0 {
		t.Fatalf("pid %d", pid)
	}
	assertNoneLeft(t, u)
}

func BenchmarkStartTrue(b *testing.B) {
	m, err := NewManager(Config{ArtifactsDir: b.TempDir(), BaseEnv: os.Environ()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	b.ResetTimer()
	for b.Loop() {
		c, err := m.Start(Spec{Argv: []string{"true"}}, Observer{})
		if err != nil {
			b.Fatal(err)
		}
		<-c.Done()
		if r := c.Result(); r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("true: %+v", r)
		}
	}
}

func BenchmarkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStartTrueNoCgroup(b *testing.B) {
	m, err := NewManager(Config{ArtifactsDir: b.TempDir(), BaseEnv: os.Environ(), DisableCgroups: true})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	for b.Loop() {
		c, err := m.Start(Spec{Argv: []string{"true"}}, Observer{})
		if err != nil {
			b.Fatal(err)
		}
		<-c.Done()
	}
}

// TestShutdownWaitsForGoroutines: after Shutdown no goroutine of the
// Manager is left (not parallel: it counts the process's goroutines).
func TestShutdownWaitsForGoroutines(t *testing.T) {
	newManager := func() *Manager {
		m, err := NewManager(Config{ArtifactsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, BaseEnv: []string{"PATH=" + os.Getenv("PATH")}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Warm up what the runtime keeps for good (the os/signal loop).
	if err := newManager().Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	m := newManager()
	u := newMark(t)
	rec := newOutputRecorder("up")
	if _, err := m.Start(Spec{Argv: []string{"sh", "-c", "echo up; (setsid sleep " + u.sleep + " &); sleep " + u.sleep}, Env: u.env(), Handle: true, StreamOutput: true, Timeout: time.Minute}, Observer{OnOutput: rec.onOutput}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(Spec{Steps: []Step{{Name: "a", Argv: []string{"true"}}, {Name: "b", Argv: []string{"sleep", u.sleep}}}, Env: u.env()}, Observer{}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	waitCensus(t, u, 4)
	if during := runtime.NumGoroutine(); during <= before {
		t.Fatalf("goroutines while running %d, before %d: the count cannot see the Manager", during, before)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var after int
	if !waitFor(2*time.Second, func() bool { after = runtime.NumGoroutine(); return after <= before }) {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Shutdown, %d before:\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
	assertNoneLeft(t, u)
}
