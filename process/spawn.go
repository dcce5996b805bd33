package process

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/panics"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/sandbox"
)

// Read sizes of an output pump: it starts small (a thousand idle commands
// hold three pumps each) and grows to pumpBufSize once a read fills its
// buffer, so a child printing fast is drained in few reads, each written
// to the files in one write(2). The pipe itself grows then too (growPipe),
// not at the fork: most commands never print enough to need it.
const (
	pumpFirstBufSize = 32 << 10
	pumpBufSize      = 256 << 10
)

// smallBufs and bigBufs hold the pumps' read buffers (pumpFirstBufSize and
// pumpBufSize bytes) between commands: they were most of what a short
// command allocated, and so most of the garbage collector's work.
var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, pumpFirstBufSize); return &b }}
	bigBufs   = sync.Pool{New: func() any { b := make([]byte, pumpBufSize); return &b }}
)

// proc is one spawned process (a plain command, or one recipe step) with
// its output pumps and its waiter.
type proc struct {
	cmd  *exec.Cmd
	pid  int
	pgid int
	// started is when the fork returned.
	started time.Time

	// exited is closed by the waiter once cmd.Wait has returned; state and
	// ended are written before and only read after.
	exited chan struct{}
	state  *os.ProcessState
	ended  time.Time

	// eof is closed when the last pump has stopped (EOF, or forced).
	eof     chan struct{}
	pending atomic.Int32
	// pumped counts the reads that brought bytes, and writing the pumps
	// handing bytes on (a write that waits for a slow client, say): the
	// end of a command cuts only pipes that bring nothing (drained).
	pumped  atomic.Int64
	writing atomic.Int32
	// readers are the parent's read ends; each pump closes its own. Under
	// a terminal, the master is the first (and input, below, too).
	readers []*os.File
	// input is what WriteInput writes: the terminal's master, or the
	// write end of an open stdin; nil when the process takes no input.
	input *os.File

	// step is the recipe step the process runs (0 for a plain command).
	step int
	// report is what confined the process, nil when unconfined; limit is
	// the limit it exceeded, set by the waiter before exited is closed.
	report *sandbox.Report
	limit  sandbox.Limit
	// proxy is the step's network allow-list proxy, served on its
	// sandbox's listener until the waiter closes it once the process has
	// exited; nil without one. Set before the proc is shared.
	proxy *netproxy.Proxy
}

// spawnRequest is everything needed to fork one process.
type spawnRequest struct {
	path  string // resolved executable
	argv  []string
	dir   string
	env   []string
	stdin *os.File // nil: the null device
	// pty, when On, runs the process in a new session on a
	// pseudo-terminal of that size: stdin, stdout and stderr are the
	// terminal, and its master's bytes go to stdout.
	pty Winsize
	// openStdin gives the process a stdin pipe whose write end is
	// proc.input (without pty).
	openStdin bool
	// stdout, stderr and events receive the pipes' bytes; they must be
	// safe for use by several pumps at once.
	stdout, stderr, events io.Writer
	// onExit runs in the waiter after cmd.Wait returned and before exited
	// is closed.
	onExit func(*proc)
	// cg, if not nil, is the cgroup to fork into.
	cg *cgroup
	// confine, if not nil, confines the process (package sandbox).
	confine *sandbox.Spec
	// proxy, if not nil, configures the proxy served on the listener the
	// sandbox makes in the process's network namespace
	// (sandbox.Policy.Proxy).
	proxy  *netproxy.Config
	logger *slog.Logger
}

// spawnProc forks one process in a group of its own, with stdout, stderr
// and the events pipe (fd 3) pumped into the request's writers. The pumps
// and the waiter run in owner, which the command's supervisor waits for.
// If forking into req.cg fails but forking without it works, cgroupBroken
// is true: the caller should stop using cgroups.
//
// Its steps: the pipes or terminal opened (openStdio), the fork
// (startCmd), the child's ends closed (and on failure the parent's), then
// the proxy served, the pumps and the waiter (await) started.
func spawnProc(req spawnRequest, owner *conc.WaitGroup) (p *proc, cgroupBroken bool, err error) {
	sio, err := openStdio(req)
	if err != nil {
		return nil, false, err
	}
	cmd, sb, cgroupBroken, err := startCmd(req, sio)
	for _, w := range sio.writers {
		_ = w.Close() // the child holds its copies
	}
	if err != nil {
		for _, r := range sio.readers {
			_ = r.Close()
		}
		if sio.input != nil {
			_ = sio.input.Close()
		}
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil, false, err
		}
		return nil, false, spawnError(req.argv[0], err)
	}
	p = &proc{
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		pgid:    cmd.Process.Pid, // Setpgid with Pgid 0, or Setsid: the child leads its group
		started: time.Now(),
		exited:  make(chan struct{}),
		eof:     make(chan struct{}),
		readers: sio.readers,
		input:   sio.input,
	}
	if sb != nil {
		rep := sb.Report()
		p.report = &rep
		if l := sb.ProxyListener(); l != nil && req.proxy != nil {
			// Connections wait in the listener's backlog until Serve
			// accepts them; Serve returns once the waiter closes the proxy.
			p.proxy = netproxy.New(*req.proxy)
			owner.Go(func() { _ = p.proxy.Serve(l) })
		}
	}
	p.pending.Store(int32(len(sio.readers)))
	for i, r := range sio.readers {
		owner.Go(func() { p.pump(r, sio.outs[i], req.logger) })
	}
	owner.Go(func() { p.await(sb, req) })
	return p, cgroupBroken, nil
}

// startCmd forks the process of req with sio's ends, into req.cg when
// there is one; if the kernel refuses that fork for another reason than
// the confinement, it forks again without the cgroup, and cgroupBroken
// reports whether that one worked. sb is the process's sandbox, nil when
// it is not confined.
func startCmd(req spawnRequest, sio *stdio) (cmd *exec.Cmd, sb *sandbox.Sandbox, cgroupBroken bool, err error) {
	cmd = sio.command(req, req.cg)
	sb, err = forkOnFreshGoroutine(cmd, req.confine)
	if err != nil && req.cg != nil && !errors.Is(err, sandbox.ErrUnavailable) {
		// The kernel may refuse CLONE_INTO_CGROUP; the command can still
		// run, attributed by markers only.
		cmd = sio.command(req, nil)
		if sb, err = forkOnFreshGoroutine(cmd, req.confine); err == nil {
			cgroupBroken = true
		}
	}
	return cmd, sb, cgroupBroken, err
}

// await is p's waiter: it waits for the process to exit, closes its
// proxy, finishes its sandbox sb (nil: none), records how and when it
// ended, runs req.onExit and closes p.exited. It runs in the command's
// owner group.
func (p *proc) await(sb *sandbox.Sandbox, req spawnRequest) {
	// Wait returns once the process has exited: the pipes are *os.File,
	// so os/exec runs no copying goroutines of its own.
	_ = p.cmd.Wait()
	if p.proxy != nil {
		// The step has ended: so has its way out. Close waits for
		// every goroutine of the proxy; its Stats are final after.
		_ = p.proxy.Close()
	}
	if sb != nil {
		limit, err := sb.Finish()
		if err != nil {
			req.logger.Warn("ending a confined process", "pid", p.pid, "err", err)
		}
		p.limit = limit
	}
	p.state = p.cmd.ProcessState
	p.ended = time.Now()
	execRemove(p.pid)
	kickReaper() // orphan zombies the peek could not see past this one
	if req.onExit != nil {
		req.onExit(p)
	}
	close(p.exited)
}

// forkOnFreshGoroutine starts cmd from a new goroutine, which never holds
// runtime.LockOSThread, so Pdeathsig is tied to a thread that lives as long
// as the server; a confined cmd is started by sandbox.Start, from a thread
// of its own that lives until the Sandbox is finished. It holds
// execTable.gate for reading from before the fork until the pid is
// recorded, so the orphan reaper cannot wait for the new child (nor see a
// confined child stopped at its exec). The caller waits for the goroutine,
// its owner.
func forkOnFreshGoroutine(cmd *exec.Cmd, confine *sandbox.Spec) (*sandbox.Sandbox, error) {
	var (
		sb  *sandbox.Sandbox
		err error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		execTable.gate.RLock()
		defer execTable.gate.RUnlock()
		if confine != nil {
			sb, err = sandbox.Start(cmd, *confine)
		} else {
			err = cmd.Start()
		}
		if err == nil {
			execAdd(cmd.Process.Pid)
		}
	}()
	<-done
	return sb, err
}

// spawnError turns a failed fork/exec into a *SpawnError with a reason a
// user can act on.
func spawnError(argv0 string, err error) error {
	reason := err.Error()
	var pe *fs.PathError
	switch {
	case errors.Is(err, syscall.ENOENT) && errors.As(err, &pe) && pe.Op == "chdir":
		reason = "working directory does not exist"
	case errors.Is(err, syscall.ENOENT):
		reason = "not found"
	case errors.Is(err, syscall.EACCES):
		reason = "permission denied"
	case errors.Is(err, syscall.ENOEXEC):
		reason = "not an executable format (a script needs a #! line)"
	case errors.Is(err, syscall.ENOTDIR):
		reason = "not a directory"
	}
	return &SpawnError{Argv0: argv0, Reason: reason, Err: err}
}

// pump copies r into w until EOF, a read error, or forceClose. A panic in
// w is logged and the pump goes on draining, so the child never blocks on a
// full pipe.
func (p *proc) pump(r *os.File, w io.Writer, logger *slog.Logger) {
	defer func() {
		_ = r.Close()
		if p.pending.Add(-1) == 0 {
			close(p.eof)
		}
	}()
	pool := &smallBufs
	bp := pool.Get().(*[]byte)
	defer func() { pool.Put(bp) }()
	buf := *bp
	var broken bool
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.pumped.Add(1)
		}
		if n > 0 && !broken {
			var c panics.Catcher
			p.writing.Add(1)
			c.Try(func() { _, _ = w.Write(buf[:n]) })
			p.writing.Add(-1)
			if rec := c.Recovered(); rec != nil {
				logger.Error("output capture panicked; discarding the rest of this stream", "pid", p.pid, "panic", rec.String())
				broken = true
			}
		}
		if err != nil {
			return
		}
		if n == len(buf) && len(buf) < pumpBufSize {
			growPipe(r)
			pool.Put(bp) // the writers do not retain buf
			pool = &bigBufs
			bp = pool.Get().(*[]byte)
			buf = *bp
		}
	}
}

// drainState says whether p's pumps brought bytes since the count last
// (pumped's value then), and whether one is handing bytes on now; it
// returns the count now.
func (p *proc) drainState(last int64) (brought, handing bool, now int64) {
	now = p.pumped.Load()
	return now != last, p.writing.Load() > 0, now
}

// forceClose makes every pump still reading return, for pipes that a
// process nobody could kill still holds open.
func (p *proc) forceClose() {
	for _, r := range p.readers {
		_ = r.SetReadDeadline(time.Now())
	}
}

// lockedWriter serialises writes to one capture stream, which pumps of
// consecutive recipe steps may share.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

// Write writes p to l.w, one write at a time.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// exitOf returns the exit code (nil when a signal ended the process) and
// the signal's name.
func exitOf(ps *os.ProcessState) (*int, string) {
	if ps == nil {
		return nil, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, signalName(ws.Signal())
	}
	code := ps.ExitCode()
	return &code, ""
}

// spawnFailCode is the exit code a recipe step gets when it cannot be
// spawned, following the shells: 126 when found but not runnable, 127 when
// not found.
func spawnFailCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// describeSpawnError renders err for the step's stderr.
func describeSpawnError(step string, err error) string {
	return fmt.Sprintf("toolhost: step %q: %v\n", step, err)
}
