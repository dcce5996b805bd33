package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/mcp/internal/taskwire"
	"github.com/toolhost/toolhost/protocol"
)

// TestAnswerOf maps elicitation results onto approval answers: only an
// accepted allow with an offered scope allows; decline and cancel deny;
// anything else is an error (a deny for toolhost).
func TestAnswerOf(t *testing.T) {
	p := &protocol.ApprovalRequestParams{Target: "example.com:443", Scopes: []protocol.ApprovalScope{protocol.ApprovalOnce, protocol.ApprovalCommand}}
	allow := func(sc protocol.ApprovalScope) *protocol.ApprovalRequestResult {
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: sc}
	}
	deny := &protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}
	for _, tc := range []struct {
		name    string
		res     *sdk.ElicitResult
		want    *protocol.ApprovalRequestResult
		wantErr bool
	}{
		{"allow once", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": "once"}}, allow(protocol.ApprovalOnce), false},
		{"allow command", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": "command"}}, allow(protocol.ApprovalCommand), false},
		{"allow without scope", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}, allow(protocol.ApprovalOnce), false},
		{"accept deny", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "scope": "once"}}, deny, false},
		{"decline", &sdk.ElicitResult{Action: "decline"}, deny, false},
		{"cancel", &sdk.ElicitResult{Action: "cancel"}, deny, false},
		{"scope not offered", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": "always"}}, nil, true},
		{"scope not a string", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": 3}}, nil, true},
		{"other decision", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "maybe"}}, nil, true},
		{"no content", &sdk.ElicitResult{Action: "accept"}, nil, true},
		{"other action", &sdk.ElicitResult{Action: "later"}, nil, true},
	} {
		got, err := answerOf(p, tc.res)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestCallersFind puts an ask on the call that started its handle, or on
// the one call in flight that runs its argv; calls of two connections
// that run the same argv, or none, match nothing.
func TestCallersFind(t *testing.T) {
	var cs callers
	ss1, ss2 := new(sdk.ServerSession), new(sdk.ServerSession)
	ctx := context.Background()
	curl := []string{"curl", "https://example.com"}

	started, doneStarted := cs.add(ctx, ss1, [][]string{{"npm", "install"}})
	cs.setHandle(started, "h-1")
	doneStarted() // a start_command that has answered: its handle still asks
	if c, callCtx, ok := cs.find(&protocol.ApprovalRequestParams{HandleID: "h-1", Argv: []string{"npm", "install"}}); !ok || c.ss != ss1 || callCtx != nil {
		t.Errorf("find(h-1) = %v, %v, %v; want ss1's call, no call context, true", c, callCtx, ok)
	}
	if _, _, ok := cs.find(&protocol.ApprovalRequestParams{Argv: []string{"npm", "install"}}); ok {
		t.Error("an ask without a handle matched a call that has returned")
	}

	call1, done1 := cs.add(ctx, ss1, [][]string{curl})
	if c, callCtx, ok := cs.find(&protocol.ApprovalRequestParams{Argv: curl}); !ok || c != call1 || callCtx == nil {
		t.Errorf("find(curl) = %v, %v, %v; want the curl call, its context, true", c, callCtx, ok)
	}
	if !cs.cancelled(call1) {
		t.Error("a call in flight does not count as cancelled when its context ends")
	}
	_, done2 := cs.add(ctx, ss2, [][]string{curl})
	if _, _, ok := cs.find(&protocol.ApprovalRequestParams{Argv: curl}); ok {
		t.Error("an ask matched calls of two connections")
	}
	done2()
	done1()
	if cs.cancelled(call1) {
		t.Error("a call that answered counts as cancelled")
	}
	if _, _, ok := cs.find(&protocol.ApprovalRequestParams{Argv: curl}); ok {
		t.Error("an ask matched calls that have returned")
	}
	cs.drop(ss1)
	if _, _, ok := cs.find(&protocol.ApprovalRequestParams{HandleID: "h-1"}); ok {
		t.Error("an ask matched the handle of a connection that has ended")
	}
}

// TestTaskInputRequired: a working task shows input_required while its
// command waits on the user, and working after; an ask that began before
// the task existed counts.
func TestTaskInputRequired(t *testing.T) {
	tt, _ := newTestTable(t)
	tt.asking("h-2", "example.com:443", 1)
	tk := tt.create("h-2", formLegacy, tt.defaultTTL, "running")
	status := func() taskwire.Status {
		tt.mu.Lock()
		defer tt.mu.Unlock()
		return tk.legacyLocked(tk.created).Status
	}
	if got := status(); got != taskwire.InputRequired {
		t.Errorf("status while asking: %s, want input_required", got)
	}
	if taskwire.InputRequired.Terminal() {
		t.Error("input_required is terminal")
	}
	tt.asking("h-2", "example.com:443", -1)
	if got := status(); got != taskwire.Working {
		t.Errorf("status after the answer: %s, want working", got)
	}
}

// TestApprovalLines: each ask is a line of the result's text; a network
// ask nobody could answer names the flag that allows its host.
func TestApprovalLines(t *testing.T) {
	const target = "127.0.0.1:8080"
	net := func(d protocol.ApprovalDecision, sc protocol.ApprovalScope, by protocol.ApprovalDecidedBy) protocol.ApprovalOutcome {
		return protocol.ApprovalOutcome{Kind: protocol.ApprovalNetwork, Target: target, Decision: d, Scope: sc, DecidedBy: by}
	}
	flag := "--network-allow " + target + " to the toolhost mcp command line"
	for _, tc := range []struct {
		ask      protocol.ApprovalOutcome
		want     string
		wantFlag bool
	}{
		{net(protocol.ApprovalAllow, protocol.ApprovalOnce, protocol.DecidedByUser), "the user allowed the connection to " + target + " (once)", false},
		{net(protocol.ApprovalAllow, protocol.ApprovalSession, protocol.DecidedByGrant), "allowed by a grant the user gave before (session)", false},
		{net(protocol.ApprovalDeny, "", protocol.DecidedByUser), "the user denied the connection to " + target, false},
		{net(protocol.ApprovalDeny, "", protocol.DecidedByTimeout), "did not answer in time", false},
		{net(protocol.ApprovalDeny, "", protocol.DecidedByNoClient), "cannot ask its user", true},
		{net(protocol.ApprovalDeny, "", protocol.DecidedByPolicy), "refused (policy)", true},
	} {
		lines := approvalLines([]protocol.ApprovalOutcome{tc.ask})
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%+v: lines %q, want one saying %q", tc.ask, lines, tc.want)
			continue
		}
		if got := strings.Contains(lines[0], flag); got != tc.wantFlag {
			t.Errorf("%+v: %q names the flag: %v, want %v", tc.ask, lines[0], got, tc.wantFlag)
		}
	}
}
