package cmd

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// frontPeek bounds what a front reads of the first message to learn the
// root: a larger initialize is served without --persist.
const frontPeek = 1 << 20

// front serves the session under --persist: it reads the client's first
// message to learn the root (when --root does not give it) and hands the
// connection to the root's holder (package persist). A first message
// that names no root is served here, without persistence, with a warning.
// An MCP client's connection (`toolhost mcp`, or an MCP first message)
// goes to the holder of --root, else of the current directory, whose
// shared MCP server of this command line serves it.
func (cl *commandLine) front(dirs persist.Dirs, version string, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) int {
	in, okIn := stdin.(*os.File)
	out, okOut := stdout.(*os.File)
	errf, okErr := stderr.(*os.File)
	if !okIn || !okOut || !okErr {
		fmt.Fprintln(stderr, "toolhost: --persist needs stdin, stdout and stderr that are files (pipes, sockets, terminals)")
		return 2
	}
	cwd, _ := os.Getwd()
	br := bufio.NewReaderSize(in, frontPeek)
	var first rpc.FirstMessage
	args, mode := cl.args, ""
	var httpArgs []string
	if cl.flags.http != "" {
		// `toolhost mcp --persist --http`: the holder serves HTTP, and
		// stdin carries nothing. The HTTP flags go apart, so that the
		// shared server is stdio fronts' of the same other flags.
		args, httpArgs = splitHTTPArgs(args)
	} else {
		first = rpc.PeekFirst(br)
	}
	if cl.sub == subMCP || (cl.framing != rpc.FramingHeader && mcp.Opens(first)) {
		mode = persist.ModeMCP
		if cl.sub == subMCP {
			args = append([]string{subMCP}, args...)
		}
	}
	root := cl.root
	switch {
	case root != "":
	case mode == persist.ModeMCP:
		// MCP names no root before its first tools/call: the holder is
		// that of the directory the client started toolhost in, the MCP
		// server's own default.
		root = cwd
	default:
		root = rootOf(first)
	}
	if root == "" {
		logger.Warn("--persist: the first message names no root (and there is no --root); this session is served without persistence")
		alone := *cl
		alone.persist = false
		alone.probeSandbox()
		return alone.serve(br, version, stdout, logger)
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	code, err := persist.Serve(persist.FrontConfig{
		Dirs: dirs, Root: root, Build: persist.BuildID(version),
		Args: args, Env: os.Environ(), Cwd: cwd, HolderArgs: []string{"--log-level", cl.logLevel}, Mode: mode, HTTP: httpArgs,
	}, first.Buffered, in, out, errf)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: --persist: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// rootOf returns the root an initialize names (rootUri, else rootPath),
// or "".
func rootOf(first rpc.FirstMessage) string {
	p := first.Initialize()
	switch {
	case p == nil:
		return ""
	case p.RootURI != nil && *p.RootURI != "":
		path, err := tools.URIPath(*p.RootURI)
		if err != nil {
			return ""
		}
		return path
	case p.RootPath != nil:
		return *p.RootPath
	}
	return ""
}
