// Command toolhost is the safe hands of an agent in a workspace: a JSON-RPC
// 2.0 server on stdio that runs commands, cancels them for real, reads and
// writes files confined to a workspace, and reports progress while work runs.
//
// Usage:
//
//	toolhost [flags]        serve one session on stdin/stdout
//	toolhost demo [flags]   play a short session against a temporary workspace
//
// Run toolhost --help for the flags. Stdout belongs to the protocol: every
// log goes to stderr or --log-file.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/internal/demo"
	"github.com/toolhost/toolhost/rpc"
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
	fs.BoolVar(&f.debugMethods, "debug-methods", false, "also serve debug/panic and debug/sleep, for testing a client or the server itself")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  toolhost [flags]       serve JSON-RPC 2.0 on stdin/stdout\n  toolhost demo [flags]  play a short session against a temporary workspace\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// run is main without the exit, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var f flags
	isDemo := len(args) > 0 && args[0] == "demo"
	if isDemo {
		args = args[1:]
	}
	fs := newFlagSet("toolhost", &f, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
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
	logger, closeLog, err := newLogger(f.logLevel, f.logFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	defer closeLog()

	cfg := tools.Config{
		Root:              f.root,
		ReadRoots:         f.readRoots,
		ArtifactsDir:      f.artifactsDir,
		KeepArtifacts:     f.keepArtifacts,
		ArtifactsCapBytes: f.artifactsCap,
		KillGrace:         f.killGrace,
		DefaultTimeout:    f.defaultTimeout,
		OutputLimit:       f.outputLimit,
		MaxProcesses:      f.maxProcesses,
		DebugMethods:      f.debugMethods,
		DisableCgroups:    f.noCgroups,
		Env:               os.Environ(),
		Logger:            logger,
	}
	opts := rpc.Options{
		Framing:         f.framing,
		MaxMessageBytes: f.maxMessageBytes,
		EOFGrace:        f.eofGrace,
		Version:         version,
		Logger:          logger,
	}
	if isDemo {
		if err := demo.Run(stdout, cfg, opts); err != nil {
			fmt.Fprintf(stderr, "toolhost demo: %v\n", err)
			return 1
		}
		return 0
	}

	srv := tools.NewServer(cfg, opts)
	// A write to a closed stdout must fail with EPIPE, not kill the server
	// before it has killed its children. Notify, not Ignore: an ignored
	// signal would be inherited by every child across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() { // lives as long as the process
		sig := <-sigs
		logger.Info("signal received; ending the session", "signal", sig)
		srv.End("signal " + sig.String())
	}()
	return srv.Serve(stdin, stdout)
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
