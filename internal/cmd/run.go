package cmd

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/internal/demo"
	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// Run is the toolhost command: it runs the command line args (without the
// program name) on stdin, stdout and stderr, and returns the code the
// process exits with. version is the server's version.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, version string) (code int) {
	if len(args) > 0 && args[0] == "holder" {
		return runHolder(args[1:], stderr, version)
	}
	if len(args) > 0 && args[0] == "approvals" {
		return runApprovals(args[1:], stdout, stderr)
	}
	cl, err := parseCommandLine(args, "", os.Environ(), stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	if cl.showVersion {
		fmt.Fprintf(stdout, "toolhost %s\n", version)
		return 0
	}
	var dirs persist.Dirs
	if cl.persist {
		if dirs, err = persist.ResolveDirs(cl.stateDir); err != nil {
			fmt.Fprintf(stderr, "toolhost: --persist: %v\n", err)
			return 2
		}
	} else {
		// Measured while the process starts and the client's first
		// message is awaited; a front leaves it to its holder.
		cl.probeSandbox()
	}
	logger, closeLog, err := newLogger(cl.logLevel, cl.logFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	defer closeLog()
	// The code the process exits with (main's os.Exit), which a session's
	// end does not decide alone: an MCP client that closes stdin ends it
	// with 0.
	defer func() { logger.Info("toolhost exits", "exitCode", code) }()
	switch {
	case cl.persist:
		return cl.front(dirs, version, stdin, stdout, stderr, logger)
	case cl.sub == subDemo:
		return cl.demo(version, stdout, stderr, logger)
	case cl.flags.http != "":
		return cl.serveHTTP(version, stderr, logger)
	}
	return cl.serve(bufio.NewReaderSize(stdin, mcp.SniffSize), version, stdout, logger)
}

// demo plays `toolhost demo`.
func (cl *commandLine) demo(version string, stdout, stderr io.Writer, logger *slog.Logger) int {
	reg := registries{log: logger}
	defer reg.stop()
	s := cl.session(version, &reg, logger)
	name, play := "toolhost demo", func() error { return demo.Run(stdout, s.tools, s.rpc) }
	if cl.demoMCP {
		name, play = "toolhost demo --mcp", func() error { return demo.RunMCP(stdout, s.tools, s.rpc, version) }
	}
	if err := play(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// serve serves one session on in and stdout, in this process: toolhost's
// protocol, or MCP under `toolhost mcp` or when the first message is an
// MCP client's. It is the way every session not held by a holder is
// served, a front's that names no root among them.
func (cl *commandLine) serve(in *bufio.Reader, version string, stdout io.Writer, logger *slog.Logger) int {
	reg := registries{log: logger}
	defer reg.stop()
	if cl.wantsRegistries() {
		reg.start() // read while the first message is awaited
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

	defer sweepDeadServers(logger)()

	s := cl.session(version, &reg, logger)
	// The first message decides the protocol: an MCP client's initialize
	// (or server/discover) goes to the MCP server, replayed from the
	// buffer; anything else is toolhost's own protocol, as it always was.
	if cl.sub == subMCP || (cl.framing != rpc.FramingHeader && mcp.IsMCP(in)) {
		ms := mcp.New(s.tools, s.rpc, s.mcp)
		ender.set(ms.End)
		return ms.Serve(in, stdout)
	}
	srv := tools.NewServer(s.tools, s.rpc)
	ender.set(srv.End)
	return srv.Serve(in, stdout)
}

// sweepDeadServers removes, in the background, the private directories
// (artifacts, session cache and TMPDIRs) that servers killed with SIGKILL
// left in the temp dir: alongside the session, so that a large sweep does
// not delay it. The caller waits for it with the function returned
// before it returns.
func sweepDeadServers(logger *slog.Logger) (wait func()) {
	swept := make(chan struct{})
	go func() { // owned by the caller, which waits on swept through wait
		defer close(swept)
		capture.SweepTempDirs("", logger)
	}()
	return func() { <-swept }
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
