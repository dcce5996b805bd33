package workspace

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
	"unicode/utf8"
	"unsafe"
)

// DefaultMaxBytes is the byte limit of a ReadFile answer when MaxBytes is 0.
const DefaultMaxBytes int64 = 1 << 20

// ReadOptions selects what ReadFile returns.
type ReadOptions struct {
	Path     string // relative to the workspace root, absolute, or a file:// URI
	Line     int    // first line, 1-based; 0 means 1
	Limit    int    // number of lines; 0 means to the end of the file
	MaxBytes int64  // limit on the selected bytes (before base64); 0 means DefaultMaxBytes
}

// ReadResult is a page of a file.
//
// Lines end at "\n"; a last line without one still counts. Content holds the
// selected lines StartLine..EndLine, "\n" included. When no line is selected
// (an empty file, or Line past the end) Content is "" and EndLine is
// StartLine-1.
type ReadResult struct {
	Path       string // absolute real path
	Content    string // the selected bytes, as text or base64
	Encoding   string // "utf-8", or "base64" when the bytes hold NUL or invalid UTF-8
	Size       int64  // size of the whole file
	StartLine  int
	EndLine    int
	TotalLines int
	Truncated  bool // lines remain after EndLine, or EndLine's bytes were cut
	MTime      time.Time
}

// ReadFile reads a page of a regular file inside any root.
//
// With neither Line (beyond 1) nor Limit the whole file is asked for, and a
// file over MaxBytes is refused with ErrTooLarge (Size and Limit set) rather
// than cut. A paged request returns the whole lines that fit in MaxBytes and
// sets Truncated; only when the first selected line alone is over MaxBytes
// are its bytes cut (at a UTF-8 boundary). The file is streamed: memory is
// bounded by MaxBytes whatever its size, though the whole file is scanned to
// count TotalLines.
//
// A directory, FIFO, socket or device is refused with ErrNotRegular without
// blocking: the name is checked with Lstat through the root first, opened
// with O_NONBLOCK, and the descriptor checked again with fstat.
func (w *Workspace) ReadFile(o ReadOptions) (*ReadResult, error) {
	const op = "read"
	if o.Line < 0 || o.Limit < 0 || o.MaxBytes < 0 {
		return nil, newErr(op, o.Path, ErrInvalid, "line, limit and maxBytes must not be negative")
	}
	maxBytes := o.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	start := max(o.Line, 1)
	whole := start == 1 && o.Limit == 0

	f, loc, st, err := w.openRead(op, o.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := func(size int64) error {
		e := newErr(op, o.Path, ErrTooLarge, "the file is %d bytes, over maxBytes %d; page with line and limit, or raise maxBytes", size, maxBytes)
		e.Size, e.Limit = size, maxBytes
		return e
	}
	if whole && st.Size() > maxBytes {
		return nil, tooLarge(st.Size())
	}
	var pg page
	if whole {
		pg, err = readWhole(f, st.Size(), maxBytes)
	} else {
		pg, err = scan(f, st.Size(), start, o.Limit, maxBytes, false)
	}
	if err != nil {
		return nil, osErr(op, o.Path, err)
	}
	if pg.tooLarge {
		return nil, tooLarge(max(st.Size(), pg.seen))
	}
	res := &ReadResult{
		Path:       w.realPath(f, loc, st),
		Encoding:   "utf-8",
		Size:       st.Size(),
		StartLine:  pg.start,
		EndLine:    pg.end,
		TotalLines: pg.total,
		Truncated:  pg.cut || pg.total > pg.end,
		MTime:      st.ModTime(),
	}
	if bytes.IndexByte(pg.content, 0) >= 0 || !utf8.Valid(pg.content) {
		res.Encoding = "base64"
		res.Content = base64.StdEncoding.EncodeToString(pg.content)
	} else if len(pg.content) > 0 {
		// The page's buffer is its own and never written again: the
		// string shares it rather than copying it (a 10 MiB file is
		// otherwise held twice).
		res.Content = unsafe.String(&pg.content[0], len(pg.content))
	}
	return res, nil
}

// openReadTries bounds how often openRead resolves and opens again a file
// that writes keep renaming new contents over.
const openReadTries = 3

// openRead resolves p for reading and opens the regular file it names,
// asking the policy (see resolve) of the very file opened. A file a
// concurrent write renamed in between is checked again by its name; one
// that is gone again by then is looked up anew, a few times.
func (w *Workspace) openRead(op, p string) (*os.File, location, fs.FileInfo, error) {
	for try := 1; ; try++ {
		loc, err := w.resolve(op, p, resolveExisting, accessRead)
		if err != nil {
			return nil, loc, nil, err
		}
		if len(loc.comps) == 0 {
			return nil, loc, nil, newErr(op, p, ErrNotRegular, "%s is a directory", loc.abs())
		}
		fi := loc.info // resolve's Lstat of the name, when it ended there
		if fi == nil {
			if fi, err = loc.r.h.Lstat(loc.rel()); err != nil {
				return nil, loc, nil, osErr(op, p, err)
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// resolve followed every link, so one here was put there since.
			return nil, loc, nil, newErr(op, p, ErrConflict, "%s became a symlink while it was being read", loc.abs())
		}
		if !fi.Mode().IsRegular() {
			return nil, loc, nil, newErr(op, p, ErrNotRegular, "%s is %s", loc.abs(), describeMode(fi.Mode()))
		}
		f, err := loc.r.h.OpenFile(loc.rel(), openReadFlags, 0)
		if err != nil {
			return nil, loc, nil, osErr(op, p, err)
		}
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = newErr(op, p, ErrNotRegular, "%s is %s", loc.abs(), describeMode(st.Mode()))
		} else if err != nil {
			err = osErr(op, p, err)
		}
		pol := w.pol.Load()
		if err == nil && pol != nil {
			// resolve asked the policy of the file it saw; the one opened
			// must pass it too (not be one a rename put there since), and
			// not be a hard link of a denied file.
			if !os.SameFile(st, fi) {
				err = w.recheck(op, p, f, st)
			}
			if err == nil {
				err = pol.checkOpened(op, p, loc.abs(), st)
			}
		}
		if err == nil {
			return f, loc, st, nil
		}
		f.Close()
		if !errors.Is(err, ErrConflict) || try == openReadTries {
			return nil, loc, nil, err
		}
	}
}

// readWhole reads r, a file of size bytes when it was opened, to its end
// into one buffer, as scan does when the whole file is asked for: the
// lines are counted afterwards, and a file of size bytes takes one read(2)
// and the one that sees EOF, with no buffer besides the content's. A file
// that grew past maxBytes meanwhile comes back with tooLarge set.
func readWhole(r io.Reader, size, maxBytes int64) (page, error) {
	buf := make([]byte, 0, min(size, maxBytes)+1) // +1: the first read can see EOF
	pg := page{start: 1}
	for {
		if len(buf) == cap(buf) {
			// The file grew since it was opened: double the buffer, never
			// past maxBytes+1.
			grown := make([]byte, len(buf), len(buf)+min(max(len(buf), 4096), int(maxBytes)+1-len(buf)))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		pg.seen = int64(len(buf))
		if pg.seen > maxBytes {
			pg.tooLarge = true
			return pg, nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return pg, err
		}
	}
	pg.content = buf
	pg.total = bytes.Count(buf, []byte{'\n'})
	if len(buf) > 0 && buf[len(buf)-1] != '\n' {
		pg.total++ // a last line without "\n" counts
	}
	pg.end = pg.total
	return pg, nil
}

// page is what scan selected from a stream.
type page struct {
	content    []byte
	start, end int   // selected lines; end = start-1 when none
	total      int   // lines in the stream
	cut        bool  // the bytes of line end were cut at the budget
	tooLarge   bool  // whole was asked and the stream is over the budget
	seen       int64 // bytes read before scan stopped
}

// Bounds of scan's read buffer.
const (
	minScanBuf = 512
	maxScanBuf = 64 << 10
)

// scan reads r once, keeping lines start..start+limit-1 (limit 0: to the end)
// within maxBytes and counting every line. Memory is bounded by maxBytes plus
// one buffer. size is the file's size when it was opened: it sizes the buffer
// (a small file is read in one read(2) without a 64 KiB allocation) and, when
// the whole file is asked for, the content; a file that grows meanwhile is
// still read to its end.
func scan(r io.Reader, size int64, start, limit int, maxBytes int64, whole bool) (page, error) {
	// size+1 lets the first read see EOF.
	bufSize := int(min(max(size+1, minScanBuf), maxScanBuf))
	br := bufio.NewReaderSize(r, bufSize)
	pg := page{start: start, end: start - 1}
	if whole && size > 0 {
		pg.content = make([]byte, 0, min(size, maxBytes))
	}
	lineNo := 0     // lines begun so far
	atStart := true // the next byte begins a line
	lineOff := 0    // offset in content where line lineNo began
	collecting := true
	for collecting {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			pg.seen += int64(len(chunk))
			if atStart {
				lineNo++
				lineOff = len(pg.content)
			}
			atStart = chunk[len(chunk)-1] == '\n'
			switch {
			case limit > 0 && lineNo >= start+limit:
				collecting = false // past the range: only count from here
			case lineNo < start:
			case int64(len(pg.content)+len(chunk)) <= maxBytes:
				pg.content = append(pg.content, chunk...)
				pg.end = lineNo
			case whole:
				pg.tooLarge = true
				return pg, nil
			case lineNo == start:
				// The first selected line alone is over the budget: cut it.
				pg.content = trimPartialRune(append(pg.content, chunk[:maxBytes-int64(len(pg.content))]...))
				pg.end, pg.cut = lineNo, true
				collecting = false
			default:
				// Keep whole lines only: drop the part of this line taken so far.
				pg.content = pg.content[:lineOff]
				pg.end = lineNo - 1
				collecting = false
			}
		}
		if err == io.EOF {
			pg.total = lineNo
			return pg, nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return pg, err
		}
	}
	buf := make([]byte, bufSize)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			b := buf[:n]
			// Lines begun in b: one at b[0] if atStart, one after each "\n"
			// that is not b's last byte.
			if atStart {
				lineNo++
			}
			lineNo += bytes.Count(b, []byte{'\n'})
			atStart = b[n-1] == '\n'
			if atStart {
				lineNo--
			}
		}
		if err == io.EOF {
			pg.total = lineNo
			return pg, nil
		}
		if err != nil {
			return pg, err
		}
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, left
// there by a cut.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}
