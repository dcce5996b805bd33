package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// DefaultInlineLimit is the inline bytes kept per stream when
// Options.InlineLimit is 0.
const DefaultInlineLimit = 64 << 10

// Names of the artifact files in a command's directory.
const (
	StdoutFile = "stdout.log"
	StderrFile = "stderr.log"
	OutputFile = "output.log"
)

// Options configures a Capture.
type Options struct {
	// InlineLimit is the bytes kept in memory per stream for Output.Stdout
	// and Output.Stderr: the first half and the last half of what the
	// stream printed. 0 (or less) means DefaultInlineLimit.
	InlineLimit int
	// OnMarker, if not nil, receives each step marker recognised on stderr
	// or on the events pipe, in order per source.
	OnMarker func(Marker)
	// OnOutput, if not nil, receives user-visible bytes as they arrive:
	// stream is "stdout" or "stderr", and markers are removed. It must not
	// retain p.
	//
	// Both callbacks run on the goroutine writing to the Capture, while it
	// holds that stream's lock: they must be quick and must not call the
	// Capture's writers, Flush or Close (Bytes is fine).
	OnOutput func(stream string, p []byte)
}

// Output summarises a closed Capture.
type Output struct {
	// Stdout and Stderr are the inline text: valid UTF-8, the head and the
	// tail of what the stream printed (InlineLimit bytes of output in all;
	// U+FFFD replacements and the omission notice may add a little), with a
	// line between them saying how many bytes were omitted and where the
	// full output is. Stderr holds no step markers.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	// StdoutPath, StderrPath and OutputPath are absolute paths of the
	// artifact files. OutputPath holds stdout, stderr and markers
	// interleaved in arrival order.
	StdoutPath, StderrPath, OutputPath string
	// ByteCount is the size of output.log; LineCount its lines, counting a
	// final line without a newline.
	ByteCount, LineCount int64
	// Sha256 is the hex SHA-256 of output.log.
	Sha256 string
}

// Capture receives one command's output from its pump goroutines and writes
// it to the command's artifact files while keeping a bounded inline head and
// tail per stream.
//
// Where bytes go:
//
//	stdout:  stdout.log, output.log, inline Stdout, OnOutput("stdout").
//	stderr:  plain lines go to stderr.log, output.log, inline Stderr and
//	         OnOutput("stderr"); step-marker lines go only to output.log
//	         (as whole lines) and OnMarker.
//	events:  the TOOLHOST_EVENTS_FD pipe. Marker lines go to output.log (as
//	         whole lines: every marker is in output.log, whichever way it
//	         came) and OnMarker; other lines are dropped and go to no
//	         artifact, so the events pipe never mixes into stderr.
//
// A stderr line is held back only while it may still become a marker (its
// first non-blank byte is '{', '[' or a marker glyph and it is at most 64 KiB
// long); other bytes are passed on as soon as they arrive. A write error on a
// file stops writes to that file, is logged once, and is returned by Close;
// the writers keep accepting bytes, so a child is never blocked on a full pipe
// because a disk is full.
//
// The writers of different streams may be used concurrently with each other
// and with Bytes, Flush and Close.
type Capture struct {
	id       string
	dir      string
	arts     *Artifacts
	logger   *slog.Logger
	onMarker func(Marker)
	onOutput func(stream string, p []byte)

	stdout captureStream
	stderr captureStream
	events eventsStream

	// visible counts user-visible bytes (stdout, and stderr without markers).
	visible atomic.Int64
	// fileBytes counts bytes written to the three files, for the artifacts
	// cap; every addition is also added to arts.total.
	fileBytes atomic.Int64
	// closed is set once Close has closed the files.
	closed atomic.Bool

	// outMu guards output.log and its running summary. Lock order:
	// closeMu, then a stream's mu, then outMu, then Artifacts.mu.
	outMu    sync.Mutex
	outFile  *os.File
	outPath  string
	outErr   error // first write error on output.log; no writes after it
	outHash  hash.Hash
	outBytes int64
	outLines int64 // newlines so far
	outLast  byte  // last byte written, to count a final partial line

	// closeMu serialises Close; result and resultErr are set under it.
	closeMu   sync.Mutex
	done      bool
	result    Output
	resultErr error
}

// captureStream is stdout or stderr.
type captureStream struct {
	c       *Capture
	name    string // "stdout" or "stderr"
	markers bool   // stderr: recognise step markers
	path    string // immutable

	// mu guards everything below.
	mu      sync.Mutex
	file    *os.File
	fileErr error // first write error; no writes to file after it
	closed  bool
	inline  headTail
	// pending holds the start of a stderr line that may still be a marker
	// (never more than maxMarkerLine bytes; empty unless markers).
	pending []byte
	// passthrough is set while the rest of the current line is known to
	// be plain output.
	passthrough bool
}

// eventsStream is the events pipe: JSONL markers only.
type eventsStream struct {
	c *Capture
	// mu guards everything below.
	mu     sync.Mutex
	closed bool
	// line holds the current partial line (at most maxMarkerLine bytes);
	// discarding is set while skipping the rest of a longer line.
	line       []byte
	discarding bool
}

// newCapture opens the files in dir, which the caller has just created.
func newCapture(a *Artifacts, id, dir string, o Options) (*Capture, error) {
	var files [3]*os.File
	for i, name := range artifactFileNames {
		f, err := openArtifactFile(filepath.Join(dir, name))
		if err != nil {
			for _, opened := range files[:i] {
				_ = opened.Close()
			}
			return nil, err
		}
		files[i] = f
	}
	return captureOn(a, id, dir, o, files), nil
}

// captureOn returns the Capture writing files (stdout.log, stderr.log and
// output.log, open and empty) in dir.
func captureOn(a *Artifacts, id, dir string, o Options, files [3]*os.File) *Capture {
	limit := o.InlineLimit
	if limit <= 0 {
		limit = DefaultInlineLimit
	}
	c := &Capture{
		id:       id,
		dir:      dir,
		arts:     a,
		logger:   a.logger,
		onMarker: o.OnMarker,
		onOutput: o.OnOutput,
		outHash:  sha256.New(),
		outPath:  filepath.Join(dir, OutputFile),
	}
	c.stdout = captureStream{c: c, name: "stdout", path: filepath.Join(dir, StdoutFile), inline: newHeadTail(limit)}
	c.stderr = captureStream{c: c, name: "stderr", markers: true, path: filepath.Join(dir, StderrFile), inline: newHeadTail(limit)}
	c.events = eventsStream{c: c}
	c.stdout.file, c.stderr.file, c.outFile = files[0], files[1], files[2]
	return c
}

// Stdout returns the writer for the child's stdout.
func (c *Capture) Stdout() io.Writer { return &c.stdout }

// Stderr returns the writer for the child's stderr; it recognises step
// markers at the start of lines and keeps them out of the user-visible
// stderr.
func (c *Capture) Stderr() io.Writer { return &c.stderr }

// Events returns the writer for the child's events pipe
// (TOOLHOST_EVENTS_FD): each line that is a marker goes to OnMarker and to
// output.log; other lines are dropped.
func (c *Capture) Events() io.Writer { return &c.events }

// Bytes returns the user-visible output bytes so far (stdout plus stderr
// without markers).
func (c *Capture) Bytes() int64 { return c.visible.Load() }

// Flush ends the current partial lines, as when a process has ended (between
// recipe steps, say): a held-back partial stderr line is emitted as plain
// output as it is, and a partial events line is parsed as a marker. The next
// bytes start new lines.
func (c *Capture) Flush() {
	c.stderr.flush()
	c.events.flush()
}

// Close flushes, closes the files and returns the summary. It is idempotent:
// later calls return the same Output and error. After Close the writers
// return ErrClosed.
func (c *Capture) Close() (Output, error) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return c.result, c.resultErr
	}
	c.Flush()
	var errs []error
	stdoutText, stdoutTrunc, err := c.stdout.close()
	errs = append(errs, err)
	stderrText, stderrTrunc, err := c.stderr.close()
	errs = append(errs, err)
	c.events.mu.Lock()
	c.events.closed = true
	c.events.line = nil
	c.events.mu.Unlock()

	c.outMu.Lock()
	errs = append(errs, c.outErr, closeErr(c.outFile))
	lines := c.outLines
	if c.outBytes > 0 && c.outLast != '\n' {
		lines++
	}
	c.result = Output{
		Stdout:          stdoutText,
		Stderr:          stderrText,
		StdoutTruncated: stdoutTrunc,
		StderrTruncated: stderrTrunc,
		StdoutPath:      c.stdout.path,
		StderrPath:      c.stderr.path,
		OutputPath:      c.outPath,
		ByteCount:       c.outBytes,
		LineCount:       lines,
		Sha256:          hex.EncodeToString(c.outHash.Sum(nil)),
	}
	c.outMu.Unlock()

	c.resultErr = errors.Join(errs...)
	c.done = true
	c.closed.Store(true)
	c.arts.captureClosed(c.id)
	return c.result, c.resultErr
}

// closeErr closes f, naming it in the error.
func closeErr(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("close artifact: %w", err)
	}
	return nil
}

// close closes the stream's file and renders its inline text.
func (s *captureStream) close() (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.pending = nil
	text, truncated := s.inline.Text(s.path)
	s.inline = headTail{}
	return text, truncated, errors.Join(s.fileErr, closeErr(s.file))
}

// Write takes a chunk from the pump. It always accepts the whole chunk
// unless the Capture is closed.
func (s *captureStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("%s of %s: %w", s.name, s.c.id, ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if s.markers {
		s.writeMarked(p)
	} else {
		s.emitPlain(p)
	}
	return len(p), nil
}

// writeMarked splits stderr into plain output and marker lines. Plain bytes
// that are contiguous in p are emitted in one piece; only the start of a
// line that may still be a marker is copied into pending. s.mu is held.
func (s *captureStream) writeMarked(p []byte) {
	run, i := 0, 0 // p[run:i] is plain output not yet emitted
	if len(s.pending) > 0 {
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		switch {
		case len(s.pending)+len(seg) > maxMarkerLine || !markerCandidate(joinPrefix(s.pending, seg)):
			// The held-back start of the line is plain after all.
			s.emitPlain(s.pending)
			s.pending = s.pending[:0]
			if nl < 0 {
				s.passthrough = true
				i = len(p)
			} else {
				i = nl + 1
			}
		case nl < 0:
			s.pending = append(s.pending, seg...)
			return
		default:
			s.pending = append(append(s.pending, seg...), '\n')
			line := s.pending[:len(s.pending)-1]
			if m, ok := parseMarker(line); ok {
				s.emitMarker(m, s.pending)
			} else {
				s.emitPlain(s.pending)
			}
			s.pending = s.pending[:0]
			run, i = nl+1, nl+1
		}
	}
	for i < len(p) {
		nl := bytes.IndexByte(p[i:], '\n')
		if s.passthrough {
			if nl < 0 {
				i = len(p)
				break
			}
			i += nl + 1
			s.passthrough = false
			continue
		}
		if nl >= 0 {
			if m, ok := parseMarker(p[i : i+nl]); ok {
				if run < i {
					s.emitPlain(p[run:i])
				}
				s.emitMarker(m, p[i:i+nl+1])
				run = i + nl + 1
			}
			i += nl + 1
			continue
		}
		seg := p[i:]
		if len(seg) > maxMarkerLine || !markerCandidate(seg) {
			s.passthrough = true
			i = len(p)
			break
		}
		if run < i {
			s.emitPlain(p[run:i])
		}
		s.pending = append(s.pending[:0], seg...)
		run, i = len(p), len(p)
	}
	if run < i {
		s.emitPlain(p[run:i])
	}
}

// joinPrefix returns the first markerDecidePrefix bytes of a followed by b.
func joinPrefix(a, b []byte) []byte {
	if len(a) >= markerDecidePrefix {
		return a
	}
	var buf [markerDecidePrefix]byte
	n := copy(buf[:], a)
	n += copy(buf[n:], b)
	return buf[:n]
}

// flush emits a held-back partial line as plain output. s.mu is not held.
func (s *captureStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if len(s.pending) > 0 {
		s.emitPlain(s.pending)
		s.pending = s.pending[:0]
	}
	s.passthrough = false
}

// emitPlain sends user-visible bytes everywhere they go. s.mu is held.
func (s *captureStream) emitPlain(p []byte) {
	c := s.c
	if s.fileErr == nil {
		n, err := s.file.Write(p)
		c.addFileBytes(n)
		if err != nil {
			s.fileErr = fmt.Errorf("write %s: %w", s.path, err)
			c.logger.Error("artifact write failed; further output to it is dropped", "commandId", c.id, "file", s.path, "err", err)
		}
	}
	s.inline.Write(p)
	c.appendOutput(p)
	c.visible.Add(int64(len(p)))
	if c.onOutput != nil {
		c.onOutput(s.name, p)
	}
}

// emitMarker records a marker line (with its newline) in output.log and
// reports the marker. The caller holds its stream's lock.
func (s *captureStream) emitMarker(m Marker, lineNL []byte) {
	s.c.appendOutput(lineNL)
	if s.c.onMarker != nil {
		s.c.onMarker(m)
	}
}

// appendOutput appends p to output.log and its running summary.
func (c *Capture) appendOutput(p []byte) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.outErr != nil {
		return
	}
	n, err := c.outFile.Write(p)
	c.addFileBytes(n)
	if err != nil {
		c.outErr = fmt.Errorf("write %s: %w", c.outPath, err)
		c.logger.Error("artifact write failed; further output to it is dropped", "commandId", c.id, "file", c.outPath, "err", err)
		p = p[:n]
	}
	if len(p) == 0 {
		return
	}
	c.outHash.Write(p)
	c.outBytes += int64(len(p))
	c.outLines += int64(bytes.Count(p, []byte{'\n'}))
	c.outLast = p[len(p)-1]
}

// addFileBytes counts bytes written to the files and checks the artifacts
// cap each time evictCheckEvery more bytes have been written.
func (c *Capture) addFileBytes(n int) {
	if n <= 0 {
		return
	}
	now := c.fileBytes.Add(int64(n))
	c.arts.total.Add(int64(n))
	if (now-int64(n))/evictCheckEvery != now/evictCheckEvery {
		c.arts.checkCap()
	}
}

// Write takes a chunk from the events pipe.
func (e *eventsStream) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, fmt.Errorf("events of %s: %w", e.c.id, ErrClosed)
	}
	n := len(p)
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		if !e.discarding {
			if len(e.line)+len(seg) > maxMarkerLine {
				e.discarding = true
				e.line = e.line[:0]
			} else {
				e.line = append(e.line, seg...)
			}
		}
		if nl < 0 {
			break
		}
		p = p[nl+1:]
		if !e.discarding {
			e.endLine()
		}
		e.discarding = false
		e.line = e.line[:0]
	}
	return n, nil
}

// endLine handles a complete events line held in e.line. e.mu is held.
func (e *eventsStream) endLine() {
	m, ok := parseMarker(e.line)
	if !ok {
		return
	}
	e.c.appendOutput(append(e.line, '\n'))
	if e.c.onMarker != nil {
		e.c.onMarker(m)
	}
}

// flush treats a partial events line as complete.
func (e *eventsStream) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if len(e.line) > 0 && !e.discarding {
		e.endLine()
	}
	e.line = e.line[:0]
	e.discarding = false
}
