package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/approval"
	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// ApprovalsConfig is how the command line says a session asks its
// client's user about what confinement refuses.
type ApprovalsConfig struct {
	// Deny is --approvals deny: nobody is asked, every ask is denied.
	Deny bool
	// Timeout is --approval-timeout, how long an ask waits for the
	// answer; 0 is the approval package's default.
	Timeout time.Duration
	// Store is the file of always grants, nil when none was opened (the
	// command line said why). A session uses it only where no command of
	// it can write the file (storeReason).
	Store *approval.Store
}

// asks are the session's asking: its broker, and each command's asks
// until its final result reports them.
type asks struct {
	broker  *approval.Broker
	cap     protocol.ApprovalsCapability
	session *rpc.Session // whose client is asked
	deny    bool         // --approvals deny

	mu sync.Mutex
	// byID are the outcomes of each command's asks, by the id its proxy
	// asked with (its handle id, or its command id before it has one);
	// guarded by mu. finalResult takes them.
	byID map[string][]protocol.ApprovalOutcome
}

// newAsks makes the asking of a session served on s whose confinement is
// conf: its client is asked when it declared capabilities.approvals (at
// the time of the ask: a resume may bring another client), unless the
// command line says --approvals deny.
func (t *Tools) newAsks(s *rpc.Session, conf *confinement) *asks {
	ac := t.cfg.Approvals
	store := ac.Store
	if store != nil {
		if why := conf.storeReason(store.Path()); why != "" {
			t.log.Warn("approvals: always grants are off for this session", "file", store.Path(), "reason", why)
			store = nil
		}
	}
	cfg := approval.Config{Deny: ac.Deny, Timeout: ac.Timeout, Store: store, Root: conf.root}
	if !ac.Deny {
		cfg.Ask = func(ctx context.Context, r approval.Request) (approval.Answer, error) {
			return askClient(ctx, s, r, t.isHandle)
		}
	}
	a := &asks{broker: approval.New(cfg), session: s, deny: ac.Deny, byID: map[string][]protocol.ApprovalOutcome{}}
	timeout := ac.Timeout
	if timeout == 0 {
		timeout = approval.DefaultTimeout
	}
	a.cap = protocol.ApprovalsCapability{Ask: !ac.Deny, TimeoutMs: timeout.Milliseconds(),
		Scopes: []protocol.ApprovalScope{protocol.ApprovalOnce, protocol.ApprovalCommand, protocol.ApprovalSession}}
	if store != nil {
		a.cap.Scopes = append(a.cap.Scopes, protocol.ApprovalAlways)
	}
	return a
}

// canAsk says a command started now may ask: --approvals ask, and a
// client that declared capabilities.approvals. A command that cannot is
// refused by its allow-list as if approvals did not exist: its proxy
// resolves no name the list does not name (the lookup of an asked name,
// which comes before the ask, is a way out for what a command knows).
func (a *asks) canAsk() bool {
	return !a.deny && a.session.ClientCapabilities().Approvals != nil
}

// askClient puts r to the client of s with approval/request; r.HandleID
// is the command's id as its proxy asked, which the request names only
// when it is a handle's (isHandle). A client that did not declare
// capabilities.approvals, or no connection, is approval.ErrNoClient; an
// error answer, or an answer that is neither allow nor deny, is an error:
// a deny.
func askClient(ctx context.Context, s *rpc.Session, r approval.Request, isHandle func(string) bool) (approval.Answer, error) {
	if s.ClientCapabilities().Approvals == nil {
		return approval.Answer{}, approval.ErrNoClient
	}
	p := protocol.ApprovalRequestParams{ApprovalID: r.ID, Argv: r.Argv, Cwd: r.Cwd,
		Kind: protocol.ApprovalKind(r.Kind), Target: r.Target, Justification: r.Justification}
	if isHandle(r.HandleID) {
		p.HandleID = r.HandleID
	}
	for _, sc := range r.Scopes {
		p.Scopes = append(p.Scopes, protocol.ApprovalScope(sc))
	}
	if p.Argv == nil {
		p.Argv = []string{}
	}
	var res protocol.ApprovalRequestResult
	err := s.Call(ctx, protocol.MethodApprovalRequest, p, &res)
	switch {
	case errors.Is(err, rpc.ErrDetached), errors.Is(err, rpc.ErrClientGone):
		return approval.Answer{}, approval.ErrNoClient
	case err != nil:
		return approval.Answer{}, err
	}
	switch res.Decision {
	case protocol.ApprovalAllow:
		return approval.Answer{Allow: true, Scope: approval.Scope(res.Scope)}, nil
	case protocol.ApprovalDeny:
		return approval.Answer{}, nil
	}
	return approval.Answer{}, fmt.Errorf("the answer's decision is %q, neither allow nor deny", res.Decision)
}

// storeReason says why no command of this confinement must be trusted
// near the grants file at path, or "" when none can write it: commands
// run unconfined, or with the whole filesystem writable, or the file
// lies in the root, a --writable directory or the root's cache, all of
// which a confined command may write.
func (c *confinement) storeReason(path string) string {
	switch {
	case c.mode == SandboxOff:
		return "commands run unconfined (--sandbox off), so one could write the grants file"
	case c.def.fs == protocol.SandboxFull:
		return "commands may write the whole filesystem (--sandbox-default full), so one could write the grants file"
	}
	dir := filepath.Dir(path)
	if c.contains(dir) && slices.Contains(c.def.protect, dir) {
		return "" // in the root, protected (serverLevel)
	}
	for _, w := range slices.Concat([]string{c.root, c.cache}, c.writable) {
		if w != "" && (dir == w || strings.HasPrefix(dir, w+string(filepath.Separator))) {
			return fmt.Sprintf("the grants file is under %s, which confined commands may write", w)
		}
	}
	return ""
}

// networkAsk is the NetworkAsk of a command with argv run in cwd: the
// session's broker decides, and the outcome is kept for the command's
// ToolResult.
func (t *Tools) networkAsk(argv []string, cwd string) func(ctx context.Context, id, host string, port int) netproxy.Verdict {
	return func(ctx context.Context, id, host string, port int) netproxy.Verdict {
		t.mu.Lock()
		a := t.asks
		t.mu.Unlock()
		if a == nil {
			return netproxy.Verdict{Reason: "the session has ended"}
		}
		// The command's id, as its proxy asks: its asks merge, and its
		// command grants last until it ends, whether or not it is a handle.
		out := a.broker.Decide(ctx, approval.Request{HandleID: id, Argv: argv, Cwd: cwd,
			Kind: approval.Network, Target: net.JoinHostPort(host, strconv.Itoa(port))})
		a.record(id, out)
		if out.Allow {
			return netproxy.Verdict{Allow: true}
		}
		return netproxy.Verdict{Reason: out.Reason}
	}
}

// isHandle says id names one of the session's handles.
func (t *Tools) isHandle(id string) bool {
	_, mgr := t.state()
	if mgr == nil || id == "" {
		return false
	}
	_, ok := mgr.Lookup(id)
	return ok
}

// record keeps an outcome of the command id asked with.
func (a *asks) record(id string, out approval.Outcome) {
	a.mu.Lock()
	a.byID[id] = append(a.byID[id], wireOutcome(out))
	a.mu.Unlock()
}

// wireOutcome is an outcome as a ToolResult reports it.
func wireOutcome(out approval.Outcome) protocol.ApprovalOutcome {
	o := protocol.ApprovalOutcome{Kind: protocol.ApprovalKind(out.Kind), Target: out.Target,
		Decision: protocol.ApprovalDeny, DecidedBy: protocol.ApprovalDecidedBy(out.DecidedBy)}
	if out.Allow {
		o.Decision, o.Scope = protocol.ApprovalAllow, protocol.ApprovalScope(out.Scope)
	}
	return o
}

// approvalsResult puts cmd's asks into its result res. Once res is final
// they are dropped, and so are the command's command grants.
func (t *Tools) approvalsResult(cmd *process.Command, res *protocol.ToolResult) {
	t.mu.Lock()
	a := t.asks
	t.mu.Unlock()
	if a == nil {
		return
	}
	ids := []string{cmd.ID()}
	if h := cmd.HandleID(); h != "" && h != cmd.ID() {
		ids = append(ids, h)
	}
	final := res.Status != protocol.StatusRunning
	a.mu.Lock()
	for _, id := range ids {
		res.Approvals = append(res.Approvals, a.byID[id]...)
		if final {
			delete(a.byID, id)
		}
	}
	a.mu.Unlock()
	if final {
		for _, id := range ids {
			a.broker.EndCommand(id)
		}
	}
}

// approvalsList serves approvals: the session's remembered grants.
func (t *Tools) approvalsList(ctx context.Context, s *rpc.Session, p *protocol.ApprovalsParams) (*protocol.ApprovalList, error) {
	a, err := t.sessionAsks()
	if err != nil {
		return nil, err
	}
	list := protocol.ApprovalList{}
	for _, g := range a.broker.Grants() {
		list = append(list, wireGrant(g))
	}
	return &list, nil
}

// revokeApproval serves revokeApproval.
func (t *Tools) revokeApproval(ctx context.Context, s *rpc.Session, p *protocol.RevokeApprovalParams) (*protocol.RevokeApprovalResult, error) {
	a, err := t.sessionAsks()
	if err != nil {
		return nil, err
	}
	if p.ApprovalID == "" {
		return nil, protocol.InvalidParams("approvalId", "is required: give the approvalId approvals lists")
	}
	var g approval.Grant
	for _, have := range a.broker.Grants() {
		if have.ID == p.ApprovalID {
			g = have
		}
	}
	if err := a.broker.Revoke(p.ApprovalID); err != nil {
		if errors.Is(err, approval.ErrUnknown) {
			return nil, protocol.InvalidParams("approvalId", "no remembered approval has the id %q (approvals lists them)", p.ApprovalID)
		}
		return nil, fmt.Errorf("cannot revoke %s: %w", p.ApprovalID, err)
	}
	return &protocol.RevokeApprovalResult{Revoked: wireGrant(g)}, nil
}

// sessionAsks returns the session's asking, once initialized.
func (t *Tools) sessionAsks() (*asks, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.asks == nil {
		return nil, protocol.ErrServerNotInitialized
	}
	return t.asks, nil
}

// wireGrant is a grant as the protocol says it.
func wireGrant(g approval.Grant) protocol.ApprovalGrant {
	return protocol.ApprovalGrant{ApprovalID: g.ID, Kind: protocol.ApprovalKind(g.Kind), Target: g.Target,
		Scope: protocol.ApprovalScope(g.Scope), HandleID: g.HandleID, CreatedAt: g.CreatedAt}
}
