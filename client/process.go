package client

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// stderrTail is how much of a process's stderr Start keeps for errors.
const stderrTail = 8 << 10

// Start starts cmd (the toolhost binary and its flags) and returns a client
// talking over its stdin and stdout. cmd must not have Stdin or Stdout set;
// its stderr goes to cmd.Stderr if set, and its tail is kept for the error
// that says why the transport ended. If ctx is done before Close, the
// process is killed. Close closes stdin, waits for the process to exit and
// returns its exit error.
func Start(ctx context.Context, cmd *exec.Cmd, opts *Options) (*Client, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &tailBuffer{max: stderrTail}
	if cmd.Stderr != nil {
		cmd.Stderr = io.MultiWriter(cmd.Stderr, tail)
	} else {
		cmd.Stderr = tail
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	closeTimeout := 10 * time.Second
	if opts != nil && opts.CloseTimeout > 0 {
		closeTimeout = opts.CloseTimeout
	}
	p := &process{cmd: cmd, stdin: stdin, stderr: tail, closeTimeout: closeTimeout, exited: make(chan struct{})}
	p.stopKill = context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	return newClient(stdout, stdin, opts, p), nil
}

// process is the child of Start.
type process struct {
	cmd          *exec.Cmd
	stdin        io.Closer
	stderr       *tailBuffer
	closeTimeout time.Duration
	// stopKill stops the kill on ctx's end.
	stopKill func() bool

	reapOnce sync.Once
	// exited is closed once cmd.Wait has returned; waitErr is set before.
	exited  chan struct{}
	waitErr error
}

// reap waits for the process on a goroutine of its own, once. It must run
// only after the read loop has read stdout to its end: Wait closes it.
func (p *process) reap() {
	p.reapOnce.Do(func() {
		go func() { // owned by the client: Close waits on exited
			p.waitErr = p.cmd.Wait()
			close(p.exited)
		}()
	})
}

// ended is called by the read loop once stdout has ended. It reaps the
// process, gives it a moment to exit (and its stderr to drain), and returns
// what to add to the transport's error: how it exited and its stderr's tail.
func (p *process) ended() string {
	p.reap()
	status := "is still running"
	select {
	case <-p.exited:
		status = "exited with status 0"
		if p.waitErr != nil {
			status = "exited: " + p.waitErr.Error()
		}
	case <-time.After(2 * time.Second):
	}
	s := fmt.Sprintf("; %s %s", p.cmd.Path, status)
	if t := p.stderr.String(); t != "" {
		s += "; its stderr ends:\n" + t
	}
	return s
}

// close closes stdin, waits for the process to exit (killing it after the
// close timeout) and for the client's goroutines, and returns the exit
// error.
func (p *process) close(c *Client) error {
	_ = p.stdin.Close()
	t := time.NewTimer(p.closeTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-c.done
	}
	// The read loop has ended, so reap has been called.
	<-p.exited
	p.stopKill()
	return p.waitErr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	// buf holds at most 2*max bytes, the last of them written; guarded by mu.
	buf []byte
}

// Write appends p, dropping all but the last max bytes now and then.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String returns the last max bytes written.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(b)
}
