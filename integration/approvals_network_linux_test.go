package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// This file checks issue 35's network asks through the binary: a confined
// command's curl to a local origin its allow-list does not name is held
// while the test, as the client's user, answers approval/request.

// asker is a client's user: each approval/request the server sends
// arrives on asked, and waits for the answer the test sends on answers
// (or for the request's end).
type asker struct {
	asked   chan *protocol.ApprovalRequestParams
	answers chan protocol.ApprovalRequestResult
	count   atomic.Int32
}

// approvalServer starts toolhost with its grants file under config (its
// XDG_CONFIG_HOME), initializes it as a client that can ask (unless
// noCap), and skips without the network enforcement.
func approvalServer(t *testing.T, config string, noCap bool, args ...string) (*server, *asker) {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "XDG_CONFIG_HOME=" + config}
	s := start(t, options{args: args, env: env})
	a := &asker{asked: make(chan *protocol.ApprovalRequestParams, 16), answers: make(chan protocol.ApprovalRequestResult, 16)}
	// The client answers its server's requests one at a time, on the
	// goroutine that delivers notifications: an ask left unanswered holds
	// it until the test ends.
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) }) // runs before start's, which waits for the client
	client.OnRequest(s.c, protocol.ApprovalRequestRequest, func(ctx context.Context, p *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		a.count.Add(1)
		a.asked <- p
		select {
		case r := <-a.answers:
			return &r, nil
		case <-ended:
			return nil, errors.New("the test ended")
		}
	})
	params := &protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}}
	if noCap {
		params = nil
	}
	res := s.initialize(params)
	needNetEnforcement(t, res.Capabilities.Sandbox.Layers)
	wantAsk := !noCap && !slices.Contains(args, "deny")
	if got := res.Capabilities.Approvals.Ask; got != wantAsk {
		t.Fatalf("capabilities.approvals.ask = %v, want %v", got, wantAsk)
	}
	return s, a
}

// fetch runs curl through the command's proxy to url under an allow-list
// that names only a host nobody asks for, and returns the result; its
// stdout ends with the HTTP status.
func fetch(t *testing.T, s *server, url string) *client.Pending {
	t.Helper()
	return s.request("runCommand", map[string]any{
		"argv":      []string{"sh", "-c", `curl -sS --max-time 60 -w '\n%{http_code}' "$URL"`},
		"env":       map[string]any{"URL": url},
		"sandbox":   netAllow("127.0.0.1:1"),
		"timeoutMs": sbTimeout.Milliseconds(),
	})
}

// result waits for a fetch's answer.
func result(t *testing.T, p *client.Pending) protocol.ToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit+sbTimeout)
	defer cancel()
	var res protocol.ToolResult
	if err := p.Wait(ctx, &res); err != nil {
		t.Fatalf("runCommand: %v", err)
	}
	return res
}

// TestApprovalsNetworkAllowAndDeny: an allow lets the held connection
// through (the body arrives), a deny answers 403 "denied by the user";
// once is not remembered, so each command asks; the ToolResult says how
// each ask was decided.
func TestApprovalsNetworkAllowAndDeny(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false)
	const body = "fetched through an ask"
	_, port := netAllowedServer(t, body)
	target := fmt.Sprintf("127.0.0.1:%d", port)

	p := fetch(t, s, "http://"+target+"/")
	q := <-a.asked
	if q.Kind != protocol.ApprovalNetwork || q.Target != target || q.ApprovalID == "" || len(q.Argv) == 0 || q.Cwd == "" {
		t.Errorf("approval/request %+v; want kind network, target %s, an id, the argv and the cwd", q, target)
	}
	if diff := cmp.Diff([]protocol.ApprovalScope{protocol.ApprovalOnce, protocol.ApprovalCommand, protocol.ApprovalSession, protocol.ApprovalAlways}, q.Scopes); diff != "" {
		t.Errorf("scopes: mismatch (-want +got):\n%s", diff)
	}
	if q.HandleID != "" {
		t.Errorf("handleId %q for a runCommand that has no handle", q.HandleID)
	}
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce}
	res := result(t, p)
	if !strings.HasPrefix(res.Stdout, body) || !strings.HasSuffix(res.Stdout, "\n200") {
		t.Errorf("an allowed fetch printed %q, want the body and 200", res.Stdout)
	}
	want := []protocol.ApprovalOutcome{{Kind: protocol.ApprovalNetwork, Target: target, Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce, DecidedBy: protocol.DecidedByUser}}
	if diff := cmp.Diff(want, res.Approvals); diff != "" {
		t.Errorf("approvals: mismatch (-want +got):\n%s", diff)
	}

	p = fetch(t, s, "http://"+target+"/")
	<-a.asked // once was not remembered
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}
	res = result(t, p)
	if !strings.Contains(res.Stdout, "denied by the user") || !strings.HasSuffix(res.Stdout, "\n403") {
		t.Errorf("a denied fetch printed %q, want 403 saying denied by the user", res.Stdout)
	}
	want = []protocol.ApprovalOutcome{{Kind: protocol.ApprovalNetwork, Target: target, Decision: protocol.ApprovalDeny, DecidedBy: protocol.DecidedByUser}}
	if diff := cmp.Diff(want, res.Approvals); diff != "" {
		t.Errorf("approvals: mismatch (-want +got):\n%s", diff)
	}
	if n := a.count.Load(); n != 2 {
		t.Errorf("%d asks, want 2", n)
	}
}

// TestApprovalsNetworkSessionGrantAndRevoke: an allow for the session
// answers the next command's connection without asking (decidedBy
// grant); approvals lists it; once revoked, the next asks again.
func TestApprovalsNetworkSessionGrantAndRevoke(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false)
	_, port := netAllowedServer(t, "ok")
	target := fmt.Sprintf("127.0.0.1:%d", port)

	p := fetch(t, s, "http://"+target+"/")
	<-a.asked
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalSession}
	result(t, p)

	res := result(t, fetch(t, s, "http://"+target+"/"))
	if !strings.HasSuffix(res.Stdout, "\n200") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByGrant || res.Approvals[0].Scope != protocol.ApprovalSession {
		t.Errorf("a fetch under a session grant: stdout %q, approvals %+v; want 200, decided by the grant", res.Stdout, res.Approvals)
	}
	var list protocol.ApprovalList
	s.mustCall("approvals", map[string]any{}, &list)
	if len(list) != 1 || list[0].Target != target || list[0].Scope != protocol.ApprovalSession {
		t.Fatalf("approvals = %+v, want the session grant of %s", list, target)
	}
	var rev protocol.RevokeApprovalResult
	s.mustCall("revokeApproval", map[string]any{"approvalId": list[0].ApprovalID}, &rev)
	if rev.Revoked.ApprovalID != list[0].ApprovalID {
		t.Errorf("revoked %+v, want %s", rev.Revoked, list[0].ApprovalID)
	}
	if e := s.call("revokeApproval", map[string]any{"approvalId": list[0].ApprovalID}, nil); e == nil || e.Code != protocol.CodeInvalidParams {
		t.Errorf("a second revoke of %s: %v, want -32602", list[0].ApprovalID, e)
	}

	p = fetch(t, s, "http://"+target+"/")
	<-a.asked // revoked: asked again
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}
	if res := result(t, p); !strings.HasSuffix(res.Stdout, "\n403") {
		t.Errorf("after the revoke, a denied fetch printed %q, want 403", res.Stdout)
	}
}

// TestApprovalsNetworkAlwaysSurvivesARestart: an allow for always is
// written to the grants file under the user's config directory, which a
// confined command cannot write; a new server on the same root answers
// from it without asking.
func TestApprovalsNetworkAlwaysSurvivesARestart(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	config := t.TempDir()
	s, a := approvalServer(t, config, false)
	_, port := netAllowedServer(t, "ok")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	p := fetch(t, s, "http://"+target+"/")
	<-a.asked
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalAlways}
	result(t, p)
	grants := filepath.Join(config, "toolhost", "grants.json")
	before, err := os.ReadFile(grants)
	if err != nil || !strings.Contains(string(before), target) {
		t.Fatalf("the grants file %s: %q, %v; want it to name %s", grants, before, err, target)
	}
	forge := netRun(t, s, map[string]any{"filesystem": "workspace-write", "network": false}, "",
		`echo '{"version":1,"grants":[]}' > "$GRANTS"`, map[string]any{"GRANTS": grants}, sbTimeout)
	if forge.Success {
		t.Errorf("a confined command wrote the grants file: %+v", forge)
	}
	if after, _ := os.ReadFile(grants); string(after) != string(before) {
		t.Errorf("the grants file changed under a confined command: %q", after)
	}
	s.shutdown()

	s2 := start(t, options{root: s.root, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "XDG_CONFIG_HOME=" + config}})
	client.OnRequest(s2.c, protocol.ApprovalRequestRequest, func(context.Context, *protocol.ApprovalRequestParams) (*protocol.ApprovalRequestResult, error) {
		t.Error("the restarted server asked about a host granted always")
		return &protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}, nil
	})
	s2.initialize(&protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}})
	res := result(t, fetch(t, s2, "http://"+target+"/"))
	if !strings.HasSuffix(res.Stdout, "\n200") || len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != protocol.DecidedByGrant {
		t.Errorf("after a restart: stdout %q, approvals %+v; want 200 decided by the always grant", res.Stdout, res.Approvals)
	}

	// From a shell: toolhost approvals list shows it, revoke drops it.
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(binary, append([]string{"approvals"}, args...)...)
		cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "XDG_CONFIG_HOME=" + config}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("toolhost approvals %q: %v", args, err)
		}
		return string(out), code
	}
	out, code := cli("list", "--json", "--root", s.root)
	var listed []struct{ ID, Kind, Target, Root string }
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != 0 || len(listed) != 1 || listed[0].Target != target || listed[0].Root != s.root {
		t.Fatalf("toolhost approvals list --json --root: exit %d, %q (%v); want the grant of %s", code, out, err, target)
	}
	if out, code := cli("revoke", "g-unknown"); code != 1 || !strings.Contains(out, "g-unknown") {
		t.Errorf("a revoke of an unknown id: exit %d, %q; want 1 naming it", code, out)
	}
	if out, code := cli("revoke", listed[0].ID); code != 0 {
		t.Fatalf("toolhost approvals revoke: exit %d, %q", code, out)
	}
	if out, _ := cli("list"); strings.Contains(out, target) {
		t.Errorf("after the revoke, the list still names %s: %q", target, out)
	}
}

// TestApprovalsNetworkNeverAsked: a client without the capability, a
// server with --approvals deny, an answer that never comes, and a name
// that resolves to a loopback address are all refused; only the timeout
// is asked, and only it and the asks a client could answer are in the
// result's approvals.
func TestApprovalsNetworkNeverAsked(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	_, port := netAllowedServer(t, "ok")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	for _, c := range []struct {
		name      string
		noCap     bool
		args      []string
		url       string
		asks      int32
		decidedBy protocol.ApprovalDecidedBy
		says      string
	}{
		// A command that cannot ask is refused as if approvals did not
		// exist: no ask, no entry, and the name is not even resolved.
		{"no capability", true, nil, "http://" + target + "/", 0, "", "is not in this command's network allow-list\n"},
		{"approvals deny", false, []string{"--approvals", "deny"}, "http://" + target + "/", 0, "", "is not in this command's network allow-list\n"},
		{"timeout", false, []string{"--approval-timeout", "300ms"}, "http://" + target + "/", 1, protocol.DecidedByTimeout, "no answer"},
		{"a name of a loopback address", false, nil, fmt.Sprintf("http://localhost:%d/", port), 0, "", "loopback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, a := approvalServer(t, t.TempDir(), c.noCap, c.args...)
			res := result(t, fetch(t, s, c.url))
			if !strings.HasSuffix(res.Stdout, "\n403") || !strings.Contains(res.Stdout, c.says) {
				t.Errorf("stdout %q, want 403 saying %q", res.Stdout, c.says)
			}
			if n := a.count.Load(); n != c.asks {
				t.Errorf("%d asks, want %d", n, c.asks)
			}
			if c.decidedBy == protocol.DecidedByTimeout && len(s.notifications(protocol.MethodCancelRequest)) == 0 {
				t.Errorf("no $/cancelRequest withdrew the ask that timed out")
			}
			if c.decidedBy == "" {
				if len(res.Approvals) != 0 {
					t.Errorf("approvals %+v for a refusal that is never asked", res.Approvals)
				}
				return
			}
			if len(res.Approvals) != 1 || res.Approvals[0].DecidedBy != c.decidedBy || res.Approvals[0].Decision != protocol.ApprovalDeny {
				t.Errorf("approvals %+v, want one deny decided by %s", res.Approvals, c.decidedBy)
			}
		})
	}
}

// TestApprovalsNetworkMerged: three connections of one command to one
// host at once are one ask, whose allow for the command lets all three
// through.
func TestApprovalsNetworkMerged(t *testing.T) {
	t.Parallel()
	netNeedTool(t, "curl", false)
	s, a := approvalServer(t, t.TempDir(), false)
	_, port := netAllowedServer(t, "ok")
	target := fmt.Sprintf("127.0.0.1:%d", port)
	p := s.request("runCommand", map[string]any{
		"argv":      []string{"sh", "-c", `for i in 1 2 3; do curl -sS --max-time 60 -o /dev/null -w '%{http_code}\n' "$URL" & done; wait`},
		"env":       map[string]any{"URL": "http://" + target + "/"},
		"sandbox":   netAllow("127.0.0.1:1"),
		"timeoutMs": sbTimeout.Milliseconds(),
	})
	<-a.asked
	// For the command: the connections that come after the answer, not
	// merged into its ask, are answered by the grant.
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalCommand}
	res := result(t, p)
	if res.Stdout != "200\n200\n200\n" {
		t.Errorf("three fetches printed %q, want three 200s", res.Stdout)
	}
	if n := a.count.Load(); n != 1 {
		t.Errorf("%d asks for three connections to one host at once, want 1", n)
	}
}

// TestApprovalsSandboxWider: a runCommand whose sandbox is wider than the
// server's is asked about before it starts when it gives a
// justification: allowed, it runs with exactly the sandbox asked (its
// write lands, under a read-only default); denied, it is -32034 naming
// the widening and nothing ran; without a justification it is -32602, as
// before, and nobody is asked.
func TestApprovalsSandboxWider(t *testing.T) {
	t.Parallel()
	s, a := approvalServer(t, t.TempDir(), false, "--sandbox-default", "read-only")
	run := func(marker, justification string) (protocol.ToolResult, *protocol.Error) {
		params := map[string]any{
			"argv":    netTouch(filepath.Join(s.root, marker)),
			"sandbox": map[string]any{"filesystem": "workspace-write"},
		}
		if justification != "" {
			params["justification"] = justification
		}
		return netRunResult(t, s, params)
	}

	_, e := run("plain", "")
	netInvalidParams(t, "a wider sandbox without a justification", e, "sandbox.filesystem")
	netMarkerAbsent(t, "without a justification", filepath.Join(s.root, "plain"))

	done := make(chan struct{})
	var res protocol.ToolResult
	go func() { // owned by the test, which waits on done
		defer close(done)
		res, e = run("allowed", "the build writes its output")
	}()
	q := <-a.asked
	if q.Kind != protocol.ApprovalSandbox || !strings.Contains(q.Target, "filesystem workspace-write, where the server allows read-only") || q.Justification != "the build writes its output" {
		t.Errorf("approval/request %+v; want kind sandbox, the widening and the justification", q)
	}
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalAllow, Scope: protocol.ApprovalOnce}
	<-done
	if e != nil || !res.Success {
		t.Fatalf("the allowed command: %v, %+v", e, res)
	}
	if _, err := os.Stat(filepath.Join(s.root, "allowed")); err != nil {
		t.Errorf("the allowed command's write did not land: %v", err)
	}
	if res.Sandbox == nil || res.Sandbox.Filesystem != protocol.SandboxWorkspaceWrite {
		t.Errorf("sandbox applied %+v, want workspace-write", res.Sandbox)
	}
	if len(res.Approvals) != 1 || res.Approvals[0].Kind != protocol.ApprovalSandbox || res.Approvals[0].Decision != protocol.ApprovalAllow {
		t.Errorf("approvals %+v, want the sandbox ask allowed", res.Approvals)
	}

	done = make(chan struct{})
	go func() { // owned by the test, which waits on done
		defer close(done)
		_, e = run("denied", "please")
	}()
	<-a.asked
	a.answers <- protocol.ApprovalRequestResult{Decision: protocol.ApprovalDeny}
	<-done
	if e == nil || e.Code != protocol.CodeApprovalDenied {
		t.Fatalf("the denied command: %v, want -32034", e)
	}
	if d := errData(e); d.Kind != string(protocol.ApprovalSandbox) || d.DecidedBy != protocol.DecidedByUser || !strings.Contains(d.Target, "workspace-write") {
		t.Errorf("ApprovalDenied data %+v, want kind sandbox, decidedBy user and the widening", d)
	}
	netMarkerAbsent(t, "a denied sandbox", filepath.Join(s.root, "denied"))
	if n := a.count.Load(); n != 2 {
		t.Errorf("%d asks, want 2", n)
	}
}
