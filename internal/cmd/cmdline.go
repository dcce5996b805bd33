package cmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/tools"
)

// The subcommands that serve or play a session; `holder` is apart (see
// runHolder).
const (
	subServe = ""     // toolhost [flags]
	subMCP   = "mcp"  // toolhost mcp [flags]
	subDemo  = "demo" // toolhost demo [--mcp] [flags]
)

// commandLine is a toolhost command line, parsed and checked: what every
// way of serving a session (stdio, a front's holder, a front that serves
// alone) builds its session from.
type commandLine struct {
	sub     string   // subServe, subMCP or subDemo
	demoMCP bool     // demo --mcp
	args    []string // the flags as given, after the subcommand: a front hands them to its holder
	flags
	sandbox tools.SandboxConfig
	secrets *mounts.Secrets // --secrets, read and checked; nil without
}

// usageError is a command line the flag package refused (or --help),
// having written why, and the usage, to the usage writer.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// parseCommandLine parses and checks a command line (without the program
// name): `mcp` first gives the agents' defaults. Relative paths are made
// absolute against cwd, unless cwd is "" (the process's own directory);
// "~" in --deny-read is env's $HOME. Any other error is the caller's to
// report. A flag error (or --help, flag.ErrHelp) has
// been written to usage, with the usage, and is a usageError.
func parseCommandLine(args []string, cwd string, env []string, usage io.Writer) (*commandLine, error) {
	cl := &commandLine{}
	if len(args) > 0 && (args[0] == subMCP || args[0] == subDemo) {
		cl.sub, args = args[0], args[1:]
	}
	if cl.sub == subDemo {
		args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
			if a == "--mcp" || a == "-mcp" {
				cl.demoMCP = true
				return true
			}
			return false
		})
	}
	cl.args = args
	f := &cl.flags
	f.defaults(cl.sub == subMCP)
	fs := newFlagSet("toolhost", f, usage)
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "network-allow-registries" && f.registries {
			f.registriesGiven = true
		}
	})
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintf(usage, "toolhost: %v\n", err)
		fs.Usage()
		return nil, usageError{err}
	}
	if cwd != "" {
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
	}
	switch f.framing {
	case rpc.FramingAuto, rpc.FramingHeader, rpc.FramingNDJSON:
	default:
		return nil, fmt.Errorf("--framing must be auto, header or ndjson, not %q", f.framing)
	}
	if f.destinationRetry < 0 {
		return nil, fmt.Errorf("--destination-retry must not be negative, not %d", f.destinationRetry)
	}
	if f.approvals != "ask" && f.approvals != "deny" {
		return nil, fmt.Errorf("--approvals must be ask or deny, not %q", f.approvals)
	}
	if f.approvalTimeout <= 0 {
		return nil, fmt.Errorf("--approval-timeout must be positive, not %v", f.approvalTimeout)
	}
	if f.persist && cl.sub == subDemo {
		return nil, errors.New("--persist is not supported with demo")
	}
	if err := cl.checkHTTP(cwd); err != nil {
		return nil, err
	}
	sb, err := f.sandboxConfig(lookupEnv(env, "HOME"))
	if err != nil {
		return nil, err
	}
	if f.secrets != "" {
		if cwd != "" && !filepath.IsAbs(f.secrets) {
			f.secrets = filepath.Join(cwd, f.secrets)
		}
		if cl.secrets, err = mounts.LoadSecrets(f.secrets); err != nil {
			return nil, fmt.Errorf("--secrets: %w", err)
		}
	}
	if f.mountMaxBytes <= 0 {
		return nil, fmt.Errorf("--mount-max-bytes must be positive, not %d", f.mountMaxBytes)
	}
	sb.Env = env
	cl.sandbox = sb
	return cl, nil
}

// parseFrontCommandLine parses, in a holder, the command line of a front
// that started in cwd with env: the usage goes nowhere, and the error
// says what the front's stderr would have.
func parseFrontCommandLine(args []string, cwd string, env []string) (*commandLine, error) {
	cl, err := parseCommandLine(args, cwd, env, io.Discard)
	if errors.As(err, new(usageError)) {
		return nil, fmt.Errorf("the command line: %v", err)
	}
	return cl, err
}

// lookupEnv returns the value of key in the environment env, or "".
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			v = kv[len(key)+1:] // the last one wins, as in os.Getenv
		}
	}
	return v
}

// wantsRegistries says the sessions' network allow-list takes the
// registries' hosts (--network-allow-registries, by default under
// `toolhost mcp`), which are then read at start.
func (cl *commandLine) wantsRegistries() bool {
	return cl.sandbox.NetworkAllow != nil && cl.registries && cl.sandbox.Mode != tools.SandboxOff
}

// probeSandbox starts measuring, in the background, what the kernel can
// confine, unless nothing will be confined: initialize answers with it,
// and then finds it done.
func (cl *commandLine) probeSandbox() {
	if cl.sandbox.Mode != tools.SandboxOff {
		sandbox.ProbeInBackground()
	}
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
