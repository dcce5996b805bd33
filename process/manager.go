package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/sandbox"

	"github.com/sourcegraph/conc"

	"github.com/toolhost/toolhost/capture"
)

// Sentinel errors. Errors from this package wrap one of them; test with
// errors.Is.
var (
	// ErrSpawn says an executable could not be started; such errors are
	// *SpawnError values that name argv[0] and the reason.
	ErrSpawn = errors.New("spawn failed")
	// ErrBusy says MaxProcesses commands already run; nothing was started.
	ErrBusy = errors.New("too many running commands")
	// ErrNotFound says the working directory does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid says a Spec or Config is malformed. A Spec's argv and env
	// are refused with an *InvalidError that names the field.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed says the Manager has been shut down.
	ErrClosed = errors.New("process manager is shut down")
)

// SpawnError says why argv[0] could not be started. It matches ErrSpawn
// with errors.Is and unwraps to the underlying cause.
type SpawnError struct {
	Argv0  string
	Reason string // e.g. "not found in the child's PATH", "is a directory"
	Err    error
}

func (e *SpawnError) Error() string {
	return fmt.Sprintf("spawn %q: %s", e.Argv0, e.Reason)
}

// Unwrap returns the cause.
func (e *SpawnError) Unwrap() error { return e.Err }

// Is makes every *SpawnError match ErrSpawn.
func (e *SpawnError) Is(target error) bool { return target == ErrSpawn }

// Statuses of a command.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusTimedOut  = "timedOut"
	StatusCancelled = "cancelled"
	// StatusFailed ends a command that Reserve made whose start failed
	// (Abort, or Launch's error): nothing of it ran; Result.Err says why.
	StatusFailed = "failed"
)

// The timeouts that end a command (Result.TimeoutReason).
const (
	TimeoutDeadline   = "deadline"   // Spec.Timeout
	TimeoutInactivity = "inactivity" // Spec.InactivityTimeout
)

// Statuses of a step (StepResult.Status; StepEvent.Status uses start, done,
// fail and skip).
const (
	StepStart     = "start"
	StepDone      = "done"
	StepFail      = "fail"
	StepSkip      = "skip"
	StepCancelled = "cancelled"
	StepRunning   = "running"
)

// Defaults for zero Config fields.
const (
	DefaultKillGrace     = 2 * time.Second
	DefaultOutputLimit   = 64 << 10
	DefaultMaxProcesses  = 256
	DefaultRecentHandles = 256
)

// Timings of the end of a command.
const (
	// stepDrain is how long a recipe waits, after a step exits, for its
	// pipes to reach EOF before it flushes and starts the next step (a
	// step may leave a background process holding them; it lives on until
	// the command ends).
	stepDrain = 100 * time.Millisecond
	// finalDrain is how long the end of a command waits for EOF after its
	// tree is killed before it closes the pipes itself: a process nothing
	// could attribute may still hold them.
	finalDrain = 500 * time.Millisecond
	// finalDrainMax bounds how long pipes that keep bringing output, but
	// whose pumps do not wait on the client, are drained after the tree
	// is killed.
	finalDrainMax = 30 * time.Second
)

// Config configures a Manager. Zero fields take the documented defaults.
type Config struct {
	// ArtifactsDir holds output artifacts; it is created (0700) if missing,
	// and "" makes a temporary directory.
	ArtifactsDir      string
	ArtifactsCapBytes int64
	// KeepArtifacts keeps ArtifactsDir at Shutdown.
	KeepArtifacts bool
	// TempRoot holds the temporary directories of confined commands
	// (Spec.Confine); "" makes a private one, removed at Shutdown.
	TempRoot string
	// KillGrace is the time between SIGTERM and SIGKILL (default 2s).
	KillGrace time.Duration
	// DefaultTimeout applies when Spec.Timeout is 0; 0 means none.
	DefaultTimeout time.Duration
	// OutputLimit is the inline bytes per stream (default 64 KiB).
	OutputLimit int
	// MaxProcesses bounds the commands running at once (default 256).
	MaxProcesses int
	// EnvAllow adds names or path.Match patterns (FOO, MY_*) to the
	// environment allowlist.
	EnvAllow []string
	// BaseEnv is the server's environment (os.Environ() in production).
	BaseEnv []string
	// RecentHandles bounds the finished handles kept queryable (default 256).
	RecentHandles int
	// FirstID is the number after which commands and handles are
	// numbered: a session a later server took over keeps its handles'
	// ids apart from those of the server before.
	FirstID uint64
	// DisableCgroups keeps commands out of cgroups even where a writable
	// cgroup2 hierarchy exists; descendants are then attributed by their
	// TOOLHOST_COMMAND marker only.
	DisableCgroups bool
	// Logger receives the package's logs (default: discard).
	Logger *slog.Logger
}

// Manager starts and tracks the commands of one session.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	allow envAllowList
	// baseEnv is cfg.BaseEnv filtered through allow, computed once:
	// read-only, each command copies it before adding its own variables.
	baseEnv map[string]string
	// nonce makes this session's TOOLHOST_COMMAND markers unique.
	nonce     string
	artifacts *capture.Artifacts
	// subreaper says the server is a child subreaper, so orphans are found
	// by walking its children; otherwise /proc is scanned for markers.
	subreaper bool
	reg       *registry
	// cgs is the session's cgroup directory, nil when cgroups are off;
	// cgOff turns them off for good after the kernel refused one.
	cgs   *cgroupSession
	cgOff atomic.Bool

	// wg owns every command's supervisor and the reaper loop; Shutdown
	// waits for it.
	wg conc.WaitGroup
	// inflight counts Start calls past the closed check; Shutdown waits for
	// it before wg, so no supervisor joins wg after Shutdown's Wait began.
	inflight sync.WaitGroup
	// reaperStop stops the reaper loop; closed by Shutdown.
	reaperStop chan struct{}
	// urgent is closed when Shutdown's context expires: ladders skip the
	// rest of their grace.
	urgent     chan struct{}
	urgentOnce sync.Once

	// tmp is Config.TempRoot, or a private directory made at the first
	// confined command (tmpMade) and removed by Shutdown; guarded by
	// tmpOnce.
	tmpOnce sync.Once
	tmp     string
	tmpMade bool
	// tmpFree are emptied temporary directories of ended commands, ready
	// for the next ones (a new directory inode costs far more than
	// emptying one); tmpSeq names new ones. Guarded by tmpMu.
	tmpMu   sync.Mutex
	tmpFree []string
	tmpSeq  int

	mu sync.Mutex // guards the fields below
	// running holds commands from Start's reservation until their Result
	// is final; len(running) <= cfg.MaxProcesses.
	running map[*Command]struct{}
	// nextID numbers commands and handles.
	nextID uint64
	// closed is set by Shutdown; Start fails with ErrClosed after it.
	closed bool

	shutdownOnce sync.Once
	shutdownDone chan struct{}
	shutdownErr  error // written before shutdownDone is closed
}

// subreaperOnce makes the process a subreaper once; subreaperErr keeps why
// it failed.
var (
	subreaperOnce sync.Once
	subreaperErr  error
)

// NewManager validates cfg, makes the server a child subreaper (Linux),
// prepares the artifacts directory and starts the orphan reaper.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.KillGrace < 0 || cfg.DefaultTimeout < 0 || cfg.OutputLimit < 0 || cfg.MaxProcesses < 0 || cfg.RecentHandles < 0 || cfg.ArtifactsCapBytes < 0 {
		return nil, fmt.Errorf("negative limit in config: %w", ErrInvalid)
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.OutputLimit == 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	if cfg.MaxProcesses == 0 {
		cfg.MaxProcesses = DefaultMaxProcesses
	}
	if cfg.RecentHandles == 0 {
		cfg.RecentHandles = DefaultRecentHandles
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	allow, err := newEnvAllowList(cfg.EnvAllow)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	m := &Manager{
		cfg:          cfg,
		nextID:       cfg.FirstID,
		log:          cfg.Logger,
		allow:        allow,
		baseEnv:      allow.filter(cfg.BaseEnv),
		nonce:        hex.EncodeToString(b[:]),
		reg:          newRegistry(cfg.RecentHandles),
		reaperStop:   make(chan struct{}),
		urgent:       make(chan struct{}),
		running:      make(map[*Command]struct{}),
		shutdownDone: make(chan struct{}),
	}
	if m.cfg.ArtifactsDir == "" {
		dir, err := capture.MkdirTemp("", cfg.KeepArtifacts)
		if err != nil {
			return nil, fmt.Errorf("artifacts directory: %w", err)
		}
		m.cfg.ArtifactsDir = dir
	} else if err := os.MkdirAll(m.cfg.ArtifactsDir, 0o700); err != nil {
		return nil, fmt.Errorf("artifacts directory: %w", err)
	}
	m.artifacts, err = capture.NewArtifacts(m.cfg.ArtifactsDir, cfg.ArtifactsCapBytes, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	subreaperOnce.Do(func() { subreaperErr = setChildSubreaper() })
	m.subreaper = subreaperErr == nil
	if subreaperErr != nil {
		m.log.Warn("not a child subreaper: orphans are found by scanning for markers only", "err", subreaperErr)
	}
	if !cfg.DisableCgroups {
		if m.cgs, err = newCgroupSession(m.nonce); err != nil {
			m.log.Debug("no cgroups: attributing descendants by marker only", "err", err)
			m.cgs = nil
		}
	}
	m.wg.Go(func() { reaperLoop(m.reaperStop) })
	return m, nil
}

// cgroups returns the session's cgroup directory, or nil.
func (m *Manager) cgroups() *cgroupSession {
	if m.cgs == nil || m.cgOff.Load() {
		return nil
	}
	return m.cgs
}

// disableCgroups stops putting new commands in cgroups.
func (m *Manager) disableCgroups(id string) {
	if !m.cgOff.Swap(true) {
		m.log.Warn("the kernel refused to fork into a cgroup; attributing descendants by marker only", "command", id)
	}
}

// ArtifactsDir returns the artifacts directory, absolute with symlinks
// resolved.
func (m *Manager) ArtifactsDir() string { return m.artifacts.Dir() }

// Spec describes a command to start.
type Spec struct {
	// Argv is the program and its arguments, never run through a shell.
	// Exactly one of Argv and Steps is set.
	Argv []string
	// Dir is the working directory: absolute, already confined by the
	// caller; "" is the server's.
	Dir string
	// Env overrides the allowlisted environment; a nil value unsets.
	Env map[string]*string
	// Stdin is the text every step reads on stdin; "" is an empty stdin.
	Stdin string
	// Timeout bounds the whole command; 0 takes Config.DefaultTimeout.
	Timeout time.Duration
	// InactivityTimeout ends the command as Timeout does once no byte has
	// arrived on its stdout, stderr or events pipe for that long; 0 is
	// none.
	InactivityTimeout time.Duration
	// OutputLimit is the inline bytes per stream; 0 takes Config.OutputLimit.
	OutputLimit int
	// Label names the command for people; "" defaults to the argv (or the
	// step names) joined by spaces.
	Label string
	// Steps makes a recipe: each step runs as its own process, in order.
	Steps []Step
	// Handle registers the command as a handle (longRunning).
	Handle bool
	// StreamOutput passes output to Observer.OnOutput.
	StreamOutput bool
	// Confine confines every step by the kernel (package sandbox); nil runs
	// them unconfined.
	Confine *Confinement
	// Pty runs every step (unless its Step.Pty says otherwise) in a
	// pseudo-terminal of this size; the zero Winsize, none. A step under
	// a terminal leads a session of its own, with the terminal as its
	// controlling terminal, stdin, stdout and stderr; its output goes to
	// the capture's stdout, and streams as "pty". TERM is xterm-256color
	// unless Env or the step's Env sets it.
	Pty Winsize
	// OpenStdin gives every step without a terminal a stdin pipe that
	// WriteInput writes (Stdin must then be empty).
	OpenStdin bool
	// StdoutJSONL reads stdout as JSON lines: each line that is a JSON
	// object goes to Observer.OnEvent (the pump waits for it), the others
	// to OnOutput as plain output; the artifact keeps every byte.
	StdoutJSONL bool
	// MaxEventBytes is the longest line passed to OnEvent; longer ones
	// are counted, not passed on. 0 is 16 MiB.
	MaxEventBytes int
	// ProgressPath is the command's progress file, which the caller writes;
	// Result and Snapshot carry it.
	ProgressPath string
	// WatchPorts reports the TCP ports the command's tree listens on to
	// Observer.OnPort, looking every portScanEvery while it runs.
	WatchPorts bool
}

// Confinement is how a command's processes are confined. Each process gets
// Policy (or its step's) with TempDir set to the command's own temporary
// directory, which the Manager makes before the first fork, passes as
// TMPDIR unless Env sets it, and removes when the command has ended.
type Confinement struct {
	Policy sandbox.Policy
	Limits sandbox.Limits
	// Require refuses to run a step with less confinement than asked: the
	// spawn fails with an error wrapping sandbox.ErrUnavailable.
	Require bool
	// Caps is the kernel probe to plan with; nil is sandbox's own.
	Caps *sandbox.Capabilities
	// DefaultEnv sets variables the environment lacks after the allowlist
	// and the Spec's and step's overrides.
	DefaultEnv map[string]string
	// Network, if set, limits the network to this allow-list, whatever
	// the policies say: every step gets a network namespace of its own
	// whose only way out is a proxy of its own (package netproxy, served
	// by the Manager on a listener inside it, named by the proxy
	// variables of the step's environment), and Result.Network counts
	// what they let through and refused. Where no such namespace can be
	// made the step runs with the network off (Require refuses). Nil: the
	// policies' Network decides.
	Network *netproxy.AllowList
	// Proxy tunes each step's proxy; the zero value takes the defaults of
	// ProxyLimits.
	Proxy ProxyLimits
	// NetworkAsk, with Network set, is what the proxy of each step asks
	// about a host:port the allow-list does not name, with the handle id
	// of the command (its command id before it has one); nil refuses as
	// before. It is netproxy.Config.Ask with the id: it is called while
	// the proxy holds the connection, and must return when ctx ends (the
	// step's end).
	NetworkAsk func(ctx context.Context, handleID, host string, port int) netproxy.Verdict
}

// Step is one step of a recipe. Dir and Env default to the Spec's; Env is
// applied on top of the Spec's.
type Step struct {
	Name            string
	Argv            []string
	Dir             string
	Env             map[string]*string
	ContinueOnError bool
	// Policy, if set, confines this step instead of Spec.Confine's policy
	// (its limits and Require still apply). Ignored without Spec.Confine.
	Policy *sandbox.Policy
	// Pty, if set, is this step's terminal instead of Spec.Pty (a zero
	// Winsize: none).
	Pty *Winsize
}

// Observer receives a command's events. Each callback may be nil; they are
// called from the command's goroutines, one at a time per command, and must
// not block for long.
type Observer struct {
	OnStep func(StepEvent)
	// OnHeartbeat is coalesced: at most about one call per second per
	// command; the Snapshot always holds the latest state.
	OnHeartbeat func(HeartbeatEvent)
	// OnOutput receives output only when Spec.StreamOutput is set.
	OnOutput func(stream string, data []byte)
	// OnEvent receives each JSON object line of a Spec.StdoutJSONL stdout,
	// in order, from the pump that read it: it may block, and the pump
	// (and so the child) waits. It must not retain line.
	OnEvent func(line []byte)
	// OnPort receives the ports of a Spec.WatchPorts command as they open
	// and close.
	OnPort func(PortEvent)
}

// StepEvent is a step transition. Index is 1-based, Total 0 when unknown.
// Elapsed is the step's own running time: 0 at start, its duration at the
// end.
type StepEvent struct {
	Step, Status string
	Index, Total int
	Elapsed      time.Duration
	TS           time.Time
}

// HeartbeatEvent says a step is alive. Elapsed is the heartbeat's own
// figure when the child gave one, else the time since the step (or the
// command) started.
type HeartbeatEvent struct {
	Step    string
	Elapsed time.Duration
}

// Result is a finished command.
type Result struct {
	CommandID, HandleID string
	Status              string // completed | timedOut | cancelled | failed
	// Err is why a command that Reserve made never started (Status
	// failed): Abort's error, or Launch's. Nil for any other status.
	Err error
	// TimeoutReason is TimeoutDeadline or TimeoutInactivity when Status is
	// timedOut, else "".
	TimeoutReason string
	// ExitCode is nil when a signal ended the process; Signal then names it.
	// A recipe reports the last step that ran.
	ExitCode  *int
	Signal    string
	StartedAt time.Time
	EndedAt   time.Time
	Duration  time.Duration
	Output    capture.Output
	// Steps are a recipe's steps, or the steps the child reported with
	// markers.
	Steps []StepResult
	// Sandbox is what confined the first process; nil when unconfined.
	Sandbox *sandbox.Report
	// LimitExceeded is the limit the command hit first, or "".
	LimitExceeded sandbox.Limit
	// Events counts a Spec.StdoutJSONL stdout's lines; nil otherwise.
	Events *EventCounts
	// Network is what the proxies of a command with a network allow-list
	// (Confinement.Network) let through and refused, summed over its
	// steps; nil without an allow-list.
	Network *netproxy.Stats
	// NetworkAllow is that allow-list's patterns; nil without one.
	NetworkAllow []string
	// ProgressPath is Spec.ProgressPath.
	ProgressPath string
}

// StepResult is one step of a finished command. ExitCode is nil for steps
// that did not run, were reported by markers, or were ended by a signal.
type StepResult struct {
	Name     string
	Status   string // done | fail | skip | cancelled | running
	Duration time.Duration
	ExitCode *int
	// Sandbox is what confined the step's process; nil when it did not run
	// or was unconfined.
	Sandbox *sandbox.Report
}

// Snapshot is a command's progress at one moment.
type Snapshot struct {
	HandleID, CommandID, Label string
	Status                     string // running | completed | timedOut | cancelled
	PID                        int
	CurrentStep, TotalSteps    int
	StepName                   string
	Elapsed                    time.Duration
	UpdatedAt, LastHeartbeatAt time.Time
	OutputBytes                int64
	ExitCode                   *int
	// Pty is the running step's terminal size, zero when it has none.
	Pty Winsize
	// Ports are the ports the command's tree listens on (WatchPorts).
	Ports []Port
	// ProgressPath is Spec.ProgressPath.
	ProgressPath string
	// InputOpen says WriteInput reaches the running step.
	InputOpen bool
}

// Start validates spec and starts it: the first (or only) process is forked
// before Start returns, the rest runs in the background. Beyond
// MaxProcesses running commands it fails with ErrBusy and starts nothing.
func (m *Manager) Start(spec Spec, obs Observer) (*Command, error) {
	steps, err := m.validate(&spec)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if len(m.running) >= m.cfg.MaxProcesses {
		m.mu.Unlock()
		return nil, fmt.Errorf("%d commands are running: %w", len(m.running), ErrBusy)
	}
	m.nextID++
	seq := m.nextID
	c := newCommand(m, seq, spec, steps, obs)
	m.running[c] = struct{}{}
	m.inflight.Add(1)
	m.mu.Unlock()
	defer m.inflight.Done()

	first, err := c.begin()
	if err != nil {
		m.mu.Lock()
		delete(m.running, c)
		m.mu.Unlock()
		return nil, err
	}
	close(c.ready) // before it is shared: the fields begin set are
	if spec.Handle {
		m.reg.add(c)
	}
	m.wg.Go(func() { c.supervise(first) })
	return c, nil
}

// validate checks spec, fills its defaults and returns its steps (a plain
// command is one unnamed step).
func (m *Manager) validate(spec *Spec) ([]Step, error) {
	if spec.Timeout < 0 || spec.OutputLimit < 0 || spec.InactivityTimeout < 0 {
		return nil, fmt.Errorf("negative timeout or output limit: %w", ErrInvalid)
	}
	if spec.Timeout == 0 {
		spec.Timeout = m.cfg.DefaultTimeout
	}
	if spec.OutputLimit == 0 {
		spec.OutputLimit = m.cfg.OutputLimit
	}
	if err := checkEnvOverrides("env", spec.Env); err != nil {
		return nil, err
	}
	if spec.StdoutJSONL && spec.MaxEventBytes <= 0 {
		spec.MaxEventBytes = 16 << 20
	}
	if (spec.Pty.On() || spec.OpenStdin) && spec.Stdin != "" {
		return nil, &InvalidError{Field: "stdin", Reason: "a command with pty or openStdin takes its input from writeInput"}
	}
	var steps []Step
	prefix := ""
	switch {
	case len(spec.Steps) > 0 && len(spec.Argv) > 0:
		return nil, &InvalidError{Field: "steps", Reason: "give argv or steps, not both"}
	case len(spec.Steps) > 0:
		steps = append([]Step(nil), spec.Steps...)
	default:
		steps = []Step{{Argv: spec.Argv}}
	}
	for i := range steps {
		s := &steps[i]
		if len(spec.Steps) > 0 {
			prefix = fmt.Sprintf("steps[%d].", i)
		}
		if err := checkArgv(prefix+"argv", s.Argv); err != nil {
			return nil, err
		}
		if err := checkEnvOverrides(prefix+"env", s.Env); err != nil {
			return nil, err
		}
		if s.Dir == "" {
			s.Dir = spec.Dir
		}
		if s.Name == "" && len(spec.Steps) > 0 {
			s.Name = "step" + strconv.Itoa(i+1)
		}
		if err := checkDir(s.Dir); err != nil {
			return nil, err
		}
	}
	if spec.Label == "" {
		if len(spec.Steps) > 0 {
			names := make([]string, len(steps))
			for i, s := range steps {
				names[i] = s.Name
			}
			spec.Label = strings.Join(names, ", ")
		} else {
			spec.Label = strings.Join(spec.Argv, " ")
		}
	}
	return steps, nil
}

// checkDir accepts "" (the server's directory) or an existing absolute
// directory.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("working directory %q is not absolute: %w", dir, ErrInvalid)
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("working directory %q: %w", dir, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("working directory %q: %v: %w", dir, err, ErrInvalid)
	}
	if !fi.IsDir() {
		return fmt.Errorf("working directory %q is not a directory: %w", dir, ErrInvalid)
	}
	return nil
}

// Lookup finds a running or recently finished handle.
func (m *Manager) Lookup(handleID string) (*Command, bool) {
	return m.reg.lookup(handleID)
}

// Handles returns the running and recently finished handles by start time.
func (m *Manager) Handles() []*Command {
	return m.reg.list()
}

// runningCount returns how many commands are running.
// Running counts the commands that run now.
func (m *Manager) Running() int { return m.runningCount() }

func (m *Manager) runningCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.running)
}

// finished removes c from the running set; the supervisor calls it once the
// Result is final and before Done is closed.
func (m *Manager) finished(c *Command) {
	m.mu.Lock()
	delete(m.running, c)
	m.mu.Unlock()
	if c.HandleID() != "" {
		m.reg.finish(c)
	}
}

// Shutdown ends the session: it cancels every command (TERM, KillGrace,
// KILL), waits for them and every goroutine of the Manager, kills the
// session's remaining orphans, and removes the artifacts unless
// KeepArtifacts. When ctx expires first, the grace is cut short, Shutdown
// still waits (the ladders are bounded) and returns ctx's error. It is
// idempotent: later calls wait for the first and return its error.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.shutdownOnce.Do(func() {
		defer close(m.shutdownDone)
		m.shutdownErr = m.shutdown(ctx)
	})
	<-m.shutdownDone
	return m.shutdownErr
}

func (m *Manager) shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.inflight.Wait() // every started supervisor is in wg now

	m.mu.Lock()
	cmds := make([]*Command, 0, len(m.running))
	for c := range m.running {
		cmds = append(cmds, c)
	}
	m.mu.Unlock()
	for _, c := range cmds {
		c.Cancel(m.cfg.KillGrace)
	}

	var errs []error
	allDone := make(chan struct{})
	stopWatch := make(chan struct{})
	var watch conc.WaitGroup // owner of the context watcher; waited below
	watch.Go(func() {
		select {
		case <-ctx.Done():
			m.urgentOnce.Do(func() { close(m.urgent) })
		case <-stopWatch:
		}
	})
	go func() { // closes allDone; ends when the last command does
		for _, c := range cmds {
			<-c.Done()
		}
		close(allDone)
	}()
	<-allDone
	close(stopWatch)
	watch.Wait()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}

	// Whatever the commands' own sweeps missed (a descendant that cleared
	// its environment, or that a command's sweep could not attribute) is
	// the session's: kill every orphan and every marker of this session.
	m.killSessionOrphans()
	if m.cgs != nil {
		if err := m.cgs.remove(); err != nil {
			m.log.Warn("removing the session's cgroup", "err", err)
		}
	}

	close(m.reaperStop)
	if rec := m.wg.WaitAndRecover(); rec != nil {
		errs = append(errs, fmt.Errorf("goroutine panicked: %v", rec.Value))
	}
	sandbox.Drain()         // every confining thread has returned
	m.tmpOnce.Do(func() {}) // no directory is made from here on
	if m.tmpMade {
		if err := os.RemoveAll(m.tmp); err != nil {
			errs = append(errs, fmt.Errorf("remove the temporary directories: %w", err))
		}
	}
	m.artifacts.Close() // the spares go, and the goroutine making them
	if !m.cfg.KeepArtifacts {
		if err := m.artifacts.RemoveAll(); err != nil {
			errs = append(errs, fmt.Errorf("remove artifacts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// killSessionOrphans kills every process re-parented to the server and
// every process that carries this session's marker.
func (m *Manager) killSessionOrphans() {
	prefix := m.nonce + "/"
	t := killTarget{
		groups: func() []int { return nil },
		find: func() []int {
			var out []int
			for _, r := range orphanRoots() {
				// Orphans of another Manager in the same process carry
				// its nonce; an orphan without a marker cleared its
				// environment and is taken as ours.
				if mk := procMarker(r); mk == "" || strings.HasPrefix(mk, prefix) {
					out = append(out, r)
					out = subtree(r, out)
				}
			}
			return append(out, scanMarkers(func(s string) bool { return strings.HasPrefix(s, prefix) })...)
		},
	}
	if !killLadder(t, 0, false, m.urgent) {
		m.log.Warn("session processes survived SIGKILL")
	}
}

// tmpRoot returns the directory that holds confined commands' temporary
// directories.
func (m *Manager) tmpRoot() string {
	m.tmpOnce.Do(func() {
		m.tmp = m.cfg.TempRoot
		if m.tmp != "" {
			return
		}
		dir, err := capture.MkdirOwned("", capture.KindTmp)
		if err != nil {
			m.tmp = os.TempDir()
			m.log.Warn("no private directory for temporary directories", "err", err)
			return
		}
		m.tmp, m.tmpMade = dir, true
	})
	return m.tmp
}

// maxFreeTmp bounds the emptied temporary directories kept for reuse.
const maxFreeTmp = 16

// takeTmp returns an empty temporary directory, mode 0700, for a confined
// command: an emptied one of an ended command, else a new one.
func (m *Manager) takeTmp() (string, error) {
	root := m.tmpRoot()
	m.tmpMu.Lock()
	if n := len(m.tmpFree); n > 0 {
		dir := m.tmpFree[n-1]
		m.tmpFree = m.tmpFree[:n-1]
		m.tmpMu.Unlock()
		return dir, nil
	}
	m.tmpSeq++
	dir := filepath.Join(root, "t"+strconv.Itoa(m.tmpSeq))
	m.tmpMu.Unlock()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// giveTmp takes back a temporary directory whose command has ended and
// whose processes are all gone: it is emptied and its mode reset, then kept
// for the next command, or removed when enough are kept or it cannot be
// emptied.
func (m *Manager) giveTmp(dir string) {
	keep := m.emptyDir(dir) == nil && os.Chmod(dir, 0o700) == nil
	m.tmpMu.Lock()
	if keep && len(m.tmpFree) < maxFreeTmp {
		m.tmpFree = append(m.tmpFree, dir)
		m.tmpMu.Unlock()
		return
	}
	m.tmpMu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		m.log.Warn("removing a temporary directory", "dir", dir, "err", err)
	}
}

// emptyDir removes everything in dir, never following a symlink out.
func (m *Manager) emptyDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, n)))
	}
	return errors.Join(errs...)
}

// InvalidError says which field of a Spec is malformed and why. It matches
// ErrInvalid. Field is named as the wire names it: "argv", "argv[2]",
// "env.NAME", "steps[1].argv".
type InvalidError struct {
	Field, Reason string
}

// Error names the field and the reason.
func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// checkArgv checks a command's argv: the one place argv is checked.
func checkArgv(field string, argv []string) error {
	if len(argv) == 0 {
		return &InvalidError{Field: field, Reason: "required: the command and its arguments"}
	}
	if argv[0] == "" {
		return &InvalidError{Field: field + "[0]", Reason: "the command must not be empty"}
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return &InvalidError{Field: fmt.Sprintf("%s[%d]", field, i), Reason: "must not contain a NUL byte"}
		}
	}
	return nil
}
