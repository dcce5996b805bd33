package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// Initialize sets the session up in three steps: it checks every option
// the client gives before it opens anything (checkInitialize), opens the
// workspace, the artifacts directory, the confinement and the process
// manager, all undone if one of them fails (openSession), then installs
// them and answers (initializeResult). A refused initialize leaves
// nothing open: under --persist the holder of a session lives for days,
// and the client may be refused any number of times.
func (t *Tools) Initialize(ctx context.Context, s *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	set, err := t.checkInitialize(s, p)
	if err != nil {
		return nil, err
	}
	o, err := t.openSession(s, set)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.ws, t.mgr = o.ws, o.mgr
	t.outputLimit = set.outputLimit
	t.killGrace = set.killGrace
	t.artifacts = o.artifacts
	t.conf = o.conf
	t.asks = t.newAsks(s, o.conf)
	t.mounts = o.mounts
	t.createdAt = time.Now().UTC()
	t.mu.Unlock()
	return t.initializeResult(ctx, s, o, set.outputLimit), nil
}

// settings are what an initialize asks for, checked: the command line's
// defaults where the client gives none.
type settings struct {
	opts           *protocol.InitializationOptions // never nil
	root           string
	readRoots      []string
	killGrace      time.Duration
	defaultTimeout time.Duration
	outputLimit    int64
	mounts         []mounts.Spec // the session's mounts, checked
}

// checkInitialize checks what an initialize asks for before anything is opened: the
// roots (each resolved through a workspace closed at once), the durations
// and limits, and the destinations, which it gives the hub.
func (t *Tools) checkInitialize(s *rpc.Session, p *protocol.InitializeParams) (*settings, error) {
	set := &settings{opts: p.InitializationOptions, killGrace: t.cfg.KillGrace, defaultTimeout: t.cfg.DefaultTimeout, outputLimit: t.cfg.OutputLimit}
	if set.opts == nil {
		set.opts = &protocol.InitializationOptions{}
	}
	opts := set.opts
	if opts.Resume != nil {
		// A server that persists answers a resume before it reaches here.
		return nil, sessionNotFound(opts.Resume.SessionID, protocol.SessionNoPersist,
			"session not found: this server was not started with --persist, so no session outlives its connection")
	}
	var err error
	if set.root, err = t.chooseRoot(p); err != nil {
		return nil, err
	}
	if set.readRoots, err = t.chooseReadRoots(set.root, opts.ReadRoots); err != nil {
		return nil, err
	}
	if opts.KillGraceMs != nil {
		if *opts.KillGraceMs < 0 {
			return nil, protocol.InvalidParams("initializationOptions.killGraceMs", "must not be negative")
		}
		set.killGrace = msDuration(*opts.KillGraceMs)
	}
	if opts.DefaultTimeoutMs != nil {
		if *opts.DefaultTimeoutMs < 0 {
			return nil, protocol.InvalidParams("initializationOptions.defaultTimeoutMs", "must not be negative")
		}
		set.defaultTimeout = msDuration(*opts.DefaultTimeoutMs)
	}
	if opts.OutputLimitBytes != nil {
		if *opts.OutputLimitBytes <= 0 || *opts.OutputLimitBytes > maxOutputLimit {
			return nil, protocol.InvalidParams("initializationOptions.outputLimitBytes", "must be between 1 and %d", maxOutputLimit)
		}
		set.outputLimit = *opts.OutputLimitBytes
	}
	if set.mounts, err = t.checkMounts(opts); err != nil {
		return nil, err
	}
	caps := protocol.ClientCapabilities{}
	if p.Capabilities != nil {
		caps = *p.Capabilities
	}
	// The hub holds nothing open: a later refusal needs no undoing here,
	// and the client's next initialize configures it again.
	if err := t.hub.Configure(s, caps, opts.Sandbox, opts.Destinations); err != nil {
		return nil, err
	}
	return set, nil
}

// opened is what Initialize opens for a session.
type opened struct {
	artifacts *artifactsDir
	ws        *workspace.Workspace
	conf      *confinement
	mgr       *process.Manager
	mounts    *sessionMounts
}

// openSession opens the artifacts directory, the workspace, the confinement and
// the process manager set asks for. If one fails, it undoes the others
// before it returns.
func (t *Tools) openSession(s *rpc.Session, set *settings) (_ *opened, err error) {
	o := &opened{}
	defer func() {
		if err != nil {
			if o.ws != nil {
				o.ws.Close()
			}
			o.conf.remove()
			o.artifacts.remove(false)
			if o.mgr != nil {
				o.mgr.Shutdown(context.Background())
			}
		}
	}()
	opts := set.opts
	if o.artifacts, err = openArtifactsDir(t.cfg.ArtifactsDir, opts.ArtifactsDir, t.cfg.KeepArtifacts); err != nil {
		return nil, err
	}
	if o.ws, err = workspace.Open(workspace.Config{Root: set.root, ReadRoots: set.readRoots, ArtifactsDir: o.artifacts.path}); err != nil {
		return nil, initError("rootUri", err)
	}
	if o.conf, err = newConfinement(t.cfg.Sandbox, o.ws, opts.Sandbox); err != nil {
		return nil, err
	}
	pol, err := o.conf.filePolicy(t.cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	if err = o.ws.SetPolicy(pol); err != nil {
		return nil, err
	}
	var allow []string
	if opts.Env != nil {
		allow = opts.Env.Allow
	}
	o.mgr, err = process.NewManager(process.Config{
		ArtifactsDir:      o.ws.ArtifactsDir(),
		ArtifactsCapBytes: t.cfg.ArtifactsCapBytes,
		KeepArtifacts:     t.cfg.KeepArtifacts || (t.cfg.ArtifactsDir == "" && opts.ArtifactsDir != ""),
		KillGrace:         set.killGrace,
		DefaultTimeout:    set.defaultTimeout,
		OutputLimit:       int(set.outputLimit),
		MaxProcesses:      t.cfg.MaxProcesses,
		EnvAllow:          allow,
		BaseEnv:           t.cfg.Env,
		DisableCgroups:    t.cfg.DisableCgroups,
		TempRoot:          o.conf.tmpRoot(),
		FirstID:           t.cfg.FirstID,
		Logger:            newClientLog(t.log, s),
	})
	if err != nil {
		if errors.Is(err, process.ErrInvalid) {
			return nil, protocol.InvalidParams("initializationOptions.env.allow", "%v", err)
		}
		return nil, fmt.Errorf("cannot start the process manager: %w", err)
	}
	o.conf.measure()
	if err := o.conf.canHideSecrets(t.cfg.Sandbox); err != nil {
		return nil, err
	}
	if o.mounts, err = t.openMounts(o.ws, o.conf, set.mounts, opts.Manifest); err != nil {
		return nil, err
	}
	return o, nil
}

// initializeResult is initialize's answer for the session o opened, once installed;
// it warns the client of commands that run unconfined, and connects the
// destinations when the command line asks it to.
func (t *Tools) initializeResult(ctx context.Context, s *rpc.Session, o *opened, outputLimit int64) *protocol.InitializeResult {
	sandboxCap := o.conf.capability()
	if o.conf.mode == SandboxAuto && !sandboxCap.Available {
		s.LogMessage(protocol.MessageWarning, "toolhost: commands run unconfined: %s", sandboxCap.Reason)
	}
	ws := o.ws
	t.log.Info("workspace ready", "root", ws.Root(), "readRoots", ws.ReadRoots(), "artifactsDir", ws.ArtifactsDir())
	approvals := t.asks.cap
	approvals.Ask = approvals.Ask && s.ClientCapabilities().Approvals != nil
	res := &protocol.InitializeResult{
		SessionID: t.sessionID,
		Capabilities: protocol.ServerCapabilities{OutputLimitBytes: outputLimit, Sandbox: sandboxCap, Resume: t.cfg.Persist,
			Snapshots: t.cfg.SnapshotDir != nil, Approvals: approvals, Mounts: t.mountCapability(o.conf)},
		Workspace: protocol.WorkspaceInfo{
			Root:         ws.Root(),
			ReadRoots:    append([]string{}, ws.ReadRoots()...),
			ArtifactsDir: ws.ArtifactsDir(),
		},
	}
	if !t.hub.Empty() {
		if t.cfg.ConnectDestinations {
			t.hub.ConnectAll(ctx)
		}
		res.Workspace.Destinations = t.hub.List()
	}
	return res
}

// Shutdown ends every command of the session: each is cancelled, its
// processes are gone and its toolResult is queued before it returns (or
// ctx ends). The first call also removes the artifacts, unless kept.
func (t *Tools) Shutdown(ctx context.Context) {
	t.mu.Lock()
	mgr, artifacts, conf, asks, sm := t.mgr, t.artifacts, t.conf, t.asks, t.mounts
	first := !t.shutdown
	t.shutdown = true
	t.mu.Unlock()
	if mgr == nil {
		return
	}
	// The destinations end their handles (their toolResults are
	// forwarded) while this server ends its own.
	hubDone := make(chan struct{})
	go func() { // owned by Shutdown through hubDone
		defer close(hubDone)
		t.hub.Close(ctx)
	}()
	defer func() { <-hubDone }()
	if err := mgr.Shutdown(ctx); err != nil {
		t.log.Warn("process shutdown incomplete", "err", err)
	}
	// An ask still pending is denied, and its asking ends.
	asks.broker.Close()
	// Every handle has ended; wait until each toolResult is queued.
	done := make(chan struct{})
	go func() { // owned by Shutdown through done
		t.senders.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.log.Warn("toolResult senders still running at shutdown")
	}
	if first {
		// The manager removed the artifacts' contents; the directory
		// itself is ours.
		artifacts.remove(t.cfg.KeepArtifacts)
		conf.remove()
		closeRepoCache(conf)
		sm.close(t.log)
		t.closeStore()
	}
}
