package capture

import (
	"time"
)

// Lengths are the bytes in a command's artifact files at one moment.
type Lengths struct {
	Stdout, Stderr, Output int64
}

// touch records activity: a write on any stream, marker or not.
func (c *Capture) touch() {
	c.lastActive.Store(int64(time.Since(c.born)))
}

// Idle returns how long ago the latest write of any stream arrived (or
// the Capture was made, before any).
func (c *Capture) Idle() time.Duration {
	return time.Since(c.born) - time.Duration(c.lastActive.Load())
}

// Lengths returns how many bytes each artifact file holds now. A reader
// that learns them before opening a name reads no further than them, so
// it never reads past the bytes a file is known to hold: stdout.log may
// change inode after its open (see the package doc), and the bytes below
// its length are the same in both inodes. After Close they are the files'
// final sizes.
func (c *Capture) Lengths() Lengths {
	return Lengths{Stdout: c.stdoutLen.Load(), Stderr: c.stderrLen.Load(), Output: c.outLen.Load()}
}

// Changed returns a channel that is closed by the next batch of bytes
// written to the files, or by Close: a reader takes it, checks Lengths,
// and waits on it only if nothing new was there, so no write falls
// between its check and its wait. A write costs one lock when nobody
// waits, and one close when someone does.
func (c *Capture) Changed() <-chan struct{} {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if c.wake == nil {
		c.wake = make(chan struct{})
		if c.closed.Load() {
			close(c.wake)
			ch := c.wake
			c.wake = nil
			return ch
		}
	}
	return c.wake
}

// wakeReaders closes the channel Changed gave out, if any.
func (c *Capture) wakeReaders() {
	c.wakeMu.Lock()
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
	c.wakeMu.Unlock()
}

// Closed reports whether Close has closed the files.
func (c *Capture) Closed() bool { return c.closed.Load() }

// Paths returns the absolute paths of stdout.log, stderr.log and
// output.log.
func (c *Capture) Paths() (stdout, stderr, output string) {
	return c.stdout.file.path, c.stderr.file.path, c.out.path
}

// Snapshot returns the Output so far, for a command that still runs: the
// inline head and tail of each stream, the paths, and output.log's
// ByteCount and LineCount; Sha256 is "" (the hash is taken at Close). A
// stderr line held back because it may still become a marker is not in
// it yet. After Close it is Close's Output.
func (c *Capture) Snapshot() Output {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return c.result
	}
	var o Output
	o.StdoutPath, o.StderrPath, o.OutputPath = c.Paths()
	c.stdout.mu.Lock()
	o.Stdout, o.StdoutTruncated = c.stdout.inline.Text(o.StdoutPath)
	c.stdout.mu.Unlock()
	c.stderr.mu.Lock()
	o.Stderr, o.StderrTruncated = c.stderr.inline.Text(o.StderrPath)
	c.stderr.mu.Unlock()
	c.outMu.Lock()
	o.ByteCount, o.LineCount = c.outBytes, c.outLines
	if c.outBytes > 0 && c.outLast != '\n' {
		o.LineCount++
	}
	c.outMu.Unlock()
	return o
}
