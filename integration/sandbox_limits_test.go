//go:build linux

package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestSandboxLimitsContain drives a fork bomb under pids 256 and a memory
// hog under 64 MiB through the binary, while another command of the session
// runs: each ends with limitExceeded naming its limit and its whole tree
// gone, and the other command and the server go on as if nothing happened.
func TestSandboxLimitsContain(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the memory hog is a python3 one-liner")
	}
	s := start(t, options{})
	init := s.initialize(nil)
	var layers []string
	for _, l := range init.Capabilities.Sandbox.Layers {
		layers = append(layers, strings.SplitN(l, ":", 2)[0])
	}
	for _, want := range []string{"pids", "memory"} {
		if !strings.Contains(strings.Join(layers, " "), want) {
			t.Skipf("no %s controller on this machine (layers %v)", want, init.Capabilities.Sandbox.Layers)
		}
	}

	bystander := newMarker()
	var started protocol.LongRunningResult
	s.mustCall("longRunning", map[string]any{
		"argv": []string{"sleep", bystander.Sleep}, "env": bystander.env(),
	}, &started)

	tests := []struct {
		name, limit string
		params      map[string]any
	}{
		{"fork bomb under pids 256", "pids", map[string]any{
			"argv":   []string{"sh", "-c", "b() { b & b & wait; }; b"},
			"limits": map[string]any{"pids": 256},
		}},
		{"memory hog under 64 MiB", "memory", map[string]any{
			"argv":   []string{"python3", "-c", "x = bytearray(512 << 20); x[::4096] = b'a' * len(x[::4096])"},
			"limits": map[string]any{"memoryBytes": 64 << 20},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mk := newMarker()
			tt.params["env"] = mk.env()
			tt.params["timeoutMs"] = 60000
			var res protocol.ToolResult
			s.mustCall("runCommand", tt.params, &res)
			got := ""
			if res.LimitExceeded != nil {
				got = *res.LimitExceeded
			}
			if got != tt.limit || res.Success || res.Status != protocol.StatusCompleted {
				t.Errorf("result: status %s, success %v, limitExceeded %q; want completed, not a success, %q (stderr %q)",
					res.Status, res.Success, got, tt.limit, res.Stderr)
			}
			if res.Sandbox == nil || res.Sandbox.Limits[tt.limit] == "" {
				t.Errorf("result.sandbox = %+v, want limits[%q] saying how it was applied", res.Sandbox, tt.limit)
			}
			assertNoneLeft(t, mk, "", "after the limit was hit")
		})
	}

	// The bystander ran through it all: it ends only now, by its cancel.
	var res protocol.ToolResult
	s.mustCall("cancel", map[string]any{"handleId": started.HandleID}, &res)
	if res.Status != protocol.StatusCancelled {
		t.Errorf("the bystander ended %s before its cancel, want it still running until cancelled", res.Status)
	}
	var after protocol.ToolResult
	s.mustCall("runCommand", map[string]any{"argv": []string{"echo", "still here"}}, &after)
	if diff := cmp.Diff("still here\n", after.Stdout); diff != "" {
		t.Errorf("a command after the limits mismatch (-want +got):\n%s", diff)
	}
	assertNoneLeft(t, bystander, "", "after the bystander was cancelled")
	s.shutdown()
}

// TestSandboxCachesPointIntoTheRootCache checks a workspace-write
// command's caches: they go to the root's cache directory in the state
// directory, or to the session's where there is no state directory; a
// cache variable of the server's environment is kept, and a request that
// sets one keeps its own.
func TestSandboxCachesPointIntoTheRootCache(t *testing.T) {
	own := t.TempDir()
	show := []string{"sh", "-c", `echo "$GOCACHE"; echo "$GOMODCACHE"`}
	cache := func(s *server, params map[string]any) []string {
		var res protocol.ToolResult
		s.mustCall("runCommand", params, &res)
		return strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
	}

	state := t.TempDir()
	plain := start(t, options{env: tcEnv(state)})
	plain.initialize(nil)
	got := cache(plain, map[string]any{"argv": show})
	caches := filepath.Join(state, "toolhost", "caches") + "/"
	if len(got) != 2 || !strings.HasPrefix(got[0], caches) || !strings.HasSuffix(got[0], "/go-build") || !strings.HasSuffix(got[1], "/go-mod") || filepath.Dir(got[0]) != filepath.Dir(got[1]) {
		t.Errorf("with a state directory: %q, want both in one directory of %s", got, caches)
	}
	got = cache(plain, map[string]any{"argv": show, "env": map[string]any{"GOCACHE": own}})
	if len(got) != 2 || got[0] != own {
		t.Errorf("a request's GOCACHE: %q, want %q kept", got, own)
	}
	plain.shutdown()

	// No HOME, no XDG_STATE_HOME: no state directory.
	inherited := start(t, options{env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GOMODCACHE=" + own}})
	inherited.initialize(nil)
	got = cache(inherited, map[string]any{"argv": show})
	if len(got) != 2 || !strings.HasSuffix(got[0], "/cache/go-build") || got[1] != own {
		t.Errorf("with GOMODCACHE in the server's environment and no state directory: %q, want GOCACHE in the session's cache and GOMODCACHE %q", got, own)
	}
	inherited.shutdown()
}
