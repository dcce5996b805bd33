package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/httpgate/gatetest"
)

// httpAudience is the audience of the OAuth servers of these tests.
const httpAudience = "https://toolhost.test/mcp"

// TestMCPHTTPOAuthTokens starts toolhost mcp --http with --oauth-issuer
// (a real issuer on loopback, its metadata and keys fetched): a good
// token of each algorithm gets in, each bad one is 401, and the
// protected-resource metadata names the issuer.
func TestMCPHTTPOAuthTokens(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	h := startHTTPMCP(t, "--oauth-issuer", iss.URL, "--oauth-audience", httpAudience)
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}}
	wrongIssuer := iss.Claims("alice", httpAudience)
	wrongIssuer["iss"] = "https://other.example"
	cases := []struct {
		name   string
		token  string
		status int
	}{
		{"RS256", iss.Token(t, iss.Claims("alice", httpAudience)), 200},
		{"ES256", iss.Token(t, iss.Claims("alice", httpAudience), gatetest.ES256()), 200},
		{"expired", iss.Expired(t, "alice", httpAudience), 401},
		{"another audience", iss.WrongAudience(t, "alice"), 401},
		{"another issuer", iss.Token(t, wrongIssuer), 401},
		{"a bad signature", iss.Token(t, iss.Claims("alice", httpAudience), gatetest.Stranger()), 401},
		{"alg none", iss.AlgNone(t, iss.Claims("alice", httpAudience)), 401},
		{"HS256 keyed with the public key", iss.HS256WithPublicKey(t, iss.Claims("alice", httpAudience)), 401},
		{"no token", "", 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &rawSession{h: h, token: c.token, version: "2025-11-25"}
			resp, body := r.post(initialize)
			if resp.StatusCode != c.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, c.status, body)
			}
			if c.status == 401 {
				wa := resp.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(wa, "Bearer") || !strings.Contains(wa, "resource_metadata=") {
					t.Errorf("WWW-Authenticate %q, want a Bearer challenge naming the resource metadata", wa)
				}
				if c.token != "" && strings.Contains(string(body)+wa, c.token) {
					t.Errorf("the answer holds the token")
				}
			}
		})
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(h.endpoint, "/mcp")+"/.well-known/oauth-protected-resource", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, req)
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &meta) != nil || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != iss.URL {
		t.Errorf("protected-resource metadata: %s %s, want it to name the issuer %s", resp.Status, body, iss.URL)
	}
}

// TestMCPHTTPPrincipals shares one server between two OAuth subjects: a
// task, a handle and a command's artifacts of one are not found for the
// other, in the words of an id that never was, and not listed.
func TestMCPHTTPPrincipals(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	h := startHTTPMCP(t, "--oauth-issuer", iss.URL, "--oauth-audience", httpAudience)
	alice := h.openRaw(iss.Token(t, iss.Claims("alice", httpAudience)))
	bob := h.openRaw(iss.Token(t, iss.Claims("bob", httpAudience)))

	id := alice.startTask("run_command", map[string]any{"argv": []string{"echo", "alice's"}})
	if res, rerr := alice.call("tasks/result", map[string]any{"taskId": id}); rerr != nil || !strings.Contains(string(res), "alice's") {
		t.Fatalf("alice's tasks/result: %s %+v", res, rerr)
	}
	_, theirs := bob.call("tasks/get", map[string]any{"taskId": id})
	never := id[:len(id)-1] + "0"
	if never == id {
		never = id[:len(id)-1] + "1"
	}
	_, none := bob.call("tasks/get", map[string]any{"taskId": never})
	if theirs == nil || none == nil {
		t.Fatalf("bob's tasks/get of alice's task: %+v, of an id that never was: %+v; want both refused", theirs, none)
	}
	if theirs.Code != none.Code || strings.ReplaceAll(theirs.Message, id, "ID") != strings.ReplaceAll(none.Message, never, "ID") {
		t.Errorf("alice's task to bob: %d %q; an unknown id: %d %q; want the same words", theirs.Code, theirs.Message, none.Code, none.Message)
	}

	// A handle: alice's start_command.
	res, rerr := alice.call("tools/call", map[string]any{"name": "start_command", "arguments": map[string]any{"argv": []string{"echo", "alice's handle"}}})
	if rerr != nil {
		t.Fatalf("alice's start_command: %+v", rerr)
	}
	var started struct {
		StructuredContent struct {
			HandleID string `json:"handleId"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &started); err != nil || started.StructuredContent.HandleID == "" {
		t.Fatalf("start_command answered no handle: %s", res)
	}
	handle := started.StructuredContent.HandleID
	waited, rerr := alice.call("tools/call", map[string]any{"name": "wait_command", "arguments": map[string]any{"handleId": handle}})
	if rerr != nil || !strings.Contains(string(waited), "alice's handle") {
		t.Fatalf("alice's wait_command: %s %+v", waited, rerr)
	}
	for _, tool := range []string{"wait_command", "read_output", "cancel_command"} {
		res, rerr := bob.call("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"handleId": handle}})
		if rerr != nil {
			t.Fatalf("bob's %s: %+v", tool, rerr)
		}
		if !strings.Contains(string(res), `"isError":true`) || !strings.Contains(string(res), "handle not found") || strings.Contains(string(res), "alice") {
			t.Errorf("bob's %s of alice's handle: %s, want handle not found", tool, res)
		}
	}
	res, rerr = bob.call("tools/call", map[string]any{"name": "list_commands", "arguments": map[string]any{}})
	if rerr != nil || strings.Contains(string(res), handle) {
		t.Errorf("bob's list_commands: %s %+v, want none of alice's", res, rerr)
	}
	res, _ = alice.call("tools/call", map[string]any{"name": "list_commands", "arguments": map[string]any{}})
	if !strings.Contains(string(res), handle) {
		t.Errorf("alice's list_commands: %s, want her handle", res)
	}
	// Its artifacts: alice reads them, bob is told they do not exist.
	var links struct {
		Content []struct {
			Type string `json:"type"`
			URI  string `json:"uri"`
		} `json:"content"`
	}
	if err := json.Unmarshal(waited, &links); err != nil {
		t.Fatal(err)
	}
	uri := ""
	for _, c := range links.Content {
		if c.Type == "resource_link" && strings.HasSuffix(c.URI, "/output") {
			uri = c.URI
		}
	}
	if uri == "" {
		t.Fatalf("wait_command linked no output: %s", waited)
	}
	if res, rerr := alice.call("resources/read", map[string]any{"uri": uri}); rerr != nil || !strings.Contains(string(res), "alice's handle") {
		t.Errorf("alice's resources/read: %s %+v", res, rerr)
	}
	if res, rerr := bob.call("resources/read", map[string]any{"uri": uri}); rerr == nil {
		t.Errorf("bob's resources/read of alice's artifact: %s, want not found", res)
	}
}

// TestMCPHTTPPublicURL: behind a tunnel, --http-public-url is what OAuth
// names (the metadata's resource, the 401's resource_metadata), and its
// host is one the listener answers to; any other name is still 403.
func TestMCPHTTPPublicURL(t *testing.T) {
	iss := gatetest.NewIssuer(t)
	const public = "https://tunnel.example/mcp"
	h := startHTTPMCP(t, "--oauth-issuer", iss.URL, "--oauth-audience", httpAudience, "--http-public-url", public)
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}}
	r := &rawSession{h: h, version: "2025-11-25"}
	req := r.request(initialize)
	req.Host = "tunnel.example"
	resp, body := do(t, req)
	wa := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(wa, `resource_metadata="https://tunnel.example/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("through the tunnel's name without a token: %s %q %s; want 401 naming the public metadata", resp.Status, wa, body)
	}
	req = r.request(initialize)
	req.Host = "other.example"
	if resp, _ := do(t, req); resp.StatusCode != 403 {
		t.Errorf("another name: %s, want 403", resp.Status)
	}
	meta, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(h.endpoint, "/mcp")+"/.well-known/oauth-protected-resource/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	meta.Host = "tunnel.example"
	resp, body = do(t, meta)
	var m struct {
		Resource string `json:"resource"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &m) != nil || m.Resource != public {
		t.Errorf("the metadata: %s %s, want the resource %s", resp.Status, body, public)
	}
	// A token for the public resource gets in through it.
	req = (&rawSession{h: h, token: iss.Token(t, iss.Claims("alice", httpAudience)), version: "2025-11-25"}).request(initialize)
	req.Host = "tunnel.example"
	if resp, body := do(t, req); resp.StatusCode != 200 {
		t.Errorf("with a token through the tunnel's name: %s %s", resp.Status, body)
	}
}
