package cmd

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/sandbox"
)

// runHolder runs `toolhost holder`: the process that holds one root's
// persisted sessions. toolhost --persist starts it; its stderr is its log
// file. Each front's command line is parsed here as the front would have
// (parseFrontCommandLine), so a held session is configured as one served
// on stdio.
func runHolder(args []string, stderr io.Writer, version string) int {
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
	reg := registries{log: logger}
	defer reg.stop()
	// configure turns a front's command line into its session's
	// configuration, its log going to logs.
	configure := func(args, env []string, cwd string, logs io.Writer) (*commandLine, session, error) {
		cl, err := parseFrontCommandLine(args, cwd, env)
		if err != nil {
			return nil, session{}, err
		}
		sessionLog, _, err := newLogger(cl.logLevel, "", logs)
		if err != nil {
			return nil, session{}, err
		}
		return cl, cl.session(version, &reg, sessionLog), nil
	}
	return persist.RunHolder(persist.HolderConfig{
		Root: *root, Dirs: persist.Dirs{State: *state, Run: *run}, Build: persist.BuildID(version), Idle: *idle,
		Configure: func(args, env []string, cwd string, logs io.Writer) (persist.SessionConfig, error) {
			cl, s, err := configure(args, env, cwd, logs)
			if err != nil {
				return persist.SessionConfig{}, err
			}
			return persist.SessionConfig{Tools: s.tools, RPC: s.rpc, Linger: cl.linger}, nil
		},
		ConfigureMCP: func(args, env []string, cwd string, logs io.Writer) (persist.MCPConfig, error) {
			cl, s, err := configure(args, env, cwd, logs)
			if err != nil {
				return persist.MCPConfig{}, err
			}
			return persist.MCPConfig{Linger: cl.linger, New: func(inner persist.InnerServer) persist.SharedMCP {
				opts := s.mcp
				opts.Inner, opts.Shared = inner, true
				return mcp.New(s.tools, s.rpc, opts)
			}}, nil
		},
		ListenMCP: listenMCP,
		Logger:    logger, Log: stderr,
	})
}
