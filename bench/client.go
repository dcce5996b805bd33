package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// client speaks newline-delimited JSON-RPC 2.0 to a child process over its
// stdin and stdout pipes: the toolhost binary, or the echo baseline (cat),
// which sends every frame straight back. Both go through the same code, so
// that their round trips differ only by what the child does with a frame.
type client struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *os.File // the child's stderr, kept in a file for failures

	// writeMu serialises writes: one frame is one write(2).
	writeMu sync.Mutex

	mu sync.Mutex
	// nextID, pending and readErr are guarded by mu.
	nextID  int64
	pending map[int64]chan response
	readErr error

	// onNotify, set before the requests that cause notifications, is
	// called on the reader goroutine with each notification and the time
	// its line was read; it must be quick. Guarded by mu.
	onNotify func(method string, params json.RawMessage, at time.Time)

	readerDone chan struct{}
}

// response is one answer, with the time its line was read.
type response struct {
	Result json.RawMessage
	Err    *wireError
	At     time.Time
}

// wireError is a JSON-RPC error object.
type wireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error returns the error in words.
func (e *wireError) Error() string { return fmt.Sprintf("%d %s %s", e.Code, e.Message, e.Data) }

// startClient starts argv with its stderr in stderrPath and reads its
// stdout on a goroutine of its own until the pipe closes.
func startClient(argv []string, dir, stderrPath string) (*client, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ef, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = ef
	if err := cmd.Start(); err != nil {
		ef.Close()
		return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	c := &client{cmd: cmd, stdin: stdin, stderr: ef, pending: make(map[int64]chan response), readerDone: make(chan struct{})}
	go c.read(stdout) // ends when the child's stdout closes
	return c, nil
}

// read dispatches every line the child writes: answers to their callers,
// notifications to onNotify.
func (c *client) read(r io.Reader) {
	defer close(c.readerDone)
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		at := time.Now()
		if len(line) > 1 {
			c.dispatch(line, at)
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.readErr = fmt.Errorf("the server's output ended: %w", err)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// dispatch routes one message.
func (c *client) dispatch(line []byte, at time.Time) {
	var m struct {
		ID     *int64          `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *wireError      `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		fmt.Fprintf(os.Stderr, "bench: cannot decode %q: %v\n", truncate(line, 200), err)
		return
	}
	if m.Method != "" {
		c.mu.Lock()
		fn := c.onNotify
		c.mu.Unlock()
		if fn != nil && m.ID == nil {
			fn(m.Method, m.Params, at)
		}
		return
	}
	if m.ID == nil {
		fmt.Fprintf(os.Stderr, "bench: answer without an id: %s\n", truncate(line, 200))
		return
	}
	c.mu.Lock()
	ch := c.pending[*m.ID]
	delete(c.pending, *m.ID)
	c.mu.Unlock()
	if ch != nil {
		ch <- response{Result: m.Result, Err: m.Error, At: at}
	}
}

// setNotify sets the notification callback (nil: none).
func (c *client) setNotify(fn func(method string, params json.RawMessage, at time.Time)) {
	c.mu.Lock()
	c.onNotify = fn
	c.mu.Unlock()
}

// send writes a request and returns the channel its answer arrives on.
func (c *client) send(method string, params any) (<-chan response, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, p)
	return c.sendFrame(id, frame)
}

// sendFrame registers id and writes frame, one write(2).
func (c *client) sendFrame(id int64, frame []byte) (<-chan response, error) {
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return nil, c.readErr
	}
	c.pending[id] = ch
	c.mu.Unlock()
	c.writeMu.Lock()
	_, err := c.stdin.Write(frame)
	c.writeMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cannot write to the server: %w", err)
	}
	return ch, nil
}

// wait waits for an answer and decodes its result into out (if not nil).
func (c *client) wait(ch <-chan response, out any) (response, error) {
	r, ok := <-ch
	if !ok {
		c.mu.Lock()
		err := c.readErr
		c.mu.Unlock()
		return r, err
	}
	if r.Err != nil {
		return r, r.Err
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			return r, fmt.Errorf("cannot decode the result: %w", err)
		}
	}
	return r, nil
}

// call sends a request and waits for its answer.
func (c *client) call(method string, params, out any) error {
	ch, err := c.send(method, params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if _, err := c.wait(ch, out); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// notify sends a notification.
func (c *client) notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q,"params":%s}`+"\n", method, p)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err = c.stdin.Write(frame)
	return err
}

// echoRoundTrip writes an answer-shaped frame of about the size of a
// progress answer to the echo child and waits for it to come back.
func (c *client) echoRoundTrip() error {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	frame := []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"result":{"handles":[]}}` + "\n")
	ch, err := c.sendFrame(id, frame)
	if err != nil {
		return err
	}
	_, err = c.wait(ch, nil)
	return err
}

// pid returns the child's pid.
func (c *client) pid() int { return c.cmd.Process.Pid }

// close ends the session: shutdown and exit for a server (when shutdown is
// true), then the end of stdin; it waits for the child to exit.
func (c *client) close(shutdown bool) error {
	if shutdown {
		if err := c.call("shutdown", nil, nil); err != nil {
			c.cmd.Process.Kill()
		} else {
			c.notify("exit", nil)
		}
	}
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }() // ends when the child exits, which Kill below forces
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		err = errors.Join(errors.New("the child did not exit within 30 s of the end of its input"), <-done)
	}
	<-c.readerDone
	c.stderr.Close()
	return err
}

// truncate cuts b to n bytes for messages.
func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
