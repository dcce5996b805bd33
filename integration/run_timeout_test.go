package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// ending is the part of a ToolResult that says how a command ended.
type ending struct {
	Status   string
	Success  bool
	ExitCode *int
	Signal   *string
}

func endingOf(r protocol.ToolResult) ending {
	return ending{Status: string(r.Status), Success: r.Success, ExitCode: r.ExitCode, Signal: r.Signal}
}

// TestRunTimeout checks timeoutMs and --default-timeout: status timedOut
// and the signal by name, SIGKILL when TERM is ignored, and nothing left.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--kill-grace", "300ms", "--default-timeout", "250ms"}})
	s.initialize(nil)
	cases := []struct {
		name   string
		argv   func(mk marker) []string
		params map[string]any
		want   ending
	}{
		{"sleep", func(mk marker) []string { return []string{"sleep", mk.Sleep} }, map[string]any{"timeoutMs": 200},
			ending{Status: "timedOut", Signal: ptr("SIGTERM")}},
		{"default timeout", func(mk marker) []string { return []string{"sleep", mk.Sleep} }, map[string]any{},
			ending{Status: "timedOut", Signal: ptr("SIGTERM")}},
		{"TERM ignored", func(mk marker) []string {
			return []string{"sh", "-c", "trap '' TERM; sleep " + mk.Sleep + "; :"}
		}, map[string]any{"timeoutMs": 400}, ending{Status: "timedOut", Signal: ptr("SIGKILL")}},
		{"a shell's exit code on TERM", func(mk marker) []string {
			return []string{"sh", "-c", "trap 'exit 7' TERM; sleep " + mk.Sleep + " & wait"}
		}, map[string]any{"timeoutMs": 400}, ending{Status: "timedOut", ExitCode: ptr(7)}},
	}
	for _, c := range cases {
		mk := newMarker()
		p := map[string]any{"argv": c.argv(mk), "env": mk.env()}
		for k, v := range c.params {
			p[k] = v
		}
		res := s.run(p)
		if diff := cmp.Diff(c.want, endingOf(res)); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", c.name, diff)
		}
		assertNoneLeft(t, mk, "", c.name+": after the answer")
	}
}

// TestRunGrandchildHoldingPipes checks that a background grandchild that
// keeps stdout open does not keep runCommand waiting, and is ended with it.
func TestRunGrandchildHoldingPipes(t *testing.T) {
	t.Parallel()
	s := start(t, options{args: []string{"--kill-grace", "500ms"}})
	s.initialize(nil)
	mk := newMarker()
	res := s.run(map[string]any{"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo started"}, "timeoutMs": 1000, "env": mk.env()})
	if diff := cmp.Diff(ending{Status: "completed", Success: true, ExitCode: ptr(0)}, endingOf(res)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if res.Stdout != "started\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	assertNoneLeft(t, mk, "", "after the answer")

	// The same while the shell itself stays until the timeout.
	mk = newMarker()
	res = s.run(map[string]any{"argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo started; exec sleep " + mk.Sleep}, "timeoutMs": 300, "env": mk.env()})
	if diff := cmp.Diff(ending{Status: "timedOut", Signal: ptr("SIGTERM")}, endingOf(res)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	assertNoneLeft(t, mk, "", "after the timeout's answer")
}

// TestRunCancelRequest checks $/cancelRequest on a running runCommand: the
// group is killed (KILL after the grace when TERM is ignored) and the
// request answers -32800 with the partial ToolResult.
func TestRunCancelRequest(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing, args: []string{"--kill-grace", "300ms"}})
		s.initialize(nil)
		mk := newMarker()
		id := s.request("runCommand", map[string]any{
			"argv":          []string{"sh", "-c", "trap '' TERM; echo partial-out; echo '" + readyMarker + "' >&2; sleep " + mk.Sleep + " & wait"},
			"env":           mk.env(),
			"workDoneToken": "tok-1",
		})
		// The step marker comes once TERM is ignored.
		s.notification("stepTransition", 1, nil, nil)
		e := s.cancelRequest(id)
		if e == nil {
			t.Fatalf("cancelled runCommand answered %s, want -32800", s.response(wireID(id)).Result)
		}
		if e.Code != -32800 {
			t.Fatalf("error %v, want -32800", e)
		}
		d := errData(e)
		if d.Partial == nil {
			t.Fatalf("no partial ToolResult in %+v", e.Data)
		}
		if diff := cmp.Diff(ending{Status: "cancelled", Signal: ptr("SIGKILL")}, endingOf(*d.Partial)); diff != "" {
			t.Errorf("partial mismatch (-want +got):\n%s", diff)
		}
		if d.Partial.CommandID == "" || d.Partial.Artifacts.OutputPath == "" {
			t.Errorf("partial lacks commandId or artifacts: %+v", d.Partial)
		}
		assertNoneLeft(t, mk, "", "after -32800")
		// The session goes on.
		if r := s.run(map[string]any{"argv": []string{"echo", "ok"}}); r.Stdout != "ok\n" {
			t.Errorf("after the cancel: %+v", r)
		}
	})
}

// TestRunOutput1GiB checks that a child printing 1 GiB is captured in full
// while the server's peak RSS stays under 64 MiB.
func TestRunOutput1GiB(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	res := s.run(map[string]any{"argv": []string{"head", "-c", "1073741824", "/dev/zero"}})
	if !res.Success || res.Artifacts.ByteCount != 1<<30 || res.Artifacts.LineCount != 1 || !res.StdoutTruncated {
		t.Errorf("1 GiB: success %v byteCount %d lineCount %d truncated %v", res.Success, res.Artifacts.ByteCount, res.Artifacts.LineCount, res.StdoutTruncated)
	}
	if len(res.Stdout) > 2*65536+512 {
		t.Errorf("inline stdout is %d bytes", len(res.Stdout))
	}
	if peak := s.memory("VmHWM"); peak >= 64<<20 {
		t.Errorf("server peak RSS %d MiB, want < 64 MiB", peak>>20)
	} else {
		t.Logf("server peak RSS %.1f MiB", float64(peak)/(1<<20))
	}
	fi, err := os.Stat(res.Artifacts.OutputPath)
	if err != nil || fi.Size() != 1<<30 {
		t.Fatalf("outputPath: %v, size %v", err, fi)
	}
	// zeros1GiB is the sha256 of 1 GiB of zero bytes (sha256sum of
	// head -c 1073741824 /dev/zero).
	const zeros1GiB = "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14"
	if res.Artifacts.Sha256 != zeros1GiB {
		t.Errorf("sha256 %s, want %s", res.Artifacts.Sha256, zeros1GiB)
	}
	s.shutdown() // removes the 2 GiB of artifacts
}

// TestRunArtifactsLifetime checks that artifacts go at the session's end
// unless --keep-artifacts, and that the cap evicts the oldest finished
// command first and logs it.
func TestRunArtifactsLifetime(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "arts")
		args := []string{"--artifacts-dir", dir}
		if keep {
			args = append(args, "--keep-artifacts")
		}
		s := start(t, options{args: args})
		s.initialize(nil)
		res := s.run(map[string]any{"argv": []string{"echo", "kept?"}})
		if !strings.HasPrefix(res.Artifacts.OutputPath, dir+"/") {
			t.Errorf("outputPath %q is not under --artifacts-dir %q", res.Artifacts.OutputPath, dir)
		}
		s.shutdown()
		b, err := os.ReadFile(res.Artifacts.OutputPath)
		switch {
		case keep && string(b) != "kept?\n":
			t.Errorf("--keep-artifacts: outputPath after the session: %q, %v", b, err)
		case !keep && err == nil:
			t.Errorf("outputPath still exists after the session")
		}
		if !keep {
			ents, _ := os.ReadDir(dir)
			if len(ents) != 0 {
				t.Errorf("artifacts dir after the session holds %v", ents)
			}
		}
	}

	// The default: a private temporary directory, gone at the end.
	s := start(t, options{})
	s.initialize(nil)
	res := s.run(map[string]any{"argv": []string{"echo", "x"}})
	tmp := s.artifactsDir()
	if !strings.HasPrefix(res.Artifacts.OutputPath, tmp+"/") {
		t.Errorf("outputPath %q not under %q", res.Artifacts.OutputPath, tmp)
	}
	if fi, err := os.Stat(tmp); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("artifacts dir: %v %v, want mode 0700", fi, err)
	}
	s.shutdown()
	if _, err := os.Stat(tmp); err == nil {
		t.Errorf("temporary artifacts dir %s is left after the session", tmp)
	}

	// The cap: three commands of 40 KB under a 100 KB cap.
	s = start(t, options{args: []string{"--artifacts-cap-bytes", "100000"}})
	s.initialize(nil)
	var paths []string
	for range 3 {
		r := s.run(map[string]any{"argv": []string{"head", "-c", "40000", "/dev/zero"}})
		paths = append(paths, r.Artifacts.OutputPath)
	}
	if _, err := os.Stat(paths[0]); err == nil {
		t.Errorf("the oldest command's artifacts are still there over the cap")
	}
	if _, err := os.Stat(paths[2]); err != nil {
		t.Errorf("the newest command's artifacts: %v", err)
	}
	if !strings.Contains(s.stderr.String(), "evicted command artifacts") {
		t.Errorf("no eviction in the log")
	}
}

// readyMarker is a step marker line a child writes to stderr to say it is
// set up; with a workDoneToken (runCommand) or a handle it becomes a
// stepTransition notification.
const readyMarker = `{"type":"step_transition","step":"ready","status":"start"}`
