package tools

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/workspace"
)

// Config is the server's configuration from its command line.
type Config struct {
	// Root is the workspace root (--root); "" lets the client choose.
	Root string
	// ReadRoots are the extra read-only roots (--read-root).
	ReadRoots []string
	// ArtifactsDir keeps command output; "" means a private temporary
	// directory removed at the end.
	ArtifactsDir      string
	KeepArtifacts     bool
	ArtifactsCapBytes int64
	KillGrace         time.Duration
	DefaultTimeout    time.Duration
	// MaxMessageBytes is the largest message the session sends or takes
	// (--max-message-bytes); 0 is 16 MiB.
	MaxMessageBytes int64
	// OutputLimit is the inline output kept per stream.
	OutputLimit  int64
	MaxProcesses int
	// DebugMethods serves the debug methods (for tests).
	DebugMethods bool
	// DisableCgroups keeps commands out of cgroups of their own.
	DisableCgroups bool
	// Sandbox configures the confinement of commands.
	Sandbox SandboxConfig
	// Destinations are the toolhosts elsewhere the session may drive
	// (--destination).
	Destinations []hub.Spec
	// ConnectDestinations connects every destination at initialize, not
	// at its first use.
	ConnectDestinations bool
	// DestinationBootstrap installs this binary on a destination that has
	// no toolhost or another version (--destination-bootstrap).
	DestinationBootstrap bool
	// DestinationRetry is how many times a destination whose far toolhost
	// persists its session (--persist) is started again to resume it when
	// its transport drops, before its handles end "lost"
	// (--destination-retry); 0: never.
	DestinationRetry int
	// Version is the server's version.
	Version string
	// Env is the server's environment, which children inherit only through
	// the allowlist.
	Env    []string
	Logger *slog.Logger

	// Persist says the session outlives its connection (--persist):
	// initialize answers capabilities.resume.
	Persist bool
	// SessionID, when set, is the session's id (a session a later server
	// took over keeps its own); else a fresh one is made.
	SessionID string
	// FirstID is the number after which commands and handles are
	// numbered (see process.Config.FirstID).
	FirstID uint64
	// Sessions, when set (under --persist), lists this user's sessions
	// for this root, for the sessions method; else it lists this one.
	Sessions func() []protocol.SessionInfo
	// OnHandle, when set, is told of every handle as it starts.
	OnHandle func(HandleStarted)

	// SnapshotDir returns the snapshot store's directory
	// (STATE/snapshots), or why there is none; it is called at the first
	// use of a snapshot. Nil leaves snapshots unavailable.
	SnapshotDir func() (string, error)
	// SnapshotMaxBytes caps the store (--snapshot-max-bytes; 0: 2 GiB).
	SnapshotMaxBytes int64
	// SnapshotExclude are --snapshot-exclude's patterns (gitignore
	// syntax), left out of every snapshot besides .git/.
	SnapshotExclude []string
	// Approvals is how a session asks its client's user about what its
	// confinement refuses.
	Approvals ApprovalsConfig
	// Mounts are the buckets shown to commands as files (mounts.go).
	Mounts MountsConfig
}

// The --sandbox modes.
const (
	SandboxAuto     = "auto"     // confined where the kernel can, with a warning otherwise
	SandboxRequired = "required" // a command that cannot be confined as asked is refused
	SandboxOff      = "off"      // no confinement
)

// SandboxConfig is the confinement of commands the command line sets.
type SandboxConfig struct {
	// Mode is SandboxAuto (the zero value), SandboxRequired or SandboxOff.
	Mode string
	// Filesystem is the default filesystem mode (--sandbox-default);
	// "" is workspace-write.
	Filesystem protocol.SandboxFilesystem
	// Network is the default network (--sandbox-network on); with
	// NetworkAllow not nil (--sandbox-network allow), only the hosts of
	// NetworkAllow (--network-allow) and of Registries.
	Network      bool
	NetworkAllow []string
	// Registries, when set (--network-allow-registries), returns the
	// allow-list entries of the hosts the machine's Go, npm and pip are
	// configured to use; it waits for them to be read, at most until ctx
	// is done.
	Registries func(ctx context.Context) []string
	// Protect and DenyRead are the server's lists (--protect, --deny-read,
	// and under `toolhost mcp` the agents' defaults): paths in the root a
	// workspace-write command may read but not change, and paths a
	// confined command cannot read ("~" is Home).
	Protect, DenyRead []string
	// Home is the server's $HOME, for "~" in denyRead.
	Home string
	// Hidden are paths no confined command reads, whatever its sandbox
	// asks: the server's own state directory (the mounts' caches) and
	// its secrets file. They are masked as denyRead paths are, but are
	// not the client's lists: capabilities and results do not name them.
	// HiddenFiles are those of them no file door reads either (the
	// secrets file).
	Hidden, HiddenFiles []string
	// GrantsDir is the directory of the user's approvals grants file
	// (package approval); when it lies in the root, it is protected like
	// a --protect path, made first if missing, so that neither a confined
	// command nor a writeFile can forge a grant.
	GrantsDir string
	// Writable are extra directories writable in workspace-write mode.
	Writable []string
	// Limits are the most a command may use (--limit-*); zero is none.
	Limits sandbox.Limits
	// NoLandlock fakes a kernel without Landlock (--debug-no-landlock).
	NoLandlock bool
	// RootCache, when set, returns the cache directory of a workspace root
	// (its canonical real path) that outlives the session (caches.go);
	// nil, or an error, keeps the caches in the session directory.
	RootCache func(root string) (string, error)
	// Env is the server's environment, whose cache variables a command
	// gets as they are (caches.go).
	Env []string
}

// maxOutputLimit caps the inline output a request may ask for, so that a
// result always fits in a message.
const maxOutputLimit = 4 << 20

// Tools is the state of one session's tools.
type Tools struct {
	cfg Config
	log *slog.Logger
	hub *hub.Hub // the destinations; set by New

	mu sync.Mutex
	// ws, mgr, outputLimit and tokens are set by Initialize and guarded by
	// mu; ws and mgr are nil before it.
	ws          *workspace.Workspace
	mgr         *process.Manager
	outputLimit int64
	killGrace   time.Duration
	artifacts   *artifactsDir               // created by Initialize, removed by Shutdown
	conf        *confinement                // the session's confinement; its directory is removed by Shutdown
	asks        *asks                       // the session's asking of its client's user; set by Initialize
	tokens      map[string]*process.Command // commands behind $/progress tokens, for window/workDoneProgress/cancel
	shutdown    bool
	// progressFiles numbers the progress files kept beside the artifacts.
	progressFiles int

	// senders are the goroutines that wait for a handle to end and send its
	// toolResult; Shutdown waits for them.
	senders conc.WaitGroup

	sessionID string    // set by New, read-only
	createdAt time.Time // set by Initialize, read-only after it
	// adopted are the final results of handles a server before this one
	// held (AdoptResults), by handle id; guarded by mu.
	adopted map[string]protocol.ToolResult

	snaps snapshots // the snapshot store, opened at the first use
	// cmdSnaps are the snapshots of commands run with snapshot: true, by
	// command id; guarded by mu.
	cmdSnaps map[string]*commandSnapshot
	// mounts are the session's mounts, set by Initialize (nil before);
	// cmdMounts are the views of each running command, by command id,
	// until its result is final. Both guarded by mu.
	mounts    *sessionMounts
	cmdMounts map[string]*commandMounts
}

// New returns the tools for one session.
func New(cfg Config) *Tools {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = 64 << 10
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	id := cfg.SessionID
	if id == "" {
		id = newSessionID()
	}
	return &Tools{cfg: cfg, log: cfg.Logger, hub: hub.New(cfg.Destinations, hub.Options{Logger: cfg.Logger, Version: cfg.Version, Bootstrap: cfg.DestinationBootstrap, Retry: cfg.DestinationRetry}), tokens: make(map[string]*process.Command), sessionID: id}
}

// NewServer returns a server that serves the tools over JSON-RPC.
func NewServer(cfg Config, opts rpc.Options) *rpc.Server {
	t := New(cfg)
	opts.Table = t.Table()
	opts.Lifecycle = t
	return rpc.NewServer(opts)
}

// Table returns a method table that serves t: every method of the
// protocol, and the debug methods when its Config asks for them. Each
// server of a session (stdio's, or a persisted session's, again at every
// resume) takes a table of its own.
func (t *Tools) Table() *rpc.Table {
	tab := rpc.NewTable()
	t.register(tab)
	if t.cfg.DebugMethods {
		t.registerDebug(tab)
	}
	return tab
}

// register puts the tools' methods into the table. A method whose
// requests may be a destination's is wrapped by forwarded (or
// forwardedLater) with its route, so that its handler serves this
// server's requests only.
func (t *Tools) register(tab *rpc.Table) {
	rpc.Handle(tab, protocol.ApprovalsRequest, t.approvalsList)
	rpc.Handle(tab, protocol.RevokeApprovalRequest, t.revokeApproval)
	rpc.HandleInline(tab, protocol.MountsRequest, t.mountsList)
	rpc.Handle(tab, protocol.SyncMountRequest, t.syncMount)
	rpc.Handle(tab, protocol.RunCommandRequest, forwarded(protocol.RunCommandRequest, t.routeRunCommand, t.runCommand))
	rpc.Handle(tab, protocol.LongRunningRequest, forwarded(protocol.LongRunningRequest, byDestination(t, longRunningDest), t.longRunning))
	rpc.Handle(tab, protocol.CancelRequest, forwarded(protocol.CancelRequest, byHandle(t, cancelHandle), t.cancel))
	rpc.HandleEncoded(tab, protocol.ReadFileRequest, encodedReadFile(forwarded(protocol.ReadFileRequest, t.routeReadFile, t.readFile)))
	tab.Quick(protocol.MethodReadFile)
	rpc.Handle(tab, protocol.WriteFileRequest, forwarded(protocol.WriteFileRequest, byDestination(t, writeFileDest), t.writeFile))
	// A snapshot under a lock, answered on the read loop; a destination's later.
	rpc.HandleOrdered(tab, protocol.ProgressRequest, forwardedLater(protocol.ProgressRequest, t.routeProgress, t.progress))
	rpc.Handle(tab, protocol.WaitRequest, forwarded(protocol.WaitRequest, byHandle(t, waitHandle), t.wait))
	rpc.Handle(tab, protocol.ReadOutputRequest, forwarded(protocol.ReadOutputRequest, byHandle(t, readOutputHandle), t.readOutput))
	rpc.HandleOrdered(tab, protocol.WriteInputRequest, t.writeInput)
	// An ioctl on the read loop; a destination's later.
	rpc.HandleOrdered(tab, protocol.ResizeRequest, forwardedLater(protocol.ResizeRequest, byHandle(t, resizeHandle), t.resize))
	// A kill(2) on the read loop; a destination's later.
	rpc.HandleOrdered(tab, protocol.SignalRequest, forwardedLater(protocol.SignalRequest, byHandle(t, signalHandle), t.signal))
	rpc.HandleInline(tab, protocol.DestinationsRequest, t.destinations)
	rpc.HandleInline(tab, protocol.SessionsRequest, t.sessions)
	rpc.Handle(tab, protocol.SnapshotRequest, forwarded(protocol.SnapshotRequest, byDestination(t, snapshotDest), t.takeSnapshot))
	rpc.Handle(tab, protocol.RestoreRequest, forwarded(protocol.RestoreRequest, t.routeRestore, t.restore))
	rpc.Handle(tab, protocol.DiffRequest, forwarded(protocol.DiffRequest, t.routeDiff, t.diff))
	rpc.Handle(tab, protocol.SnapshotsRequest, forwarded(protocol.SnapshotsRequest, byDestination(t, snapshotsDest), t.listSnapshots))
	rpc.Handle(tab, protocol.DropSnapshotRequest, forwarded(protocol.DropSnapshotRequest, bySnapshot(t, dropID, dropDest), t.dropSnapshot))
	rpc.Handle(tab, protocol.ExportSnapshotRequest, forwarded(protocol.ExportSnapshotRequest, bySnapshot(t, exportID, exportDest), t.exportSnapshot))
	rpc.HandleNotification(tab, protocol.WorkDoneProgressCancelNotification, t.workDoneProgressCancel)
	tab.Sends(protocol.NotifyToolResult, protocol.NotifyStepTransition, protocol.NotifyHeartbeat, protocol.NotifyOutput, protocol.MethodCancelRequest,
		protocol.NotifyEvent, protocol.NotifyPortOpened, protocol.NotifyPortClosed,
		protocol.NotifyProgress, protocol.NotifyLogMessage)
	tab.SendsRequests(protocol.MethodWorkDoneProgressCreate, protocol.MethodApprovalRequest)
}

// state returns the workspace and the process manager, set by Initialize.
func (t *Tools) state() (*workspace.Workspace, *process.Manager) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ws, t.mgr
}
