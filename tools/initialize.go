package tools

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// Initialize sets the session up: it resolves the root and read roots (the
// command line's, narrowed by the client's), opens the workspace and the
// artifacts directory and starts the process manager.
func (t *Tools) Initialize(ctx context.Context, s *rpc.Session, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
	opts := p.InitializationOptions
	if opts == nil {
		opts = &protocol.InitializationOptions{}
	}
	if opts.Resume != nil {
		// A server that persists answers a resume before it reaches here.
		return nil, sessionNotFound(opts.Resume.SessionID, protocol.SessionNoPersist,
			"session not found: this server was not started with --persist, so no session outlives its connection")
	}
	root, err := t.chooseRoot(p)
	if err != nil {
		return nil, err
	}
	readRoots, err := t.chooseReadRoots(root, opts.ReadRoots)
	if err != nil {
		return nil, err
	}

	artifacts, err := openArtifactsDir(t.cfg.ArtifactsDir, opts.ArtifactsDir, t.cfg.KeepArtifacts)
	if err != nil {
		return nil, err
	}
	cleanup := func() { artifacts.remove(false) }
	ws, err := workspace.Open(workspace.Config{Root: root, ReadRoots: readRoots, ArtifactsDir: artifacts.path})
	if err != nil {
		cleanup()
		return nil, initError("rootUri", err)
	}

	conf, err := newConfinement(t.cfg.Sandbox, ws, opts.Sandbox)
	if err != nil {
		ws.Close()
		cleanup()
		return nil, err
	}
	cleanupAll := cleanup
	cleanup = func() { conf.remove(); cleanupAll() }
	pol, err := conf.filePolicy(t.cfg.Sandbox)
	if err == nil {
		err = ws.SetPolicy(pol)
	}
	if err != nil {
		ws.Close()
		cleanup()
		return nil, err
	}

	killGrace := t.cfg.KillGrace
	if opts.KillGraceMs != nil {
		if *opts.KillGraceMs < 0 {
			cleanup()
			return nil, protocol.InvalidParams("initializationOptions.killGraceMs", "must not be negative")
		}
		killGrace = msDuration(*opts.KillGraceMs)
	}
	defaultTimeout := t.cfg.DefaultTimeout
	if opts.DefaultTimeoutMs != nil {
		if *opts.DefaultTimeoutMs < 0 {
			cleanup()
			return nil, protocol.InvalidParams("initializationOptions.defaultTimeoutMs", "must not be negative")
		}
		defaultTimeout = msDuration(*opts.DefaultTimeoutMs)
	}
	outputLimit := t.cfg.OutputLimit
	if opts.OutputLimitBytes != nil {
		if *opts.OutputLimitBytes <= 0 || *opts.OutputLimitBytes > maxOutputLimit {
			cleanup()
			return nil, protocol.InvalidParams("initializationOptions.outputLimitBytes", "must be between 1 and %d", maxOutputLimit)
		}
		outputLimit = *opts.OutputLimitBytes
	}
	caps := protocol.ClientCapabilities{}
	if p.Capabilities != nil {
		caps = *p.Capabilities
	}
	if err := t.hub.Configure(s, caps, opts.Sandbox, opts.Destinations); err != nil {
		cleanup()
		return nil, err
	}
	var allow []string
	if opts.Env != nil {
		allow = opts.Env.Allow
	}
	mgr, err := process.NewManager(process.Config{
		ArtifactsDir:      ws.ArtifactsDir(),
		ArtifactsCapBytes: t.cfg.ArtifactsCapBytes,
		KeepArtifacts:     t.cfg.KeepArtifacts || (t.cfg.ArtifactsDir == "" && opts.ArtifactsDir != ""),
		KillGrace:         killGrace,
		DefaultTimeout:    defaultTimeout,
		OutputLimit:       int(outputLimit),
		MaxProcesses:      t.cfg.MaxProcesses,
		EnvAllow:          allow,
		BaseEnv:           t.cfg.Env,
		DisableCgroups:    t.cfg.DisableCgroups,
		TempRoot:          conf.tmpRoot(),
		FirstID:           t.cfg.FirstID,
		Logger:            newClientLog(t.log, s),
	})
	if err != nil {
		ws.Close()
		cleanup()
		if errors.Is(err, process.ErrInvalid) {
			return nil, protocol.InvalidParams("initializationOptions.env.allow", "%v", err)
		}
		return nil, fmt.Errorf("cannot start the process manager: %w", err)
	}

	conf.measure()

	t.mu.Lock()
	t.ws, t.mgr = ws, mgr
	t.outputLimit = outputLimit
	t.killGrace = killGrace
	t.artifacts = artifacts
	t.conf = conf
	t.createdAt = time.Now().UTC()
	t.mu.Unlock()
	sandboxCap := conf.capability()
	if conf.mode == SandboxAuto && !sandboxCap.Available {
		s.LogMessage(protocol.MessageWarning, "toolhost: commands run unconfined: %s", sandboxCap.Reason)
	}
	t.log.Info("workspace ready", "root", ws.Root(), "readRoots", ws.ReadRoots(), "artifactsDir", ws.ArtifactsDir())

	res := &protocol.InitializeResult{
		SessionID:    t.sessionID,
		Capabilities: protocol.ServerCapabilities{OutputLimitBytes: outputLimit, Sandbox: sandboxCap, Resume: t.cfg.Persist, Snapshots: t.cfg.SnapshotDir != nil},
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
	return res, nil
}

// chooseRoot returns the root: --root, narrowed by the client's rootUri or
// rootPath when one is given; else the client's.
func (t *Tools) chooseRoot(p *protocol.InitializeParams) (string, error) {
	var client, field string
	switch {
	case p.RootURI != nil && *p.RootURI != "":
		path, err := URIPath(*p.RootURI)
		if err != nil {
			return "", protocol.InvalidParams("rootUri", "%v", err)
		}
		client, field = path, "rootUri"
	case p.RootPath != nil && *p.RootPath != "":
		client, field = *p.RootPath, "rootPath"
	}
	if t.cfg.Root == "" {
		if client == "" {
			return "", protocol.InvalidParams("rootUri", "no workspace root: give rootUri or rootPath, or start the server with --root")
		}
		if !filepath.IsAbs(client) {
			return "", protocol.InvalidParams(field, "must be an absolute path, not %q", client)
		}
		return client, nil
	}
	if client == "" {
		return t.cfg.Root, nil
	}
	if !filepath.IsAbs(client) {
		return "", protocol.InvalidParams(field, "must be an absolute path, not %q", client)
	}
	dir, err := narrow(workspace.Config{Root: t.cfg.Root}, field, client)
	if errors.Is(err, workspace.ErrOutside) {
		return "", protocol.NewError(protocol.CodePathOutsideWorkspace, &protocol.ErrorData{Field: field, Path: client, Reason: "the client may narrow --root, never widen it"},
			"%s %q is outside the server's --root %q", field, client, t.cfg.Root)
	}
	return dir, err
}

// chooseReadRoots returns the read roots: the command line's, narrowed by
// the client's when it gives some. With --root or --read-root set, every
// client read root must lie inside the root or a command-line read root.
func (t *Tools) chooseReadRoots(root string, client []string) ([]string, error) {
	if len(client) == 0 {
		return t.cfg.ReadRoots, nil
	}
	var paths []string
	for i, c := range client {
		field := fmt.Sprintf("initializationOptions.readRoots[%d]", i)
		path := c
		if strings.HasPrefix(c, "file:") {
			var err error
			if path, err = URIPath(c); err != nil {
				return nil, protocol.InvalidParams(field, "%v", err)
			}
		}
		if !filepath.IsAbs(path) {
			return nil, protocol.InvalidParams(field, "must be an absolute path or a file URI, not %q", c)
		}
		paths = append(paths, path)
	}
	if t.cfg.Root == "" && len(t.cfg.ReadRoots) == 0 {
		return paths, nil
	}
	bounds := workspace.Config{Root: root, ReadRoots: t.cfg.ReadRoots}
	for i, path := range paths {
		field := fmt.Sprintf("initializationOptions.readRoots[%d]", i)
		dir, err := narrow(bounds, field, path)
		if errors.Is(err, workspace.ErrOutside) {
			return nil, protocol.NewError(protocol.CodePathOutsideWorkspace,
				&protocol.ErrorData{Field: field, Path: path, Reason: "the client may narrow the command line's roots, never widen them"},
				"read root %q is outside the server's --root and --read-root", path)
		}
		if err != nil {
			return nil, err
		}
		paths[i] = dir
	}
	return paths, nil
}

// narrow resolves a directory the client names, field, through a
// workspace opened on bounds: the same os.Root handles and rules as every
// file request, so a symlink that leads out of bounds is refused, not
// followed. It returns the directory's real path; a path out of bounds is
// an error matching workspace.ErrOutside.
func narrow(bounds workspace.Config, field, path string) (string, error) {
	ws, err := workspace.Open(bounds)
	if err != nil {
		return "", initError(field, err)
	}
	defer ws.Close()
	dir, err := ws.Dir(path)
	if err != nil {
		if errors.Is(err, workspace.ErrOutside) {
			return "", err
		}
		return "", initError(field, err)
	}
	return dir, nil
}

// URIPath returns the path of a file URI.
func URIPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("not a URI: %v", err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("only file URIs are supported, not %q", u.Scheme)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("a file URI with host %q is not local", u.Host)
	}
	return u.Path, nil
}

// initError maps a workspace error about a root the client's field names
// to a wire error.
func initError(field string, err error) error {
	var pe *workspace.PathError
	path := ""
	if errors.As(err, &pe) {
		path = pe.Path
	}
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return protocol.NewError(protocol.CodeNotFound, &protocol.ErrorData{Path: path, Reason: "the root does not exist"}, "%v", err)
	case errors.Is(err, workspace.ErrNotRegular):
		return protocol.NewError(protocol.CodeInvalidParams, &protocol.ErrorData{Field: field, Path: path, Reason: "the root is not a directory"}, "%v", err)
	}
	return wsError(err)
}

// Shutdown ends every command of the session: each is cancelled, its
// processes are gone and its toolResult is queued before it returns (or
// ctx ends). The first call also removes the artifacts, unless kept.
func (t *Tools) Shutdown(ctx context.Context) {
	t.mu.Lock()
	mgr, artifacts, conf := t.mgr, t.artifacts, t.conf
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
		t.closeStore()
	}
}
