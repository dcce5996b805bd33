package integration

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestRecipeStepsChooseTheirTerminal runs a recipe whose steps run without
// a terminal, under the request's and under one of their own size: each
// sees what it was given, its output streams as "stdout" or "pty", and
// stdout.log holds all of it in order.
func TestRecipeStepsChooseTheirTerminal(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	const probe = `if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo tty; else echo no-tty; fi`
	h := s.longRun(map[string]any{
		"streamOutput": true,
		"pty":          map[string]any{"rows": 20, "cols": 70},
		"steps": []map[string]any{
			{"name": "plain", "argv": []string{"sh", "-c", probe}, "pty": false},
			{"name": "request's terminal", "argv": []string{"sh", "-c", probe + `; echo "TERM=$TERM"; stty size`}},
			{"name": "own terminal", "argv": []string{"sh", "-c", `echo "TERM=$TERM"; stty size`}, "pty": map[string]any{"rows": 11, "cols": 33}, "env": map[string]any{"TERM": "vt100"}},
		},
	})
	res := s.toolResultOf(h.HandleID)
	if res.Status != protocol.StatusCompleted || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("recipe ended %s (exit %v): %s", res.Status, res.ExitCode, res.Stdout)
	}
	want := "no-tty\n" + "tty\r\nTERM=xterm-256color\r\n20 70\r\n" + "TERM=vt100\r\n11 33\r\n"
	if diff := cmp.Diff(want, res.Stdout); diff != "" {
		t.Errorf("stdout mismatch (-want +got):\n%s", diff)
	}
	if res.Stderr != "" {
		t.Errorf("stderr = %q, want empty: a terminal merges it into its one stream", res.Stderr)
	}
	// Each step's output streamed under its stream's name.
	streamed := map[protocol.Stream]string{}
	for _, raw := range s.notifications("output") {
		var o protocol.OutputParams
		if err := json.Unmarshal(raw, &o); err != nil || o.HandleID != h.HandleID {
			continue
		}
		streamed[o.Stream] += o.Data
	}
	wantStreamed := map[protocol.Stream]string{
		protocol.StreamStdout: "no-tty\n",
		protocol.StreamPty:    "tty\r\nTERM=xterm-256color\r\n20 70\r\nTERM=vt100\r\n11 33\r\n",
	}
	if diff := cmp.Diff(wantStreamed, streamed); diff != "" {
		t.Errorf("streamed output mismatch (-want +got):\n%s", diff)
	}
}
