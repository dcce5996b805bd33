package rpc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// initialize answers initialize, once.
func (s *Server) initialize(ctx context.Context, raw []byte) ([]byte, *protocol.Error) {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state != stateNew {
		return nil, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: protocol.MethodInitialize, Reason: "initialize may be sent once"}, "invalid request: already initialized")
	}
	var p protocol.InitializeParams
	if err := decodeParams(raw, &p, false); err != nil {
		return nil, toError(protocol.MethodInitialize, err)
	}
	if p.Capabilities != nil {
		s.session.mu.Lock()
		s.session.caps = *p.Capabilities
		s.session.mu.Unlock()
	}
	res := &protocol.InitializeResult{}
	if s.opts.Lifecycle != nil {
		r, err := s.opts.Lifecycle.Initialize(ctx, s.session, &p)
		if err != nil {
			return nil, toError(protocol.MethodInitialize, err)
		}
		res = r
	}
	res.ServerInfo = protocol.ServerInfo{Name: "toolhost", Version: s.opts.Version}
	res.Capabilities.Methods = s.opts.Table.methodNames()
	res.Capabilities.Notifications = s.opts.Table.sentNames()
	res.Capabilities.ServerRequests = append([]string{}, s.opts.Table.requests...)
	res.Capabilities.Framing = s.framing
	res.Capabilities.MaxMessageBytes = s.opts.MaxMessageBytes
	if res.Workspace.ReadRoots == nil {
		res.Workspace.ReadRoots = []string{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, toError(protocol.MethodInitialize, err)
	}
	s.mu.Lock()
	if s.state == stateNew {
		s.state = stateInitialized
	}
	s.mu.Unlock()
	return b, nil
}

// shutdown answers shutdown: requests in flight are cancelled and all work
// ends before the answer; afterwards only exit is accepted.
func (s *Server) shutdown() ([]byte, *protocol.Error) {
	s.mu.Lock()
	switch s.state {
	case stateNew:
		s.mu.Unlock()
		return nil, protocol.NewError(protocol.CodeServerNotInitialized, &protocol.ErrorData{Method: protocol.MethodShutdown, Reason: "send initialize first"}, "server not initialized")
	case stateShutdown, stateEnding:
		s.mu.Unlock()
		return nil, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Method: protocol.MethodShutdown, Reason: "shutdown was already received"}, "invalid request: already shut down")
	}
	s.state = stateShutdown
	s.shutdownSeen = true
	for _, req := range s.inflight {
		if req.method != protocol.MethodShutdown {
			req.cancel(errShuttingDown)
		}
	}
	s.mu.Unlock()
	if s.opts.Lifecycle != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.EndTimeout)
		defer cancel()
		s.opts.Lifecycle.Shutdown(ctx)
	}
	return []byte("null"), nil
}

// waitIdle waits until no request is in flight, the session ends, or d
// passes.
func (s *Server) waitIdle(d time.Duration) {
	done := make(chan struct{})
	go func() { // owned by waitIdle's caller through done; it ends when the table empties or at the end
		s.mu.Lock()
		for len(s.inflight) > 0 && s.state != stateEnding {
			s.idle.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// End ends the session, for the given reason: it cancels every request and
// all work, answers what is in flight, flushes the output and then lets
// Serve return. It is idempotent and may be called from any goroutine (a
// signal handler, exit, the end of input).
func (s *Server) End(reason string) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		code := 1
		if s.shutdownSeen {
			code = 0
		}
		s.state = stateEnding
		// No answer that is still due may hold work back.
		var fns []func()
		for _, req := range s.inflight {
			fns = append(fns, req.afterReply...)
			req.afterReply = nil
		}
		s.idle.Broadcast()
		s.mu.Unlock()
		s.signalRoom()
		s.log.Info("session ending", "reason", reason, "exitCode", code)

		ctx, cancel := context.WithTimeout(context.Background(), s.opts.EndTimeout)
		defer cancel()
		s.endRoot(errSessionEnded)
		for _, fn := range fns {
			fn()
		}
		if s.opts.Lifecycle != nil {
			s.opts.Lifecycle.Shutdown(ctx)
		}
		// Handlers answer once their contexts are cancelled; wait for them
		// (within the bound) so that their answers are queued.
		handlersDone := make(chan struct{})
		go func() { // owned by End through handlersDone
			s.handlers.Wait()
			close(handlersDone)
		}()
		select {
		case <-handlersDone:
		case <-ctx.Done():
			s.log.Warn("handlers still running at the end of the session")
		}
		if s.out != nil {
			if err := s.out.flush(ctx); err != nil {
				s.log.Warn("output not flushed", "err", err)
			}
			if n := s.out.dropped.Load(); n > 0 {
				s.log.Warn("notifications dropped while the client read too slowly", "count", n)
			}
		}
		s.exitCode = code
		close(s.ended)
	})
}
