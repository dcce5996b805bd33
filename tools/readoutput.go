package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// The bounds of readOutput's maxBytes and waitMs.
const (
	defaultOutputReadBytes = 64 << 10
	maxOutputReadBytes     = 1 << 20
	maxReadWaitMs          = 60_000
)

// readOutput reads a handle's artifact from a byte offset. While the
// command runs it reads no further than the length the capture reported
// before the file was opened (stdout.log may change inode, see package
// capture), and with waitMs it waits on the capture's broadcast of new
// bytes, not on a clock: it answers as soon as bytes arrive or the command
// ends.
func (t *Tools) readOutput(ctx context.Context, s *rpc.Session, p *protocol.ReadOutputParams) (*protocol.ReadOutputResult, error) {
	r, err := checkReadOutput(p)
	if err != nil {
		return nil, err
	}
	_, mgr := t.state()
	cmd, ok := mgr.Lookup(p.HandleID)
	if !ok {
		return nil, handleNotFound(p.HandleID)
	}
	w := &outputWait{ctx: ctx, s: s, handleID: p.HandleID, ms: r.waitMs}
	defer w.stop()
	cp := cmd.Capture()
	if cp == nil {
		// A runCommand's command still starting has no output yet; one
		// that ended before it started has none ever. With waitMs, wait
		// for its start (or end) first.
		if r.waitMs > 0 {
			if _, err := w.until(cmd.Started()); err != nil {
				return nil, err
			}
		}
		if cp = cmd.Capture(); cp == nil {
			ended := false
			select {
			case <-cmd.Done():
				ended = true
			default:
			}
			return &protocol.ReadOutputResult{Encoding: protocol.EncodingUTF8, EOF: ended, Running: !ended}, nil
		}
	}
	return t.readCapture(cp, r, w)
}

// outputRead is what a readOutput asks for, checked.
type outputRead struct {
	handleID string
	stream   protocol.OutputStream // output, stdout or stderr
	maxBytes int64
	waitMs   int64
	offset   int64 // from the end when negative
}

// checkReadOutput checks a readOutput's params and fills in the defaults.
func checkReadOutput(p *protocol.ReadOutputParams) (outputRead, error) {
	r := outputRead{handleID: p.HandleID, stream: p.Stream, maxBytes: defaultOutputReadBytes}
	if p.HandleID == "" {
		return r, protocol.InvalidParams("handleId", "required")
	}
	switch r.stream {
	case "":
		r.stream = protocol.OutputStreamOutput
	case protocol.OutputStreamOutput, protocol.OutputStreamStdout, protocol.OutputStreamStderr:
	case protocol.OutputStreamPty:
		r.stream = protocol.OutputStreamStdout // a terminal's output is kept as stdout
	default:
		return r, protocol.InvalidParams("stream", `must be "output", "stdout", "stderr" or "pty", not %q`, r.stream)
	}
	if p.MaxBytes != nil {
		r.maxBytes = *p.MaxBytes
		if r.maxBytes < 1 || r.maxBytes > maxOutputReadBytes {
			return r, protocol.InvalidParams("maxBytes", "must be between 1 and %d, not %d", maxOutputReadBytes, r.maxBytes)
		}
	}
	if p.WaitMs != nil {
		r.waitMs = *p.WaitMs
		if r.waitMs < 0 || r.waitMs > maxReadWaitMs {
			return r, protocol.InvalidParams("waitMs", "must be between 0 and %d, not %d", maxReadWaitMs, r.waitMs)
		}
	}
	if p.Offset != nil {
		r.offset = *p.Offset
	}
	return r, nil
}

// readCapture reads the stream r asks for of a started command's capture,
// waiting (w) for bytes when there are none yet.
func (t *Tools) readCapture(cp *capture.Capture, r outputRead, w *outputWait) (*protocol.ReadOutputResult, error) {
	stdoutPath, stderrPath, outputPath := cp.Paths()
	path, length := outputPath, func(l capture.Lengths) int64 { return l.Output }
	switch r.stream {
	case protocol.OutputStreamStdout:
		path, length = stdoutPath, func(l capture.Lengths) int64 { return l.Stdout }
	case protocol.OutputStreamStderr:
		path, length = stderrPath, func(l capture.Lengths) int64 { return l.Stderr }
	}
	offset := r.offset
	for {
		// In this order: the broadcast is taken before the lengths, so a
		// write after them closes it; closed before the lengths, so that
		// closed lengths are final.
		changed := cp.Changed()
		closed := cp.Closed()
		total := length(cp.Lengths())
		from := offset
		if from < 0 {
			from = max(0, total+from)
		}
		n := min(r.maxBytes, max(0, total-from))
		res, err := readArtifact(path, from, n, closed || from+n < total)
		if err != nil {
			return nil, t.readError(r.handleID, path, closed, err)
		}
		res.TotalBytes, res.Running = total, !closed
		res.EOF = closed && res.NextOffset >= total
		if res.NextOffset > from || closed || r.waitMs == 0 {
			return res, nil
		}
		if more, err := w.until(changed); !more || err != nil {
			if err != nil {
				return nil, err
			}
			return res, nil
		}
		if offset < 0 {
			offset = from // a tail waits for what follows it
		}
	}
}

// outputWait is a readOutput's waiting, at most ms in all: its timer
// starts at the first wait, which detaches the request (it only waits).
type outputWait struct {
	ctx      context.Context
	s        *rpc.Session
	handleID string
	ms       int64
	timer    *time.Timer // set by the first until
	expired  bool        // the timer has fired
}

// until waits for ch to be closed, and reports whether it was before the
// time ran out; the request's end is its error.
func (w *outputWait) until(ch <-chan struct{}) (bool, error) {
	if w.expired {
		return false, nil
	}
	if w.timer == nil {
		w.s.Detach(w.ctx)
		w.timer = time.NewTimer(time.Duration(w.ms) * time.Millisecond)
	}
	select {
	case <-ch:
		return true, nil
	case <-w.timer.C:
		w.expired = true
		return false, nil
	case <-w.ctx.Done():
		return false, protocol.NewError(protocol.CodeRequestCancelled, &protocol.ErrorData{Method: protocol.MethodReadOutput, HandleID: w.handleID, Reason: context.Cause(w.ctx).Error()},
			"request cancelled while waiting for output")
	}
}

// stop stops the timer, if a wait started it.
func (w *outputWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// readArtifact reads n bytes of the file at path from off; it opens the
// name even for none, so that a removed artifact is seen. A rune cut at
// the end is left for the next read, unless that would leave nothing
// though more bytes follow (more: then the caller would wait for bytes
// that are already there), or the command has ended (more is then set).
func readArtifact(path string, off, n int64, more bool) (*protocol.ReadOutputResult, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:got]
	if k := completeRunes(buf); k > 0 || !more {
		buf = buf[:k]
	}
	res := &protocol.ReadOutputResult{Offset: off, NextOffset: off + int64(len(buf)), Encoding: protocol.EncodingUTF8}
	if utf8.Valid(buf) {
		res.Data = string(buf)
	} else {
		res.Data = base64.StdEncoding.EncodeToString(buf)
		res.Encoding = protocol.EncodingBase64
	}
	return res, nil
}

// completeRunes returns the length of b without an incomplete UTF-8
// sequence at its end.
func completeRunes(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return len(b) - k
			}
			break
		}
	}
	return len(b)
}

// readError turns a failed artifact read into the wire's error: a missing
// file of an ended command was evicted.
func (t *Tools) readError(handleID, path string, closed bool, err error) error {
	if closed && errors.Is(err, fs.ErrNotExist) {
		return protocol.NewError(protocol.CodeNotFound, &protocol.ErrorData{HandleID: handleID, Path: path,
			Reason: "evicted: the command's artifacts were removed to keep the artifacts directory under --artifacts-cap-bytes"},
			"artifact evicted: %s", path)
	}
	t.log.Warn("reading an artifact", "handle", handleID, "path", path, "err", err)
	return protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{HandleID: handleID, Path: path, Reason: err.Error()},
		"cannot read the artifact %s", path)
}
