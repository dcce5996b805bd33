package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/tools"
)

// frontPeek bounds what a front reads of the first message to learn the
// root: a larger initialize is served without --persist.
const frontPeek = 1 << 20

// front serves the session under --persist: it reads the client's first
// message to learn the root (when --root does not give it) and hands the
// connection to the root's holder (package persist). A first message
// that names no root is served here, without persistence, with a warning.
// An MCP client's connection (isMCP: `toolhost mcp`; or an MCP first
// message) goes to the holder of --root, else of the current directory,
// whose shared MCP server of this command line serves it.
func (f *flags) front(args []string, isMCP bool, dirs persist.Dirs, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) int {
	in, okIn := stdin.(*os.File)
	out, okOut := stdout.(*os.File)
	errf, okErr := stderr.(*os.File)
	if !okIn || !okOut || !okErr {
		fmt.Fprintln(stderr, "toolhost: --persist needs stdin, stdout and stderr that are files (pipes, sockets, terminals)")
		return 2
	}
	br := bufio.NewReaderSize(in, frontPeek)
	prefix := peekFirst(br)
	cwd, _ := os.Getwd()
	mode := ""
	if isMCP || (f.framing != rpc.FramingHeader && mcp.IsMCP(br)) {
		// MCP names no root before its first tools/call: the holder is
		// that of --root, else of the directory the client started
		// toolhost in, the MCP server's own default.
		mode = persist.ModeMCP
		if isMCP {
			args = append([]string{"mcp"}, args...)
		}
	}
	root := f.root
	if root == "" && mode == persist.ModeMCP {
		root = cwd
	}
	if root == "" {
		root = rootOf(prefix)
	}
	if root != "" {
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real
		}
	}
	if root == "" {
		logger.Warn("--persist: the first message names no root (and there is no --root); this session is served without persistence")
		g := *f
		g.persist = false
		sb, _ := g.sandboxConfig(os.Getenv("HOME"))
		if sb.Mode != tools.SandboxOff {
			sandbox.ProbeInBackground()
		}
		cfg, opts := g.sessionConfig(sb, os.Environ(), logger)
		return tools.NewServer(cfg, opts).Serve(br, stdout)
	}
	var holderArgs []string
	holderArgs = append(holderArgs, "--log-level", f.logLevel)
	code, err := persist.Serve(persist.FrontConfig{
		Dirs: dirs, Root: root, Build: persist.BuildID(version),
		Args: args, Env: os.Environ(), Cwd: cwd, HolderArgs: holderArgs, Mode: mode,
	}, prefix, in, out, errf)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: --persist: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// peekFirst returns every byte buffered once br holds the first whole
// message (or its input ended, or the buffer is full), reading nothing
// more than the client sent.
func peekFirst(br *bufio.Reader) []byte {
	for {
		b, _ := br.Peek(br.Buffered())
		if persistFirstWhole(b) || len(b) >= br.Size() {
			return slices.Clone(b)
		}
		// More is needed: wait for at least one more byte.
		if _, err := br.Peek(len(b) + 1); err != nil {
			b, _ = br.Peek(br.Buffered())
			return slices.Clone(b)
		}
	}
}

// persistFirstWhole reports whether b holds a whole first message.
func persistFirstWhole(b []byte) bool {
	return persist.FirstMessage(b) != nil
}

// rootOf returns the root an initialize in prefix names (rootUri, else
// rootPath), or "".
func rootOf(prefix []byte) string {
	body := persist.FirstMessage(prefix)
	var m struct {
		Method string                    `json:"method"`
		Params protocol.InitializeParams `json:"params"`
	}
	if body == nil || json.Unmarshal(body, &m) != nil || m.Method != protocol.MethodInitialize {
		return ""
	}
	p := m.Params
	if p.RootURI != nil && *p.RootURI != "" {
		if path, err := tools.URIPath(*p.RootURI); err == nil {
			return path
		}
		return ""
	}
	if p.RootPath != nil {
		return *p.RootPath
	}
	return ""
}

// runHolder runs `toolhost holder`: the process that holds one root's
// persisted sessions. toolhost --persist starts it; its stderr is its log
// file.
func runHolder(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolhost holder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "the root whose sessions it holds")
	state := fs.String("state-dir", "", "the state directory")
	run := fs.String("run-dir", "", "the directory of its socket and lock")
	level := fs.String("log-level", "info", "log level")
	idle := fs.Duration("idle", 2*time.Second, "how long it waits without sessions before it exits")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *root == "" || *state == "" || *run == "" {
		fmt.Fprintln(stderr, "toolhost holder: --root, --state-dir and --run-dir are required; toolhost --persist starts it")
		return 2
	}
	logger, closeLog, err := newLogger(*level, "", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost holder: %v\n", err)
		return 2
	}
	defer closeLog()
	sandbox.ProbeInBackground()
	var reg holderRegistries
	defer reg.stop()
	return persist.RunHolder(persist.HolderConfig{
		Root: *root, Dirs: persist.Dirs{State: *state, Run: *run}, Build: persist.BuildID(version), Idle: *idle,
		Configure: func(args, env []string, cwd string, logs io.Writer) (persist.SessionConfig, error) {
			sc, _, err := configureSession(args, env, cwd, logs, &reg, logger)
			return sc, err
		},
		ConfigureMCP: func(args, env []string, cwd string, logs io.Writer) (persist.MCPConfig, error) {
			sc, f, err := configureSession(args, env, cwd, logs, &reg, logger)
			if err != nil {
				return persist.MCPConfig{}, err
			}
			return persist.MCPConfig{Linger: sc.Linger, New: func(inner persist.InnerServer) persist.SharedMCP {
				return mcp.New(sc.Tools, sc.RPC, mcp.Options{Version: version, TaskTTL: f.taskTTL, TaskTTLMax: f.taskTTLMax, Inner: inner, Shared: true})
			}}, nil
		},
		Logger: logger, Log: stderr,
	})
}

// configureSession turns a front's command line into its session's
// configuration, and its flags, as run would for a session it served
// itself: `mcp` first gives the agents' defaults. Relative paths are the
// front's directory's.
func configureSession(args, env []string, cwd string, logs io.Writer, reg *holderRegistries, holderLog *slog.Logger) (persist.SessionConfig, *flags, error) {
	var f flags
	agent := len(args) > 0 && args[0] == "mcp"
	if agent {
		args = args[1:]
	}
	f.defaults(agent)
	var msgs bytes.Buffer
	fs := newFlagSet("toolhost", &f, &msgs)
	if err := fs.Parse(args); err != nil {
		return persist.SessionConfig{}, nil, fmt.Errorf("the command line: %v", err)
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "network-allow-registries" && f.registries {
			f.registriesGiven = true
		}
	})
	abs := func(p string) string {
		if p != "" && !filepath.IsAbs(p) {
			return filepath.Join(cwd, p)
		}
		return p
	}
	f.root, f.artifactsDir = abs(f.root), abs(f.artifactsDir)
	for i := range f.readRoots {
		f.readRoots[i] = abs(f.readRoots[i])
	}
	home := ""
	for _, kv := range env {
		if v, ok := cutEnv(kv, "HOME"); ok {
			home = v
		}
	}
	sb, err := f.sandboxConfig(home)
	if err != nil {
		return persist.SessionConfig{}, nil, err
	}
	logger, _, err := newLogger(f.logLevel, "", logs)
	if err != nil {
		return persist.SessionConfig{}, nil, err
	}
	if sb.NetworkAllow != nil && f.registries && sb.Mode != tools.SandboxOff {
		r := reg.get(holderLog)
		sb.Registries = func(ctx context.Context) []string { return r.wait(ctx) }
	}
	cfg, opts := f.sessionConfig(sb, env, logger)
	return persist.SessionConfig{Tools: cfg, RPC: opts, Linger: f.linger}, &f, nil
}

// cutEnv returns the value of key in an environment entry kv.
func cutEnv(kv, key string) (string, bool) {
	if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
		return kv[len(key)+1:], true
	}
	return "", false
}

// holderRegistries reads the registries' hosts once for every session of
// a holder, at the first that needs them.
type holderRegistries struct {
	once sync.Once
	r    *registries
}

func (h *holderRegistries) get(log *slog.Logger) *registries {
	h.once.Do(func() { h.r = startRegistries(log) })
	return h.r
}

func (h *holderRegistries) stop() {
	h.once.Do(func() {})
	if h.r != nil {
		h.r.stop()
	}
}
