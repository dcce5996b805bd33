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
	sess := s.session.Load()
	if p.Capabilities != nil {
		sess.mu.Lock()
		sess.caps = *p.Capabilities
		sess.mu.Unlock()
	}
	res := &protocol.InitializeResult{}
	if s.opts.Lifecycle != nil {
		r, err := s.opts.Lifecycle.Initialize(ctx, sess, &p)
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
func (s *Server) End(reason string) { s.end(reason, true) }

// finish ends the connection at the end of its input or at exit: under
// Persist, without shutdown first, it leaves the session's work running
// (release); otherwise it ends the session (End).
func (s *Server) finish(reason string) {
	s.mu.Lock()
	keep := s.opts.Persist && !s.shutdownSeen
	s.mu.Unlock()
	s.end(reason, !keep)
}

// release ends the connection and leaves its session detached, its work
// running: see Options.Persist.
func (s *Server) release(reason string) { s.end(reason, false) }

// isEnding reports whether the connection is ending or has ended.
func (s *Server) isEnding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateEnding
}

// end ends the connection; with work, the session's work as well (End),
// else it leaves the session detached (release).
func (s *Server) end(reason string, work bool) {
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
		sess := s.session.Load()
		// No exit code here: Serve's is the process's only for a plain
		// session (the MCP server's, say, decides its own), and main logs
		// the one the process exits with.
		if work {
			s.log.Info("session ending", "reason", reason, "shutdownReceived", code == 0)
		} else {
			// Nothing more is queued for this connection: what the
			// session sends from now on waits for the next one.
			sess.unbind(s)
			s.log.Info("connection ending; the session is detached and its work goes on", "reason", reason, "shutdownReceived", code == 0)
		}

		ctx, cancel := context.WithTimeout(context.Background(), s.opts.EndTimeout)
		defer cancel()
		s.endRoot(errSessionEnded)
		for _, fn := range fns {
			fn()
		}
		if work && s.opts.Lifecycle != nil {
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
		if work {
			sess.unbind(s)
		} else if d, ok := s.opts.Lifecycle.(Detacher); ok {
			d.Detached(sess, reason)
		}
		s.exitCode = code
		close(s.ended)
	})
}

// Release ends the connection as the end of its input does: under
// Persist, unless shutdown came first, the session is left detached and
// its work goes on; otherwise the session ends. A holder calls it when
// the process that handed it the connection is gone.
func (s *Server) Release(reason string) { s.finish(reason) }
