package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/workspace"
)

// MountsConfig is what the command line says of mounts (issue 36).
type MountsConfig struct {
	// Specs are the command line's mounts (--mount), checked.
	Specs []mounts.Spec
	// ClientMounts lets initializationOptions.mounts replace Specs
	// (--client-mounts).
	ClientMounts bool
	// Credentials resolves a secret id (--secrets FILE, else the
	// variable TOOLHOST_SECRET_<ID>); nil resolves none.
	Credentials func(id string) (objstore.Credentials, error)
	// Open makes a store's client; Kinds are the kinds it serves.
	Open  mounts.Opener
	Kinds []string
	// Dir returns the directory that holds the sessions' mount caches
	// (STATE/mounts), or why there is none. No confined command can read
	// it: the state directory is denied to every command.
	Dir func() (string, error)
	// Limits bound what a mount fetches (--mount-max-bytes).
	Limits mounts.Limits
}

// sessionMounts are a session's mounts and manifest entries, fixed by
// Initialize; each mount's state is its own.
type sessionMounts struct {
	list []*sessionMount // in the order given
	// entries are the manifest's, resolved: shown as they are.
	entries []sandbox.Bind
	dir     string // the session's mount caches; removed by close unless a mount keeps local changes
}

// sessionMount is one mount of a session.
type sessionMount struct {
	wire protocol.Mount
	m    *mounts.Mount

	mu sync.Mutex
	// fetchedAt and syncedAt are when a fetch and a write-back last
	// succeeded, for mounts {} (the rest it lists is m.State()); guarded
	// by mu.
	fetchedAt, syncedAt *time.Time
	// kept says the last write-back left local changes unwritten
	// (conflicts, refusals): the cache is kept at the session's end.
	kept bool
}

// commandMounts are the views one command was given, released once its
// result is final; once makes its write-back happen exactly once.
type commandMounts struct {
	views    []mountView
	once     sync.Once
	outcomes []protocol.MountOutcome // set by once
}

// mountView is a mount's directory bound for a command.
type mountView struct {
	sm   *sessionMount
	view string
}

// mountCapability reports capabilities.mounts: a kind is true where a
// client is built in and a command can be given a bind (a mount
// namespace, with confinement on).
func (t *Tools) mountCapability(c *confinement) protocol.MountsCapability {
	var cap protocol.MountsCapability
	if c == nil || c.mode == SandboxOff || !c.caps.MountNS {
		return cap
	}
	for _, k := range t.cfg.Mounts.Kinds {
		switch protocol.MountKind(k) {
		case protocol.MountS3:
			cap.S3 = true
		case protocol.MountGCS:
			cap.GCS = true
		case protocol.MountR2:
			cap.R2 = true
		case protocol.MountAzureBlob:
			cap.AzureBlob = true
		}
	}
	return cap
}

// checkMounts returns the specs a session mounts: the command line's, or
// the client's (only under --client-mounts), checked.
func (t *Tools) checkMounts(opts *protocol.InitializationOptions) ([]mounts.Spec, error) {
	specs := t.cfg.Mounts.Specs
	if opts.Mounts != nil {
		if !t.cfg.Mounts.ClientMounts {
			return nil, protocol.InvalidParams("initializationOptions.mounts", "the server does not take a client's mounts: it mounts what its --mount flags say; start it with --client-mounts to let a client choose")
		}
		specs = nil
		for i, m := range *opts.Mounts {
			field := fmt.Sprintf("initializationOptions.mounts[%d]", i)
			s := mounts.Spec{Name: m.Name, Path: m.Path, ReadOnly: m.ReadOnly, Kind: string(m.Intent.Kind), URI: m.Intent.URI}
			if m.Intent.Credentials != nil {
				if m.Intent.Credentials.ID == "" {
					return nil, protocol.InvalidParams(field+".intent.credentials.id", "required: the id of a secret the server holds")
				}
				s.SecretID = m.Intent.Credentials.ID
			}
			if err := s.Check(); err != nil {
				return nil, protocol.InvalidParams(field, "%v", err)
			}
			specs = append(specs, s)
		}
	}
	if err := mounts.CheckSpecs(specs); err != nil {
		return nil, protocol.InvalidParams("initializationOptions.mounts", "%v", err)
	}
	return specs, nil
}

// openMounts opens the session's mounts once its workspace and
// confinement are open: each mount point is checked against the roots
// and made, its secret resolved and its store's client made (nothing is
// fetched yet: the first command that starts fetches). Manifest entries
// are resolved too. Errors name the field.
func (t *Tools) openMounts(ws *workspace.Workspace, c *confinement, specs []mounts.Spec, manifest *protocol.Manifest) (_ *sessionMounts, err error) {
	sm := &sessionMounts{}
	if len(specs) == 0 && (manifest == nil || len(manifest.Entries) == 0) {
		return sm, nil
	}
	defer func() {
		if err != nil {
			sm.close(t.log)
		}
	}()
	if c.mode == SandboxOff || !c.caps.MountNS {
		reason := "a mount is bound in the command's mount namespace, which this server cannot make"
		if c.mode == SandboxOff {
			reason = "the server runs with --sandbox off: a mount is bound in a confined command's mount namespace"
		} else if r := c.caps.Reasons["mountns"]; r != "" {
			reason += ": " + r
		}
		name, kind := "manifest", ""
		if len(specs) > 0 {
			name, kind = specs[0].Name, specs[0].Kind
		}
		return nil, mountFailed(name, kind, reason)
	}
	var targets []string
	for i, s := range specs {
		field := fmt.Sprintf("mounts[%d].path", i)
		if err := checkMountPoint(ws, s.Path, field); err != nil {
			return nil, err
		}
		targets = append(targets, s.Path)
	}
	if manifest != nil {
		for i, e := range manifest.Entries {
			b, err := manifestBind(ws, e, fmt.Sprintf("initializationOptions.manifest.entries[%d]", i))
			if err != nil {
				return nil, err
			}
			for _, p := range targets {
				if within(b.Target, p) || within(p, b.Target) {
					return nil, protocol.InvalidParams(fmt.Sprintf("initializationOptions.manifest.entries[%d].target", i), "%s overlaps the mount or entry at %s", b.Target, p)
				}
			}
			targets = append(targets, b.Target)
			sm.entries = append(sm.entries, b)
		}
	}
	if len(specs) == 0 {
		return sm, nil
	}
	if t.cfg.Mounts.Dir == nil {
		return nil, mountFailed(specs[0].Name, specs[0].Kind, "no state directory holds the mounts' caches")
	}
	base, err := t.cfg.Mounts.Dir()
	if err != nil {
		return nil, mountFailed(specs[0].Name, specs[0].Kind, "no state directory holds the mounts' caches: "+err.Error())
	}
	sm.dir = filepath.Join(base, t.sessionID)
	if err := os.MkdirAll(sm.dir, 0o700); err != nil {
		return nil, mountFailed(specs[0].Name, specs[0].Kind, "cannot make the mounts' cache: "+err.Error())
	}
	for i, s := range specs {
		var creds objstore.Credentials
		if s.SecretID != "" {
			if t.cfg.Mounts.Credentials == nil {
				return nil, protocol.InvalidParams(fmt.Sprintf("mounts[%d].intent.credentials.id", i), "unknown secret %q: the server has no --secrets file and no TOOLHOST_SECRET_%s variable", s.SecretID, mounts.EnvName(s.SecretID))
			}
			if creds, err = t.cfg.Mounts.Credentials(s.SecretID); err != nil {
				return nil, protocol.InvalidParams(fmt.Sprintf("mounts[%d].intent.credentials.id", i), "%v", err)
			}
		}
		st, err := mounts.Open(s, creds, t.cfg.Mounts.Open)
		if err != nil {
			return nil, mountError(err)
		}
		h := sha256.Sum256([]byte(s.Name))
		dir := filepath.Join(sm.dir, hex.EncodeToString(h[:8]))
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, mountFailed(s.Name, s.Kind, "cannot make its cache: "+err.Error())
		}
		m, err := mounts.New(s, st, dir, t.cfg.Mounts.Limits)
		if err != nil {
			return nil, mountError(err)
		}
		if err := os.MkdirAll(s.Path, 0o755); err != nil {
			return nil, mountFailed(s.Name, s.Kind, "cannot make its mount point: "+err.Error())
		}
		sm.list = append(sm.list, &sessionMount{m: m, wire: protocol.Mount{Name: s.Name, Path: s.Path, ReadOnly: s.ReadOnly,
			Intent: protocol.MountIntent{Kind: protocol.MountKind(s.Kind), URI: s.URI, Credentials: credentialsOf(s)}}})
	}
	return sm, nil
}

// canHideSecrets refuses a session of a server given --secrets where no
// command can be kept from reading the file: the sandbox off, or no mount
// namespace with Landlock to hold its mask in place. Such a server
// mounts nothing either; it fails closed rather than leave the keys in
// its commands' sight.
func (c *confinement) canHideSecrets(cfg SandboxConfig) error {
	if len(cfg.HiddenFiles) == 0 {
		return nil
	}
	why := ""
	switch {
	case c.mode == SandboxOff:
		why = "the server runs with --sandbox off"
	case !c.caps.MountNS:
		why = "no mount namespace can be made (" + c.caps.Reasons["mountns"] + ")"
	case c.caps.LandlockABI == 0:
		why = "there is no Landlock to keep a mask in place"
	case !c.caps.Masks:
		why = "no empty file system can be mounted over it"
	default:
		return nil
	}
	return mountFailed("", "", "--secrets: the secrets file can be kept from confined commands only in a mount namespace held by Landlock, and "+why+"; run toolhost as root with the sandbox on, or without --secrets")
}

// credentialsOf is a spec's credentials as the wire names them.
func credentialsOf(s mounts.Spec) *protocol.MountCredentials {
	if s.SecretID == "" {
		return nil
	}
	return &protocol.MountCredentials{ID: s.SecretID}
}

// checkMountPoint refuses a mount point that would hide files (the
// root's own, or the machine's), or overlap a read root or the artifacts
// directory: it must be missing, or an empty directory.
func checkMountPoint(ws *workspace.Workspace, path, field string) error {
	inRoot := within(path, ws.Root())
	for _, d := range append(append([]string{}, ws.ReadRoots()...), ws.ArtifactsDir()) {
		if within(path, d) || within(d, path) {
			return protocol.InvalidParams(field, "%s overlaps the read-only directory %s", path, d)
		}
	}
	if within(ws.Root(), path) {
		return protocol.InvalidParams(field, "%s holds the workspace root: a mount may not hide it", path)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return protocol.InvalidParams(field, "%s: %v", path, err)
	case !fi.IsDir():
		return protocol.InvalidParams(field, "%s is a file: a mount may not hide it", path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return protocol.InvalidParams(field, "%s: %v", path, err)
	}
	switch {
	case len(ents) > 0 && inRoot:
		return protocol.InvalidParams(field, "%s holds the root's own files: a mount may not hide them; choose a path where nothing is", path)
	case len(ents) > 0:
		return protocol.InvalidParams(field, "%s holds files: a mount may not hide them; choose a path where nothing is, or an empty directory", path)
	}
	return nil
}

// manifestBind resolves a manifest entry: its source inside the root or a
// read root (a writable one inside the root), its target a mount point
// as checkMountPoint allows.
func manifestBind(ws *workspace.Workspace, e protocol.ManifestEntry, field string) (sandbox.Bind, error) {
	if !filepath.IsAbs(e.Source) || filepath.Clean(e.Source) != e.Source {
		return sandbox.Bind{}, protocol.InvalidParams(field+".source", "must be an absolute, clean path, not %q", e.Source)
	}
	if !filepath.IsAbs(e.Target) || filepath.Clean(e.Target) != e.Target {
		return sandbox.Bind{}, protocol.InvalidParams(field+".target", "must be an absolute, clean path, not %q", e.Target)
	}
	src, err := filepath.EvalSymlinks(e.Source)
	if err != nil {
		return sandbox.Bind{}, protocol.InvalidParams(field+".source", "%v", err)
	}
	ok := within(src, ws.Root())
	if !e.Writable {
		for _, d := range ws.ReadRoots() {
			ok = ok || within(src, d)
		}
	}
	if !ok {
		where := "the root or a read root"
		if e.Writable {
			where = "the root (a writable entry)"
		}
		return sandbox.Bind{}, protocol.InvalidParams(field+".source", "%s is not inside %s: a client shows commands nothing it could not read or write itself", e.Source, where)
	}
	if err := ws.Check("manifest", src, e.Writable); err != nil {
		return sandbox.Bind{}, wsError(err)
	}
	if err := checkMountPoint(ws, e.Target, field+".target"); err != nil {
		return sandbox.Bind{}, err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return sandbox.Bind{}, protocol.InvalidParams(field+".source", "%v", err)
	}
	if err := makeMountPoint(e.Target, fi.IsDir()); err != nil {
		return sandbox.Bind{}, protocol.InvalidParams(field+".target", "cannot make the mount point: %v", err)
	}
	return sandbox.Bind{Source: src, Target: e.Target, Writable: e.Writable}, nil
}

// makeMountPoint makes path a directory, or an empty file, if missing.
func makeMountPoint(path string, dir bool) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	if dir {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// mountFailed is -32035 MountFailed.
func mountFailed(name, kind, reason string) error {
	return protocol.NewError(protocol.CodeMountFailed, &protocol.ErrorData{Name: name, Kind: kind, Reason: reason},
		"mount %s failed: %s", name, reason)
}

// mountError maps an error of package mounts to the wire: a *mounts.Error
// is MountFailed; anything else is wrapped as one without a name.
func mountError(err error) error {
	var me *mounts.Error
	if errors.As(err, &me) {
		return mountFailed(me.Name, me.Kind, me.Reason)
	}
	return mountFailed("", "", err.Error())
}

// prepareMounts fetches what changed in every mount of the session and
// returns the binds a command gets, and the views to release once its
// result is final. A mount that cannot be fetched is MountFailed: the
// command is not started, and the views already made are released.
func (t *Tools) prepareMounts(ctx context.Context) ([]sandbox.Bind, *commandMounts, error) {
	t.mu.Lock()
	sm := t.mounts
	t.mu.Unlock()
	if sm == nil || (len(sm.list) == 0 && len(sm.entries) == 0) {
		return nil, nil, nil
	}
	cm := &commandMounts{}
	binds := append([]sandbox.Bind{}, sm.entries...)
	for _, m := range sm.list {
		view, err := m.prepare(ctx)
		if err != nil {
			cm.release()
			return nil, nil, mountError(err)
		}
		cm.views = append(cm.views, mountView{sm: m, view: view})
		// Owned: the view lies in the state directory, which every
		// command is denied; the bind shows it at the mount alone.
		binds = append(binds, sandbox.Bind{Source: view, Target: m.wire.Path, Writable: !m.wire.ReadOnly, Owned: true})
	}
	return binds, cm, nil
}

// prepare fetches the mount for a command and records how it went; the
// command gives the view back with release. A writable mount a running
// command holds is not fetched again (package mounts): the next command
// shares its working directory as it is.
func (m *sessionMount) prepare(ctx context.Context) (string, error) {
	view, err := m.m.Prepare(ctx)
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	m.mu.Lock()
	m.fetchedAt = &now
	m.mu.Unlock()
	return view, nil
}

// release gives back a view prepare made.
func (m *sessionMount) release(view string) { m.m.Release(view) }

// writeBack writes the mount's changes back and records how it went.
func (m *sessionMount) writeBack(ctx context.Context) protocol.MountOutcome {
	out := protocol.MountOutcome{Name: m.wire.Name, Conflicts: []string{}}
	r, err := m.m.WriteBack(ctx)
	out.Uploaded, out.Deleted = r.Uploaded, r.Deleted
	if r.Conflicts != nil {
		out.Conflicts = r.Conflicts
	}
	for _, n := range r.NotUploaded {
		out.NotUploaded = append(out.NotUploaded, protocol.MountRefusal{Path: n.Path, Reason: n.Reason})
	}
	now := time.Now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		out.Error = err.Error()
	} else {
		m.syncedAt = &now
	}
	m.kept = err != nil || len(out.Conflicts) > 0 || len(out.NotUploaded) > 0
	return out
}

// release releases the command's read-only views.
func (cm *commandMounts) release() {
	if cm == nil {
		return
	}
	for _, v := range cm.views {
		v.sm.release(v.view)
	}
	cm.views = nil
}

// attachMounts records cm as cmd's, so that its final result writes the
// writable mounts back and releases its views.
func (t *Tools) attachMounts(cmd *process.Command, cm *commandMounts) {
	if cm == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cmdMounts == nil {
		t.cmdMounts = map[string]*commandMounts{}
	}
	t.cmdMounts[cmd.ID()] = cm
}

// mountsResult writes back, once, the writable mounts of cmd, whose
// result res is final, and puts what each write-back did into res.
func (t *Tools) mountsResult(cmd *process.Command, res *protocol.ToolResult) {
	if res.Status == protocol.StatusRunning {
		return
	}
	t.mu.Lock()
	cm := t.cmdMounts[cmd.ID()]
	t.mu.Unlock()
	if cm == nil {
		return
	}
	cm.once.Do(func() {
		// The write-back is the command's end: it is not cut short by
		// the request that waits for it.
		ctx := context.Background()
		for _, v := range cm.views {
			if !v.sm.wire.ReadOnly {
				cm.outcomes = append(cm.outcomes, v.sm.writeBack(ctx))
			}
		}
		cm.release()
		t.mu.Lock()
		delete(t.cmdMounts, cmd.ID())
		t.mu.Unlock()
	})
	res.Mounts = cm.outcomes
}

// sessionMounts returns the session's mounts, or ServerNotInitialized.
func (t *Tools) sessionMounts() (*sessionMounts, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mounts == nil {
		return nil, protocol.ErrServerNotInitialized
	}
	return t.mounts, nil
}

// mountsList serves mounts: the session's mounts with their state.
func (t *Tools) mountsList(ctx context.Context, s *rpc.Session, p *protocol.MountsParams) (*protocol.MountList, error) {
	sm, err := t.sessionMounts()
	if err != nil {
		return nil, err
	}
	list := protocol.MountList{}
	for _, m := range sm.list {
		st := m.m.State()
		m.mu.Lock()
		list = append(list, protocol.MountState{Mount: m.wire, Fetched: m.fetchedAt != nil, Objects: st.Objects, Bytes: st.Bytes,
			FetchedAt: m.fetchedAt, SyncedAt: m.syncedAt, Skipped: st.Skipped, Error: st.Err})
		m.mu.Unlock()
	}
	return &list, nil
}

// syncMount serves syncMount: a writable mount's changes written back
// now.
func (t *Tools) syncMount(ctx context.Context, s *rpc.Session, p *protocol.SyncMountParams) (*protocol.MountOutcome, error) {
	sm, err := t.sessionMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range sm.list {
		if m.wire.Name != p.Name {
			continue
		}
		if m.wire.ReadOnly {
			return nil, protocol.InvalidParams("name", "mount %q is read-only: nothing is ever written back", p.Name)
		}
		out := m.writeBack(ctx)
		if out.Error != "" {
			return nil, mountFailed(m.wire.Name, string(m.wire.Intent.Kind), out.Error)
		}
		return &out, nil
	}
	names := make([]string, 0, len(sm.list))
	for _, m := range sm.list {
		names = append(names, m.wire.Name)
	}
	return nil, protocol.InvalidParams("name", "no mount %q; the session's mounts are %v", p.Name, names)
}

// mountSkips returns the mount points and manifest targets inside root,
// relative to it: no snapshot holds them, and a restore leaves them
// alone.
func (sm *sessionMounts) skips(root string) []string {
	if sm == nil {
		return nil
	}
	var out []string
	add := func(p string) {
		if rel, err := filepath.Rel(root, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	for _, m := range sm.list {
		add(m.wire.Path)
	}
	for _, e := range sm.entries {
		add(e.Target)
	}
	return out
}

// readMountFile serves a readFile whose path lies in a mount (ok), from
// the mount as the bucket is now: a read-only mount's fresh view, a
// writable mount's working directory (fetched first if no command holds
// it), each read through a workspace rooted there, so that no symlink
// leads out.
func (t *Tools) readMountFile(ctx context.Context, ws *workspace.Workspace, p *protocol.ReadFileParams) (_ *workspace.ReadResult, ok bool, err error) {
	t.mu.Lock()
	sm := t.mounts
	t.mu.Unlock()
	if sm == nil || len(sm.list) == 0 {
		return nil, false, nil
	}
	path := p.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(ws.Root(), path)
	}
	path = filepath.Clean(path)
	for _, m := range sm.list {
		if !within(path, m.wire.Path) {
			continue
		}
		rel, _ := filepath.Rel(m.wire.Path, path)
		view, err := m.prepare(ctx)
		if err != nil {
			return nil, true, mountError(err)
		}
		defer m.release(view)
		mw, err := workspace.Open(workspace.Config{Root: view})
		if err != nil {
			return nil, true, mountFailed(m.wire.Name, string(m.wire.Intent.Kind), "cannot open its cache: "+err.Error())
		}
		defer mw.Close()
		r, err := mw.ReadFile(workspace.ReadOptions{Path: rel, Line: p.Line, Limit: p.Limit, MaxBytes: p.MaxBytes})
		if err != nil {
			return nil, true, wsError(err)
		}
		r.Path = filepath.Join(m.wire.Path, rel)
		return r, true, nil
	}
	return nil, false, nil
}

// close removes the session's mount caches, but those of a mount whose
// last write-back left local changes unwritten, which it logs.
func (sm *sessionMounts) close(log interface {
	Warn(string, ...any)
}) {
	if sm == nil || sm.dir == "" {
		return
	}
	keep := false
	for _, m := range sm.list {
		m.mu.Lock()
		k := m.kept
		m.mu.Unlock()
		if k {
			keep = true
			log.Warn("a writable mount kept local changes its write-back could not write; its cache stays", "mount", m.wire.Name, "dir", sm.dir)
		}
	}
	if !keep {
		os.RemoveAll(sm.dir)
	}
}

// mountCommand fetches the session's mounts for a command about to start
// and binds them (and the manifest's entries) in its policy and its
// steps'. The caller attaches the views to the command once it exists,
// or releases them if it does not start.
func (t *Tools) mountCommand(ctx context.Context, spec *process.Spec) (*commandMounts, error) {
	binds, cm, err := t.prepareMounts(ctx)
	if err != nil || len(binds) == 0 {
		return cm, err
	}
	if spec.Confine == nil {
		cm.release()
		return nil, mountFailed("", "", "the command runs unconfined: mounts are bound only in a confined command's mount namespace")
	}
	spec.Confine.Policy.Binds = binds
	for i := range spec.Steps {
		if spec.Steps[i].Policy != nil {
			spec.Steps[i].Policy.Binds = binds
		}
	}
	return cm, nil
}
