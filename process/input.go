package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of a command's input, terminal and signals.
var (
	// ErrNoInput says the command was started without a pseudo-terminal
	// and without an open stdin: nothing can be written to it.
	ErrNoInput = errors.New("the command has no open input: start it with pty or openStdin")
	// ErrNoTerminal says the command's running step has no
	// pseudo-terminal to resize.
	ErrNoTerminal = errors.New("the command has no pseudo-terminal")
	// ErrUnsupported says this platform cannot do it.
	ErrUnsupported = errors.New("not supported on this platform")
	// ErrUnknownSignal says a signal name is not one Signal sends.
	ErrUnknownSignal = errors.New("unknown signal")
)

// NotRunningError says the command's input is gone: the command has ended
// (Status is its result's), or an eof closed the running step's stdin
// (Status is running). It matches ErrNotRunning.
type NotRunningError struct {
	Status string
	Reason string
}

// ErrNotRunning is what every *NotRunningError matches with errors.Is.
var ErrNotRunning = errors.New("not running")

func (e *NotRunningError) Error() string { return e.Reason }

// Is makes every *NotRunningError match ErrNotRunning.
func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }

// Winsize is the size of a pseudo-terminal; the zero Winsize asks for none.
type Winsize struct {
	Rows, Cols int
}

// On reports whether the size asks for a terminal.
func (w Winsize) On() bool { return w.Rows > 0 && w.Cols > 0 }

// signals are the signals Signal sends, by name.
var signals = map[string]unix.Signal{
	"SIGINT": unix.SIGINT, "SIGTERM": unix.SIGTERM, "SIGKILL": unix.SIGKILL,
	"SIGHUP": unix.SIGHUP, "SIGQUIT": unix.SIGQUIT, "SIGTSTP": unix.SIGTSTP,
	"SIGCONT": unix.SIGCONT, "SIGSTOP": unix.SIGSTOP, "SIGUSR1": unix.SIGUSR1,
	"SIGUSR2": unix.SIGUSR2, "SIGWINCH": unix.SIGWINCH, "SIGALRM": unix.SIGALRM,
}

// LookupSignal returns the signal a name stands for ("SIGINT" or "INT").
func LookupSignal(name string) (unix.Signal, error) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if s, ok := signals[n]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("%q: %w", name, ErrUnknownSignal)
}

// input is a command's input: the running step's pseudo-terminal master
// or the write end of its stdin pipe. Writes take turns in the order they
// were reserved (InputTurn), so that bytes reach the child in the order the
// requests arrived, whichever goroutine serves each.
type input struct {
	turns turnQueue

	mu sync.Mutex // guards the fields below
	// f is the running step's input, nil between steps, once eof closed
	// a pipe, and once the command has ended. For a terminal it is the
	// master, which the step's output pump reads and closes: writes then
	// fail, and are reported as not running.
	f *os.File
	// pty says f is a terminal master.
	pty bool
	// size is the running step's terminal size.
	size Winsize
	// resized is the size the latest Resize set, which later terminal
	// steps start at; zero before any.
	resized Winsize
	// closed says eof closed the running step's stdin.
	closed bool
}

// setStep makes f (nil for none) the running step's input; it replaces
// (and, for a pipe, closes) the previous step's.
func (in *input) setStep(f *os.File, pty bool) {
	in.mu.Lock()
	old, oldPty := in.f, in.pty
	in.f, in.pty, in.closed = f, pty, false
	in.mu.Unlock()
	if old != nil && !oldPty {
		_ = old.Close()
	}
}

// isStep reports whether f is still the running step's input.
func (in *input) isStep(f *os.File) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.f == f
}

// testHookInputWritten runs in WriteInput between a write with eof and the
// eof.
var testHookInputWritten func()

// endStep forgets f once its step's main process has exited, closing a
// stdin pipe; a terminal master is its pump's to close.
func (in *input) endStep(f *os.File) {
	in.mu.Lock()
	mine := in.f == f && f != nil
	pty := in.pty
	if mine {
		in.f = nil
	}
	in.mu.Unlock()
	if mine && !pty {
		_ = f.Close()
	}
}

// Turn is a reserved place in a command's queue of input writes.
type Turn struct{ n uint64 }

// turnQueue hands out turns in order and lets them go one at a time; a
// turn given up (Skip) is passed over.
type turnQueue struct {
	mu sync.Mutex // guards the fields below
	// next is the turn the next Reserve hands out; serving is the turn
	// that may go now. Turns between them are waiting or given up.
	next, serving uint64
	// skipped are given-up turns not yet reached.
	skipped map[uint64]bool
	// changed is closed, and replaced, each time serving moves.
	changed chan struct{}
}

// reserve hands out the next turn.
func (q *turnQueue) reserve() Turn {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := Turn{q.next}
	q.next++
	return t
}

// await waits until t may go; on ctx's end it gives t up and returns the
// context's error.
func (q *turnQueue) await(ctx context.Context, t Turn) error {
	for {
		q.mu.Lock()
		if q.serving == t.n {
			q.mu.Unlock()
			return nil
		}
		if q.changed == nil {
			q.changed = make(chan struct{})
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			q.done(t)
			return context.Cause(ctx)
		}
	}
}

// done ends turn t (served or given up) and lets the next one go.
func (q *turnQueue) done(t Turn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.serving != t.n {
		if q.skipped == nil {
			q.skipped = make(map[uint64]bool)
		}
		q.skipped[t.n] = true
		return
	}
	q.serving++
	for q.skipped[q.serving] {
		delete(q.skipped, q.serving)
		q.serving++
	}
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// HasInput reports whether the command was started to take input: a
// pseudo-terminal or an open stdin.
func (c *Command) HasInput() bool { return c.launched() && (c.spec.OpenStdin || c.anyPty) }

// InputTurn reserves the next place in the command's queue of writes: the
// caller then calls WriteInput with it, exactly once. It fails, reserving
// nothing, when the command takes no input (ErrNoInput) or has ended
// (*NotRunningError).
func (c *Command) InputTurn() (Turn, error) {
	if !c.HasInput() {
		return Turn{}, ErrNoInput
	}
	if err := c.notRunning(); err != nil {
		return Turn{}, err
	}
	return c.input.turns.reserve(), nil
}

// notRunning returns a *NotRunningError once the command has ended, else
// nil.
func (c *Command) notRunning() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return &NotRunningError{Status: c.result.Status, Reason: "the command has ended (" + c.result.Status + ")"}
	}
	return nil
}

// WriteInput waits for turn t, then writes data to the running step's
// input and, with eof, ends it: a stdin pipe is closed, a terminal gets
// its EOF character. It returns how many bytes of data went in. A child
// that does not read makes it wait until ctx ends (it then returns the
// bytes written and the context's cause); the turns after t wait too.
func (c *Command) WriteInput(ctx context.Context, t Turn, data []byte, eof bool) (int, error) {
	if err := c.input.turns.await(ctx, t); err != nil {
		return 0, err
	}
	defer c.input.turns.done(t)

	c.input.mu.Lock()
	f, pty, closed := c.input.f, c.input.pty, c.input.closed
	c.input.mu.Unlock()
	if f == nil || closed {
		if err := c.notRunning(); err != nil {
			return 0, err
		}
		reason := "the running step has no open input"
		if closed {
			reason = "an earlier eof closed the running step's stdin"
		}
		return 0, &NotRunningError{Status: StatusRunning, Reason: reason}
	}

	// This turn is the file's only writer: a deadline a cancelled write
	// left behind is cleared, and ctx's end cuts this write short.
	_ = f.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Now()) })
	defer stop()
	n, err := f.Write(data)
	if err == nil && eof {
		if testHookInputWritten != nil {
			testHookInputWritten()
		}
		// The step may end between the write and the eof (a child that
		// exits once it has read): its end closes the input, which is what
		// the eof asked for, so that is no error.
		if pty {
			var ch byte
			if ch, err = eofChar(f); err == nil {
				_, err = f.Write([]byte{ch})
			}
			if err != nil && !c.input.isStep(f) {
				err = nil
			}
		} else {
			c.input.mu.Lock()
			mine := c.input.f == f
			if mine {
				c.input.closed = true
				c.input.f = nil
			}
			c.input.mu.Unlock()
			if mine {
				err = f.Close()
			}
		}
	}
	switch {
	case err == nil:
		return n, nil
	case ctx.Err() != nil:
		return n, fmt.Errorf("cancelled after %d of %d bytes: %w", n, len(data), context.Cause(ctx))
	}
	if nr := c.notRunning(); nr != nil {
		return n, nr
	}
	// The step ended (its input closed, EPIPE, EIO) while the write went on.
	return n, &NotRunningError{Status: StatusRunning, Reason: fmt.Sprintf("the running step's input closed after %d of %d bytes: %v", n, len(data), err)}
}

// Resize sets the size of the command's terminal, for the running step
// and the steps to come.
func (c *Command) Resize(size Winsize) error {
	if !c.launched() || !c.anyPty {
		return ErrNoTerminal
	}
	if err := c.notRunning(); err != nil {
		return err
	}
	c.input.mu.Lock()
	defer c.input.mu.Unlock()
	c.input.resized = size
	if c.input.f != nil && c.input.pty {
		c.input.size = size
		if err := setWinsize(c.input.f, size); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return &NotRunningError{Status: StatusRunning, Reason: "the running step's terminal has closed"}
			}
			return fmt.Errorf("resize: %w", err)
		}
	}
	return nil
}

// Signal sends sig to the running step's terminal's foreground process
// group, else to the step's process group, and returns the group.
func (c *Command) Signal(sig unix.Signal) (int, error) {
	c.input.mu.Lock()
	f, pty := c.input.f, c.input.pty
	c.input.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return 0, &NotRunningError{Status: c.result.Status, Reason: "the command has ended (" + c.result.Status + ")"}
	}
	pgrp := c.pgid
	if f != nil && pty {
		if fg, err := foreground(f); err == nil && fg > 1 {
			pgrp = fg
		}
	}
	if pgrp <= 1 {
		return 0, &NotRunningError{Status: StatusRunning, Reason: "no step is running"}
	}
	if err := unix.Kill(-pgrp, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return 0, &NotRunningError{Status: StatusRunning, Reason: "the step's process group is gone"}
		}
		return 0, fmt.Errorf("signal %v to group %d: %w", sig, pgrp, err)
	}
	return pgrp, nil
}
