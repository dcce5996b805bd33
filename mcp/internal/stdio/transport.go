package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport is MCP's stdio transport, one JSON-RPC message per line,
// made to survive bad input: a line that is not JSON is answered with a
// parse error (-32700), a message that is not JSON-RPC or a batch with an
// invalid request (-32600), and a line over the size limit with -32600
// too, and the session goes on. (The SDK's own stdio transport ends the
// session at the first line it cannot decode.)
type Transport struct {
	In  io.Reader
	Out io.Writer
	// Max is the longest line read, in bytes.
	Max int64
	Log *slog.Logger
	// Splice puts the strings of large results in place.
	Splice *Splicer
	// Outlet is given the connection, for the notifications the SDK has
	// no method to send.
	Outlet *Outlet
	// SessionID names the connection among those of one server (the
	// SDK's ServerSession.ID): a server that serves several tells their
	// requests apart by it.
	SessionID string
}

// Connect starts reading the input.
func (t *Transport) Connect(context.Context) (sdk.Connection, error) {
	c := &lineConn{out: t.Out, log: t.Log, splice: t.Splice, id: t.SessionID, incoming: make(chan jsonrpc.Message), closed: make(chan struct{})}
	if t.Outlet != nil {
		t.Outlet.Use(c)
	}
	// The reader ends at the end of the input. Close cannot interrupt a
	// read of a real stdin: the reader is then left blocked in it for the
	// process's exit to end, as toolhost's own read loop is.
	go c.readLoop(bufio.NewReaderSize(t.In, 64<<10), t.Max)
	return c, nil
}

// lineConn is the connection of Transport.
type lineConn struct {
	out    io.Writer
	log    *slog.Logger
	splice *Splicer
	id     string // the Transport's SessionID
	// writeMu serializes writes: one message per line, whole.
	writeMu sync.Mutex
	// incoming carries the decoded messages; the reader closes it at the
	// end of the input.
	incoming  chan jsonrpc.Message
	closed    chan struct{}
	closeOnce sync.Once
}

// readLoop reads lines until the input ends or the connection closes.
func (c *lineConn) readLoop(br *bufio.Reader, max int64) {
	defer close(c.incoming)
	for {
		line, tooLong, err := readLine(br, max)
		if tooLong {
			c.reject(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message too large: over %d bytes (--max-message-bytes)", max))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			if msg := c.decode(line); msg != nil {
				select {
				case c.incoming <- msg:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.log.Warn("reading the MCP input failed", "err", err)
			}
			return
		}
	}
}

// readLine reads one line, without its newline. A line over max bytes is
// read to its end and dropped: tooLong is then set.
func readLine(br *bufio.Reader, max int64) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if int64(len(buf)+len(chunk)) > max+1 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

// decode decodes one line into a message, or answers it with an error
// and returns nil.
func (c *lineConn) decode(line []byte) jsonrpc.Message {
	if line[0] == '[' {
		c.reject(idOf(line), jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per line")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err == nil {
		if req, ok := msg.(*jsonrpc.Request); ok {
			Lift(req)
		}
		return msg
	}
	if !json.Valid(line) {
		c.reject(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON: "+err.Error())
		return nil
	}
	c.reject(idOf(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	return nil
}

// idOf returns the id of a message that could not be decoded, if it has
// a usable one.
func idOf(line []byte) *jsonrpc.ID {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || m.ID == nil {
		return nil
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil {
		return nil
	}
	return &id
}

// reject answers bad input with an error response.
func (c *lineConn) reject(id *jsonrpc.ID, code int64, msg string) {
	resp := struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{JSONRPC: "2.0", Error: &jsonrpc.Error{Code: code, Message: msg}}
	if id != nil {
		resp.ID = id.Raw()
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	c.log.Info("bad MCP input answered", "code", code, "msg", msg)
	_ = c.writeLine(b)
}

// Read returns the next message, or io.EOF once the input has ended or the
// connection is closed.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msg, ok := <-c.incoming:
		if !ok {
			return nil, io.EOF
		}
		return msg, nil
	case <-c.closed:
		return nil, io.EOF
	}
}

// codeNotInitialized is the error of a request before initialize.
const codeNotInitialized = -32002

// Write writes one message on a line of its own. An error the SDK sends
// without a JSON-RPC code goes out with one: -32002 for a request before
// initialize, as toolhost's protocol and LSP answer it, -32603 for
// anything else, and a code of 0 (which JSON-RPC does not define) as
// -32600.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
		var we *jsonrpc.Error
		if errors.As(r.Error, &we) && we.Code == 0 {
			r.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: we.Message, Data: we.Data}
		} else if !errors.As(r.Error, &we) {
			code := int64(jsonrpc.CodeInternalError)
			if strings.Contains(r.Error.Error(), "invalid during session initialization") {
				// The SDK's answer to a request before initialize: toolhost's
				// (and LSP's) ServerNotInitialized.
				code = codeNotInitialized
			}
			r.Error = &jsonrpc.Error{Code: code, Message: r.Error.Error() + ": send initialize first"}
		}
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.Error == nil && r.Result != nil {
		// A result is already JSON, compact (the SDK encoded it): written
		// as it is, it is not gone over again.
		id, err := json.Marshal(r.ID.Raw())
		if err != nil {
			return err
		}
		result, written := c.splice.Apply(r.Result)
		b := make([]byte, 0, len(result)+len(id)+40)
		b = append(append(append(append(b, `{"jsonrpc":"2.0","id":`...), id...), `,"result":`...), result...)
		err = c.writeLine(append(b, '}'))
		for _, f := range written {
			f()
		}
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeLine(b)
}

// notify writes a notification the SDK has no method for.
func (c *lineConn) notify(method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		return err
	}
	return c.writeLine(b)
}

// Outlet is the way out for the notifications the SDK cannot send
// (notifications/tasks/status, notifications/tasks, a subscription's
// acknowledgment with task ids): they are written on the transport's
// connection, in the order of the calls.
type Outlet struct {
	conn atomic.Pointer[Notifier]
}

// Notifier writes a notification the SDK has no method for on one
// connection: a line of this transport, or an HTTP session's stream.
type Notifier interface {
	Notify(method string, params any) error
}

// Use connects o to n: what is sent through o from then on goes to n.
func (o *Outlet) Use(n Notifier) { o.conn.Store(&n) }

// Notify writes one notification on the line.
func (c *lineConn) Notify(method string, params any) error { return c.notify(method, params) }

// Attach connects o straight to w, one message per line, with no input
// read: a test sees on w what is sent through o.
func (o *Outlet) Attach(w io.Writer, log *slog.Logger) {
	o.Use(&lineConn{out: w, log: log, closed: make(chan struct{})})
}

// Notify sends one notification; it fails before the session is
// connected and once the connection is closed.
func (o *Outlet) Notify(method string, params any) error {
	n := o.conn.Load()
	if n == nil {
		return io.ErrClosedPipe
	}
	return (*n).Notify(method, params)
}

// writeLine writes b and a newline, whole.
func (c *lineConn) writeLine(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err := c.out.Write(append(b, '\n'))
	return err
}

// Close stops the connection; Read returns io.EOF from then on.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// SessionID is the Transport's: empty unless the server serves several
// connections.
func (c *lineConn) SessionID() string { return c.id }
