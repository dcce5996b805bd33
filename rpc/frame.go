package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/protocol"
	"go.lsp.dev/jsonrpc2"
)

// The framings.
const (
	FramingAuto   = "auto"
	FramingHeader = "header"
	FramingNDJSON = "ndjson"
)

// Guard limits.
const (
	maxHeaderLine  = 8 << 10  // bytes in one header line
	maxHeaderLines = 32       // lines in one header block
	idPrefixBytes  = 64 << 10 // bytes of an oversized frame searched for its id
)

// frameReader delimits the input into frames, with limits: the library's
// readers allocate whatever a header declares and let a line grow without
// bound, so on the way in toolhost frames itself. A frame over max is
// discarded as it streams in, never allocated, and answered with TooLarge
// (under its id when that is in its first 64 KiB); a bad header is answered
// with -32700 and the input resynchronised on the next Content-Length;
// blank NDJSON lines are skipped. What a frame holds is the dispatcher's
// concern (Server.dispatch). On the way out the library's streams frame
// (see outbox).
//
// The read loop (Server.readLoop) is the only user of a frameReader.
type frameReader struct {
	in      *bufio.Reader
	framing string // FramingHeader or FramingNDJSON once detected
	max     int64  // the largest frame accepted
	log     *slog.Logger
	answer  func(code int, msg []byte) // queues an error answer, of code
}

// detectFraming reads past leading white space and decides the framing from
// the first byte: 'C' (or 'c') means Content-Length headers, anything else
// one JSON value per line.
func detectFraming(in *bufio.Reader) (string, error) {
	for {
		b, err := in.Peek(1)
		if err != nil {
			return "", err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			in.ReadByte()
			continue
		case 'C', 'c':
			return FramingHeader, nil
		}
		return FramingNDJSON, nil
	}
}

// errFrameDone marks a frame that was fully handled (answered or skipped).
var errFrameDone = errors.New("frame handled")

// next returns the next frame, which the caller owns and which is never
// blank, or an error from the input (io.EOF at its end). Frames that break
// the framing or the limits are answered and skipped.
func (g *frameReader) next() ([]byte, error) {
	for {
		var frame []byte
		var err error
		if g.framing == FramingHeader {
			frame, err = g.readHeaderFrame()
		} else {
			frame, err = g.readLine()
		}
		if err == errFrameDone {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(frame)) == 0 {
			continue
		}
		return frame, nil
	}
}

// readHeaderFrame reads one header-framed body. A body longer than max is
// discarded as it streams in and answered with TooLarge.
func (g *frameReader) readHeaderFrame() ([]byte, error) {
	length := int64(-1)
	for lines := 0; ; lines++ {
		line, err := g.readHeaderLine()
		if err != nil {
			if err == io.EOF && lines > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if line == "" {
			if lines == 0 {
				continue // blank lines between frames are tolerated
			}
			break
		}
		if lines >= maxHeaderLines {
			g.reply(jsonrpc2.ID{}, protocol.CodeParseError, &protocol.ErrorData{Reason: "too many header lines"}, "parse error: too many header lines")
			return nil, g.resync()
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			g.reply(jsonrpc2.ID{}, protocol.CodeParseError, &protocol.ErrorData{Reason: fmt.Sprintf("malformed header line %q", clip(line, 80))}, "parse error: malformed header line")
			return nil, g.resync()
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			value = strings.TrimSpace(value)
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n <= 0 {
				g.reply(jsonrpc2.ID{}, protocol.CodeParseError, &protocol.ErrorData{Reason: fmt.Sprintf("bad Content-Length %q", clip(value, 40))}, "parse error: bad Content-Length")
				return nil, g.resync()
			}
			length = n
		}
	}
	if length < 0 {
		g.reply(jsonrpc2.ID{}, protocol.CodeParseError, &protocol.ErrorData{Reason: "missing Content-Length header"}, "parse error: missing Content-Length header")
		return nil, errFrameDone
	}
	if length > g.max {
		prefix := make([]byte, min(length, idPrefixBytes))
		n, err := io.ReadFull(g.in, prefix)
		if err == nil {
			_, err = io.CopyN(io.Discard, g.in, length-int64(n))
		}
		g.tooLarge(prefix[:n], length)
		if err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, errFrameDone
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(g.in, body); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return body, nil
}

// readHeaderLine reads one header line without its line end, refusing a
// line longer than maxHeaderLine.
func (g *frameReader) readHeaderLine() (string, error) {
	var line []byte
	for {
		chunk, err := g.in.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHeaderLine {
			g.reply(jsonrpc2.ID{}, protocol.CodeParseError, &protocol.ErrorData{Reason: "header line too long"}, "parse error: header line too long")
			if err == bufio.ErrBufferFull {
				if err := g.skipLine(); err != nil {
					return "", err
				}
			}
			return "", g.resync()
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(line) > 0 && err == io.EOF {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		return strings.TrimRight(string(line), "\r\n"), nil
	}
}

// resync skips input up to the next "Content-Length" (in any case),
// wherever it stands, after a bad header made the frame boundary
// unknowable; a bad frame's body often runs into the next frame's header
// without a line end.
func (g *frameReader) resync() error {
	const want = "content-length"
	for {
		if _, err := g.in.Peek(1); err != nil {
			return err
		}
		buf, _ := g.in.Peek(g.in.Buffered())
		if i := indexFold(buf, want); i >= 0 {
			g.in.Discard(i)
			if _, err := g.in.Peek(len(want)); err != nil {
				return err
			}
			return errFrameDone
		}
		// Keep a tail that may be the start of a match.
		keep := min(len(buf), len(want)-1)
		if len(buf) > keep {
			g.in.Discard(len(buf) - keep)
			continue
		}
		// Only a possible prefix is buffered: wait for one more byte.
		if _, err := g.in.Peek(len(buf) + 1); err != nil {
			return err
		}
	}
}

// indexFold returns the index of the first ASCII case-insensitive match of
// lower-case want in b, or -1.
func indexFold(b []byte, want string) int {
	for i := 0; i+len(want) <= len(b); i++ {
		if strings.EqualFold(string(b[i:i+len(want)]), want) {
			return i
		}
	}
	// A match cut at the end of b is left to the caller's next look.
	return -1
}

// skipLine discards input up to and including the next newline.
func (g *frameReader) skipLine() error {
	for {
		_, err := g.in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		return err
	}
}

// readLine reads one NDJSON line. Blank lines are skipped; a line longer
// than max is discarded as it streams in and answered with TooLarge.
func (g *frameReader) readLine() ([]byte, error) {
	var line []byte
	var total int64
	over := false
	for {
		chunk, err := g.in.ReadSlice('\n')
		total += int64(len(chunk))
		if !over {
			if total > g.max+2 { // +2: the line end is not part of the frame
				over = true
				if len(line) < idPrefixBytes {
					line = append(line, chunk[:min(len(chunk), idPrefixBytes-len(line))]...)
				}
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if over {
			size := total
			if err == nil {
				size-- // the line end is not part of the message
			}
			g.tooLarge(line, size)
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, errFrameDone
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, errFrameDone
		}
		// A last line without a newline is still a message.
		return line, nil
	}
}

// tooLarge answers an oversized frame with TooLarge, under the id found in
// its first bytes when there is one.
func (g *frameReader) tooLarge(prefix []byte, size int64) {
	id := idFromPrefix(prefix)
	g.log.Warn("frame over the size limit", "size", size, "limit", g.max)
	g.reply(id, protocol.CodeTooLarge, &protocol.ErrorData{Size: size, Limit: g.max, Reason: "message exceeds --max-message-bytes"},
		"message of %d bytes exceeds the limit of %d bytes", size, g.max)
}

// reply answers a frame that broke the framing or the limits.
func (g *frameReader) reply(id jsonrpc2.ID, code int, data *protocol.ErrorData, format string, args ...any) {
	g.answer(code, encodeError(id, protocol.NewError(code, data, format, args...)))
}
