package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// Issue 35 under MCP: toolhost's session asks its client (this server)
// with approval/request; this server puts the question to the MCP
// client's user as a form elicitation on the tool call that caused it.
//
// Correlation. An approval/request names the command by its handleId
// when the command has one, and always by its argv and cwd. Every
// run_command and start_command call registers itself (callers.add) with
// the argvs it may run, and with its handle once toolhost answers with
// one; a started command's entry outlives its call (it asks later, from
// the background) until its connection ends. An ask is put:
//
//   - with a handleId, on the call (or the connection) that started that
//     handle;
//   - without one (a run_command that has not yielded, or a handle's ask
//     that arrives before its start's answer), on the calls in flight
//     whose argv is the request's. The cwd is not compared: the request's
//     is resolved (absolute, symlinks followed) and the call's is what the
//     model wrote. When the matching calls are all of one connection, the
//     question is put there, in the context of the first of them (the
//     answer goes to toolhost by approvalId, whichever call carries it);
//     when they span connections, or none matches, nobody is asked and the
//     ask is denied.
//
// A client that cannot elicit in form mode is never asked: its session
// does not declare capabilities.approvals, so its commands' proxies
// refuse as without approvals (at once, no approvals entry), and the
// result's text names the flag that allows the host. A 2026-07-28 client is such a client today: the SDK refuses a
// server-initiated elicitation in that version, which asks for
// multi-round-trip input requests instead, and a tool call cannot answer
// with those while its command holds a connection open.

// callers are the tool calls that may cause an ask.
type callers struct {
	// mu guards next and calls.
	mu    sync.Mutex
	next  int
	calls map[int]*caller
}

// caller is one run_command or start_command call, and the command it
// started.
type caller struct {
	ss    *sdk.ServerSession
	argvs [][]string // the argvs its command may run: its argv, or its steps'

	// The fields below are guarded by callers.mu.

	// ctx is the call's context while the call is in flight; nil once it
	// has returned.
	ctx context.Context
	// handleID is the command's handle, once toolhost has answered with it.
	handleID string
}

// add registers a call of ss that runs argvs, and returns its entry and
// done, to call when the call returns: the entry is dropped then, unless
// it has a handle (setHandle), whose asks may come after the call.
func (cs *callers) add(ctx context.Context, ss *sdk.ServerSession, argvs [][]string) (c *caller, done func()) {
	c = &caller{ss: ss, argvs: argvs, ctx: ctx}
	cs.mu.Lock()
	if cs.calls == nil {
		cs.calls = make(map[int]*caller)
	}
	cs.next++
	id := cs.next
	cs.calls[id] = c
	cs.mu.Unlock()
	return c, func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		c.ctx = nil
		if c.handleID == "" {
			delete(cs.calls, id)
		}
	}
}

// setHandle records that c's command runs behind handleID.
func (cs *callers) setHandle(c *caller, handleID string) {
	if handleID == "" {
		return
	}
	cs.mu.Lock()
	c.handleID = handleID
	cs.mu.Unlock()
}

// drop forgets the calls of a connection that has ended.
func (cs *callers) drop(ss *sdk.ServerSession) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for id, c := range cs.calls {
		if c.ss == ss {
			delete(cs.calls, id)
		}
	}
}

// find returns the call to ask p on, and its context while it is in
// flight (nil: the call has returned; its command asks from the
// background). ok is false when no call, or calls of several
// connections, may have caused it.
func (cs *callers) find(p *protocol.ApprovalRequestParams) (c *caller, callCtx context.Context, ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ids := make([]int, 0, len(cs.calls))
	for id := range cs.calls {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the oldest call first
	if p.HandleID != "" {
		for _, id := range ids {
			if c := cs.calls[id]; c.handleID == p.HandleID {
				return c, c.ctx, true
			}
		}
	}
	for _, id := range ids {
		m := cs.calls[id]
		if m.ctx == nil || !slices.ContainsFunc(m.argvs, func(a []string) bool { return slices.Equal(a, p.Argv) }) {
			continue
		}
		if c == nil {
			c, callCtx = m, m.ctx
		} else if m.ss != c.ss {
			return nil, nil, false // calls of two connections: which user?
		}
	}
	return c, callCtx, c != nil
}

// cancelled reports whether c's call was in flight when its context
// ended: it was cancelled (notifications/cancelled, its connection's
// end), not answered.
func (cs *callers) cancelled(c *caller) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return c.ctx != nil
}

// canElicit reports whether ss's client can be asked with a form
// elicitation by this server: it declared elicitation (form, or no mode,
// which is form), and its protocol version lets a server send one while
// it serves a call (before 2026-07-28).
func canElicit(ss *sdk.ServerSession) bool {
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return false
	}
	el := ip.Capabilities.Elicitation
	if el.Form == nil && el.URL != nil {
		return false
	}
	return ip.ProtocolVersion != "" && ip.ProtocolVersion < "2026-07-28"
}

// askTimeout bounds an elicitation when toolhost's session did not say
// how long it waits (it always does): past it, the inner ask is over
// anyway.
const askTimeout = 60 * time.Second

// The form's fields.
const (
	fieldDecision = "decision"
	fieldScope    = "scope"
)

// approvalRequest answers toolhost's approval/request: it elicits the
// user of the MCP client whose call caused the ask. Decline or cancel is
// a deny; an answer that is not one, no call to ask on, a client that
// cannot elicit, or an elicitation that fails is an error, which toolhost
// takes as a deny.
func (s *Server) approvalRequest(ctx context.Context, p *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
	c, callCtx, ok := s.callers.find(p)
	if !ok {
		s.log.Warn("an approval request matches no tool call: denied", "approvalId", p.ApprovalID, "argv", p.Argv, "target", p.Target)
		return nil, fmt.Errorf("no MCP tool call of one connection runs %q: nobody to ask", p.Argv)
	}
	ss := c.ss
	if !canElicit(ss) {
		return nil, errors.New("the MCP client of this call cannot elicit (form mode)")
	}
	timeout := askTimeout
	s.ws.mu.Lock()
	if info := s.ws.info; info != nil && info.Capabilities.Approvals.TimeoutMs > 0 {
		timeout = time.Duration(info.Capabilities.Approvals.TimeoutMs) * time.Millisecond
	}
	s.ws.mu.Unlock()
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if callCtx != nil {
		// The elicitation belongs to the call: a call cancelled ends it
		// (the SDK then tells the client), but one that answers while its
		// command goes on (a task, a start, a yield) leaves it to the
		// command.
		stop := context.AfterFunc(callCtx, func() {
			if s.callers.cancelled(c) {
				cancel()
			}
		})
		defer stop()
	}
	if p.HandleID != "" {
		s.tasks.asking(p.HandleID, p.Target, 1)
		defer s.tasks.asking(p.HandleID, p.Target, -1)
	}
	res, err := ss.Elicit(ectx, elicitParams(p))
	if err != nil {
		return nil, fmt.Errorf("eliciting the user: %w", err)
	}
	return answerOf(p, res)
}

// elicitParams is the form that asks p: a flat object of two enums, the
// decision and the scope among p's.
func elicitParams(p *protocol.ApprovalRequestParams) *sdk.ElicitParams {
	var msg strings.Builder
	fmt.Fprintf(&msg, "A command wants to connect to %s, which its network allow-list does not name.\nCommand: %s\nIn: %s",
		p.Target, strings.Join(p.Argv, " "), p.Cwd)
	if p.Justification != "" {
		fmt.Fprintf(&msg, "\nWhy: %s", p.Justification)
	}
	msg.WriteString("\nAllow it?")
	scopes := make([]any, 0, len(p.Scopes))
	var names []string
	for _, sc := range p.Scopes {
		scopes = append(scopes, string(sc))
		names = append(names, scopeWords(sc))
	}
	props := map[string]any{
		fieldDecision: map[string]any{
			"type": "string", "title": "Decision", "enum": []any{string(protocol.ApprovalAllow), string(protocol.ApprovalDeny)},
			"description": "allow or deny the connection to " + p.Target,
		},
	}
	if len(scopes) > 0 {
		props[fieldScope] = map[string]any{
			"type": "string", "title": "Remember the allow", "enum": scopes,
			"description": strings.Join(names, "; "),
		}
	}
	return &sdk.ElicitParams{
		Mode:    "form",
		Message: msg.String(),
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": props,
			"required":   []any{fieldDecision},
		},
	}
}

// scopeWords says what an allow of scope sc reaches.
func scopeWords(sc protocol.ApprovalScope) string {
	switch sc {
	case protocol.ApprovalOnce:
		return "once: this connection only"
	case protocol.ApprovalCommand:
		return "command: this command, until it ends"
	case protocol.ApprovalSession:
		return "session: this toolhost session"
	case protocol.ApprovalAlways:
		return "always: this workspace, in your grants file"
	}
	return string(sc)
}

// answerOf maps the elicitation's result onto the answer to p: accept
// with decision allow and a scope of p's (none given: once, when offered)
// is an allow; accept with deny, decline and cancel are a deny; anything
// else is an error.
func answerOf(p *protocol.ApprovalRequestParams, res *sdk.ElicitResult) (*protocol.ApprovalRequestResult, error) {
	switch res.Action {
	case "decline", "cancel":
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}, nil
	case "accept":
	default:
		return nil, fmt.Errorf("the elicitation's action is %q", res.Action)
	}
	decision, _ := res.Content[fieldDecision].(string)
	switch protocol.ApprovalDecision(decision) {
	case protocol.ApprovalDeny:
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}, nil
	case protocol.ApprovalAllow:
	default:
		return nil, fmt.Errorf("the elicitation's decision is %q, neither allow nor deny", decision)
	}
	scope := protocol.ApprovalOnce
	if v, ok := res.Content[fieldScope]; ok {
		str, _ := v.(string)
		scope = protocol.ApprovalScope(str)
	}
	if !slices.Contains(p.Scopes, scope) {
		return nil, fmt.Errorf("the elicitation's scope %q is not one offered (%v)", scope, p.Scopes)
	}
	return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: scope}, nil
}
