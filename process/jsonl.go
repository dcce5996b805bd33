package process

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// EventCounts counts how a jsonl stdout's lines were read.
type EventCounts struct {
	// Events is the lines that were JSON objects, each passed to OnEvent.
	Events int64
	// Invalid is the non-blank lines that were not JSON objects.
	Invalid int64
	// Oversize is the lines longer than Spec.MaxEventBytes: neither
	// parsed nor passed on.
	Oversize int64
}

// jsonlSplitter reads a stdout of JSON lines (Spec.StdoutJSONL). Every byte
// goes on to next (the capture: the stdout artifact holds them all); each
// line that is a JSON object goes to onEvent, which may block: the pump
// that writes waits, and so the child, while the client reads slowly.
// Other non-blank lines go to onPlain, with their newline.
type jsonlSplitter struct {
	next    io.Writer
	onEvent func(line []byte)
	onPlain func(line []byte)
	// onOversize, if set, hears of each line over max (its number, from
	// 1, among the oversize ones).
	onOversize func(n int64)
	max        int // the longest line passed on

	mu sync.Mutex // guards the fields below; held while onEvent blocks
	// line is the line so far (at most max bytes); oversize says the line
	// went past max and is being skipped to its end.
	line     []byte
	oversize bool
	counts   EventCounts
}

// Write passes p on to the capture, then splits it into lines.
func (j *jsonlSplitter) Write(p []byte) (int, error) {
	n, err := j.next.Write(p)
	j.mu.Lock()
	defer j.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			j.add(p)
			break
		}
		j.add(p[:i])
		j.endLine()
		p = p[i+1:]
	}
	return n, err
}

// add appends to the current line, or skips once it is too long.
func (j *jsonlSplitter) add(b []byte) {
	if j.oversize {
		return
	}
	if len(j.line)+len(b) > j.max {
		j.oversize = true
		j.line = j.line[:0]
		return
	}
	j.line = append(j.line, b...)
}

// endLine reads the line that just ended.
func (j *jsonlSplitter) endLine() {
	defer func() {
		j.line = j.line[:0]
		if cap(j.line) > 64<<10 {
			j.line = nil // a long line's buffer is not kept
		}
	}()
	if j.oversize {
		j.oversize = false
		j.counts.Oversize++
		if j.onOversize != nil {
			j.onOversize(j.counts.Oversize)
		}
		return
	}
	l := bytes.TrimRight(j.line, "\r")
	if len(bytes.TrimSpace(l)) == 0 {
		return
	}
	if isJSONObject(l) {
		j.counts.Events++
		j.onEvent(bytes.TrimSpace(l))
		return
	}
	j.counts.Invalid++
	if j.onPlain != nil {
		j.onPlain(append(l, '\n'))
	}
}

// flush reads a last line that has no newline; the pumps have stopped.
func (j *jsonlSplitter) flush() EventCounts {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.line) > 0 || j.oversize {
		j.endLine()
	}
	return j.counts
}

// isJSONObject reports whether b is one JSON object.
func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && json.Valid(b)
}
