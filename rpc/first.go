package rpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"

	"github.com/toolhost/toolhost/protocol"
)

// FirstMessage is a client's first message, read ahead of the server that
// will serve it: a front learns from it which root (and so which holder)
// a session belongs to, and whether the client speaks MCP. It is found by
// the same frameReader that a Server reads with, so the two never
// disagree on where a message ends.
type FirstMessage struct {
	// Buffered is every byte read ahead, the first message and whatever
	// followed it in the same reads; the server that serves the
	// connection reads them again (from the same bufio.Reader, or handed
	// on with the connection).
	Buffered []byte
	// Framing is FramingHeader or FramingNDJSON, as the first byte that
	// is not white space says; "" when none came.
	Framing string
	// Body is the first message's JSON; nil when Buffered holds no whole
	// message: the input ended or the read-ahead filled first, or the
	// message broke the framing.
	Body []byte

	// broken says the first message broke the framing (a header without
	// Content-Length, say): no later byte makes it whole.
	broken bool
}

// PeekFirst waits until br holds the client's first whole message, or its
// input ends, or br's buffer is full, and returns it without consuming
// anything: it reads no more than the client has sent, so a client that
// waits for an answer is not waited for. A message larger than br's
// buffer has no Body.
func PeekFirst(br *bufio.Reader) FirstMessage {
	for {
		b, _ := br.Peek(br.Buffered())
		m := ParseFirst(b)
		if m.Body != nil || m.broken || len(b) >= br.Size() {
			m.Buffered = bytes.Clone(b)
			return m
		}
		// More is needed: wait for at least one more byte.
		if _, err := br.Peek(len(b) + 1); err != nil {
			b, _ = br.Peek(br.Buffered())
			m = ParseFirst(b)
			m.Buffered = bytes.Clone(b)
			return m
		}
	}
}

// PeekFraming waits for the first byte of br that is not white space and
// returns the framing it means, without consuming anything: FramingHeader
// for 'C' (Content-Length), FramingNDJSON for anything else. It returns
// "" when the input ends (or the buffer fills with white space) first.
func PeekFraming(br *bufio.Reader) string {
	for n := 1; ; n = br.Buffered() + 1 {
		b, err := br.Peek(min(n, br.Size()))
		if err == nil {
			b, _ = br.Peek(br.Buffered()) // all that came, not only the n bytes waited for
		}
		if rest := bytes.TrimLeft(b, " \t\r\n"); len(rest) > 0 {
			return framingOf(rest[0])
		}
		if err != nil || len(b) >= br.Size() {
			return ""
		}
	}
}

// framingOf is the framing a first byte that is not white space means.
func framingOf(c byte) string {
	if c == 'C' || c == 'c' {
		return FramingHeader
	}
	return FramingNDJSON
}

// ParseFirst finds the first message in b, bytes a front read ahead (see
// PeekFirst). In NDJSON, a last line without its newline counts only when
// it is whole JSON: more of it may be on the way.
func ParseFirst(b []byte) FirstMessage {
	var m FirstMessage
	rest := bytes.TrimLeft(b, " \t\r\n")
	if len(rest) == 0 {
		return m
	}
	m.Framing = framingOf(rest[0])
	fr := &frameReader{
		in:      bufio.NewReader(bytes.NewReader(rest)),
		framing: m.Framing,
		// A frame that declares more than b holds is not whole yet; the
		// limit keeps the reader from allocating what a header declares.
		max: int64(len(rest)),
		log: slog.New(slog.DiscardHandler),
		answer: func(code int, _ []byte) {
			if code != protocol.CodeTooLarge {
				m.broken = true
			}
		},
	}
	body, err := fr.next()
	switch {
	case err != nil:
		return m // io.EOF, io.ErrUnexpectedEOF: not whole; or broken
	case m.Framing == FramingNDJSON && bytes.IndexByte(rest, '\n') < 0 && !json.Valid(body):
		return m
	}
	m.Body = body
	return m
}

// Request returns the method and params of the first message when it is
// a request or a notification (not a batch, not malformed).
func (m FirstMessage) Request() (method string, params json.RawMessage, ok bool) {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if m.Body == nil || json.Unmarshal(m.Body, &req) != nil || req.Method == "" {
		return "", nil, false
	}
	return req.Method, req.Params, true
}

// Initialize returns the params of the first message when it is an
// initialize whose params decode, else nil.
func (m FirstMessage) Initialize() *protocol.InitializeParams {
	method, params, ok := m.Request()
	if !ok || method != protocol.MethodInitialize {
		return nil
	}
	var p protocol.InitializeParams
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return &p
}
