package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// terminal collects the output a handle streams, so that the demo can
// wait for text to appear on it.
type terminal struct {
	mu      sync.Mutex // guards text and changed
	text    strings.Builder
	changed chan struct{} // closed, and replaced, when text grows
}

// watchTerminal follows the "pty" output of every handle of c.
func watchTerminal(c *client.Client) (*terminal, func()) {
	t := &terminal{changed: make(chan struct{})}
	stop := client.OnNotification(c, protocol.OutputNotification, func(o *protocol.OutputParams) {
		if o.Stream != protocol.StreamPty {
			return
		}
		t.mu.Lock()
		t.text.WriteString(o.Data)
		close(t.changed)
		t.changed = make(chan struct{})
		t.mu.Unlock()
	})
	return t, stop
}

// waitFor waits until the terminal's output, from offset from, holds s,
// and returns the offset after it.
func (t *terminal) waitFor(ctx context.Context, from int, s string) (int, error) {
	for {
		t.mu.Lock()
		text, ch := t.text.String(), t.changed
		t.mu.Unlock()
		if i := strings.Index(text[from:], s); i >= 0 {
			return from + i + len(s), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for %q on the terminal: %w", s, ctx.Err())
		}
	}
}

// ptyShell drives an interactive shell in a pseudo-terminal: it types a
// command, resizes the terminal, interrupts a sleep with Ctrl-C and exits.
func (d *session) ptyShell(ctx context.Context, results <-chan *protocol.ToolResult) error {
	term, stop := watchTerminal(d.c)
	defer stop()
	d.p.say("\nAn interactive shell in a real terminal (pty): type into it, resize it, interrupt it:")
	var started protocol.LongRunningResult
	if err := d.call(protocol.MethodLongRunning, protocol.LongRunningParams{Label: "shell", StreamOutput: true,
		Pty:              &protocol.PtySize{Rows: 24, Cols: 80},
		RunCommandParams: protocol.RunCommandParams{Argv: []string{"sh", "-i"}, Env: map[string]*string{"PS1": ptr("demo$ ")}}}, &started); err != nil {
		return err
	}
	h := started.HandleID
	at, err := term.waitFor(ctx, 0, "demo$ ")
	if err != nil {
		return err
	}
	if err := d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "echo typed in a terminal: $((6*7)); tty\r"}, nil); err != nil {
		return err
	}
	if at, err = term.waitFor(ctx, at, "/dev/pts/"); err != nil {
		return err
	}
	if err := d.call(protocol.MethodResize, protocol.ResizeParams{HandleID: h, Rows: 30, Cols: 100}, nil); err != nil {
		return err
	}
	if err := d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "stty size\r"}, nil); err != nil {
		return err
	}
	if at, err = term.waitFor(ctx, at, "30 100"); err != nil {
		return err
	}
	// The job says it runs once it is the terminal's foreground job (the
	// shell hands the terminal over before the job starts), in words its
	// echoed command line does not hold.
	if err := d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "sh -c 'echo \"now sleep\"ing; exec sleep 300'\r"}, nil); err != nil {
		return err
	}
	if at, err = term.waitFor(ctx, at, "now sleeping"); err != nil {
		return err
	}
	d.p.say("Ctrl-C, written as a key, interrupts the sleep; the shell goes on:")
	if err := d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "\x03"}, nil); err != nil {
		return err
	}
	if at, err = term.waitFor(ctx, at, "demo$ "); err != nil {
		return err
	}
	if err := d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "exit 0\r"}, nil); err != nil {
		return err
	}
	if err := waitResult(results); err != nil {
		return err
	}
	d.p.say("Input to a handle that has ended is refused:")
	return d.call(protocol.MethodWriteInput, protocol.WriteInputParams{HandleID: h, Data: "echo too late\r"}, nil)
}

func ptr[T any](v T) *T { return &v }
