//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysState is the Linux part of a Sandbox.
type sysState struct {
	// groups are the limit cgroups; set before the child starts, then
	// only read.
	groups []*group
	// watches are the limit event sources, read by the monitors and
	// closed by Finish, which also closes stop for the watches without a
	// file.
	watches []watch
	stop    chan struct{}
	// monitors are the goroutines that read watches; Finish waits for
	// them.
	monitors sync.WaitGroup
	onLimit  func(Limit)
	// cpuSeconds is RLIMIT_CPU's soft limit, 0 for none.
	cpuSeconds uint64
	// proxy is the proxy's listener (proxy_linux.go), made by the
	// confining thread before it reports on started, closed by Finish;
	// proxyEnv is Spec.ProxyEnv.
	proxy    net.Listener
	proxyEnv func(netip.AddrPort) []string

	// release is closed by Finish: the confining goroutine returns and
	// the runtime ends its thread, still locked.
	release chan struct{}
	// init is pid 1 of the command's PID namespace, nil without one: set
	// by the confining goroutine before it reports on started, ended by
	// endInit.
	init *os.Process

	// mu guards hit and finished.
	mu sync.Mutex
	// hit is the first limit a monitor saw hit.
	hit Limit
	// finished is set by Finish; monitors then stop acting.
	finished bool
}

// start is Start on Linux.
func start(cmd *exec.Cmd, spec Spec, caps Capabilities) (*Sandbox, error) {
	if cmd.Process != nil {
		return nil, errors.New("sandbox: the command has already started")
	}
	pol, fds, err := openPolicy(spec.Policy)
	if err != nil {
		return nil, err
	}
	defer fds.close() // the confining thread has used them when Start returns
	if policyOpened != nil {
		policyOpened(pol)
	}
	ly, rep, err := plan(pol, spec.Limits, caps)
	if rerr := ly.refusal(); rerr != nil {
		return nil, rerr
	}
	if err != nil && (spec.Require || !errors.Is(err, ErrUnavailable)) {
		return nil, err
	}
	ly.fds = fds
	if ly.tmp != nil {
		ly.tmp.setEnv(cmd, spec.Policy.TempDir)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	if ly.stopAtExec() {
		if attr.Ptrace {
			return nil, errors.New("sandbox: the command already asks to be traced")
		}
		attr.Ptrace = true
	}
	if ly.netns == NetNSUserNS {
		if err := setUserNetNS(attr); err != nil {
			return nil, err
		}
	}
	if ly.pidns {
		clearPdeathsig(attr)
	}

	s := &Sandbox{cmd: cmd, report: rep}
	st := &s.sys
	st.onLimit = spec.OnLimit
	st.cpuSeconds = ly.cpuSeconds
	st.proxyEnv = spec.ProxyEnv
	st.stop = make(chan struct{})
	st.release = make(chan struct{})
	v2fd, err := st.makeGroups(ly, spec, attr)
	if err != nil {
		_ = st.removeGroups()
		return nil, err
	}
	for _, g := range st.groups {
		ws, err := g.watches()
		if err != nil {
			st.closeWatches()
			_ = st.removeGroups()
			return nil, err
		}
		st.watches = append(st.watches, ws...)
	}

	started := make(chan error, 1)
	goLocked(func() { st.confined(cmd, ly, started) })
	err = <-started
	if v2fd != nil {
		_ = v2fd.Close()
	}
	if err != nil {
		st.closeWatches()
		err = errors.Join(err, st.endInit())
		_ = st.removeGroups()
		return nil, err
	}
	for _, w := range st.watches {
		st.monitors.Go(func() { st.monitor(w) })
	}
	return s, nil
}

// policyOpened, set by tests only, runs in Start once the policy is opened
// and before anything is mounted: a test swaps a path there.
var policyOpened func(Policy)

// makeGroups makes the limit cgroups ly asks for. A v2 group is the
// caller's (spec.CgroupV2Dir) or one of the package's that attr now forks
// into; the returned directory must stay open until the fork.
func (st *sysState) makeGroups(ly layers, spec Spec, attr *syscall.SysProcAttr) (*os.File, error) {
	var (
		v2ctrls  []string
		v2parent string
		v2fd     *os.File
	)
	for _, c := range []struct {
		name string
		ctl  Controller
	}{{"memory", ly.memory}, {"pids", ly.pids}} {
		switch c.ctl.Version {
		case 2:
			if v2parent != "" && v2parent != c.ctl.Parent {
				return nil, fmt.Errorf("cgroup: pids and memory are delegated in different places (%s, %s)", v2parent, c.ctl.Parent)
			}
			v2parent = c.ctl.Parent
			v2ctrls = append(v2ctrls, c.name)
		case 1:
			g, err := newGroup(1, c.ctl.Parent, []string{c.name}, spec.Limits)
			if err != nil {
				return nil, err
			}
			st.groups = append(st.groups, g)
		}
	}
	if len(v2ctrls) == 0 {
		return nil, nil
	}
	var (
		g   *group
		err error
	)
	switch {
	case spec.CgroupV2Dir != "":
		g, err = callerGroup(v2parent, spec.CgroupV2Dir, v2ctrls, spec.Limits)
	case attr.UseCgroupFD:
		err = errors.New("cgroup: the command already forks into a cgroup of its own; give it as Spec.CgroupV2Dir")
	default:
		if g, err = newGroup(2, v2parent, v2ctrls, spec.Limits); err == nil {
			if v2fd, err = os.Open(g.dir); err != nil {
				err = fmt.Errorf("cgroup: %w", err)
			} else {
				attr.UseCgroupFD = true
				attr.CgroupFD = int(v2fd.Fd())
			}
		}
	}
	if g != nil {
		st.groups = append(st.groups, g)
	}
	return v2fd, err
}

// confined runs on a goroutine locked to its OS thread (goLocked), never
// unlocked: it starts the init of the command's PID namespace, joins the
// v1 limit groups, confines the thread (capabilities, network and mount
// namespaces, Landlock, seccomp), starts cmd, which inherits all of it
// and is born in the PID namespace, finishes the child's set-up while it is
// stopped at its exec, leaves the groups and reports on started. It then
// holds the thread until Finish releases it, since Pdeathsig fires when
// the thread that forked a child exits; then it returns and the runtime
// ends the thread, so nothing else ever runs confined. New threads of the
// runtime are never cloned from a locked thread (they come from its
// template thread), so none inherits the confinement. It waits on a
// channel, not in a system call: a parked goroutine gives its P back at
// once, so the goroutine it woke with started runs without waiting for the
// runtime to notice a blocked thread.
func (st *sysState) confined(cmd *exec.Cmd, ly layers, started chan<- error) {
	err := st.confineAndStart(cmd, ly)
	if err != nil {
		st.closeProxy()
	}
	started <- err
	if err != nil {
		return
	}
	<-st.release
}

// confiners owns the goroutines locked to confining threads (goLocked):
// each returns once its Sandbox is finished, or at once when its Start
// failed, and the runtime then ends its thread. Drain waits for them.
// Finish does not: a goroutine woken on a thread about to exit would wait
// for the runtime to find it another, which costs more than the rest of
// Finish.
var confiners sync.WaitGroup

// Drain waits until the confining goroutine of every Start has returned:
// those of sandboxes not finished yet keep it waiting. The runtime ends
// their threads right after. It also waits for ProbeInBackground's
// goroutine. Call it at shutdown, after the last Finish.
func Drain() {
	probing.Wait()
	confiners.Wait()
}

// goLocked runs f on a new goroutine locked to an OS thread that is not the
// process's main thread, and never unlocks it, so that the runtime ends
// the thread when f returns. The runtime never ends the main thread (a
// goroutine that exits locked to it wedges it instead, with whatever was
// done to it), so if the goroutine lands there it holds the main thread
// while a second goroutine, which then cannot be scheduled on it, locks
// another thread and runs f; it then gives the main thread back. The
// goroutines belong to confiners.
func goLocked(f func()) {
	confiners.Go(func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return // still locked: the thread exits
		}
		locked := make(chan struct{})
		confiners.Go(func() {
			runtime.LockOSThread() // never unlocked: the thread exits
			close(locked)
			f()
		})
		<-locked
		runtime.UnlockOSThread()
	})
}

// confineAndStart is the body of confined up to the report. Its steps, in
// order: the PID namespace's init, the v1 limit groups joined
// (joinGroups), the thread confined (confineThread), the fork and exec,
// the child's set-up at its exec (setUpChild), and the groups left.
func (st *sysState) confineAndStart(cmd *exec.Cmd, ly layers) error {
	if ly.pidns {
		// First: the init is pid 1, and stays out of the limit groups.
		init, err := startPIDNS()
		if err != nil {
			return err
		}
		st.init = init
	}
	joins, pidsAtExec, err := st.joinGroups(ly)
	defer func() {
		for _, j := range joins {
			j.close()
		}
	}()
	if err != nil {
		return err
	}
	if err := st.confineThread(cmd, &ly); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	errs := []error{setUpChild(cmd.Process.Pid, ly, pidsAtExec)}
	for _, j := range joins {
		errs = append(errs, j.leave())
	}
	if err := errors.Join(errs...); err != nil {
		// The command runs, but not as reported: end it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return nil
}

// joinGroups has the calling thread join the command's v1 groups, so that
// the child is forked into them, but for its v1 pids group when ly puts
// the child there at its exec (pidsAtExec, returned). It returns the
// groups joined, to be left once the child is started and closed in any
// case, even with an error (those joined before it).
func (st *sysState) joinGroups(ly layers) (joins []*joined, pidsAtExec *group, err error) {
	for _, g := range st.groups {
		if g.version != 1 {
			continue
		}
		if ly.pidsAtExec && g.has("pids") {
			pidsAtExec = g
			continue
		}
		j, err := g.join()
		if err != nil {
			return joins, pidsAtExec, err
		}
		joins = append(joins, j)
	}
	return joins, pidsAtExec, nil
}

// confineThread applies ly's layers to the calling thread, which the
// child inherits, in this order: capabilities dropped, the network
// namespace, the proxy's listener in it (which sets ly.proxyPort, for
// Landlock's connect rule), the mount namespace, Landlock, then the
// seccomp filters.
func (st *sysState) confineThread(cmd *exec.Cmd, ly *layers) error {
	if ly.capDrop {
		if err := dropCaps(); err != nil {
			return err
		}
	}
	if ly.netns == NetNSUnshare {
		if err := unshareNet(); err != nil {
			return err
		}
	}
	if ly.proxy {
		// In the namespace, and before Landlock and seccomp.
		port, err := st.listenProxy(cmd)
		if err != nil {
			return err
		}
		ly.proxyPort = port
	}
	if ly.mntns {
		if err := applyMountNS(*ly); err != nil {
			return err
		}
	}
	if ly.abi > 0 {
		if err := restrictThread(*ly); err != nil {
			return err
		}
	}
	if ly.seccomp {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		if err := installNetFilter(); err != nil {
			return err
		}
	}
	if ly.unixSeccomp {
		if err := installUnixFilter(); err != nil {
			return err
		}
	}
	return nil
}

// setUpChild finishes the set-up of pid, the child just started: while
// it is stopped at its exec (ly.stopAtExec), the id maps of its user
// namespace, its v1 pids group (pidsAtExec, nil: none) and RLIMIT_CPU;
// where it is not stopped, RLIMIT_CPU right after the exec.
func setUpChild(pid int, ly layers, pidsAtExec *group) error {
	if !ly.stopAtExec() {
		if ly.cpuSeconds > 0 {
			return setCPU(pid, ly.cpuSeconds)
		}
		return nil
	}
	return atExecStop(pid, func() error {
		var errs []error
		if ly.netns == NetNSUserNS || pidsAtExec != nil {
			// The thread is confined: writing under /proc and /sys is
			// for a goroutine on another thread.
			errc := make(chan error, 1)
			go func() {
				var err error
				if ly.netns == NetNSUserNS {
					err = writeIDMaps(pid)
				}
				if pidsAtExec != nil {
					err = errors.Join(err, pidsAtExec.add(pid))
				}
				errc <- err
			}()
			errs = append(errs, <-errc)
		}
		if ly.cpuSeconds > 0 {
			errs = append(errs, setCPU(pid, ly.cpuSeconds))
		}
		return errors.Join(errs...)
	})
}

// setCPU sets pid's RLIMIT_CPU: SIGXCPU after seconds of CPU time, SIGKILL
// one second later.
func setCPU(pid int, seconds uint64) error {
	lim := unix.Rlimit{Cur: seconds, Max: seconds + 1}
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil); err != nil {
		return fmt.Errorf("cpu limit: %w", err)
	}
	return nil
}

// atExecStop waits for the child, traced by the calling thread (Ptrace),
// to stop at its exec, before the new program runs a single instruction,
// runs setup and detaches. The wait leaves the child waitable (WNOWAIT): if
// it died instead, os/exec's Wait still reaps it.
func atExecStop(pid int, setup func() error) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("waiting for the exec: %w", err)
		}
	}
	const cldTrapped = 4 // CLD_TRAPPED: a ptrace stop
	if info.Code != cldTrapped {
		return nil // dead before its program ran: nothing to set up
	}
	err := setup()
	// The exec stop is a SIGTRAP; any other stop is a signal that arrived
	// before the exec, which the detach delivers.
	sig := siginfoStatus(&info)
	if sig == int(unix.SIGTRAP) {
		sig = 0
	}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0); e != 0 {
		return errors.Join(err, fmt.Errorf("detach: %w", e))
	}
	return err
}

// siginfoStatus returns si_status of a SIGCHLD siginfo: after si_signo,
// si_errno, si_code (and padding to 16 bytes on 64-bit platforms), si_pid
// and si_uid.
func siginfoStatus(info *unix.Siginfo) int {
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off+8)))
}

// monitor waits for w's group to hit its limit: it looks at the counters,
// then waits for the next notification (or pollEvery, where there is
// none), until Finish closes w.f or stop. The first hit of any limit kills
// every process in the limit groups and calls OnLimit.
func (st *sysState) monitor(w watch) {
	var tick <-chan time.Time
	if w.f == nil {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		tick = t.C
	}
	buf := make([]byte, 4096)
	for {
		if w.g.hit(w.kind) {
			st.limitHit(w.kind)
			return
		}
		if w.f != nil {
			if _, err := w.f.Read(buf); err != nil {
				return // closed by Finish
			}
			if w.certain {
				st.limitHit(w.kind)
				return
			}
			continue
		}
		select {
		case <-tick:
		case <-st.stop:
			return
		}
	}
}

// limitHit records the first limit hit, kills the groups' processes and
// tells the caller.
func (st *sysState) limitHit(kind Limit) {
	st.mu.Lock()
	first := st.hit == "" && !st.finished
	if first {
		st.hit = kind
	}
	st.mu.Unlock()
	if !first {
		return
	}
	for _, g := range st.groups {
		_ = g.kill()
	}
	if st.onLimit != nil {
		st.onLimit(kind)
	}
}

// closeWatches closes every event source and stops the polling monitors.
func (st *sysState) closeWatches() {
	for _, w := range st.watches {
		if w.f != nil {
			_ = w.f.Close()
		}
	}
	close(st.stop)
}

// removeGroups kills what is left in the package's own groups and removes
// them.
func (st *sysState) removeGroups() error {
	var errs []error
	for _, g := range st.groups {
		if !g.own {
			continue
		}
		if err := g.kill(); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, g.remove())
	}
	return errors.Join(errs...)
}

// errFinished is returned by a second Finish.
var errFinished = errors.New("sandbox: already finished")

// Finish ends the sandbox once cmd.Wait has returned: it stops watching
// the limits, says which limit the command exceeded ("" if none), ends the
// command's PID namespace (every process left in it is SIGKILLed, and
// Finish waits, up to 5 s, until they are gone), kills whatever is left in
// the limit cgroups the package made and removes them, and lets the
// confining goroutine return (Drain waits for that), after
// which the runtime ends its thread. A limit counts as exceeded when a
// cgroup saw an OOM kill or a refused fork, or when the command's process
// died of SIGXCPU, or of SIGKILL after using its CPU time. Call it exactly
// once; if the command still runs, releasing the thread fires its
// Pdeathsig, if it has one (but a PID namespace cannot end before the
// command is reaped: call Finish after cmd.Wait).
func (s *Sandbox) Finish() (Limit, error) {
	st := &s.sys
	st.mu.Lock()
	if st.finished {
		st.mu.Unlock()
		return "", errFinished
	}
	st.finished = true
	st.mu.Unlock()
	st.closeWatches()
	st.monitors.Wait()

	st.mu.Lock()
	hit := st.hit
	st.mu.Unlock()
	for _, g := range st.groups {
		if hit != "" {
			break
		}
		hit = g.exceeded()
	}
	if hit == "" && st.cpuSeconds > 0 {
		if ps := s.cmd.ProcessState; ps != nil {
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				used := ps.UserTime() + ps.SystemTime()
				if ws.Signal() == syscall.SIGXCPU || (ws.Signal() == syscall.SIGKILL && used >= time.Duration(st.cpuSeconds)*time.Second) {
					hit = LimitCPU
				}
			}
		}
	}
	// The namespace first: its end kills what the groups hold as well.
	err := errors.Join(st.endInit(), st.removeGroups())
	st.closeProxy()
	close(st.release)
	return hit, err
}

// endInit ends the command's PID namespace, if it has one, and waits until
// nothing of it is left; the command must have been waited for.
func (st *sysState) endInit() error {
	if st.init == nil {
		return nil
	}
	err := endPIDNS(st.init)
	st.init = nil
	return err
}
