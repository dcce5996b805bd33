package capture

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// headTail keeps the first headMax and the last tailMax bytes written to it,
// in memory bounded by headMax+tailMax whatever is written. It is not safe
// for concurrent use; the owning captureStream's mutex guards it.
type headTail struct {
	headMax, tailMax int

	// head holds the first bytes, at most headMax.
	head []byte
	// tail is a ring of tailMax bytes, allocated when the head is full.
	// tailPos is where the next byte goes; tailLen how many bytes are valid
	// (when tailLen < tailMax they are tail[:tailLen]).
	tail    []byte
	tailPos int
	tailLen int
	// total counts every byte written.
	total int64
}

// newHeadTail returns a headTail keeping about limit bytes: limit/2 of head,
// the rest of tail.
func newHeadTail(limit int) headTail {
	return headTail{headMax: limit / 2, tailMax: limit - limit/2}
}

// Write keeps what fits in the head and the latest bytes in the tail ring.
func (h *headTail) Write(p []byte) {
	h.total += int64(len(p))
	if room := h.headMax - len(h.head); room > 0 {
		take := min(room, len(p))
		if h.head == nil {
			h.head = make([]byte, 0, h.headMax)
		}
		h.head = append(h.head, p[:take]...)
		p = p[take:]
	}
	if len(p) == 0 || h.tailMax == 0 {
		return
	}
	if h.tail == nil {
		h.tail = make([]byte, h.tailMax)
	}
	if len(p) >= h.tailMax {
		copy(h.tail, p[len(p)-h.tailMax:])
		h.tailPos, h.tailLen = 0, h.tailMax
		return
	}
	n := copy(h.tail[h.tailPos:], p)
	copy(h.tail, p[n:])
	h.tailPos = (h.tailPos + len(p)) % h.tailMax
	h.tailLen = min(h.tailLen+len(p), h.tailMax)
}

// tailBytes returns the tail's bytes, oldest first, in a new slice.
func (h *headTail) tailBytes() []byte {
	out := make([]byte, 0, h.tailLen)
	if h.tailLen < h.tailMax {
		return append(out, h.tail[:h.tailLen]...)
	}
	out = append(out, h.tail[h.tailPos:]...)
	return append(out, h.tail[:h.tailPos]...)
}

// Text renders the kept bytes as valid UTF-8 (invalid sequences become
// U+FFFD) and reports whether anything was left out. When bytes were left out,
// the head is cut back to a rune boundary, the tail starts at one, and a line
// of its own between them says how many bytes were omitted and that the full
// output is in fullPath.
func (h *headTail) Text(fullPath string) (string, bool) {
	tail := h.tailBytes()
	kept := int64(len(h.head) + len(tail))
	if kept == h.total {
		joined := make([]byte, 0, kept)
		joined = append(append(joined, h.head...), tail...)
		return strings.ToValidUTF8(string(joined), "\uFFFD"), false
	}
	head := trimPartialRuneEnd(h.head)
	tail = trimPartialRuneStart(tail)
	omitted := h.total - int64(len(head)+len(tail))
	var sb strings.Builder
	sb.Grow(len(head) + len(tail) + len(fullPath) + 64)
	sb.WriteString(strings.ToValidUTF8(string(head), "\uFFFD"))
	if len(head) > 0 && head[len(head)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString("… [")
	sb.WriteString(strconv.FormatInt(omitted, 10))
	sb.WriteString(" bytes omitted; full output in ")
	sb.WriteString(fullPath)
	sb.WriteString("] …\n")
	sb.WriteString(strings.ToValidUTF8(string(tail), "\uFFFD"))
	return sb.String(), true
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence cut off at the end of
// b (at most 3 bytes), so that the cut falls on a rune boundary.
func trimPartialRuneEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// trimPartialRuneStart drops continuation bytes (at most 3) at the start of
// b that belong to a rune begun before the cut.
func trimPartialRuneStart(b []byte) []byte {
	n := 0
	for n < len(b) && n < utf8.UTFMax-1 && !utf8.RuneStart(b[n]) {
		n++
	}
	return b[n:]
}
