package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// Issue 35 under MCP: toolhost mcp puts a confined command's connection
// to a host:port its allow-list does not name to the MCP client's user as
// a form elicitation on the tool call that caused it.

// approvalMCPArgs are the flags of the servers of these tests: an
// allow-list that names only a port nothing listens on, and no
// registries, so that the local origin is asked about.
var approvalMCPArgs = []string{"--network-allow", "127.0.0.1:1", "--network-allow-registries=false"}

// approvalMCPEnv is the server's environment, with its grants file under
// a directory of the test's.
func approvalMCPEnv(t *testing.T) []string {
	return append(quickExitEnv(), "XDG_CONFIG_HOME="+t.TempDir())
}

// curlArgs are run_command's arguments for a curl of url that prints the
// body, then a line with the HTTP status.
func curlArgs(url string) map[string]any {
	return map[string]any{"argv": []string{"curl", "-sS", "--max-time", "60", "-w", `\n%{http_code}`, url}}
}

// elicited is one elicitation the client got, and where its answer goes;
// withdrawn is closed if the server cancels it.
type elicited struct {
	params    *sdk.ElicitParams
	answer    chan *sdk.ElicitResult
	withdrawn chan struct{}
}

// elicitOn is an ElicitationHandler that sends each elicitation to
// asked and waits for its answer, its withdrawal, or ended.
func elicitOn(asked chan<- elicited, ended <-chan struct{}) func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	return func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		e := elicited{params: req.Params, answer: make(chan *sdk.ElicitResult, 1), withdrawn: make(chan struct{})}
		asked <- e
		select {
		case r := <-e.answer:
			return r, nil
		case <-ctx.Done():
			close(e.withdrawn)
			return nil, ctx.Err()
		case <-ended:
			return nil, fmt.Errorf("the test ended")
		}
	}
}

// startMCPEliciting starts toolhost mcp and connects the Go SDK's client,
// at protocol version version, with an ElicitationHandler: each
// elicitation arrives on the channel returned and waits for its answer.
func startMCPEliciting(t *testing.T, version string) (*mcpSession, chan elicited) {
	t.Helper()
	asked := make(chan elicited, 8)
	ended := make(chan struct{})
	s := &mcpSession{t: t, root: t.TempDir(), progressed: make(chan struct{}, 1), logs: make(chan *sdk.LoggingMessageParams, 64)}
	cmd := exec.Command(binary, append([]string{"mcp", "--root", s.root, "--log-level", "warn", "--kill-grace", "500ms"}, approvalMCPArgs...)...)
	cmd.Stderr, cmd.Env = &testLogWriter{t: t}, approvalMCPEnv(t)
	c := sdk.NewClient(&sdk.Implementation{Name: "toolhost-approvals", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: elicitOn(asked, ended),
	})
	ctx, cancel := limit()
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to toolhost: %v", err)
	}
	s.cs = cs
	t.Cleanup(func() {
		close(ended)
		if err := cs.Close(); err != nil {
			t.Errorf("closing the MCP session: %v", err)
		}
	})
	return s, asked
}

// callAsync calls a tool on its own goroutine, whose result arrives on
// the channel returned; the test waits on it.
func (s *mcpSession) callAsync(name string, args any) <-chan *sdk.CallToolResult {
	done := make(chan *sdk.CallToolResult, 1)
	go func() { // owned by the test, which receives from done
		ctx, cancel := limit()
		defer cancel()
		res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			s.t.Errorf("%s: %v", name, err)
		}
		done <- res
	}()
	return done
}

// checkForm checks that an elicitation asks about target in form mode,
// names the command, and offers the decision and the scopes as enums.
func checkForm(t *testing.T, p *sdk.ElicitParams, target string) {
	t.Helper()
	if p.Mode != "form" && p.Mode != "" {
		t.Errorf("elicitation mode %q, want form", p.Mode)
	}
	for _, part := range []string{target, "curl", "--max-time"} {
		if !strings.Contains(p.Message, part) {
			t.Errorf("the elicitation's message %q does not name %q", p.Message, part)
		}
	}
	b, _ := json.Marshal(p.RequestedSchema)
	var schema struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("the elicitation's schema %s: %v", b, err)
	}
	if diff := cmp.Diff([]string{"allow", "deny"}, schema.Properties["decision"].Enum); diff != "" {
		t.Errorf("the decision's enum: mismatch (-want +got):\n%s", diff)
	}
	if !slices.Contains(schema.Properties["scope"].Enum, "once") {
		t.Errorf("the scope's enum %v offers no once", schema.Properties["scope"].Enum)
	}
	if !slices.Contains(schema.Required, "decision") {
		t.Errorf("the schema's required %v lacks decision", schema.Required)
	}
}

// mcpToolResult decodes a run_command result's structured content.
func mcpToolResult(t *testing.T, out *sdk.CallToolResult) protocol.ToolResult {
	t.Helper()
	if out == nil {
		t.Fatal("no result")
	}
	if out.IsError {
		t.Fatalf("isError: %s", text(out))
	}
	var res protocol.ToolResult
	decodeStructured(t, out, &res)
	return res
}

// TestMCPApprovalAcceptAndDecline: with a client that elicits, a curl to
// a local origin the allow-list does not name is held while the user
// answers the form: accepted (allow, once), the body arrives; declined,
// the curl gets 403 "denied by the user". Each result says how its ask
// was decided, in its structured content and its text.
func TestMCPApprovalAcceptAndDecline(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	const body = "fetched after an elicitation"
	_, port := netAllowedServer(t, body)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	s, asked := startMCPEliciting(t, "2025-11-25")

	done := s.callAsync("run_command", curlArgs("http://"+target+"/"))
	e := <-asked
	checkForm(t, e.params, target)
	e.answer <- &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow", "scope": "once"}}
	out := <-done
	res := mcpToolResult(t, out)
	if !strings.HasPrefix(res.Stdout, body) || !strings.HasSuffix(res.Stdout, "\n200") {
		t.Errorf("an allowed curl printed %q, want the body and 200", res.Stdout)
	}
	want := []protocol.ApprovalOutcome{{Kind: protocol.ApprovalNetwork, Target: target, Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce, DecidedBy: protocol.DecidedByUser}}
	if diff := cmp.Diff(want, res.Approvals); diff != "" {
		t.Errorf("approvals: mismatch (-want +got):\n%s", diff)
	}
	if line := "the user allowed the connection to " + target + " (once)"; !strings.Contains(firstText(t, out), line) {
		t.Errorf("the result's text does not say %q:\n%s", line, text(out))
	}

	done = s.callAsync("run_command", curlArgs("http://"+target+"/"))
	e = <-asked // once was not remembered
	e.answer <- &sdk.ElicitResult{Action: "decline"}
	out = <-done
	res = mcpToolResult(t, out)
	if !strings.Contains(res.Stdout, "denied by the user") || !strings.HasSuffix(res.Stdout, "\n403") {
		t.Errorf("a declined curl printed %q, want 403 saying denied by the user", res.Stdout)
	}
	want = []protocol.ApprovalOutcome{{Kind: protocol.ApprovalNetwork, Target: target, Decision: protocol.ApprovalDeny, DecidedBy: protocol.DecidedByUser}}
	if diff := cmp.Diff(want, res.Approvals); diff != "" {
		t.Errorf("approvals: mismatch (-want +got):\n%s", diff)
	}
	if line := "the user denied the connection to " + target; !strings.Contains(firstText(t, out), line) {
		t.Errorf("the result's text does not say %q:\n%s", line, text(out))
	}
	select {
	case e := <-asked:
		t.Errorf("one more elicitation: %q", e.params.Message)
	default:
	}
}

// TestMCPApprovalCallCancelled: a run_command cancelled while its
// elicitation waits withdraws the elicitation (the client's handler sees
// its context end), and the command's whole tree is gone.
func TestMCPApprovalCallCancelled(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	_, port := netAllowedServer(t, "never fetched")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	s, asked := startMCPEliciting(t, "2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { // owned by the test, which receives from done
		_, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_command", Arguments: curlArgs("http://" + target + "/")})
		done <- err
	}()
	e := <-asked
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled call answered without an error")
	}
	lctx, lcancel := limit()
	defer lcancel()
	select {
	case <-e.withdrawn:
	case <-lctx.Done():
		t.Fatal("the elicitation of a cancelled call was not withdrawn")
	}
	// The session goes on.
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"echo", "after"}}, &res)
	if res.Stdout != "after\n" {
		t.Errorf("the next command printed %q", res.Stdout)
	}
}

// TestMCPApprovalNoElicitation: a client that cannot be asked is never
// asked: the SDK's client without a handler (at its latest version), and
// one with a handler at 2026-07-28, where the SDK lets no server request
// in the middle of a call. The curl gets 403 at once (its proxy refuses
// as without approvals), and the result's text names the flag its user
// can add, --network-allow 127.0.0.1:PORT.
func TestMCPApprovalNoElicitation(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	_, port := netAllowedServer(t, "never fetched")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (*mcpSession, chan elicited)
	}{
		{"no handler", func(t *testing.T) (*mcpSession, chan elicited) {
			return startMCP(t, mcpOptions{extra: approvalMCPArgs, env: approvalMCPEnv(t)}), nil
		}},
		{"2026-07-28", func(t *testing.T) (*mcpSession, chan elicited) { return startMCPEliciting(t, "2026-07-28") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, asked := tc.start(t)
			var res protocol.ToolResult
			out := s.ok("run_command", curlArgs("http://"+target+"/"), &res)
			if !strings.HasSuffix(res.Stdout, "\n403") || strings.Contains(res.Stdout, "never fetched") {
				t.Errorf("curl printed %q, want a 403", res.Stdout)
			}
			// Never asked: a command that cannot ask is refused by its
			// allow-list as without approvals, so there is no entry.
			if len(res.Approvals) != 0 {
				t.Errorf("approvals %+v for a client that cannot be asked, want none", res.Approvals)
			}
			if flag := "--network-allow " + target + " to the toolhost mcp command line"; !strings.Contains(firstText(t, out), flag) {
				t.Errorf("the result's text does not say %q:\n%s", flag, text(out))
			}
			select {
			case e := <-asked: // nil without a handler: never ready
				t.Errorf("an elicitation: %q", e.params.Message)
			default:
			}
		})
	}
}

// TestMCPApprovalTaskInputRequired runs run_command as a 2025-11-25 task
// on a raw session that elicits: while the elicitation is unanswered,
// tasks/get says input_required; answered (allow), the task works again
// and completes with the body.
func TestMCPApprovalTaskInputRequired(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	needNetEnforcementOfBinary(t)
	const body = "fetched by a task"
	_, port := netAllowedServer(t, body)
	target := fmt.Sprintf("127.0.0.1:%d", port)

	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"mcp", "--root", root, "--log-level", "warn", "--kill-grace", "500ms"}, approvalMCPArgs...)...)
	cmd.Stderr, cmd.Env = &testLogWriter{t: t}, approvalMCPEnv(t)
	s, asked := openElicitingTaskSession(t, cmd, root)
	var init map[string]any
	s.call("initialize", map[string]any{"protocolVersion": versionTasks2025,
		"capabilities": map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		"clientInfo":   map[string]any{"name": "toolhost-approvals-tasks", "version": "1"}}, &init)
	s.notify("notifications/initialized", map[string]any{})

	var created createTask2025
	s.toolCall("run_command", curlArgs("http://"+target+"/"), map[string]any{}).result(&created)
	if created.Task == nil {
		t.Fatal("run_command with params.task answered no task")
	}
	id := created.Task.TaskID
	req := <-asked
	if req.Method != "elicitation/create" {
		t.Fatalf("the server asked %s, want elicitation/create", req.Method)
	}
	var p sdk.ElicitParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		t.Fatal(err)
	}
	checkForm(t, &p, target)
	var got task2025
	s.call("tasks/get", map[string]any{"taskId": id}, &got)
	if got.Status != "input_required" || !strings.Contains(got.StatusMessage, target) {
		t.Errorf("tasks/get while the user decides: %s %q, want input_required naming %s", got.Status, got.StatusMessage, target)
	}
	answer, _ := json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"decision": "allow", "scope": "once"}})
	if err := s.conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: answer}); err != nil {
		t.Fatal(err)
	}
	var res callResult
	s.call("tasks/result", map[string]any{"taskId": id}, &res)
	if res.StructuredContent == nil || !strings.HasPrefix(res.StructuredContent.Stdout, body) {
		t.Errorf("the task's result: %+v, want the body", res.StructuredContent)
	}
	s.call("tasks/get", map[string]any{"taskId": id}, &got)
	if got.Status != "completed" {
		t.Errorf("tasks/get after the answer: %s, want completed", got.Status)
	}
}

// openElicitingTaskSession is openTaskSession with a reader that passes
// the server's requests to the test (on the channel returned, which
// answers them on s.conn) instead of refusing them.
func openElicitingTaskSession(t *testing.T, cmd *exec.Cmd, root string) (*taskSession, <-chan *jsonrpc.Request) {
	t.Helper()
	ctx, cancel := limit()
	defer cancel()
	conn, err := (&sdk.CommandTransport{Command: cmd}).Connect(ctx)
	if err != nil {
		t.Fatalf("starting toolhost mcp: %v", err)
	}
	s := &taskSession{t: t, conn: conn, root: root, cmd: cmd, pending: map[jsonrpc.ID]chan taskAnswer{},
		noted: make(chan struct{}, 1), readDone: make(chan struct{})}
	asked := make(chan *jsonrpc.Request, 8)
	go func() { // owned by the session: the cleanup below waits on readDone
		defer close(s.readDone)
		for {
			m, err := s.conn.Read(context.Background())
			if err != nil {
				s.readErr = err
				return
			}
			switch m := m.(type) {
			case *jsonrpc.Response:
				s.mu.Lock()
				ch, ok := s.pending[m.ID]
				delete(s.pending, m.ID)
				s.mu.Unlock()
				if ok {
					ch <- taskAnswer{resp: m}
				}
			case *jsonrpc.Request:
				if m.IsCall() {
					asked <- m
				}
			}
		}
	}()
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("closing the session: %v", err)
		}
		<-s.readDone
	})
	return s, asked
}
