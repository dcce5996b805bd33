package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/toolhost/toolhost/protocol"
)

// Session is what a tool sees of the connection it serves: the client's
// capabilities and the ways to send it notifications and requests. It is
// safe for concurrent use.
type Session struct {
	srv *Server

	mu   sync.Mutex
	caps protocol.ClientCapabilities // set by initialize; guarded by mu
}

// ClientCapabilities returns what the client said it supports.
func (s *Session) ClientCapabilities() protocol.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

// Logger returns the server's logger.
func (s *Session) Logger() *slog.Logger { return s.srv.log }

// Notify sends a notification that may be dropped, and counted, only when
// the client has fallen so far behind that the outbound queue is over its
// budget (stepTransition, $/progress begin and report).
func (s *Session) Notify(method string, params any) {
	s.srv.out.notify(method, params, true)
}

// NotifyCritical sends a notification that is never dropped (toolResult,
// $/progress end).
func (s *Session) NotifyCritical(method string, params any) {
	s.srv.out.notify(method, params, false)
}

// NotifyInOrder sends a notification that is never dropped nor coalesced
// (event), after waiting while the outbound queue is over its high-water
// mark: the caller slows down with the client instead of the queue
// growing. It returns early with ctx's cause, sending nothing.
func (s *Session) NotifyInOrder(ctx context.Context, method string, params any) error {
	if err := s.srv.out.waitRoom(ctx); err != nil {
		return err
	}
	s.srv.out.notify(method, params, false)
	return nil
}

// NotifyCoalesced sends a notification that later ones with the same key
// merge into while it waits to be written (heartbeat, output).
func (s *Session) NotifyCoalesced(key string, c Coalescable) {
	s.srv.out.coalesce(key, c)
}

// LogMessage sends window/logMessage: a message the user should see.
func (s *Session) LogMessage(typ protocol.MessageType, format string, args ...any) {
	s.Notify(protocol.NotifyLogMessage, protocol.LogMessageParams{Type: typ, Message: fmt.Sprintf(format, args...)})
}

// AfterReply runs fn once the response to the request ctx serves has been
// queued, so that notifications about what the request started never
// reach the client before the response that names it. fn runs exactly
// once: after the response, or at the session's end at the latest.
func (s *Session) AfterReply(ctx context.Context, fn func()) {
	s.srv.afterReply(ctx, fn)
}

// Detach tells the server that the request ctx serves will take long but
// no longer computes (it waits on a process, say), so that it does not
// count against the requests that may compute at once. A request that
// never detaches counts until it is answered.
func (s *Session) Detach(ctx context.Context) {
	s.srv.detach(ctx)
}

// Call sends a request to the client and decodes its result into result
// (which may be nil). The client's error answer comes back as an *Error.
func (s *Session) Call(ctx context.Context, method string, params, result any) error {
	raw, err := s.srv.callClient(ctx, method, params)
	if err != nil {
		return err
	}
	if result != nil && len(raw) > 0 {
		return json.Unmarshal(raw, result)
	}
	return nil
}
