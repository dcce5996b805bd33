package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

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

// guard stands between the input and the library's framer. The library ends
// the session on any malformed frame, allocates whatever a header declares
// and lets a line grow without bound, so the guard delimits frames itself
// with limits, answers bad ones with -32700/-32600/-32006 and forwards only
// valid JSON-RPC messages, compacted to one line each, to the library's
// NDJSON stream. Framing proper (reading a body of a declared length,
// composing replies) stays the library's on the way out.
//
// The guard's goroutine (owned by Server.Serve) is the only reader of in.
type guard struct {
	in      *bufio.Reader
	framing string // FramingHeader or FramingNDJSON once detected
	max     int64  // the largest frame accepted
	out     *outbox
	log     *slog.Logger
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

// next returns the next valid message, compacted, and whether it holds a
// request, or an error from the input (io.EOF at its end). Bad frames are
// answered and skipped.
func (g *guard) next() ([]byte, bool, error) {
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
			return nil, false, err
		}
		msg, call, ok := g.check(frame)
		if ok {
			return msg, call, nil
		}
	}
}

// readHeaderFrame reads one header-framed body. A body longer than max is
// discarded as it streams in and answered with TooLarge.
func (g *guard) readHeaderFrame() ([]byte, error) {
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
			g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "too many header lines"}, "parse error: too many header lines")
			return nil, g.resync()
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: fmt.Sprintf("malformed header line %q", clip(line, 80))}, "parse error: malformed header line")
			return nil, g.resync()
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			value = strings.TrimSpace(value)
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n <= 0 {
				g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: fmt.Sprintf("bad Content-Length %q", clip(value, 40))}, "parse error: bad Content-Length")
				return nil, g.resync()
			}
			length = n
		}
	}
	if length < 0 {
		g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "missing Content-Length header"}, "parse error: missing Content-Length header")
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
func (g *guard) readHeaderLine() (string, error) {
	var line []byte
	for {
		chunk, err := g.in.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHeaderLine {
			g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "header line too long"}, "parse error: header line too long")
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
func (g *guard) resync() error {
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
func (g *guard) skipLine() error {
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
func (g *guard) readLine() ([]byte, error) {
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
func (g *guard) tooLarge(prefix []byte, size int64) {
	id := idFromPrefix(prefix)
	g.log.Warn("frame over the size limit", "size", size, "limit", g.max)
	g.reply(id, CodeTooLarge, &ErrorData{Size: size, Limit: g.max, Reason: "message exceeds --max-message-bytes"},
		"message of %d bytes exceeds the limit of %d bytes", size, g.max)
}

// member records that a member of a message is present (null included:
// "result": null is a result) and the first byte of its value, without
// copying the value: params may be megabytes.
type member struct {
	set   bool
	first byte
}

// UnmarshalJSON is called for every value, null included.
func (m *member) UnmarshalJSON(b []byte) error {
	m.set, m.first = true, b[0]
	return nil
}

// rawMember is a member whose value is kept (an id: small).
type rawMember struct {
	set bool
	raw json.RawMessage
}

func (m *rawMember) UnmarshalJSON(b []byte) error {
	m.set, m.raw = true, append(json.RawMessage(nil), b...)
	return nil
}

// envelope is the shape of a JSON-RPC message, for validation.
type envelope struct {
	JSONRPC *string   `json:"jsonrpc"`
	ID      rawMember `json:"id"`
	Method  member    `json:"method"`
	Params  member    `json:"params"`
	Result  member    `json:"result"`
	Error   member    `json:"error"`
}

// check validates one frame. It returns the frame, whether it holds a
// request, and true; or it answers the frame and returns false.
func (g *guard) check(frame []byte) (msg []byte, call, ok bool) {
	frame = bytes.TrimSpace(frame)
	call = true // a batch counts as a request
	switch frame[0] {
	case '{':
		// Decoding the envelope also checks the whole frame is JSON.
		if call, ok = g.checkObject(frame); !ok {
			return nil, false, false
		}
		return frame, call, true
	case '[':
		if !json.Valid(frame) {
			g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "malformed JSON: " + syntaxReason(frame)}, "parse error: malformed JSON")
			return nil, false, false
		}
		// The library answers an empty batch and each bad member itself,
		// but it takes a member that is not an object for a parse error:
		// such a member becomes {}, which it answers with -32600 as JSON-RPC
		// asks.
		return objectMembers(frame), true, true
	}
	if !json.Valid(frame) {
		g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "malformed JSON: " + syntaxReason(frame)}, "parse error: malformed JSON")
		return nil, false, false
	}
	g.reply(jsonrpc2.ID{}, CodeInvalidRequest, &ErrorData{Reason: "a message must be an object or a batch array"}, "invalid request: not an object")
	return nil, false, false
}

// checkObject validates a single message object and answers it when it is
// not JSON or not a valid request, notification or response. It reports
// whether the message is a request (a call with an id).
func (g *guard) checkObject(frame []byte) (call, ok bool) {
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			g.reply(jsonrpc2.ID{}, CodeParseError, &ErrorData{Reason: "malformed JSON: " + err.Error()}, "parse error: malformed JSON")
			return false, false
		}
		// A member of the wrong JSON type ("jsonrpc": 2).
		id, _ := parseID(env.ID)
		g.reply(id, CodeInvalidRequest, &ErrorData{Reason: err.Error()}, "invalid request")
		return false, false
	}
	id, idOK := parseID(env.ID)
	bad := func(reason string) (bool, bool) {
		if !idOK {
			id = jsonrpc2.ID{}
		}
		g.reply(id, CodeInvalidRequest, &ErrorData{Reason: reason}, "invalid request: %s", reason)
		return false, false
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return bad(`"jsonrpc" must be "2.0"`)
	}
	if !env.Method.set {
		// A response to a call the server made.
		if !env.ID.set || env.Result.set == env.Error.set {
			g.log.Warn("dropping a malformed response from the client", "frame", clip(string(frame), 200))
			return false, false
		}
		return false, true
	}
	if env.Method.first != '"' {
		return bad(`"method" must be a string`)
	}
	if env.ID.set && !idOK {
		return bad(`"id" must be a string or an integer`)
	}
	if p := env.Params; p.set && p.first != '{' && p.first != '[' && p.first != 'n' {
		return bad(`"params" must be an object or an array`)
	}
	return env.ID.set, true
}

// parseID parses a request id: a string or an integer. A missing or null
// id is not valid.
func parseID(m rawMember) (jsonrpc2.ID, bool) {
	if !m.set {
		return jsonrpc2.ID{}, false
	}
	return idFromJSON(m.raw)
}

// idFromJSON parses a JSON string or integer as an id.
func idFromJSON(raw json.RawMessage) (jsonrpc2.ID, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return jsonrpc2.ID{}, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc2.ID{}, false
		}
		return jsonrpc2.NewStringID(s), true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc2.ID{}, false
	}
	return jsonrpc2.NewNumberID(n), true
}

// idFromPrefix finds the id of a message from its first bytes, reading the
// top-level members in order until "id" or the end of the prefix.
func idFromPrefix(prefix []byte) jsonrpc2.ID {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc2.ID{}
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return jsonrpc2.ID{}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return jsonrpc2.ID{}
		}
		if k == "id" {
			id, _ := idFromJSON(v)
			return id
		}
	}
	return jsonrpc2.ID{}
}

// reply queues an error response.
func (g *guard) reply(id jsonrpc2.ID, code int, data *ErrorData, format string, args ...any) {
	e := NewError(code, data, format, args...)
	g.out.send(jsonrpc2.AppendResponse(nil, id, nil, e.wire()), false)
}

// syntaxReason describes why frame is not JSON.
func syntaxReason(frame []byte) string {
	var v any
	if err := json.Unmarshal(frame, &v); err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// clip cuts s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// objectMembers returns a batch with every member that is not an object
// replaced by {}.
func objectMembers(batch []byte) []byte {
	var members []json.RawMessage
	if json.Unmarshal(batch, &members) != nil {
		return batch
	}
	changed := false
	for i, m := range members {
		if m = bytes.TrimSpace(m); len(m) == 0 || m[0] != '{' {
			members[i] = json.RawMessage("{}")
			changed = true
		}
	}
	if !changed {
		return batch
	}
	out, err := json.Marshal(members)
	if err != nil {
		return batch
	}
	return out
}
