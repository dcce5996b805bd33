package tools

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/workspace"
)

// fixture is one session's tools, set up as Initialize sets them, on a
// workspace of temporary directories. Every path in it is real (free of
// symlinks), as the workspace reports them.
//
// The root holds sub/deeper/, file.txt (a regular file), link-in (a
// symlink to sub) and link-out (a symlink to outside); the read root holds
// lib/.
type fixture struct {
	tools *Tools
	ws    *workspace.Workspace
	conf  *confinement

	root, readRoot, artifacts string
	// writable is the command line's --writable directory.
	writable string
	// outside is a directory in no root.
	outside string
}

// newFixture sets up a session as Initialize does, from the command line's
// cfg (whose Sandbox.Writable it sets) and the client's
// initializationOptions.sandbox, asked. The session directory goes to a
// temporary TMPDIR, and everything is removed at the end of the test.
func newFixture(t *testing.T, cfg Config, asked *protocol.Sandbox) *fixture {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir()) // newConfinement's session directory
	root, readRoot, artifacts := t.TempDir(), t.TempDir(), t.TempDir()
	writable, outside := realDir(t, t.TempDir()), realDir(t, t.TempDir())
	mustMkdirAll(t, filepath.Join(root, "sub", "deeper"))
	mustMkdirAll(t, filepath.Join(readRoot, "lib"))
	if err := os.WriteFile(filepath.Join(root, "file.txt"), []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(root, "link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link-out")); err != nil {
		t.Fatal(err)
	}

	ws, err := workspace.Open(workspace.Config{Root: root, ReadRoots: []string{readRoot}, ArtifactsDir: artifacts})
	if err != nil {
		t.Fatalf("workspace.Open: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	cfg.Sandbox.Writable = []string{writable}
	tl := New(cfg)
	conf, err := newConfinement(tl.cfg.Sandbox, ws, asked)
	if err != nil {
		t.Fatalf("newConfinement: %v", err)
	}
	t.Cleanup(conf.remove)
	tl.mu.Lock()
	tl.ws, tl.outputLimit, tl.conf = ws, tl.cfg.OutputLimit, conf
	tl.mu.Unlock()
	return &fixture{
		tools: tl, ws: ws, conf: conf,
		root: ws.Root(), readRoot: ws.ReadRoots()[0], artifacts: ws.ArtifactsDir(),
		writable: writable, outside: outside,
	}
}

// path returns the real path of rel in the root.
func (f *fixture) path(rel string) string { return filepath.Join(f.root, rel) }

// cacheDir is the session's cache directory.
func (f *fixture) cacheDir() string { return filepath.Join(f.conf.dir, "cache") }

// policy is the sandbox policy the session gives a filesystem mode and a
// network setting: the workspace writable as the mode says, the read roots
// and the artifacts directory never written.
func (f *fixture) policy(fs protocol.SandboxFilesystem, network bool) sandbox.Policy {
	return sandbox.Policy{
		Filesystem: sandbox.Filesystem(fs),
		Network:    network,
		Root:       f.root,
		CacheDir:   f.cacheDir(),
		Writable:   []string{f.writable},
		ReadRoots:  []string{f.readRoot, f.artifacts},
	}
}

// cacheEnv is env with the cache variables of a workspace-write command
// pointed into the session's cache directory, where env leaves them alone.
func (f *fixture) cacheEnv(env map[string]*string) map[string]*string {
	out := map[string]*string{
		"XDG_CACHE_HOME":   ptr(f.cacheDir()),
		"GOCACHE":          ptr(filepath.Join(f.cacheDir(), "go-build")),
		"npm_config_cache": ptr(filepath.Join(f.cacheDir(), "npm")),
		"PIP_CACHE_DIR":    ptr(filepath.Join(f.cacheDir(), "pip")),
		"GOMODCACHE":       ptr(filepath.Join(f.cacheDir(), "go-mod")),
		"GOPATH":           ptr(filepath.Join(f.cacheDir(), "go-path")),
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// goModCache is the DefaultEnv of a workspace-write command: none, since
// GOMODCACHE is among cacheEnv's.
func (f *fixture) goModCache() map[string]string { return nil }

// confined returns the confinement of a command at policy pol.
func (f *fixture) confined(pol sandbox.Policy, limits sandbox.Limits, require bool, defaultEnv map[string]string) *process.Confinement {
	return &process.Confinement{Policy: pol, Limits: limits, Require: require, Caps: &f.conf.caps, DefaultEnv: defaultEnv}
}

// realDir returns dir with its symlinks resolved.
func realDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// mustMkdirAll makes dir and its parents.
func mustMkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// wantError is a wire error a test expects: its code, as a sentinel of
// package protocol, and its data. wsReason says Data.Reason is the
// workspace's wording, checked only for being there.
type wantError struct {
	is       *protocol.Error
	data     *protocol.ErrorData
	wsReason bool
}

// checkError checks that err is the wire error want says.
func checkError(t *testing.T, err error, want wantError) {
	t.Helper()
	if !errors.Is(err, want.is) {
		t.Fatalf("error = %v, want one matching %v (code %d)", err, want.is, want.is.Code)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %#v, want a *protocol.Error", err)
	}
	var opts []cmp.Option
	if want.wsReason {
		if pe.Data == nil || pe.Data.Reason == "" {
			t.Errorf("error data = %+v, want a reason", pe.Data)
		}
		opts = append(opts, cmpopts.IgnoreFields(protocol.ErrorData{}, "Reason"))
	}
	if diff := cmp.Diff(want.data, pe.Data, opts...); diff != "" {
		t.Errorf("error data mismatch (-want +got):\n%s", diff)
	}
}
