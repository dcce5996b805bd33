package tools

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/workspace"
)

// Initialize sets the session up: it resolves the root and read roots (the
// command line's, narrowed by the client's), opens the workspace and the
// artifacts directory and starts the process manager.
func (t *Tools) Initialize(ctx context.Context, s *rpc.Session, p *rpc.InitializeParams) (*rpc.InitializeResult, error) {
	opts := p.InitializationOptions
	if opts == nil {
		opts = &rpc.InitializationOptions{}
	}
	root, err := t.chooseRoot(p)
	if err != nil {
		return nil, err
	}
	readRoots, err := t.chooseReadRoots(root, opts.ReadRoots)
	if err != nil {
		return nil, err
	}

	artifactsDir, tempDir, err := t.artifactsDir(opts.ArtifactsDir)
	if err != nil {
		return nil, err
	}
	cleanup := func() {
		if tempDir != "" {
			os.RemoveAll(tempDir)
		}
	}
	ws, err := workspace.Open(workspace.Config{Root: root, ReadRoots: readRoots, ArtifactsDir: artifactsDir})
	if err != nil {
		cleanup()
		return nil, initError(err)
	}

	killGrace := t.cfg.KillGrace
	if opts.KillGraceMs != nil {
		if *opts.KillGraceMs < 0 {
			cleanup()
			return nil, rpc.InvalidParams("initializationOptions.killGraceMs", "must not be negative")
		}
		killGrace = time.Duration(*opts.KillGraceMs) * time.Millisecond
	}
	defaultTimeout := t.cfg.DefaultTimeout
	if opts.DefaultTimeoutMs != nil {
		if *opts.DefaultTimeoutMs < 0 {
			cleanup()
			return nil, rpc.InvalidParams("initializationOptions.defaultTimeoutMs", "must not be negative")
		}
		defaultTimeout = time.Duration(*opts.DefaultTimeoutMs) * time.Millisecond
	}
	outputLimit := t.cfg.OutputLimit
	if opts.OutputLimitBytes != nil {
		if *opts.OutputLimitBytes <= 0 || *opts.OutputLimitBytes > maxOutputLimit {
			cleanup()
			return nil, rpc.InvalidParams("initializationOptions.outputLimitBytes", "must be between 1 and %d", maxOutputLimit)
		}
		outputLimit = *opts.OutputLimitBytes
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
		Logger:            newClientLog(t.log, s),
	})
	if err != nil {
		ws.Close()
		cleanup()
		if errors.Is(err, process.ErrInvalid) {
			return nil, rpc.InvalidParams("initializationOptions.env.allow", "%v", err)
		}
		return nil, fmt.Errorf("cannot start the process manager: %w", err)
	}

	t.mu.Lock()
	t.ws, t.mgr = ws, mgr
	t.outputLimit = outputLimit
	t.killGrace = killGrace
	t.tempDir = tempDir
	t.mu.Unlock()
	t.log.Info("workspace ready", "root", ws.Root(), "readRoots", ws.ReadRoots(), "artifactsDir", ws.ArtifactsDir())

	return &rpc.InitializeResult{
		Capabilities: rpc.ServerCapabilities{OutputLimitBytes: outputLimit},
		Workspace: rpc.WorkspaceInfo{
			Root:         ws.Root(),
			ReadRoots:    append([]string{}, ws.ReadRoots()...),
			ArtifactsDir: ws.ArtifactsDir(),
		},
	}, nil
}

// chooseRoot returns the root: --root, narrowed by the client's rootUri or
// rootPath when one is given; else the client's.
func (t *Tools) chooseRoot(p *rpc.InitializeParams) (string, error) {
	var client, field string
	switch {
	case p.RootURI != nil && *p.RootURI != "":
		path, err := uriPath(*p.RootURI)
		if err != nil {
			return "", rpc.InvalidParams("rootUri", "%v", err)
		}
		client, field = path, "rootUri"
	case p.RootPath != nil && *p.RootPath != "":
		client, field = *p.RootPath, "rootPath"
	}
	if t.cfg.Root == "" {
		if client == "" {
			return "", rpc.InvalidParams("rootUri", "no workspace root: give rootUri or rootPath, or start the server with --root")
		}
		if !filepath.IsAbs(client) {
			return "", rpc.InvalidParams(field, "must be an absolute path, not %q", client)
		}
		return client, nil
	}
	if client == "" {
		return t.cfg.Root, nil
	}
	inside, err := within(client, []string{t.cfg.Root})
	if err != nil {
		return "", initError(err)
	}
	if !inside {
		return "", rpc.NewError(rpc.CodePathOutsideWorkspace, &rpc.ErrorData{Field: field, Path: client, Reason: "the client may narrow --root, never widen it"},
			"%s %q is outside the server's --root %q", field, client, t.cfg.Root)
	}
	return client, nil
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
			if path, err = uriPath(c); err != nil {
				return nil, rpc.InvalidParams(field, "%v", err)
			}
		}
		if !filepath.IsAbs(path) {
			return nil, rpc.InvalidParams(field, "must be an absolute path or a file URI, not %q", c)
		}
		paths = append(paths, path)
	}
	if t.cfg.Root == "" && len(t.cfg.ReadRoots) == 0 {
		return paths, nil
	}
	allowed := append([]string{root}, t.cfg.ReadRoots...)
	for i, path := range paths {
		inside, err := within(path, allowed)
		if err != nil {
			return nil, initError(err)
		}
		if !inside {
			return nil, rpc.NewError(rpc.CodePathOutsideWorkspace,
				&rpc.ErrorData{Field: fmt.Sprintf("initializationOptions.readRoots[%d]", i), Path: path, Reason: "the client may narrow the command line's roots, never widen them"},
				"read root %q is outside the server's --root and --read-root", path)
		}
	}
	return paths, nil
}

// artifactsDir returns the artifacts directory: --artifacts-dir, else the
// client's, else a new private temporary one (returned as tempDir too, to
// remove at the end).
func (t *Tools) artifactsDir(client string) (dir, tempDir string, err error) {
	dir = t.cfg.ArtifactsDir
	if dir == "" {
		dir = client
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "toolhost-artifacts-")
		if err != nil {
			return "", "", fmt.Errorf("cannot create the artifacts directory: %w", err)
		}
		return tmp, tmp, nil
	}
	if !filepath.IsAbs(dir) {
		return "", "", rpc.InvalidParams("initializationOptions.artifactsDir", "must be an absolute path, not %q", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", rpc.NewError(rpc.CodeNotFound, &rpc.ErrorData{Path: dir, Reason: err.Error()}, "cannot create the artifacts directory %q", dir)
	}
	return dir, "", nil
}

// within reports whether path, resolved, lies inside one of roots,
// resolved, on path-component boundaries.
func within(path string, roots []string) (bool, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", workspace.ErrNotFound, path, err)
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		if real == rr || strings.HasPrefix(real, strings.TrimSuffix(rr, "/")+"/") {
			return true, nil
		}
	}
	return false, nil
}

// uriPath returns the path of a file URI.
func uriPath(uri string) (string, error) {
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

// initError maps a workspace error from initialize to a wire error.
func initError(err error) error {
	var pe *workspace.PathError
	path := ""
	if errors.As(err, &pe) {
		path = pe.Path
	}
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return rpc.NewError(rpc.CodeNotFound, &rpc.ErrorData{Path: path, Reason: "the root does not exist"}, "%v", err)
	case errors.Is(err, workspace.ErrNotRegular):
		return rpc.NewError(rpc.CodeInvalidParams, &rpc.ErrorData{Field: "rootUri", Path: path, Reason: "the root is not a directory"}, "%v", err)
	}
	return wsError(err)
}

// Shutdown ends every command of the session: each is cancelled, its
// processes are gone and its toolResult is queued before it returns (or
// ctx ends). The first call also removes the artifacts, unless kept.
func (t *Tools) Shutdown(ctx context.Context) {
	t.mu.Lock()
	mgr, ws, tempDir := t.mgr, t.ws, t.tempDir
	first := !t.shutdown
	t.shutdown = true
	t.mu.Unlock()
	if mgr == nil {
		return
	}
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
	if first && ws != nil && tempDir != "" && !t.cfg.KeepArtifacts {
		// The manager removed the artifacts' contents; the temporary
		// directory itself is ours.
		os.RemoveAll(tempDir)
	}
}
