package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// callLimit bounds every request of the bench, so that a broken server
// fails a figure instead of hanging the run.
const callLimit = 5 * time.Minute

// limit returns a context that ends after callLimit, and its cancel.
func limit() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callLimit)
}

// child is a process the bench talks to with the Go client of package
// client, over its stdin and stdout in newline-delimited JSON: the toolhost
// binary, or the echo baseline (cat), which sends every frame straight
// back. Both are read by the same client code, so that their round trips
// differ only by what the child does with a frame.
type child struct {
	*client.Client
	cmd    *exec.Cmd
	stderr *os.File // the child's stderr, kept in a file for failures
}

// startChild starts argv in dir with its stderr in stderrPath.
func startChild(argv []string, dir, stderrPath string, opts *client.Options) (*child, error) {
	ef, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stderr = ef
	o := client.Options{}
	if opts != nil {
		o = *opts
	}
	o.Framing = client.FramingNDJSON
	c, err := client.Start(context.Background(), cmd, &o)
	if err != nil {
		ef.Close()
		return nil, err
	}
	return &child{Client: c, cmd: cmd, stderr: ef}, nil
}

// pid returns the child's pid.
func (c *child) pid() int { return c.cmd.Process.Pid }

// close ends the session: shutdown and exit for a server (when shutdown is
// true), then the end of stdin; it waits for the child to exit.
func (c *child) close(shutdown bool) error {
	var err error
	if shutdown {
		ctx, cancel := limit()
		defer cancel()
		if err = c.Shutdown(ctx); err == nil {
			err = c.Exit(ctx)
		}
	}
	err = errors.Join(err, c.Close())
	c.stderr.Close()
	return err
}

// echo is the baseline of the round trip: cat, sent a notification of the
// size of a progress answer, read back by the client's read loop.
type echo struct {
	*child
	// read receives a token each time the client's read loop reads a frame.
	read chan struct{}
}

// startEcho starts cat in dir.
func startEcho(dir string) (*echo, error) {
	e := &echo{read: make(chan struct{}, 1)}
	c, err := startChild([]string{"cat"}, dir, filepath.Join(dir, "stderr.log"), &client.Options{OnRead: func([]byte) { e.read <- struct{}{} }})
	if err != nil {
		return nil, err
	}
	e.child = c
	return e, nil
}

// roundTrip writes a frame of about the size of a progress answer and
// waits until the client's read loop has read it back.
func (e *echo) roundTrip() error {
	ctx, cancel := limit()
	defer cancel()
	if err := e.Notify(ctx, "echo", protocol.ProgressList{Handles: []protocol.Progress{}}); err != nil {
		return err
	}
	select {
	case <-e.read:
		return nil
	case <-e.Done():
		return e.Err()
	case <-ctx.Done():
		return fmt.Errorf("cat echoed nothing within %v", callLimit)
	}
}
