package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestApprovalsConnectionLostMidAsk: a client whose input ends while an
// ask waits for it denies it (decidedBy noClient): the command's
// connection is refused at once, not after the timeout, and the command's
// result still arrives on the open output.
func TestApprovalsConnectionLostMidAsk(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false, "--approval-timeout", "10m")
	_, port := netAllowedServer(t, "ok")
	p := fetch(t, s, fmt.Sprintf("http://127.0.0.1:%d/", port))
	<-a.asked
	s.closeStdin()
	res := result(t, p)
	if !strings.HasSuffix(res.Stdout, "\n403") || !strings.Contains(res.Stdout, "no client can ask") {
		t.Errorf("stdout %q, want 403 saying no client can ask", res.Stdout)
	}
	if len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByNoClient {
		t.Errorf("approvals %+v, want one deny decided by noClient", res.Approvals)
	}
}

// TestApprovalsSessionGrantSurvivesAResume: under --persist, an allow for
// the session is the session's: a client that resumes it after the first
// one's connection ended finds the grant, and is not asked.
func TestApprovalsSessionGrantSurvivesAResume(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	pe := newPersistEnv(t)
	config := t.TempDir()
	o := pe.options()
	o.env = append(o.env, "XDG_CONFIG_HOME="+config)
	a := start(t, o)
	asked := make(chan *protocol.ApprovalRequestParams, 1)
	client.OnRequest(a.c, protocol.ApprovalRequestRequest, func(_ context.Context, q *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		asked <- q
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalSession}, nil
	})
	caps := &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}
	init := a.initialize(&protocol.InitializeParams{Capabilities: caps})
	needNetEnforcement(t, init.Capabilities.Sandbox.Layers)
	_, port := netAllowedServer(t, "ok")
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if res := result(t, fetch(t, a, url)); !strings.HasSuffix(res.Stdout, "\n200") {
		t.Fatalf("the first fetch printed %q, want 200", res.Stdout)
	}
	<-asked
	a.closeStdin()
	a.wait()

	b := start(t, o)
	client.OnRequest(b.c, protocol.ApprovalRequestRequest, func(context.Context, *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		t.Error("the resumed session asked about a host its session allowed")
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}, nil
	})
	params := resumeParams(init.SessionID, nil)
	params.Capabilities = caps
	b.initialize(params)
	res := result(t, fetch(t, b, url))
	if !strings.HasSuffix(res.Stdout, "\n200") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByGrant {
		t.Errorf("after the resume: stdout %q, approvals %+v; want 200 decided by the session grant", res.Stdout, res.Approvals)
	}
	var list protocol.ApprovalList
	b.mustCall("approvals", map[string]any{}, &list)
	if len(list) != 1 || list[0].Scope != protocol.ApprovalSession {
		t.Errorf("approvals after the resume = %+v, want the session grant", list)
	}
}

// TestApprovalsTwentyCommandsFiveHosts: twenty commands at once, four to
// each of five hosts no list names, with a user who allows each host for
// the session: exactly five asks, and every command gets its body.
func TestApprovalsTwentyCommandsFiveHosts(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false)
	var urls []string
	for i := range 5 {
		_, port := netAllowedServer(t, fmt.Sprintf("host %d", i))
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/", port))
	}
	go func() { // owned by the test: it ends once the five answers are taken, or with the test
		for range 5 {
			<-a.asked
			a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalSession}
		}
	}()
	var pending []*client.Pending
	for i := range 20 {
		pending = append(pending, fetch(t, s, urls[i%5]))
	}
	for i, p := range pending {
		res := result(t, p)
		if want := fmt.Sprintf("host %d\n200", i%5); res.Stdout != want {
			t.Errorf("command %d printed %q, want %q", i, res.Stdout, want)
		}
	}
	if n := a.count.Load(); n != 5 {
		t.Errorf("%d asks for five hosts, want 5", n)
	}
}

// TestApprovalsBadAnswers: an answer that is not one is a deny by policy,
// and the session goes on: a decision other than allow or deny, a scope
// not offered, an allow without a scope, and an error answer. A damaged grants file is refused,
// left as it was, and always is not offered.
func TestApprovalsBadAnswers(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	config := t.TempDir()
	grants := filepath.Join(config, "toolhost", "grants.json")
	if err := os.MkdirAll(filepath.Dir(grants), 0o700); err != nil {
		t.Fatal(err)
	}
	const damaged = `{"version":1,"grants":[{"id":`
	if err := os.WriteFile(grants, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	s, a := approvalServer(t, config, false)
	_, port := netAllowedServer(t, "ok")
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for _, answer := range []protocol.ApprovalRequestResult{
		{Decision: "maybe"},
		{Decision: protocol.ApprovalAllow, Scope: "forever"},
		{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalAlways},
		{Decision: protocol.ApprovalAllow},
	} {
		p := fetch(t, s, url)
		q := <-a.asked
		if slices.Contains(q.Scopes, protocol.ApprovalAlways) {
			t.Errorf("always offered with a damaged grants file: %v", q.Scopes)
		}
		a.answers <- answer
		res := result(t, p)
		if !strings.HasSuffix(res.Stdout, "\n403") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByPolicy {
			t.Errorf("answer %+v: stdout %q, approvals %+v; want 403, denied by policy", answer, res.Stdout, res.Approvals)
		}
	}
	// An error answer.
	client.OnRequest(s.c, protocol.ApprovalRequestRequest, func(context.Context, *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "the user's window closed"}
	})
	if res := result(t, fetch(t, s, url)); !strings.HasSuffix(res.Stdout, "\n403") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByPolicy {
		t.Errorf("an error answer: stdout %q, approvals %+v; want 403, denied by policy", res.Stdout, res.Approvals)
	}
	if b, _ := os.ReadFile(grants); string(b) != damaged {
		t.Errorf("the damaged grants file was changed: %q", b)
	}
	if !strings.Contains(s.stderr.String(), "grants file") {
		t.Errorf("no warning about the damaged grants file in the log")
	}
}

// TestApprovalsSandboxNetworkOn: a command that asks for the network on
// under --sandbox-network off, with a justification, is asked about; the
// allow gives it the network it asked for, and nothing more.
func TestApprovalsSandboxNetworkOn(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false, "--sandbox-network", "off")
	_, port := netAllowedServer(t, "reached")
	p := s.request("runCommand", map[string]any{
		"argv":          []string{"sh", "-c", `curl -sS --max-time 60 "$URL"`},
		"env":           map[string]any{"URL": fmt.Sprintf("http://127.0.0.1:%d/", port)},
		"sandbox":       map[string]any{"network": true},
		"justification": "the tests fetch a fixture",
		"timeoutMs":     sbTimeout.Milliseconds(),
	})
	q := <-a.asked
	if q.Kind != protocol.ApprovalSandbox || q.Target != "network on, where the server allows off" {
		t.Errorf("approval/request kind %s, target %q; want sandbox, the network on where the server allows off", q.Kind, q.Target)
	}
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce}
	res := result(t, p)
	if res.Stdout != "reached" || res.Sandbox == nil || !res.Sandbox.Network {
		t.Errorf("stdout %q, sandbox %+v; want the body, with the network on", res.Stdout, res.Sandbox)
	}
}

// TestApprovalsSandboxLongerList: a request whose allow-list names a host
// the server's does not cover is asked about with a justification, and
// allowed, gets exactly its own list: the host it named, and nothing the
// server's list had.
func TestApprovalsSandboxLongerList(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	_, listed := netAllowedServer(t, "listed")
	_, other := netAllowedServer(t, "other")
	s, a := approvalServer(t, t.TempDir(), false, "--sandbox-network", "allow", "--network-allow", fmt.Sprintf("127.0.0.1:%d", listed))
	target := fmt.Sprintf("127.0.0.1:%d", other)
	p := s.request("runCommand", map[string]any{
		"argv":          []string{"sh", "-c", `curl -sS --max-time 60 "$OTHER"`},
		"env":           map[string]any{"OTHER": "http://" + target + "/"},
		"sandbox":       netAllow(target),
		"justification": "the fixture server",
		"timeoutMs":     sbTimeout.Milliseconds(),
	})
	q := <-a.asked
	if q.Kind != protocol.ApprovalSandbox || !strings.Contains(q.Target, "network only "+target) {
		t.Errorf("approval/request kind %s, target %q; want sandbox naming the list asked", q.Kind, q.Target)
	}
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce}
	res := result(t, p)
	// The list asked replaces the server's: its host is reached, and the
	// list enforced is exactly it.
	if res.Stdout != "other" {
		t.Errorf("stdout %q, want the body of the host the list asked names", res.Stdout)
	}
	if res.Sandbox == nil || len(res.Sandbox.NetworkAllow) != 1 || res.Sandbox.NetworkAllow[0] != target {
		t.Errorf("sandbox %+v, want exactly the list asked, %s", res.Sandbox, target)
	}
}

// TestApprovalsSandboxFullNeverAsked: the whole filesystem writable is
// never asked for, justification or not: such a command could write the
// user's grants file. It stays -32602, and nothing ran.
func TestApprovalsSandboxFullNeverAsked(t *testing.T) {
	t.Parallel()
	s, a := approvalServer(t, t.TempDir(), false)
	marker := filepath.Join(s.root, "full")
	_, e := netRunResult(t, s, map[string]any{
		"argv":          netTouch(marker),
		"sandbox":       map[string]any{"filesystem": "full"},
		"justification": "it must write everywhere",
	})
	netInvalidParams(t, "filesystem full with a justification", e, "sandbox.filesystem")
	netMarkerAbsent(t, "filesystem full", marker)
	if n := a.count.Load(); n != 0 {
		t.Errorf("%d asks for the whole filesystem, want none", n)
	}
}

// TestApprovalsGrantsFileInTheRootIsProtected: a root that holds the
// user's config directory (a root at $HOME) protects the grants file's
// directory: a confined command cannot write it, nor can writeFile, and
// always is still offered, since nothing of the session can forge it.
func TestApprovalsGrantsFileInTheRootIsProtected(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, ".config")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "XDG_CONFIG_HOME=" + config}
	s := start(t, options{root: root, env: env})
	res := s.initialize(&protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}})
	if !slices.Contains(res.Capabilities.Approvals.Scopes, protocol.ApprovalAlways) {
		t.Errorf("scopes %v: always not offered though the grants file is protected", res.Capabilities.Approvals.Scopes)
	}
	grants := filepath.Join(config, "toolhost", "grants.json")
	forge := netRun(t, s, map[string]any{"filesystem": "workspace-write", "network": false}, "",
		`echo '{"version":1,"grants":[]}' > "$GRANTS"`, map[string]any{"GRANTS": grants}, sbTimeout)
	if forge.Success {
		t.Errorf("a confined command wrote the grants file in the root: %+v", forge)
	}
	e := s.call("writeFile", map[string]any{"path": grants, "content": `{"version":1,"grants":[]}`}, nil)
	if e == nil || e.Code != protocol.CodePathOutsideWorkspace || errData(e).Policy != "protect" {
		t.Errorf("writeFile of the grants file: %v, want -32001 with policy protect", e)
	}
	if _, err := os.Lstat(grants); err == nil {
		t.Errorf("the grants file exists after the attempts to forge it")
	}
}
