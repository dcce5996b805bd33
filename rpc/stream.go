package rpc

import (
	"context"
	"io"

	"go.lsp.dev/jsonrpc2"
)

// guardStream is the stream the library's connection reads and writes. It
// implements the library's frame interface (ReadFrame, WriteFrame), so the
// library reads raw frames from it and parses them itself:
//
//   - ReadFrame runs the guard on the library's read loop: only valid
//     messages reach the library, and the loop waits there for room while
//     the client reads slowly or too many requests compute (waitRoom).
//   - Write and WriteFrame never block on the client: every frame the
//     library writes (a response, a batch of responses, a call) is queued in
//     the outbox as a message that is never dropped. Once a response is
//     queued the server is told (Server.replied): the request is no longer
//     in flight and the callbacks waiting for its reply run.
//
// Framing proper stays the library's on the way out: the outbox frames
// with the library's own streams.
type guardStream struct {
	srv *Server
	g   *guard
}

// ReadFrame returns the next valid message. At the end of the input it
// first lets the session end (see Server.inputEnded), then reports io.EOF.
func (gs *guardStream) ReadFrame(ctx context.Context) ([]byte, int64, error) {
	msg, call, err := gs.g.next()
	if err != nil {
		gs.srv.inputEnded(err)
		return nil, 0, io.EOF
	}
	gs.srv.waitRoom(call)
	return msg, int64(len(msg)), nil
}

// Read reads one message; the library reads through ReadFrame instead.
func (gs *guardStream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	frame, n, err := gs.ReadFrame(ctx)
	if err != nil {
		return nil, 0, err
	}
	msg, err := jsonrpc2.DecodeMessage(frame)
	return msg, n, err
}

// Write queues one message the library sends.
func (gs *guardStream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	body, err := jsonrpc2.EncodeMessage(msg)
	if err != nil {
		return 0, err
	}
	gs.queue(body)
	return int64(len(body)), nil
}

// WriteFrame queues one encoded frame the library sends (a batch answer).
func (gs *guardStream) WriteFrame(ctx context.Context, data []byte) (int64, error) {
	gs.queue(append([]byte(nil), data...))
	return int64(len(data)), nil
}

// queue queues body, which it owns, and tells the server which requests it
// answers.
func (gs *guardStream) queue(body []byte) {
	gs.srv.out.send(body, false)
	gs.srv.replied(replyKeys(body))
}

// Close does nothing: the input belongs to the caller of Serve.
func (gs *guardStream) Close() error { return nil }
