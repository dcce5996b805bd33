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
	"time"

	"github.com/sourcegraph/conc"
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

// Hashing output.log (see the package doc). Up to hashAfter bytes, Close
// hashes it, read back from the page cache; past that a goroutine follows
// the file as it grows, reading hashBufSize bytes at a time, so the hash is
// taken beside the pump rather than on its path.
const (
	hashAfter   = 1 << 20
	hashBufSize = 256 << 10
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
// How the files are made and shared (a hard link, a copy at the first byte
// that is not stdout's) is in the package doc.
//
// A stderr line is held back only while it may still become a marker (its
// first non-blank byte is '{', '[' or a marker glyph and it is at most 64 KiB
// long); other bytes are passed on as soon as they arrive. An error making or
// writing a file stops writes to that file, is logged once, and is returned
// by Close; the writers keep accepting bytes, so a child is never blocked on
// a full pipe because a disk is full.
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
	// fileBytes counts the bytes of the three files, each name by its own
	// size (a byte in stdout.log and output.log counts twice, whether they
	// are one inode or two), for the artifacts cap; every addition is also
	// added to arts.total.
	fileBytes atomic.Int64
	// closed is set once Close has closed the files.
	closed atomic.Bool

	// The live view of the files, for readers while the command runs (see
	// live.go). born is set at creation. lastActive is the time of the
	// latest write of any stream, as nanoseconds since born. stdoutLen,
	// stderrLen and outLen are the bytes written to each file, each added
	// after the bytes are in the file and before wake is closed.
	born                         time.Time
	lastActive                   atomic.Int64
	stdoutLen, stderrLen, outLen atomic.Int64
	// wakeMu guards wake: nil until a reader asks for it (Changed), then
	// closed and set nil by the next write batch or Close. Lock order:
	// after outMu.
	wakeMu sync.Mutex
	wake   chan struct{}

	// outMu guards output.log, stdout's file (stdout.file: a split
	// replaces it from another stream's goroutine, so stdout writes its
	// file under outMu), the hash and the running summary. Lock order:
	// closeMu, then a stream's mu, then outMu, then Artifacts.mu.
	outMu sync.Mutex
	out   artifactFile
	// shared says stdout.log and output.log are one inode: set from the
	// start until the first byte that is not stdout's (split), then never
	// again. While it is set, out.f is stdout.file.f and out.err follows
	// stdout.file.err.
	shared   bool
	outBytes int64 // bytes in output.log; out.f is set before it grows
	outLines int64 // newlines so far
	outLast  byte  // last byte written, to count a final partial line

	// The hash of output.log. hashed counts the bytes h has taken. While
	// hashing is set, h and hashed advance only in the follower goroutine
	// (hashed under outMu); Close takes h over once it has waited for it.
	h        hash.Hash
	hashed   int64
	hashing  bool  // the follower was started
	hashStop bool  // Close asks the follower to end once it has caught up
	hashErr  error // first error reading output.log back
	// hashWake (L is &outMu) wakes the follower when output.log grows or
	// Close asks it to end.
	hashWake sync.Cond
	// follower owns the hashing goroutine; Close waits for it.
	follower conc.WaitGroup

	// closeMu serialises Close; result and resultErr are set under it.
	closeMu   sync.Mutex
	done      bool
	result    Output
	resultErr error
}

// artifactFile is one of a command's files.
type artifactFile struct {
	path string // absolute; immutable
	// f is the open file; nil while the name is a link to the session's
	// empty file, until the first byte for it arrives.
	f *os.File
	// err is the first error making or writing the file; nothing is
	// written to it after.
	err error
}

// captureStream is stdout or stderr.
type captureStream struct {
	c       *Capture
	name    string // "stdout" or "stderr"
	markers bool   // stderr: recognise step markers

	// file is the stream's artifact. stderr's is guarded by mu, stdout's
	// by Capture.outMu (see there).
	file artifactFile

	// mu guards everything below.
	mu     sync.Mutex
	closed bool
	inline headTail
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

// newCapture returns the Capture writing in dir, which holds the three
// names. stdout (also output.log's inode) and stderr are their open files,
// or nil where the name is a link to the session's empty file.
func newCapture(a *Artifacts, id, dir string, o Options, stdout, stderr *os.File) *Capture {
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
		shared:   true,
		h:        sha256.New(),
		born:     time.Now(),
	}
	c.hashWake.L = &c.outMu
	c.stdout = captureStream{c: c, name: "stdout", inline: newHeadTail(limit),
		file: artifactFile{path: filepath.Join(dir, StdoutFile), f: stdout}}
	c.stderr = captureStream{c: c, name: "stderr", markers: true, inline: newHeadTail(limit),
		file: artifactFile{path: filepath.Join(dir, StderrFile), f: stderr}}
	c.out = artifactFile{path: filepath.Join(dir, OutputFile), f: stdout}
	c.events = eventsStream{c: c}
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

// Close flushes, finishes the hash, closes the files and returns the
// summary. It is idempotent: later calls return the same Output and error.
// After Close the writers return ErrClosed.
func (c *Capture) Close() (Output, error) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return c.result, c.resultErr
	}
	c.Flush()
	var errs []error
	stdoutText, stdoutTrunc := c.stdout.close()
	stderrText, stderrTrunc, err := c.stderr.closeStderr()
	errs = append(errs, err)
	c.events.mu.Lock()
	c.events.closed = true
	c.events.line = nil
	c.events.mu.Unlock()

	// No writer runs now: let the follower catch up, then hash the rest.
	c.outMu.Lock()
	c.hashStop = true
	c.hashWake.Broadcast()
	c.outMu.Unlock()
	c.follower.Wait()

	c.outMu.Lock()
	if c.hashErr == nil && c.hashed < c.outBytes {
		buf := make([]byte, min(c.outBytes-c.hashed, hashBufSize))
		if err := hashFile(c.h, c.out.f, c.hashed, c.outBytes, buf); err != nil {
			c.hashErr = fmt.Errorf("hash %s: %w", c.out.path, err)
		}
		c.hashed = c.outBytes
	}
	sum := ""
	if c.hashErr == nil {
		sum = hex.EncodeToString(c.h.Sum(nil))
	}
	errs = append(errs, c.stdout.file.err, c.out.err, c.hashErr)
	if f := c.stdout.file.f; f != nil && f != c.out.f {
		errs = append(errs, closeErr(f))
	}
	if c.out.f != nil {
		errs = append(errs, closeErr(c.out.f))
	}
	lines := c.outLines
	if c.outBytes > 0 && c.outLast != '\n' {
		lines++
	}
	c.result = Output{
		Stdout:          stdoutText,
		Stderr:          stderrText,
		StdoutTruncated: stdoutTrunc,
		StderrTruncated: stderrTrunc,
		StdoutPath:      c.stdout.file.path,
		StderrPath:      c.stderr.file.path,
		OutputPath:      c.out.path,
		ByteCount:       c.outBytes,
		LineCount:       lines,
		Sha256:          sum,
	}
	c.outMu.Unlock()

	c.resultErr = errors.Join(errs...)
	c.done = true
	c.closed.Store(true)
	c.wakeReaders()
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

// close stops the stream's writer and renders its inline text.
func (s *captureStream) close() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.pending = nil
	text, truncated := s.inline.Text(s.file.path)
	s.inline = headTail{}
	return text, truncated
}

// closeStderr is close for stderr, which also closes its file.
func (s *captureStream) closeStderr() (string, bool, error) {
	text, truncated := s.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.file.err
	if s.file.f != nil {
		err = errors.Join(err, closeErr(s.file.f))
	}
	return text, truncated, err
}

// Write takes a chunk from the pump. It always accepts the whole chunk
// unless the Capture is closed.
func (s *captureStream) Write(p []byte) (int, error) {
	s.c.touch()
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
	if s == &c.stdout {
		c.writeStdout(p)
	} else {
		n := c.writeFile(&s.file, p)
		c.addFileBytes(n)
		c.stderrLen.Add(int64(n))
		c.appendOutput(p)
	}
	s.inline.Write(p)
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

// writeStdout writes stdout's bytes to stdout.log and output.log: one write
// while they are one inode. stdout.mu is held.
func (c *Capture) writeStdout(p []byte) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if !c.shared {
		n := c.writeFile(&c.stdout.file, p)
		c.addFileBytes(n)
		c.stdoutLen.Add(int64(n))
		c.appendOutputLocked(p)
		return
	}
	so := &c.stdout.file
	if so.f == nil && so.err == nil {
		c.makeShared()
	}
	if so.err != nil {
		return
	}
	n, err := so.f.Write(p)
	c.addFileBytes(2 * n) // two names
	c.stdoutLen.Add(int64(n))
	c.countOutput(p[:n])
	if err != nil {
		err = fmt.Errorf("write %s: %w", so.path, err)
		c.fail(so, err)
		c.fail(&c.out, err)
	}
}

// makeShared gives stdout.log and output.log, links to the empty file so
// far, a new inode of their own, for stdout's first byte. outMu is held and
// shared is set.
func (c *Capture) makeShared() {
	so := &c.stdout.file
	f, tmp, err := c.newFile(StdoutFile)
	if err == nil {
		// output.log first, through a temporary name: a link cannot
		// replace a name, a rename can.
		tmpOut := filepath.Join(c.dir, "."+OutputFile)
		if err = os.Link(tmp, tmpOut); err == nil {
			if err = os.Rename(tmpOut, c.out.path); err != nil {
				_ = os.Remove(tmpOut)
			}
		}
		if err == nil {
			err = os.Rename(tmp, so.path)
		}
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		err = fmt.Errorf("create %s: %w", so.path, err)
		c.fail(so, err)
		c.fail(&c.out, err)
		return
	}
	so.f, c.out.f = f, f
}

// split ends the sharing of stdout.log's inode with output.log, for the
// first byte that is not stdout's: output.log keeps the inode, and
// stdout.log becomes a copy of what it held so far, renamed over its name,
// that stdout goes on writing alone. outMu is held, so no stdout byte
// arrives meanwhile.
func (c *Capture) split() {
	c.shared = false
	so := &c.stdout.file
	if so.f == nil {
		// No stdout byte yet: output.log gets a file of its own with its
		// first byte, stdout.log with stdout's.
		return
	}
	f, tmp, err := c.newFile(StdoutFile)
	if err == nil {
		if err = copyPrefix(f, so.f, c.outBytes); err == nil {
			err = os.Rename(tmp, so.path)
		}
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		// stdout.log would take the other streams' bytes from now on:
		// better no file than a wrong one.
		_ = os.Remove(so.path)
		so.f = nil // still open as out.f
		c.fail(so, fmt.Errorf("copy %s: %w", so.path, err))
		return
	}
	so.f = f
}

// newFile returns an empty artifact file open for reading and writing at a
// temporary path, for the caller to rename to the file called name: a
// spare file when there is one, else a new one in the command's directory.
func (c *Capture) newFile(name string) (*os.File, string, error) {
	if f, path, ok := c.arts.takeFile(); ok {
		return f, path, nil
	}
	path := filepath.Join(c.dir, "."+name)
	f, err := openArtifactFile(path)
	return f, path, err
}

// writeFile writes p to af, first giving af an inode of its own if its
// name is still a link to the empty file, and returns the bytes written.
// The caller holds the lock that guards af.
func (c *Capture) writeFile(af *artifactFile, p []byte) int {
	if af.err != nil {
		return 0
	}
	if af.f == nil {
		f, tmp, err := c.newFile(filepath.Base(af.path))
		if err == nil {
			if err = os.Rename(tmp, af.path); err != nil {
				_ = f.Close()
				_ = os.Remove(tmp)
			}
		}
		if err != nil {
			c.fail(af, fmt.Errorf("create %s: %w", af.path, err))
			return 0
		}
		af.f = f
	}
	n, err := af.f.Write(p)
	if err != nil {
		c.fail(af, fmt.Errorf("write %s: %w", af.path, err))
	}
	return n
}

// fail records the first error of af and logs it. The caller holds the
// lock that guards af.
func (c *Capture) fail(af *artifactFile, err error) {
	if af.err != nil {
		return
	}
	af.err = err
	c.logger.Error("artifact file failed; further output to it is dropped", "commandId", c.id, "file", af.path, "err", err)
}

// appendOutput appends p, bytes that are not stdout's, to output.log.
func (c *Capture) appendOutput(p []byte) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	c.appendOutputLocked(p)
}

// appendOutputLocked appends p to output.log; outMu is held. While
// stdout.log and output.log are shared, p is not stdout's: they split.
func (c *Capture) appendOutputLocked(p []byte) {
	if c.shared {
		c.split()
	}
	n := c.writeFile(&c.out, p)
	c.addFileBytes(n)
	c.countOutput(p[:n])
}

// countOutput adds p, just written to output.log, to the running summary,
// and keeps the hash going. outMu is held.
func (c *Capture) countOutput(p []byte) {
	if len(p) == 0 {
		return
	}
	c.outBytes += int64(len(p))
	c.outLines += int64(bytes.Count(p, []byte{'\n'}))
	c.outLast = p[len(p)-1]
	c.outLen.Store(c.outBytes)
	c.wakeReaders()
	switch {
	case c.hashing:
		c.hashWake.Signal()
	case c.outBytes > hashAfter:
		c.hashing = true
		c.follower.Go(c.follow)
	}
}

// follow hashes output.log as it grows, reading it back, until Close asks
// it to end and it has caught up. Its owner is c.follower.
func (c *Capture) follow() {
	buf := make([]byte, hashBufSize)
	c.outMu.Lock()
	defer c.outMu.Unlock()
	for {
		for c.hashed == c.outBytes && !c.hashStop {
			c.hashWake.Wait()
		}
		if c.hashed == c.outBytes {
			return
		}
		f, from, to := c.out.f, c.hashed, c.outBytes
		c.outMu.Unlock()
		err := hashFile(c.h, f, from, to, buf)
		c.outMu.Lock()
		if err != nil {
			c.hashErr = fmt.Errorf("hash %s: %w", c.out.path, err)
			return
		}
		c.hashed = to
	}
}

// hashFile feeds bytes [from, to) of f to h.
func hashFile(h hash.Hash, f *os.File, from, to int64, buf []byte) error {
	for from < to {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-from)], from)
		h.Write(buf[:n])
		from += int64(n)
		if err != nil && (from < to || !errors.Is(err, io.EOF)) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
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
	e.c.touch()
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
