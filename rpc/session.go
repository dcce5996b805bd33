package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/toolhost/toolhost/protocol"
)

// Session is what a tool sees of the client it serves: the client's
// capabilities and the ways to send it notifications and requests. It is
// safe for concurrent use.
//
// A session is served by one connection (a [Server]) at a time. Under
// persistence ([Options.Persist]) it outlives its connection: a
// connection that ends without shutdown leaves it detached, and a later
// connection's initialize takes it over ([Session.MoveTo]). While
// detached, notifications are dropped, except the numbered ones
// ([Session.NotifyNumbered]), which the ledger keeps for the next
// connection.
type Session struct {
	log  *slog.Logger
	keep bool // persisted: the ledger keeps numbered notifications for a later connection

	// srv is the connection serving the session; nil while detached, and
	// between a resume's initialize and its answer. It is read without mu
	// (every notification reads it) and written under mu, so that the
	// ledger's sends and a bind's replay keep their order.
	srv atomic.Pointer[Server]

	mu   sync.Mutex
	caps protocol.ClientCapabilities // set by initialize; guarded by mu

	// seq is the last number given to a numbered notification, guarded by
	// mu; numbers start at 1 and increase in the session.
	seq int64
	// ledger holds the numbered notifications, in seq order, guarded by
	// mu. Only a kept session (keep) holds entries: every one not yet
	// written to a connection, and the last written ones up to
	// LedgerKeepWritten, for a resume that names a lastSeq.
	ledger   []*numbered
	nWritten int // entries of ledger written; guarded by mu
	// journal, when set (SetJournal), is told of each numbered
	// notification and each write of one, under mu, so that a later
	// process can deliver what this one could not.
	journal Journal
	// dropped counts the notifications dropped while detached.
	dropped atomic.Int64
}

// Journal keeps a session's numbered notifications on disk.
type Journal interface {
	// Numbered records a numbered notification's encoded message.
	Numbered(seq int64, message []byte)
	// Written records that the notification seq was written to a
	// connection.
	Written(seq int64)
}

// numbered is one numbered notification in the ledger.
type numbered struct {
	seq     int64
	body    []byte // the encoded message, seq included
	written bool   // written to a connection; guarded by Session.mu
}

// LedgerKeepWritten bounds the written entries a kept ledger holds for a
// resume that names an older lastSeq; a journal keeps as many (package
// persist).
const LedgerKeepWritten = 10000

// newSession returns a session served by srv.
func newSession(srv *Server, keep bool) *Session {
	s := &Session{log: srv.log, keep: keep}
	s.srv.Store(srv)
	return s
}

// conn returns the connection serving the session, or nil.
func (s *Session) conn() *Server { return s.srv.Load() }

// ClientCapabilities returns what the client said it supports.
func (s *Session) ClientCapabilities() protocol.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

// Attached reports whether a connection serves the session.
func (s *Session) Attached() bool { return s.conn() != nil }

// Logger returns the server's logger.
func (s *Session) Logger() *slog.Logger { return s.log }

// Notify sends a notification that may be dropped, and counted, only when
// the client has fallen so far behind that the outbound queue is over its
// budget (stepTransition, $/progress begin and report).
func (s *Session) Notify(method string, params any) {
	if srv := s.conn(); srv != nil {
		srv.out.notify(method, params, true)
		return
	}
	s.dropped.Add(1)
}

// NotifyCritical sends a notification that is never dropped while a
// connection serves the session ($/progress end, portOpened). A detached
// session has no client to send it to: only numbered notifications are
// kept for the next one.
func (s *Session) NotifyCritical(method string, params any) {
	if srv := s.conn(); srv != nil {
		srv.out.notify(method, params, false)
		return
	}
	s.dropped.Add(1)
}

// NotifyInOrder sends a notification that is never dropped nor coalesced
// (event), after waiting while the outbound queue is over its high-water
// mark: the caller slows down with the client instead of the queue
// growing. It returns early with ctx's cause, sending nothing.
func (s *Session) NotifyInOrder(ctx context.Context, method string, params any) error {
	srv := s.conn()
	if srv == nil {
		s.dropped.Add(1)
		return nil
	}
	if err := srv.out.waitRoom(ctx); err != nil {
		return err
	}
	srv.out.notify(method, params, false)
	return nil
}

// NotifyCoalesced sends a notification that later ones with the same key
// merge into while it waits to be written (heartbeat, output).
func (s *Session) NotifyCoalesced(key string, c Coalescable) {
	if srv := s.conn(); srv != nil {
		srv.out.coalesce(key, c)
		return
	}
	s.dropped.Add(1)
}

// NotifyNumbered sends a notification that is never dropped and carries
// "seq", the next number of the session, as a member of its params (an
// object; a "seq" it already has is replaced): toolResult. A kept session
// holds it in its ledger until a connection has written it, so that a
// detached session delivers it to the connection that resumes it.
func (s *Session) NotifyNumbered(method string, params any) {
	p, err := json.Marshal(params)
	if err != nil {
		s.log.Error("cannot encode notification", "method", method, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	body, err := numberedMessage(method, p, s.seq)
	if err != nil {
		s.log.Error("cannot number notification", "method", method, "err", err)
		return
	}
	srv := s.srv.Load()
	if !s.keep {
		if srv != nil {
			srv.out.send(body, false)
		}
		return
	}
	n := &numbered{seq: s.seq, body: body}
	s.ledger = append(s.ledger, n)
	if s.journal != nil {
		s.journal.Numbered(n.seq, body)
	}
	if srv != nil {
		srv.out.sendThen(body, func() { s.markWritten(n) })
	}
}

// markWritten records that n reached a connection's output.
func (s *Session) markWritten(n *numbered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.written {
		return
	}
	n.written = true
	s.nWritten++
	if s.journal != nil {
		s.journal.Written(n.seq)
	}
	s.pruneLocked()
}

// pruneLocked lets go of the oldest written entries beyond
// LedgerKeepWritten. The caller holds mu.
func (s *Session) pruneLocked() {
	if s.nWritten <= LedgerKeepWritten+LedgerKeepWritten/4 {
		return // pruned in bursts, so that each write costs O(1) on average
	}
	kept := s.ledger[:0]
	for _, n := range s.ledger {
		if n.written && s.nWritten > LedgerKeepWritten {
			s.nWritten--
			continue
		}
		kept = append(kept, n)
	}
	clear(s.ledger[len(kept):])
	s.ledger = kept
}

// Seq returns the number of the last numbered notification.
func (s *Session) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// SetJournal makes j the journal of the session's numbered notifications.
func (s *Session) SetJournal(j Journal) {
	s.mu.Lock()
	s.journal = j
	s.mu.Unlock()
}

// Restore puts numbered notifications a journal kept back into the
// ledger of a kept session that no connection serves yet: their encoded
// messages and whether each was written, in seq order. Later numbers
// follow the last one.
func (s *Session) Restore(seqs []int64, bodies [][]byte, written []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, seq := range seqs {
		s.ledger = append(s.ledger, &numbered{seq: seq, body: bodies[i], written: written[i]})
		if written[i] {
			s.nWritten++
		}
		s.seq = max(s.seq, seq)
	}
	s.pruneLocked()
}

// NumberedMessage encodes a notification as NotifyNumbered sends it
// numbered seq: for a server that numbers a result a journal keeps.
func NumberedMessage(method string, params any, seq int64) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return numberedMessage(method, p, seq)
}

// numberedMessage encodes a notification whose params object p gains
// "seq": seq as its first member.
func numberedMessage(method string, p []byte, seq int64) ([]byte, error) {
	p = bytes.TrimSpace(p)
	if len(p) < 2 || p[0] != '{' {
		return nil, errors.New("params are not an object")
	}
	if hasMember(p, "seq") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		delete(m, "seq")
		var err error
		if p, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"seq":%d`, seq)
	if rest := bytes.TrimSpace(p[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(p[1:])
	return encodeNotification(method, json.RawMessage(b.Bytes()))
}

// hasMember reports whether the JSON object p has a member named name at
// its top level.
func hasMember(p []byte, name string) bool {
	dec := json.NewDecoder(bytes.NewReader(p))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if k, _ := t.(string); k == name {
			return true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// MoveTo makes the connection that serves s (a new one, in its
// initialize) serve target instead: the session a resume names. The
// connection that served target before, if any, ends without ending
// target's work. Once the initialize answer is queued, target is bound to
// the new connection and sent, in order, its numbered notifications after
// lastSeq, or without lastSeq every one not yet written; later ones follow
// as they come. ctx is the initialize request's.
func (s *Session) MoveTo(ctx context.Context, target *Session, lastSeq *int64) {
	srv := s.conn()
	if srv == nil {
		return
	}
	caps := s.ClientCapabilities()
	srv.session.Store(target)
	target.mu.Lock()
	prev := target.srv.Swap(nil)
	target.caps = caps
	target.mu.Unlock()
	if prev != nil && prev != srv {
		prev.log.Info("another connection resumed the session; this one ends")
		go prev.release("resumed by another connection") // owned by prev's Serve, which returns once it is done
	}
	srv.afterReply(ctx, func() { target.bind(srv, lastSeq) })
}

// bind makes srv serve s and sends it what the ledger owes: see MoveTo.
func (s *Session) bind(srv *Server, lastSeq *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv.isEnding() {
		return
	}
	s.srv.Store(srv)
	for _, n := range s.ledger {
		if lastSeq != nil && n.seq <= *lastSeq {
			continue
		}
		if lastSeq == nil && n.written {
			continue
		}
		n := n
		srv.out.sendThen(n.body, func() { s.markWritten(n) })
	}
}

// unbind leaves s detached if srv serves it.
func (s *Session) unbind(srv *Server) {
	s.mu.Lock()
	s.srv.CompareAndSwap(srv, nil)
	s.mu.Unlock()
}

// LogMessage sends window/logMessage: a message the user should see.
func (s *Session) LogMessage(typ protocol.MessageType, format string, args ...any) {
	s.Notify(protocol.NotifyLogMessage, protocol.LogMessageParams{Type: typ, Message: fmt.Sprintf(format, args...)})
}

// AfterReply runs fn once the response to the request ctx serves has been
// queued, so that notifications about what the request started never
// reach the client before the response that names it. fn runs exactly
// once: after the response, or at the end of the connection at the
// latest. Without a request in flight it runs at once.
func (s *Session) AfterReply(ctx context.Context, fn func()) {
	if req, _ := ctx.Value(requestKey{}).(*request); req != nil {
		req.srv.afterReply(ctx, fn)
		return
	}
	fn()
}

// Detach tells the server that the request ctx serves will take long but
// no longer computes (it waits on a process, say), so that it does not
// count against the requests that may compute at once. A request that
// never detaches counts until it is answered.
func (s *Session) Detach(ctx context.Context) {
	if req, _ := ctx.Value(requestKey{}).(*request); req != nil {
		req.srv.detach(ctx)
	}
}

// ErrDetached is the error of a request to the client of a detached
// session.
var ErrDetached = errors.New("no connection serves the session")

// Call sends a request to the client and decodes its result into result
// (which may be nil). The client's error answer comes back as an *Error.
func (s *Session) Call(ctx context.Context, method string, params, result any) error {
	srv := s.conn()
	if srv == nil {
		return ErrDetached
	}
	raw, err := srv.callClient(ctx, method, params)
	if err != nil {
		return err
	}
	if result != nil && len(raw) > 0 {
		return json.Unmarshal(raw, result)
	}
	return nil
}
