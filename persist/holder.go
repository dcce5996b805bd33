package persist

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// SessionConfig is one session's configuration, as its front's command
// line gives it.
type SessionConfig struct {
	Tools  tools.Config
	RPC    rpc.Options
	Linger time.Duration
}

// Configure turns a front's command line, environment and directory into
// a session's configuration; the session's logs go to logs.
type Configure func(args, env []string, cwd string, logs io.Writer) (SessionConfig, error)

// HolderConfig configures a holder.
type HolderConfig struct {
	// Root is the workspace root the holder serves sessions of.
	Root string
	Dirs Dirs
	// Build names this binary (see BuildID); fronts of another build are
	// refused.
	Build string
	// Idle is how long the holder waits without sessions or connections
	// before it exits.
	Idle time.Duration
	// Configure makes each connection's session configuration.
	Configure Configure
	// ConfigureMCP makes the shared MCP server of an MCP front's command
	// line (nil: MCP fronts are refused).
	ConfigureMCP ConfigureMCP
	// ListenMCP opens the HTTP listener of a shared MCP server, for a
	// front of `toolhost mcp --persist --http` (nil: such fronts are
	// refused).
	ListenMCP ListenMCP
	Logger    *slog.Logger
	// Log is where the holder's own logs go (its log file); sessions log
	// there while detached.
	Log io.Writer
}

// holder holds the persisted sessions of one root for one OS user.
type holder struct {
	cfg  HolderConfig
	log  *slog.Logger
	key  string
	ln   *net.UnixListener
	lock *os.File

	mu sync.Mutex
	// sessions are the sessions held, by id; guarded by mu.
	sessions map[string]*session
	// mcp are the shared MCP servers, by their command line's key
	// (mcpKey); guarded by mu. mcpMu serializes making them.
	mcp   map[string]*mcpShared
	mcpMu sync.Mutex
	// http is the root's one HTTP listener, of the shared server httpOf,
	// opened for the HTTP flags httpArgs; nil when none. Guarded by mcpMu
	// (closeMCP, which closes it, takes mcpMu).
	http     MCPListener
	httpOf   *mcpShared
	httpArgs []string
	// conns counts the fronts being served; guarded by mu.
	conns int
	// idle fires Idle after the holder last had neither sessions nor
	// connections; guarded by mu.
	idle    *time.Timer
	closing bool // no more connections are accepted; guarded by mu

	// work owns the goroutines serving fronts and ending sessions; Run
	// waits for it.
	work sync.WaitGroup
	quit chan struct{} // closed to stop accepting and exit
	once sync.Once
}

// errHeld says another holder holds the root; RunHolder exits quietly.
var errHeld = errors.New("another holder holds this root")

// RunHolder serves fronts until the holder has been idle for Idle, or a
// signal ends it. It returns the process exit code.
func RunHolder(cfg HolderConfig) int {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 2 * time.Second
	}
	h := &holder{cfg: cfg, log: cfg.Logger, key: holderKey(cfg.Root, cfg.Build), sessions: map[string]*session{}, mcp: map[string]*mcpShared{}, quit: make(chan struct{})}
	if err := h.listen(); err != nil {
		if errors.Is(err, errHeld) {
			h.log.Info("another holder serves this root; exiting", "root", cfg.Root)
			return 0
		}
		h.log.Error("holder cannot start", "err", err)
		return 1
	}
	h.log.Info("holder serving", "root", cfg.Root, "socket", cfg.Dirs.socketPath(h.key), "pid", os.Getpid())
	h.adoptDead()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	accepted := make(chan struct{})
	go func() { // owned by RunHolder, which waits on accepted
		defer close(accepted)
		h.accept()
	}()
	h.mu.Lock()
	h.armIdleLocked()
	h.mu.Unlock()
	select {
	case sig := <-sigs:
		h.log.Info("signal received; ending every session", "signal", sig)
		h.endAll("the holder was stopped by " + sig.String())
	case <-h.quit:
	}
	h.stop()
	<-accepted
	h.work.Wait()
	h.log.Info("holder exiting")
	h.lock.Close()
	return 0
}

// listen takes the root's lock and listens on its socket, replacing a
// stale one. A holder whose lock is taken while its socket answers is
// another holder serving: errHeld. One whose lock is taken while its
// socket does not answer is one exiting: listen waits for its lock.
func (h *holder) listen() error {
	d := h.cfg.Dirs
	lock, err := fsutil.LockFile(d.lockPath(h.key), false)
	if errors.Is(err, fsutil.ErrLocked) {
		if c, derr := net.DialTimeout("unix", d.socketPath(h.key), time.Second); derr == nil {
			c.Close()
			return errHeld
		}
		lock, err = fsutil.LockFile(d.lockPath(h.key), true)
	}
	if err != nil {
		return fmt.Errorf("holder lock: %w", err)
	}
	// The lock file says who holds it, for people and tests; the lock
	// itself is what counts.
	_ = lock.Truncate(0)
	_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	// The lock is ours: a socket file left there is a dead holder's.
	_ = os.Remove(d.socketPath(h.key))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.socketPath(h.key), Net: "unix"})
	if err != nil {
		lock.Close()
		return fmt.Errorf("holder socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // stop removes it, under the lock
	if err := os.Chmod(d.socketPath(h.key), 0o600); err != nil {
		ln.Close()
		lock.Close()
		return err
	}
	h.ln, h.lock = ln, lock
	return nil
}

// accept serves each front on a goroutine of its own until the listener
// closes.
func (h *holder) accept() {
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		h.mu.Lock()
		if h.closing {
			h.mu.Unlock()
			c.Close()
			continue
		}
		h.conns++
		if h.idle != nil {
			h.idle.Stop()
		}
		h.work.Add(1)
		h.mu.Unlock()
		go func() { // owned by h.work, which RunHolder waits for
			defer h.work.Done()
			h.serveFront(c)
			h.mu.Lock()
			h.conns--
			h.armIdleLocked()
			h.mu.Unlock()
		}()
	}
}

// armIdleLocked starts the idle timer when the holder holds nothing. The
// caller holds mu.
func (h *holder) armIdleLocked() {
	if h.closing || h.holdsLocked() {
		return
	}
	if h.idle != nil {
		h.idle.Stop()
	}
	h.idle = time.AfterFunc(h.cfg.Idle, func() {
		h.mu.Lock()
		quit := !h.closing && !h.holdsLocked()
		if quit {
			h.closing = true
		}
		h.mu.Unlock()
		if quit {
			h.log.Info("holder idle; exiting", "idle", h.cfg.Idle)
			h.once.Do(func() { close(h.quit) })
		}
	})
}

// holdsLocked reports whether the holder serves a front or holds a
// session or a shared MCP server. The caller holds mu.
func (h *holder) holdsLocked() bool {
	return h.conns > 0 || len(h.sessions) > 0 || len(h.mcp) > 0
}

// stop stops accepting and removes the socket.
func (h *holder) stop() {
	h.mu.Lock()
	h.closing = true
	if h.idle != nil {
		h.idle.Stop()
	}
	h.mu.Unlock()
	_ = os.Remove(h.cfg.Dirs.socketPath(h.key))
	h.ln.Close()
}

// endAll ends every session at once: the shared MCP servers first,
// which end their own, then the sessions left.
func (h *holder) endAll(reason string) {
	h.endEach(reason, func() (all []*lingering) {
		for _, m := range h.mcp {
			all = append(all, &m.lingering)
		}
		return all
	})
	h.endEach(reason, func() (all []*lingering) {
		for _, s := range h.sessions {
			all = append(all, &s.lingering)
		}
		return all
	})
}

// logSwitch is where a session's logs go: the stderr of the front that
// serves it, or the holder's log while detached.
type logSwitch struct {
	fallback io.Writer
	mu       sync.Mutex
	w        io.Writer // guarded by mu; nil: fallback
}

func (l *logSwitch) set(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}

func (l *logSwitch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		if n, err := l.w.Write(p); err == nil {
			return n, nil
		}
	}
	return l.fallback.Write(p)
}
