// Package daemontest starts and owns the daemons the test fixtures run for
// real (sshd in sshdtest, dockerd in dockertest): each is started from a
// thread kept locked for as long as it runs, so that its Pdeathsig (set by
// the fixture in cmd.SysProcAttr) ends it with the process that started
// it; its output is kept, the last part of it for failures; and it is
// reaped, and its output read to the end, before Exited is closed.
package daemontest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Daemon is a daemon Start started.
type Daemon struct {
	// Cmd is its command, started.
	Cmd *exec.Cmd
	// Exited is closed once it is reaped and its output read to the end.
	Exited chan struct{}

	log tailLog
}

// Start starts cmd with its stdout and stderr on a pipe, whose last keep
// bytes LogTail returns, and returns once cmd has started (or failed to).
// The channel it returns is closed at the first line of that output with
// marker in it (the daemon's "listening" line). After the daemon exits,
// what it forked may hold the pipe open: drain bounds how long the reading
// waits for them before it ends.
func Start(cmd *exec.Cmd, marker string, keep int, drain time.Duration) (*Daemon, <-chan struct{}, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	d := &Daemon{Cmd: cmd, Exited: make(chan struct{}), log: tailLog{keep: keep}}
	heard := make(chan struct{})
	started := make(chan error, 1)
	go d.own(r, w, marker, drain, heard, started) // owned by Exited: it closes it last
	if err := <-started; err != nil {
		return nil, nil, err
	}
	return d, heard, nil
}

// own is the daemon's owner. It starts the daemon from a thread it keeps
// locked (never unlocked, so the thread, and with it Pdeathsig, lasts as
// long as this goroutine, which lasts as long as the daemon), says on
// started whether it started, reaps it, and waits for the reader of its
// output before closing Exited.
func (d *Daemon) own(r, w *os.File, marker string, drain time.Duration, heard chan<- struct{}, started chan<- error) {
	runtime.LockOSThread()
	err := d.Cmd.Start()
	w.Close() // the daemon and its children hold the pipe's write end now
	started <- err
	if err != nil {
		r.Close()
		close(d.Exited)
		return
	}
	// logDone is closed by the output's reader, owned by this goroutine,
	// which waits for it below.
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		d.readLog(r, marker, heard)
	}()
	_ = d.Cmd.Wait()
	// What the daemon forked may hold the pipe a while; after drain,
	// closing the read end ends the reader.
	timer := time.NewTimer(drain)
	select {
	case <-logDone:
	case <-timer.C:
	}
	timer.Stop()
	r.Close()
	<-logDone
	close(d.Exited)
}

// readLog keeps the daemon's output from r, and closes heard once a line
// has marker in it. It returns at the pipe's end, or when r is closed.
func (d *Daemon) readLog(r io.Reader, marker string, heard chan<- struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	said := false
	for sc.Scan() {
		d.log.add(sc.Text())
		if !said && strings.Contains(sc.Text(), marker) {
			said = true
			close(heard)
		}
	}
	// A line too long to scan: keep the pipe drained so the daemon never
	// blocks.
	_, _ = io.Copy(io.Discard, r)
}

// LogTail returns the last part of the daemon's output, for failures.
func (d *Daemon) LogTail() string {
	return d.log.tail()
}

// Stop ends the daemon with SIGTERM and, after limit, SIGKILL, and waits
// until Exited is closed.
func (d *Daemon) Stop(limit time.Duration) {
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-d.Exited:
	case <-timer.C:
		_ = d.Cmd.Process.Kill()
		<-d.Exited
	}
}

// tailLog keeps the last keep bytes of a log.
type tailLog struct {
	keep int

	mu  sync.Mutex
	buf []byte // guarded by mu
}

// add appends a line, dropping what tail will not show any more.
func (t *tailLog) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(append(t.buf, line...), '\n')
	if len(t.buf) > 2*t.keep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.keep-1:]...)
	}
}

// tail returns the last keep bytes, marked "…" when there were more.
func (t *tailLog) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.keep {
		return "…" + string(t.buf[len(t.buf)-t.keep:])
	}
	return string(t.buf)
}
