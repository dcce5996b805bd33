package rpc

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/toolhost/toolhost/protocol"
)

// method is one request method of the table.
type method struct {
	// serve decodes the params, runs the handler and encodes its result.
	serve func(ctx context.Context, s *Session, params []byte) ([]byte, error)
	// inline methods never block: they run on the read loop.
	inline bool
	// quick methods usually answer within handOverAfter; see Table.Quick.
	quick bool
	// ordered, if set, replaces serve: its first part runs on the read
	// loop, in wire order, and answers (rest nil) or returns the rest,
	// which runs on a goroutine of its own.
	ordered func(ctx context.Context, s *Session, params []byte) (res []byte, rest func(context.Context) ([]byte, error), err error)
}

// notificationHandler decodes a notification's params and handles it.
type notificationHandler func(ctx context.Context, s *Session, params []byte) error

// Table is the method table: the requests and notifications the tools
// serve, with their types, and the notifications and requests they may
// send. Tools register into it before the server starts; it is read-only
// afterwards.
type Table struct {
	methods       map[string]*method
	notifications map[string]notificationHandler
	sends         []string // notifications the tools may send
	requests      []string // requests the tools may send the client
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{methods: make(map[string]*method), notifications: make(map[string]notificationHandler)}
}

// Handle registers the handler of a request. The params are decoded
// strictly into P before h runs (an unknown member or a value of the wrong
// type is -32602 naming the field); the result is encoded with
// encoding/json. h's ctx is cancelled by $/cancelRequest and at the
// session's end. An *Error h returns goes out with its code and data,
// anything else as -32603.
func Handle[P, R any](t *Table, rt protocol.RequestType[P, R], h func(ctx context.Context, s *Session, p *P) (*R, error)) {
	t.methods[rt.Method()] = &method{serve: typed(h)}
}

// HandleEncoded is Handle for a handler that encodes its own result: the
// JSON it returns must be what encoding/json makes of an R, since clients
// decode it as one. It is for results that encoding/json is slow on, such
// as a file's content (one long string, escaped a byte at a time).
func HandleEncoded[P, R any](t *Table, rt protocol.RequestType[P, R], h func(ctx context.Context, s *Session, p *P) ([]byte, error)) {
	t.methods[rt.Method()] = &method{serve: func(ctx context.Context, s *Session, params []byte) ([]byte, error) {
		var p P
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		return h(ctx, s, &p)
	}}
}

// HandleInline is Handle for a request that never blocks and answers in
// microseconds (a snapshot under a lock): it runs on the read loop,
// without the goroutine a concurrent request costs, so the requests after
// it wait that long.
func HandleInline[P, R any](t *Table, rt protocol.RequestType[P, R], h func(ctx context.Context, s *Session, p *P) (*R, error)) {
	t.methods[rt.Method()] = &method{serve: typed(h), inline: true}
}

// HandleOrdered is Handle for a request whose effect must follow the wire
// order of the requests before it (writeInput: bytes reach the command in
// the order the requests arrived), or that usually answers at once but
// sometimes must wait (progress of a handle here, or of one on a
// destination). first runs on the read loop, in wire order, and must not
// block: it checks the params and either answers (rest nil: res is the
// answer, as HandleInline's handler gives it) or takes the request's place
// (a turn in a queue, a request written to a destination) and returns the
// rest, which runs on a goroutine of its own, as a Handle handler does,
// and answers. An error from first answers at once.
func HandleOrdered[P, R any](t *Table, rt protocol.RequestType[P, R], first func(ctx context.Context, s *Session, p *P) (res *R, rest func(context.Context) (*R, error), err error)) {
	t.methods[rt.Method()] = &method{ordered: func(ctx context.Context, s *Session, params []byte) ([]byte, func(context.Context) ([]byte, error), error) {
		var p P
		if err := decodeParams(params, &p, true); err != nil {
			return nil, nil, err
		}
		res, rest, err := first(ctx, s, &p)
		if err != nil {
			return nil, nil, err
		}
		if rest == nil {
			b, err := json.Marshal(res)
			return b, nil, err
		}
		return nil, func(ctx context.Context) ([]byte, error) {
			r, err := rest(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(r)
		}, nil
	}}
}

// typed wraps a typed handler in the decoding and encoding of its types.
func typed[P, R any](h func(ctx context.Context, s *Session, p *P) (*R, error)) func(context.Context, *Session, []byte) ([]byte, error) {
	return func(ctx context.Context, s *Session, params []byte) ([]byte, error) {
		var p P
		if err := decodeParams(params, &p, true); err != nil {
			return nil, err
		}
		r, err := h(ctx, s, &p)
		if err != nil {
			return nil, err
		}
		return json.Marshal(r)
	}
}

// HandleNotification registers the handler of a client notification. Its
// params are decoded leniently (LSP clients add members of their own); a
// notification whose params do not decode is logged and dropped.
func HandleNotification[P any](t *Table, nt protocol.NotificationType[P], h func(ctx context.Context, s *Session, p *P)) {
	t.notifications[nt.Method()] = func(ctx context.Context, s *Session, params []byte) error {
		var p P
		if err := decodeParams(params, &p, false); err != nil {
			return err
		}
		h(ctx, s, &p)
		return nil
	}
}

// Quick marks a method registered with Handle or HandleEncoded as one that
// usually answers within handOverAfter (a hundred microseconds) but may
// block (a read from a slow file system): the read loop's goroutine serves
// it itself, and hands the reading to another goroutine only if it has not
// answered by then. Waking another goroutine at once cost a small
// readFile a noticeable part of its round trip (BENCHMARKS.md); a
// command's start, which takes far longer, is better off without the
// timer.
func (t *Table) Quick(method string) {
	if m := t.methods[method]; m != nil && !m.inline && m.ordered == nil {
		m.quick = true
	}
}

// Sends records notifications the tools may send, for capabilities.
func (t *Table) Sends(methods ...string) {
	for _, m := range methods {
		if !slices.Contains(t.sends, m) {
			t.sends = append(t.sends, m)
		}
	}
}

// SendsRequests records requests the tools may send the client, for
// capabilities.
func (t *Table) SendsRequests(methods ...string) {
	for _, m := range methods {
		if !slices.Contains(t.requests, m) {
			t.requests = append(t.requests, m)
		}
	}
}

// methodNames returns every request method served, lifecycle included,
// sorted.
func (t *Table) methodNames() []string {
	names := []string{protocol.MethodInitialize, protocol.MethodShutdown}
	for m := range t.methods {
		names = append(names, m)
	}
	slices.Sort(names)
	return names
}

// sentNames returns the notifications the server may send, sorted.
func (t *Table) sentNames() []string {
	names := slices.Clone(t.sends)
	if !slices.Contains(names, protocol.NotifyLogMessage) {
		names = append(names, protocol.NotifyLogMessage)
	}
	slices.Sort(names)
	return names
}
