package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/internal/fsutil"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/snapshot"
	"github.com/toolhost/toolhost/workspace"
)

// snapshots is the session's access to the snapshot store of
// --state-dir, opened at the first use.
type snapshots struct {
	once  sync.Once
	store *snapshot.Store // set by once; nil with err
	err   error
}

// store returns the session's snapshot store, opening it at the first
// call.
func (t *Tools) store() (*snapshot.Store, error) {
	t.snaps.once.Do(func() {
		if t.cfg.SnapshotDir == nil {
			t.snaps.err = errors.New("this server keeps no snapshots")
			return
		}
		dir, err := t.cfg.SnapshotDir()
		if err != nil {
			t.snaps.err = err
			return
		}
		t.snaps.store, t.snaps.err = snapshot.Open(dir, snapshot.Options{MaxBytes: t.cfg.SnapshotMaxBytes, Logger: t.log})
	})
	if t.snaps.err != nil {
		return nil, protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{Reason: t.snaps.err.Error()}, "snapshots are unavailable: %v", t.snaps.err)
	}
	return t.snaps.store, nil
}

// storeFor returns the session's store for a request about the snapshot
// id, which its param field must give.
func (t *Tools) storeFor(field, id string) (*snapshot.Store, error) {
	if id == "" {
		return nil, protocol.InvalidParams(field, "required")
	}
	return t.store()
}

// closeStore closes the session's snapshot store, if it was opened, and
// waits for what its restores left to remove; later snapshot requests are
// told the session has ended.
func (t *Tools) closeStore() {
	t.snaps.once.Do(func() { t.snaps.err = errors.New("the session has ended") })
	if t.snaps.store != nil {
		t.snaps.store.Close()
	}
}

// skips returns the paths, relative to the root, a snapshot leaves out
// and a restore never writes: the read roots and the artifacts directory
// that lie inside the root.
func (t *Tools) skips() (root string, skip []string) {
	ws, _ := t.state()
	root = ws.Root()
	for _, d := range append(append([]string{}, ws.ReadRoots()...), ws.ArtifactsDir()) {
		if rel, err := filepath.Rel(root, d); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			skip = append(skip, filepath.ToSlash(rel))
		}
	}
	t.mu.Lock()
	sm := t.mounts
	t.mu.Unlock()
	return root, append(skip, sm.skips(root)...)
}

// takeSnapshot takes a snapshot of the root.
func (t *Tools) takeSnapshot(ctx context.Context, s *rpc.Session, p *protocol.SnapshotParams) (*protocol.SnapshotInfo, error) {
	info, err := t.take(ctx, p.Label)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// denied returns the denyRead paths inside the root, relative to it, which
// no snapshot stores, diff shows or export writes, and which a restore
// neither writes nor removes. An entry that holds the whole root refuses
// every snapshot method: nothing of the root may be read.
func (t *Tools) denied(op string) ([]string, error) {
	ws, _ := t.state()
	rels := ws.Inside(workspace.PolicyDenyRead)
	if slices.Contains(rels, ".") {
		if err := ws.Check(op, ".", false); err != nil {
			return nil, wsError(err)
		}
		// Held by the root's configured spelling alone: refused all the same.
		return nil, protocol.NewError(protocol.CodePathOutsideWorkspace, &protocol.ErrorData{Path: ".", Policy: workspace.PolicyDenyRead,
			Reason: "a denyRead entry holds the whole root: no snapshot method may read it. This is policy; asking again will not help"}, "%s: refused by policy", op)
	}
	return rels, nil
}

// take takes a snapshot of the root labelled label.
func (t *Tools) take(ctx context.Context, label string) (protocol.SnapshotInfo, error) {
	st, err := t.store()
	if err != nil {
		return protocol.SnapshotInfo{}, err
	}
	denied, err := t.denied("snapshot")
	if err != nil {
		return protocol.SnapshotInfo{}, err
	}
	root, skip := t.skips()
	skip = append(skip, denied...)
	ws, _ := t.state()
	info, err := st.Take(context.WithoutCancel(ctx), root, snapshot.TakeOptions{Label: label, Exclude: t.cfg.SnapshotExclude, Skip: skip, SkipFile: ws.DeniedFiles()})
	if err != nil {
		return protocol.SnapshotInfo{}, snapshotError("", err)
	}
	return snapshotInfo(info), nil
}

// snapshotInfo turns the store's Info into the wire's.
func snapshotInfo(i snapshot.Info) protocol.SnapshotInfo {
	return protocol.SnapshotInfo{SnapshotID: i.ID, Label: i.Label, CreatedAt: i.CreatedAt.UTC(), Files: i.Files, Bytes: i.Bytes, NewBytes: i.NewBytes, Ms: i.Duration.Milliseconds()}
}

// routeSnapshot returns the destination a snapshot id names ("NAME/id"),
// or a zero Target for one of this server.
func (t *Tools) routeSnapshot(id, field string) (hub.Target, error) {
	tg, ok, err := t.hub.Route(id, field)
	if !ok || err != nil {
		return hub.Target{}, err
	}
	return tg, nil
}

// restore makes the root what a snapshot holds.
func (t *Tools) restore(ctx context.Context, s *rpc.Session, p *protocol.RestoreParams) (*protocol.RestoreResult, error) {
	st, err := t.storeFor("snapshotId", p.SnapshotID)
	if err != nil {
		return nil, err
	}
	if n := t.runningCommands(); n > 0 && !p.Force {
		return nil, protocol.NewError(protocol.CodeSnapshotBusy, &protocol.ErrorData{SnapshotID: p.SnapshotID, Reason: fmt.Sprintf("%d commands of the session run; wait for them, cancel them, or restore with force: true", n)},
			"snapshot busy: %d commands of the session run", n)
	}
	denied, err := t.denied("restore")
	if err != nil {
		return nil, err
	}
	ws, _ := t.state()
	for _, q := range p.Paths {
		if err := ws.Check("restore", q, true); err != nil {
			return nil, wsError(err)
		}
	}
	// A protected path is left as it is, as a command would have to.
	root, skip := t.skips()
	skip = append(append(skip, denied...), ws.Inside(workspace.PolicyProtect)...)
	res, err := st.Restore(context.WithoutCancel(ctx), p.SnapshotID, root, snapshot.RestoreOptions{Paths: p.Paths, Exclude: t.cfg.SnapshotExclude, Skip: skip, SkipFile: ws.DeniedFiles()})
	if err != nil {
		return nil, snapshotError(p.SnapshotID, err)
	}
	return &protocol.RestoreResult{Written: res.Written, Removed: res.Removed, Ms: res.Duration.Milliseconds()}, nil
}

// runningCommands counts the session's commands that run.
func (t *Tools) runningCommands() int {
	_, mgr := t.state()
	if mgr == nil {
		return 0
	}
	return mgr.Running()
}

// diff says what changed between two snapshots, or since one.
func (t *Tools) diff(ctx context.Context, s *rpc.Session, p *protocol.DiffParams) (*protocol.DiffResult, error) {
	st, err := t.storeFor("from", p.From)
	if err != nil {
		return nil, err
	}
	denied, err := t.denied("diff")
	if err != nil {
		return nil, err
	}
	if p.Path != "" {
		ws, _ := t.state()
		if err := ws.Check("diff", p.Path, false); err != nil {
			return nil, wsError(err)
		}
	}
	// What the session skips now (its mounts, read roots and artifacts)
	// is left out too: a snapshot from before a mount never recorded it.
	root, skip := t.skips()
	ws, _ := t.state()
	d, err := st.Diff(context.WithoutCancel(ctx), p.From, p.To, root, snapshot.DiffOptions{Path: p.Path, Exclude: t.cfg.SnapshotExclude, Skip: append(skip, denied...), SkipFile: ws.DeniedFiles()})
	if err != nil {
		id := p.From
		if errors.Is(err, snapshot.ErrNotFound) && p.To != "" {
			if _, gerr := st.Get(p.From); gerr == nil {
				id = p.To
			}
		}
		return nil, snapshotError(id, err)
	}
	return &protocol.DiffResult{Changes: changes(d.Changes), Truncated: d.Truncated, Patch: d.Patch}, nil
}

// changes turns the store's changes into the wire's (never nil).
func changes(cs []snapshot.Change) []protocol.Change {
	out := make([]protocol.Change, len(cs))
	for i, c := range cs {
		out[i] = protocol.Change{Path: c.Path, Kind: protocol.ChangeKind(c.Kind), Size: c.Size}
	}
	return out
}

// listSnapshots lists the snapshots of the root.
func (t *Tools) listSnapshots(ctx context.Context, s *rpc.Session, p *protocol.SnapshotsParams) (*protocol.SnapshotList, error) {
	st, err := t.store()
	if err != nil {
		return nil, err
	}
	root, _ := t.skips()
	infos, err := st.List(root)
	if err != nil {
		return nil, snapshotError("", err)
	}
	l := make(protocol.SnapshotList, len(infos))
	for i, in := range infos {
		l[i] = snapshotInfo(in)
	}
	return &l, nil
}

// dropSnapshot removes a snapshot.
func (t *Tools) dropSnapshot(ctx context.Context, s *rpc.Session, p *protocol.DropSnapshotParams) (*protocol.DropSnapshotResult, error) {
	st, err := t.ownSnapshot(p.SnapshotID)
	if err != nil {
		return nil, err
	}
	if err := st.Drop(p.SnapshotID); err != nil {
		return nil, snapshotError(p.SnapshotID, err)
	}
	return &protocol.DropSnapshotResult{}, nil
}

// ownSnapshot returns the session's store once it has checked that id
// (snapshotId, required) is a snapshot of the session's root: one of
// another root is not this session's to drop or export.
func (t *Tools) ownSnapshot(id string) (*snapshot.Store, error) {
	st, err := t.storeFor("snapshotId", id)
	if err != nil {
		return nil, err
	}
	info, err := st.Get(id)
	if err != nil {
		return nil, snapshotError(id, err)
	}
	root, _ := t.skips()
	if filepath.Clean(info.Root) != filepath.Clean(root) {
		return nil, snapshotError(id, snapshot.ErrOtherRoot)
	}
	return st, nil
}

// exportSnapshot writes a snapshot as a tar into the artifacts directory.
func (t *Tools) exportSnapshot(ctx context.Context, s *rpc.Session, p *protocol.ExportSnapshotParams) (*protocol.ExportSnapshotResult, error) {
	st, err := t.ownSnapshot(p.SnapshotID)
	if err != nil {
		return nil, err
	}
	denied, err := t.denied("export")
	if err != nil {
		return nil, err
	}
	ws, _ := t.state()
	dir := filepath.Join(ws.ArtifactsDir(), "snapshots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	final := filepath.Join(dir, p.SnapshotID+".tar")
	tmp, err := fsutil.CreateTemp(final, 0o600)
	if err != nil {
		return nil, err
	}
	defer tmp.Discard()
	// A damaged store leaves a partial tar: it is kept only whole. An
	// artifact need not outlive a crash, so nothing is fsynced.
	err = st.Export(context.WithoutCancel(ctx), p.SnapshotID, tmp.File, snapshot.ExportOptions{Skip: denied})
	if err == nil {
		err = tmp.Commit(fsutil.RenameOnly)
	}
	if err != nil {
		return nil, snapshotError(p.SnapshotID, err)
	}
	fi, err := os.Stat(final)
	if err != nil {
		return nil, err
	}
	return &protocol.ExportSnapshotResult{Path: final, Bytes: fi.Size()}, nil
}

// snapshotError maps the store's errors to wire errors; id is the
// snapshot concerned.
func snapshotError(id string, err error) error {
	var tl *snapshot.TooLargeError
	switch {
	case errors.As(err, &tl):
		var largest []protocol.DirSize
		for _, d := range tl.Largest {
			largest = append(largest, protocol.DirSize{Path: d.Path, Bytes: d.Bytes})
		}
		return protocol.NewError(protocol.CodeSnapshotTooLarge, &protocol.ErrorData{Size: tl.Need, Limit: tl.Max, Largest: largest, Reason: err.Error()}, "snapshot too large: %v", err)
	case errors.Is(err, snapshot.ErrNotFound):
		return protocol.NewError(protocol.CodeSnapshotNotFound, &protocol.ErrorData{SnapshotID: id, Reason: "no snapshot has this id"}, "snapshot not found: %s", id)
	case errors.Is(err, snapshot.ErrOutsideRoot):
		return protocol.NewError(protocol.CodeInvalidParams, &protocol.ErrorData{Field: "paths", Reason: err.Error()}, "invalid params: %v", err)
	case errors.Is(err, snapshot.ErrOtherRoot):
		return protocol.NewError(protocol.CodeInvalidParams, &protocol.ErrorData{Field: "snapshotId", SnapshotID: id, Reason: "the snapshot is of another root than the session's"}, "invalid params: snapshot %s is of another root", id)
	case errors.Is(err, snapshot.ErrInvalid):
		return protocol.NewError(protocol.CodeInvalidParams, &protocol.ErrorData{Reason: err.Error()}, "invalid params: %v", err)
	case errors.Is(err, snapshot.ErrDamaged):
		return protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{SnapshotID: id, Reason: err.Error()}, "the snapshot store is damaged; nothing was written: %v", err)
	}
	return protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{SnapshotID: id, Reason: err.Error()}, "snapshot: %v", err)
}

// commandSnapshot is the snapshot a command run with snapshot: true took
// before it started; its changes are computed once, when it has ended.
type commandSnapshot struct {
	id   string
	once sync.Once
	// changes and truncated are set by once.
	changes   []protocol.Change
	truncated bool
}

// beforeCommand takes the snapshot of a command run with snapshot: true.
func (t *Tools) beforeCommand(ctx context.Context, command string) (*commandSnapshot, error) {
	label := "before " + command
	if len(label) > 200 {
		label = label[:200]
	}
	info, err := t.take(ctx, label)
	if err != nil {
		return nil, err
	}
	return &commandSnapshot{id: info.SnapshotID}, nil
}

// attach records cs as cmd's, so that its final results carry it.
func (t *Tools) attachSnapshot(cmd *process.Command, cs *commandSnapshot) {
	if cs == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cmdSnaps == nil {
		t.cmdSnaps = map[string]*commandSnapshot{}
	}
	t.cmdSnaps[cmd.ID()] = cs
}

// finalResult is a command's final ToolResult, with its snapshot's id and
// changes when it ran with snapshot: true.
func (t *Tools) finalResult(cmd *process.Command) protocol.ToolResult {
	res := toolResult(cmd.Result())
	reposResult(cmd, &res)
	t.approvalsResult(cmd, &res)
	t.mountsResult(cmd, &res)
	t.mu.Lock()
	cs := t.cmdSnaps[cmd.ID()]
	t.mu.Unlock()
	if cs == nil {
		return res
	}
	cs.once.Do(func() {
		st, err := t.store()
		if err != nil {
			return
		}
		denied, err := t.denied("diff")
		if err != nil {
			return
		}
		root, skip := t.skips()
		start := time.Now()
		ws, _ := t.state()
		d, err := st.Diff(context.Background(), cs.id, "", root, snapshot.DiffOptions{Exclude: t.cfg.SnapshotExclude, Skip: append(skip, denied...), SkipFile: ws.DeniedFiles()})
		if err != nil {
			t.log.Warn("a command's changes could not be computed", "command", cmd.ID(), "snapshot", cs.id, "err", err)
			return
		}
		cs.changes, cs.truncated = changes(d.Changes), d.Truncated
		t.log.Debug("a command's changes", "command", cmd.ID(), "changes", len(d.Changes), "duration", time.Since(start))
	})
	res.SnapshotID, res.Changes, res.ChangesTruncated = cs.id, cs.changes, cs.truncated
	if res.Changes == nil {
		res.Changes = []protocol.Change{}
	}
	return res
}
