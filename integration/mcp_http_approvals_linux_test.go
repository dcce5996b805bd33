package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// TestMCPHTTPElicitation: over HTTP, a confined command's connection to a
// host its allow-list does not name is put to the client's user as an
// elicitation on the stream of the tool call that caused it: accepted,
// the body arrives; declined, the curl gets 403 "denied by the user".
func TestMCPHTTPElicitation(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	const body = "fetched over http after an elicitation"
	_, port := netAllowedServer(t, body)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	h := startHTTPMCPEnv(t, approvalMCPEnv(t), approvalMCPArgs...)
	// A client that declared no elicitation, the first of the server, is
	// never asked: its command is refused at once, by policy. (It opens the
	// shared workspace: the eliciting client after it is asked all the same.)
	plain := h.connect("", nil, "2025-11-25")
	res := mcpToolResult(t, plain.call("run_command", curlArgs("http://"+target+"/")))
	if !strings.HasSuffix(res.Stdout, "\n403") || len(res.Approvals) != 1 || res.Approvals[0].Decision != protocol.ApprovalDeny || res.Approvals[0].DecidedBy == protocol.DecidedByUser {
		t.Errorf("a client that cannot elicit: %q, approvals %+v; want 403 at once, denied without asking", res.Stdout, res.Approvals)
	}
	asked := make(chan elicited, 8)
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) })
	s := h.connect("", &sdk.ClientOptions{ElicitationHandler: elicitOn(asked, ended)}, "2025-11-25")

	done := s.callAsync("run_command", curlArgs("http://"+target+"/"))
	e := <-asked
	checkForm(t, e.params, target)
	e.answer <- &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": "once"}}
	res = mcpToolResult(t, <-done)
	if !strings.HasPrefix(res.Stdout, body) || !strings.HasSuffix(res.Stdout, "\n200") {
		t.Errorf("an allowed curl printed %q, want the body and 200", res.Stdout)
	}
	done = s.callAsync("run_command", curlArgs("http://"+target+"/"))
	e = <-asked
	e.answer <- &sdk.ElicitResult{Action: "decline"}
	res = mcpToolResult(t, <-done)
	if !strings.Contains(res.Stdout, "denied by the user") || !strings.HasSuffix(res.Stdout, "\n403") {
		t.Errorf("a declined curl printed %q, want 403 saying denied by the user", res.Stdout)
	}
	select {
	case e := <-asked:
		t.Errorf("one more elicitation: %q", e.params.Message)
	default:
	}
}

// TestMCPHTTPElicitationTimeout: an HTTP client that never answers its
// elicitation is not waited on past --approval-timeout: the ask is
// denied as a timeout, the elicitation is withdrawn, and the call
// answers.
func TestMCPHTTPElicitationTimeout(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	_, port := netAllowedServer(t, "never fetched")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	h := startHTTPMCPEnv(t, approvalMCPEnv(t), append([]string{"--approval-timeout", "1s"}, approvalMCPArgs...)...)
	withdrawn := make(chan struct{})
	s := h.connect("", &sdk.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			<-ctx.Done() // never answers
			close(withdrawn)
			return nil, ctx.Err()
		},
	}, "2025-11-25")
	res := mcpToolResult(t, s.call("run_command", curlArgs("http://"+target+"/")))
	if !strings.HasSuffix(res.Stdout, "\n403") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByTimeout {
		t.Errorf("an unanswered ask: %q, approvals %+v; want 403, decided by timeout", res.Stdout, res.Approvals)
	}
	ctx, cancel := limit()
	defer cancel()
	select {
	case <-withdrawn:
	case <-ctx.Done():
		t.Error("the unanswered elicitation was not withdrawn")
	}
}
