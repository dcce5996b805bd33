// Command toolhost is the safe hands of an agent in a workspace: a JSON-RPC
// 2.0 server on stdio that runs commands, cancels them for real, reads and
// writes files confined to a workspace, and reports progress while work runs.
//
// Usage:
//
//	toolhost [flags]        serve one session on stdin/stdout: toolhost's JSON-RPC
//	                        protocol, or MCP when the first message is an MCP
//	                        initialize or server/discover
//	toolhost mcp [flags]    serve the Model Context Protocol on stdin/stdout
//	toolhost demo [flags]   play a short session against a temporary workspace
//	                        (demo --mcp: an MCP session)
//
// Run toolhost --help for the flags. Stdout belongs to the protocol: every
// log goes to stderr or --log-file.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/internal/demo"
	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/tools"
)

// version is the server version; release builds set it with -ldflags.
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	root, framing, artifactsDir, logLevel, logFile string
	readRoots                                      []string
	killGrace, eofGrace, defaultTimeout            time.Duration
	maxProcesses                                   int
	maxMessageBytes, outputLimit, artifactsCap     int64
	keepArtifacts, showVersion, debugMethods       bool
	noCgroups                                      bool

	sandbox, sandboxDefault, sandboxNetwork string
	writable                                []string
	// networkAllow are --network-allow's patterns; registries is
	// --network-allow-registries; protect and denyRead add to the
	// defaults (the agents' under `toolhost mcp`).
	networkAllow      []string
	registries        bool
	registriesGiven   bool // --network-allow-registries on the command line
	protect, denyRead []string
	limitMemory       byteSize
	limitPids         int64
	limitCPU          time.Duration
	debugNoLandlock   bool

	destinations         []hub.Spec
	connectDestinations  bool
	destinationBootstrap bool
	destinationRetry     int
	// taskTTL and taskTTLMax bound how long MCP tasks are kept.
	taskTTL, taskTTLMax time.Duration

	// persist, stateDir and linger: sessions that outlive their
	// connection (package persist).
	persist  bool
	stateDir string
	linger   time.Duration

	// snapshotMaxBytes and snapshotExclude configure the snapshot store.
	snapshotMaxBytes byteSize
	snapshotExclude  []string
}

// byteSize is a flag of bytes: a number with an optional K, M or G suffix
// (powers of 1024).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("not a size in bytes (a number, with K, M or G): %q", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// newFlagSet declares the flags on a set named name.
func newFlagSet(name string, f *flags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.root, "root", "", "the workspace `dir`: commands run and files are read and written only inside it (default: the client's rootUri/rootPath); a client may narrow it, never widen it")
	fs.Func("read-root", "an extra read-only `dir` (repeatable): readable with readFile, never writable; a client may narrow these, never widen them", func(s string) error {
		f.readRoots = append(f.readRoots, s)
		return nil
	})
	fs.StringVar(&f.framing, "framing", rpc.FramingAuto, "message framing: auto (the first byte decides: 'C' for Content-Length headers, '{' or '[' for one JSON value per line), header or ndjson")
	fs.StringVar(&f.artifactsDir, "artifacts-dir", "", "the `dir` that keeps every command's full output (default: a private temporary directory, removed at the end)")
	fs.BoolVar(&f.keepArtifacts, "keep-artifacts", false, "keep the artifacts directory when the session ends")
	fs.Int64Var(&f.artifactsCap, "artifacts-cap-bytes", 1<<30, "the most `bytes` of artifacts kept; the oldest finished commands' output is removed first")
	fs.DurationVar(&f.killGrace, "kill-grace", 2*time.Second, "how long a command has between SIGTERM and SIGKILL when it is cancelled or times out")
	fs.DurationVar(&f.defaultTimeout, "default-timeout", 0, "the timeout of commands that give none (0: none)")
	fs.DurationVar(&f.eofGrace, "eof-grace", 30*time.Second, "how long requests in flight when stdin closes may take to finish before they are cancelled")
	fs.IntVar(&f.maxProcesses, "max-processes", 256, "the most commands running at once; beyond it requests fail with Busy (-32007)")
	fs.Int64Var(&f.maxMessageBytes, "max-message-bytes", 16<<20, "the largest message read, in `bytes`; a larger one is refused with TooLarge (-32006) and the session goes on")
	fs.Int64Var(&f.outputLimit, "output-limit-bytes", 64<<10, "the inline output kept per stream of a command, in `bytes` (head and tail)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&f.logFile, "log-file", "", "write logs to this `file` instead of stderr (never stdout)")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&f.noCgroups, "no-cgroups", false, "do not give commands cgroups of their own even where cgroup v2 allows; descendants are then found by the marker in their environment only")
	fs.StringVar(&f.sandbox, "sandbox", "auto", "confinement of commands by the kernel: auto (confined where the kernel can, with a warning otherwise), required (a command that cannot be confined as asked is refused with SandboxUnavailable, -32010) or off")
	fs.StringVar(&f.sandboxDefault, "sandbox-default", "workspace-write", "the filesystem confinement of a command that asks for none: workspace-write (writes only under the root, its own /tmp (TMPDIR), the root's cache and --writable), read-only (writes only its own /tmp) or full (no filesystem confinement); a client may tighten it, never loosen it")
	fs.StringVar(&f.sandboxNetwork, "sandbox-network", f.sandboxNetwork, "the network of a command that asks for none: on; off (no TCP connect or bind and no UDP outside its own loopback); or allow (a network namespace of its own whose only way out is toolhost's proxy, to the hosts of --network-allow and --network-allow-registries); a client may narrow it, never widen it")
	fs.Func("network-allow", "a `PATTERN` the network allow-list lets through, with --sandbox-network allow: host, *.domain, either with :port, or an IP literal with an optional port (repeatable)", func(s string) error {
		if _, err := netproxy.ParsePattern(s); err != nil {
			return err
		}
		f.networkAllow = append(f.networkAllow, s)
		return nil
	})
	fs.BoolVar(&f.registries, "network-allow-registries", f.registries, "with --sandbox-network allow, also let through the hosts the machine's Go, npm and pip are configured to use (go env GOPROXY GOSUMDB; npm's registry and pip's index, read from their settings files and environment), read at start")
	fs.Func("protect", "a `PATH` in the root a workspace-write command may read but not change (repeatable; **/.git/NAME is NAME in every repository of the root; adds to the defaults: **/.git/hooks and **/.git/config under toolhost mcp)", func(s string) error {
		f.protect = append(f.protect, s)
		return nil
	})
	fs.Func("deny-read", "a `PATH` a confined command cannot read, ~ being $HOME (repeatable; adds to the defaults: ~/.ssh, ~/.aws, ~/.config/gcloud, ~/.kube, ~/.docker, ~/.netrc and ~/.git-credentials under toolhost mcp)", func(s string) error {
		f.denyRead = append(f.denyRead, s)
		return nil
	})
	fs.Func("writable", "an extra `dir` confined commands may write in workspace-write mode (repeatable)", func(s string) error {
		f.writable = append(f.writable, s)
		return nil
	})
	fs.Var(&f.limitMemory, "limit-memory", "the most memory a command's process tree may use, in `bytes` (K, M, G suffixes); 0: none; a client may lower it")
	fs.Int64Var(&f.limitPids, "limit-pids", 0, "the most processes and threads a command's tree may hold at once; 0: none; a client may lower it")
	fs.DurationVar(&f.limitCPU, "limit-cpu", 0, "the most CPU time each process of a command may use (RLIMIT_CPU, whole seconds); 0: none; a client may lower it")
	fs.Func("destination", "`NAME=COMMAND`: a toolhost elsewhere that requests with destination NAME run on, reached through COMMAND's stdin and stdout (split as a shell would, never run by one), e.g. 'build=ssh -T build1 toolhost --root /srv/ws' (repeatable); clients choose among these, never add one", func(s string) error {
		d, err := hub.ParseSpec(s)
		if err != nil {
			return err
		}
		for _, o := range f.destinations {
			if o.Name == d.Name {
				return fmt.Errorf("destination %q given twice", d.Name)
			}
		}
		f.destinations = append(f.destinations, d)
		return nil
	})
	fs.BoolVar(&f.connectDestinations, "connect-destinations", false, "connect every destination at initialize, not at its first use")
	fs.BoolVar(&f.destinationBootstrap, "destination-bootstrap", false, "when a destination has no toolhost (its command exits 127) or another version, install this binary there over the same transport, into ~/.cache/toolhost/VERSION/, and start that; the destination's command must name the far program toolhost")
	fs.IntVar(&f.destinationRetry, "destination-retry", hub.DefaultRetry, "when a destination's transport drops (ssh or docker exec killed, the network gone) and its far toolhost runs with --persist, start its command again up to `COUNT` times (backoff from 100ms, doubling, at most 5s) to resume the far session: its commands go on and their results arrive once; only past these is each handle lost; 0: lose them at once")
	fs.DurationVar(&f.taskTTL, "task-ttl", mcp.DefaultTaskTTL, "MCP: how long a task (a command an MCP client follows as a task) and its result are kept after its creation when the client asks for no ttl; never while its command runs")
	fs.DurationVar(&f.taskTTLMax, "task-ttl-max", mcp.DefaultTaskTTLMax, "MCP: the longest ttl a client may ask a task to be kept for")
	fs.BoolVar(&f.persist, "persist", false, "the session outlives its connection: a transport that ends without shutdown (an editor reload, a crashed agent, a dropped ssh link) detaches it, its commands go on for --linger, and a later toolhost --persist resumes it by sessionId (initializationOptions.resume); its commands are held by a holder process per user and root, which the first toolhost --persist starts; under toolhost mcp, every connection with the same command line reaches the same session and its tasks (by their task ids), and it ends after --linger without one")
	fs.StringVar(&f.stateDir, "state-dir", "", "the `dir` of state that outlives a session: the journals of --persist, the snapshots, and the build caches (Go, npm, pip) kept per root for confined commands (default $XDG_STATE_HOME/toolhost, else ~/.local/state/toolhost); created 0700, and refused if another user owns it or others may enter it")
	f.snapshotMaxBytes = 2 << 30
	fs.Var(&f.snapshotMaxBytes, "snapshot-max-bytes", "the most `bytes` the snapshot store of --state-dir may hold (K, M, G suffixes); a snapshot that would pass it is refused with SnapshotTooLarge (-32031)")
	fs.Func("snapshot-exclude", "a gitignore `PATTERN` left out of every snapshot, besides .git/ (repeatable)", func(s string) error {
		f.snapshotExclude = append(f.snapshotExclude, s)
		return nil
	})
	fs.DurationVar(&f.linger, "linger", 10*time.Minute, "with --persist, how long a detached session's commands go on before they are killed and the session ends")
	fs.BoolVar(&f.debugNoLandlock, "debug-no-landlock", false, "behave as on a kernel without Landlock, for testing --sandbox")
	fs.BoolVar(&f.debugMethods, "debug-methods", false, "also serve debug/panic and debug/sleep, for testing a client or the server itself")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  toolhost [flags]       serve JSON-RPC 2.0 on stdin/stdout (MCP when the first message is an MCP initialize or server/discover)\n  toolhost mcp [flags]   serve the Model Context Protocol on stdin/stdout\n  toolhost demo [flags]  play a short session against a temporary workspace (--mcp: an MCP session)\n  toolhost holder ...    the holder of --persist's sessions, which toolhost --persist starts itself\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// run is main without the exit, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	if len(args) > 0 && args[0] == "holder" {
		return runHolder(args[1:], stderr)
	}
	var f flags
	isDemo := len(args) > 0 && args[0] == "demo"
	isMCP := len(args) > 0 && args[0] == "mcp"
	if isDemo || isMCP {
		args = args[1:]
	}
	demoMCP := false
	if isDemo {
		args = slices.DeleteFunc(args, func(a string) bool {
			if a == "--mcp" || a == "-mcp" {
				demoMCP = true
				return true
			}
			return false
		})
	}
	f.defaults(isMCP)
	fs := newFlagSet("toolhost", &f, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "network-allow-registries" && f.registries {
			f.registriesGiven = true
		}
	})
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolhost: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if f.showVersion {
		fmt.Fprintf(stdout, "toolhost %s\n", version)
		return 0
	}
	switch f.framing {
	case rpc.FramingAuto, rpc.FramingHeader, rpc.FramingNDJSON:
	default:
		fmt.Fprintf(stderr, "toolhost: --framing must be auto, header or ndjson, not %q\n", f.framing)
		return 2
	}
	if f.destinationRetry < 0 {
		fmt.Fprintf(stderr, "toolhost: --destination-retry must not be negative, not %d\n", f.destinationRetry)
		return 2
	}
	sb, err := f.sandboxConfig(os.Getenv("HOME"))
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	var dirs persist.Dirs
	if f.persist {
		if isDemo {
			fmt.Fprintln(stderr, "toolhost: --persist is not supported with demo")
			return 2
		}
		if dirs, err = persist.ResolveDirs(f.stateDir); err != nil {
			fmt.Fprintf(stderr, "toolhost: --persist: %v\n", err)
			return 2
		}
	}
	if sb.Mode != tools.SandboxOff && !f.persist {
		// What the kernel can confine is measured while the process starts
		// and the client's first message is awaited: initialize, which
		// answers with it, then finds it done.
		sandbox.ProbeInBackground()
	}
	logger, closeLog, err := newLogger(f.logLevel, f.logFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	defer closeLog()
	// The code the process exits with (main's os.Exit), which a session's
	// end does not decide alone: an MCP client that closes stdin ends it
	// with 0.
	defer func() { logger.Info("toolhost exits", "exitCode", code) }()
	if f.persist {
		return f.front(args, isMCP, dirs, stdin, stdout, stderr, logger)
	}
	if sb.NetworkAllow != nil && f.registries && sb.Mode != tools.SandboxOff {
		reg := startRegistries(logger)
		defer reg.stop()
		sb.Registries = func(ctx context.Context) []string {
			p := reg.wait(ctx)
			if p == nil {
				logger.Warn("network allow-list: the registries' hosts were not read in time; they are not in the list")
			}
			return p
		}
	}

	cfg, opts := f.sessionConfig(sb, os.Environ(), logger)
	if isDemo && demoMCP {
		if err := demo.RunMCP(stdout, cfg, opts, version); err != nil {
			fmt.Fprintf(stderr, "toolhost demo --mcp: %v\n", err)
			return 1
		}
		return 0
	}
	if isDemo {
		if err := demo.Run(stdout, cfg, opts); err != nil {
			fmt.Fprintf(stderr, "toolhost demo: %v\n", err)
			return 1
		}
		return 0
	}

	// A write to a closed stdout must fail with EPIPE, not kill the server
	// before it has killed its children. Notify, not Ignore: an ignored
	// signal would be inherited by every child across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	var ender sessionEnder
	go func() { // lives as long as the process
		sig := <-sigs
		logger.Info("signal received; ending the session", "signal", sig)
		ender.end("signal " + sig.String())
	}()

	// A server killed with SIGKILL leaves its private directories
	// (artifacts, session cache and TMPDIRs) in the temp dir: remove those
	// of dead servers. Alongside the session, so that a large one does not
	// delay it; run waits for it before it returns.
	swept := make(chan struct{})
	go func() { // owned by run, which waits on swept
		defer close(swept)
		capture.SweepTempDirs("", logger)
	}()
	defer func() { <-swept }()

	// The first message decides the protocol: an MCP client's initialize
	// (or server/discover) goes to the MCP server, replayed from the
	// buffer; anything else is toolhost's own protocol, as it always was.
	in := bufio.NewReaderSize(stdin, mcp.SniffSize)
	if isMCP || (f.framing != rpc.FramingHeader && mcp.IsMCP(in)) {
		ms := mcp.New(cfg, opts, mcp.Options{Version: version, TaskTTL: f.taskTTL, TaskTTLMax: f.taskTTLMax})
		ender.set(ms.End)
		return ms.Serve(in, stdout)
	}
	srv := tools.NewServer(cfg, opts)
	ender.set(srv.End)
	return srv.Serve(in, stdout)
}

// sessionEnder ends the session a signal arrives during. Before one
// serves (while the first message is awaited) no command has started, and
// the process just exits.
type sessionEnder struct {
	mu    sync.Mutex
	endFn func(reason string) // guarded by mu; nil until a session serves
}

// set gives the ender the session's End.
func (e *sessionEnder) set(fn func(string)) {
	e.mu.Lock()
	e.endFn = fn
	e.mu.Unlock()
}

// end ends the session, or the process when none serves yet.
func (e *sessionEnder) end(reason string) {
	e.mu.Lock()
	fn := e.endFn
	e.mu.Unlock()
	if fn == nil {
		os.Exit(1)
	}
	fn(reason)
}

// The agents' defaults, under `toolhost mcp` (BRIEF Parts 3 and 4): the
// hooks and config of every repository in the root are read-only, and the
// usual places of credentials are not readable.
var (
	agentProtect  = []string{"**/.git/hooks", "**/.git/config"}
	agentDenyRead = []string{"~/.ssh", "~/.aws", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.netrc", "~/.git-credentials"}
)

// defaults sets the defaults of the flags that differ under `toolhost
// mcp` (agent): agents are safe by default, builds reach their
// registries and nothing else, and secrets are neither read nor the
// repository's hooks changed.
func (f *flags) defaults(agent bool) {
	f.sandboxNetwork = "on"
	if agent {
		f.sandboxNetwork, f.registries = "allow", true
		f.protect = slices.Clone(agentProtect)
		f.denyRead = slices.Clone(agentDenyRead)
	}
}

// sessionConfig returns the configuration of a session the flags give,
// with env as the server's environment.
func (f *flags) sessionConfig(sb tools.SandboxConfig, env []string, logger *slog.Logger) (tools.Config, rpc.Options) {
	stateDir := f.stateDir
	sb.Env = env
	sb.RootCache = func(root string) (string, error) {
		d, err := persist.ResolveDirs(stateDir)
		if err != nil {
			return "", err
		}
		return d.RootCache(root)
	}
	cfg := tools.Config{
		SnapshotDir: func() (string, error) {
			d, err := persist.ResolveDirs(stateDir)
			if err != nil {
				return "", err
			}
			return filepath.Join(d.State, "snapshots"), nil
		},
		SnapshotMaxBytes:     int64(f.snapshotMaxBytes),
		SnapshotExclude:      f.snapshotExclude,
		Root:                 f.root,
		ReadRoots:            f.readRoots,
		ArtifactsDir:         f.artifactsDir,
		KeepArtifacts:        f.keepArtifacts,
		ArtifactsCapBytes:    f.artifactsCap,
		KillGrace:            f.killGrace,
		DefaultTimeout:       f.defaultTimeout,
		OutputLimit:          f.outputLimit,
		MaxMessageBytes:      f.maxMessageBytes,
		MaxProcesses:         f.maxProcesses,
		DebugMethods:         f.debugMethods,
		DisableCgroups:       f.noCgroups,
		Sandbox:              sb,
		Destinations:         f.destinations,
		ConnectDestinations:  f.connectDestinations,
		DestinationBootstrap: f.destinationBootstrap,
		DestinationRetry:     f.destinationRetry,
		Version:              version,
		Env:                  env,
		Logger:               logger,
	}
	opts := rpc.Options{
		Framing:         f.framing,
		MaxMessageBytes: f.maxMessageBytes,
		EOFGrace:        f.eofGrace,
		Version:         version,
		Logger:          logger,
	}
	return cfg, opts
}

// sandboxConfig checks the sandbox and limit flags; home is the server's
// $HOME, for "~" in --deny-read.
func (f *flags) sandboxConfig(home string) (tools.SandboxConfig, error) {
	c := tools.SandboxConfig{
		Mode:       f.sandbox,
		Filesystem: protocol.SandboxFilesystem(f.sandboxDefault),
		Writable:   f.writable,
		NoLandlock: f.debugNoLandlock,
	}
	switch f.sandbox {
	case tools.SandboxAuto, tools.SandboxRequired, tools.SandboxOff:
	default:
		return c, fmt.Errorf("--sandbox must be auto, required or off, not %q", f.sandbox)
	}
	switch c.Filesystem {
	case protocol.SandboxWorkspaceWrite, protocol.SandboxReadOnly, protocol.SandboxFull:
	default:
		return c, fmt.Errorf("--sandbox-default must be workspace-write, read-only or full, not %q", f.sandboxDefault)
	}
	switch f.sandboxNetwork {
	case "on":
		c.Network = true
	case "off":
	case "allow":
		c.Network = true
		c.NetworkAllow = append([]string{}, f.networkAllow...)
	default:
		return c, fmt.Errorf("--sandbox-network must be on, off or allow, not %q", f.sandboxNetwork)
	}
	if f.sandboxNetwork != "allow" && len(f.networkAllow) > 0 {
		return c, fmt.Errorf("--network-allow needs --sandbox-network allow, not %s", f.sandboxNetwork)
	}
	if f.sandboxNetwork != "allow" && f.registriesGiven {
		return c, fmt.Errorf("--network-allow-registries needs --sandbox-network allow, not %s", f.sandboxNetwork)
	}
	c.Protect, c.DenyRead = f.protect, f.denyRead
	c.Home = home
	for _, d := range f.writable {
		if !filepath.IsAbs(d) {
			return c, fmt.Errorf("--writable must be an absolute path, not %q", d)
		}
	}
	switch {
	case f.limitPids < 0:
		return c, fmt.Errorf("--limit-pids must not be negative")
	case f.limitCPU < 0:
		return c, fmt.Errorf("--limit-cpu must not be negative")
	}
	c.Limits = sandbox.Limits{MemoryBytes: int64(f.limitMemory), Pids: f.limitPids, CPU: f.limitCPU}
	if c.Mode == tools.SandboxOff && c.Limits != (sandbox.Limits{}) {
		// Limits are applied by the sandbox; never claim them unenforced.
		return c, fmt.Errorf("--limit-memory, --limit-pids and --limit-cpu need --sandbox auto or required, not off")
	}
	return c, nil
}

// newLogger returns the logger for --log-level and --log-file.
func newLogger(level, file string, stderr io.Writer) (*slog.Logger, func(), error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, nil, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", level)
	}
	w, closeFn := stderr, func() {}
	if file != "" {
		lf, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot open the log file: %w", err)
		}
		w, closeFn = lf, func() { lf.Close() }
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv})), closeFn, nil
}
