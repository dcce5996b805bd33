package cmd

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/toolhost/toolhost/approval"
	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// session is the configuration of one session, as a command line gives
// it: the tools', the connection's and, under MCP, the MCP server's.
type session struct {
	tools tools.Config
	rpc   rpc.Options
	mcp   mcp.Options
}

// session returns the configuration of a session of cl, logging to
// logger; reg reads the registries' hosts when cl wants them.
func (cl *commandLine) session(version string, reg *registries, logger *slog.Logger) session {
	sb := cl.sandbox
	stateDir := cl.stateDir
	// No command reads the state directory (the mounts' caches, the
	// journals, the snapshots) or the secrets file, whatever the flags
	// say; a command's cache there stays its own (sandbox's holding
	// masks). No file door reads the secrets file either.
	sb.Hidden = nil
	if d, err := persist.ResolveDirs(stateDir); err == nil {
		sb.Hidden = append(sb.Hidden, d.State)
	}
	if cl.secrets != nil {
		sb.Hidden = append(sb.Hidden, cl.flags.secrets)
		sb.HiddenFiles = []string{cl.flags.secrets}
	}
	sb.RootCache = func(root string) (string, error) {
		d, err := persist.ResolveDirs(stateDir)
		if err != nil {
			return "", err
		}
		return d.RootCache(root)
	}
	if cl.wantsRegistries() {
		r := reg.start()
		sb.Registries = func(ctx context.Context) []string {
			p := r.wait(ctx)
			if p == nil {
				logger.Warn("network allow-list: the registries' hosts were not read in time; they are not in the list")
			}
			return p
		}
	}
	approvals := cl.approvalsConfig(logger)
	// The grants file is protected wherever a session's root holds it,
	// even a session that uses none: another session trusts it.
	if path, err := approval.DefaultStorePath(func(k string) string { return lookupEnv(sb.Env, k) }); err == nil {
		sb.GrantsDir = filepath.Dir(path)
	}
	cfg := tools.Config{
		Approvals: approvals,
		Mounts:    cl.mountsConfig(),
		SnapshotDir: func() (string, error) {
			d, err := persist.ResolveDirs(stateDir)
			if err != nil {
				return "", err
			}
			return filepath.Join(d.State, "snapshots"), nil
		},
		SnapshotMaxBytes:     int64(cl.snapshotMaxBytes),
		SnapshotExclude:      cl.snapshotExclude,
		Root:                 cl.root,
		ReadRoots:            cl.readRoots,
		ArtifactsDir:         cl.artifactsDir,
		KeepArtifacts:        cl.keepArtifacts,
		ArtifactsCapBytes:    cl.artifactsCap,
		KillGrace:            cl.killGrace,
		DefaultTimeout:       cl.defaultTimeout,
		OutputLimit:          cl.outputLimit,
		MaxMessageBytes:      cl.maxMessageBytes,
		MaxProcesses:         cl.maxProcesses,
		DebugMethods:         cl.debugMethods,
		DisableCgroups:       cl.noCgroups,
		Sandbox:              sb,
		Destinations:         cl.destinations,
		ConnectDestinations:  cl.connectDestinations,
		DestinationBootstrap: cl.destinationBootstrap,
		DestinationRetry:     cl.destinationRetry,
		Version:              version,
		Env:                  sb.Env,
		Logger:               logger,
	}
	opts := rpc.Options{
		Framing:         cl.framing,
		MaxMessageBytes: cl.maxMessageBytes,
		EOFGrace:        cl.eofGrace,
		Version:         version,
		Logger:          logger,
	}
	return session{
		tools: cfg,
		rpc:   opts,
		mcp:   mcp.Options{Version: version, TaskTTL: cl.taskTTL, TaskTTLMax: cl.taskTTLMax},
	}
}

// approvalsConfig is the sessions' asking: --approvals, its timeout, and
// the user's file of always grants, which is left out, with a warning,
// when it cannot be read whole.
func (cl *commandLine) approvalsConfig(logger *slog.Logger) tools.ApprovalsConfig {
	ac := tools.ApprovalsConfig{Deny: cl.approvals == "deny", Timeout: cl.approvalTimeout}
	if ac.Deny {
		return ac
	}
	path, err := approval.DefaultStorePath(func(k string) string { return lookupEnv(cl.sandbox.Env, k) })
	if err == nil {
		ac.Store, err = approval.OpenStore(path)
	}
	if err != nil {
		logger.Warn("approvals: no always grants: the grants file cannot be used", "err", err)
	}
	return ac
}
