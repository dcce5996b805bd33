package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/protocol"
)

// threeDests returns two destinations over the test's sshd and one direct
// local one, each with a root of its own.
func threeDests(t testing.TB, extra ...string) []dest {
	t.Helper()
	d := needSSHD(t)
	return []dest{sshDest(t, d, "ssh1", extra...), sshDest(t, d, "ssh2", extra...), localDest(t, "local", extra...)}
}

// TestDestinationsListAndRun starts a server with two ssh destinations and
// a local one: initialize's workspace.destinations and destinations {}
// list them idle, a runCommand on each runs there (in its root), and then
// each is ready with its root and serverInfo.
func TestDestinationsListAndRun(t *testing.T) {
	t.Parallel()
	dests := threeDests(t)
	s := startHub(t, dests)
	ir := s.initialize(nil)

	var idle protocol.DestinationList
	for _, d := range dests {
		idle = append(idle, protocol.DestinationInfo{Name: d.Name, State: protocol.DestinationIdle, Command: d.Argv})
	}
	if diff := cmp.Diff(idle, protocol.DestinationList(ir.Workspace.Destinations)); diff != "" {
		t.Errorf("initialize's workspace.destinations mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(idle, s.destinations()); diff != "" {
		t.Errorf("destinations before use mismatch (-want +got):\n%s", diff)
	}

	for _, d := range dests {
		res := s.run(map[string]any{"destination": d.Name, "argv": []string{"sh", "-c", `pwd; echo "ran on $0"`, d.Name}})
		if res.Status != protocol.StatusCompleted || !res.Success {
			t.Fatalf("runCommand on %s: %s (exit %v) stderr %q", d.Name, res.Status, res.ExitCode, res.Stderr)
		}
		if want := d.Root + "\nran on " + d.Name + "\n"; res.Stdout != want {
			t.Errorf("runCommand on %s: stdout %q, want %q (run in the far root)", d.Name, res.Stdout, want)
		}
		if !strings.HasPrefix(res.CommandID, d.Name+"/") {
			t.Errorf("runCommand on %s: commandId %q, want the prefix %s/", d.Name, res.CommandID, d.Name)
		}
		for _, p := range []string{res.Artifacts.StdoutPath, res.Artifacts.StderrPath, res.Artifacts.OutputPath} {
			if !strings.HasPrefix(p, d.Name+"//") {
				t.Errorf("runCommand on %s: artifact path %q, want NAME//abs/path", d.Name, p)
			}
		}
	}

	// The same binary answers on every side: the same serverInfo.
	var ready protocol.DestinationList
	for _, d := range dests {
		si := ir.ServerInfo
		ready = append(ready, protocol.DestinationInfo{Name: d.Name, State: protocol.DestinationReady, Command: d.Argv, Root: d.Root, ServerInfo: &si})
	}
	if diff := cmp.Diff(ready, s.destinations(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("destinations after use mismatch (-want +got):\n%s", diff)
	}
	s.shutdown()
}

// TestDestinationsConnectAtInitialize gives --connect-destinations:
// initialize's workspace.destinations already shows each ready.
func TestDestinationsConnectAtInitialize(t *testing.T) {
	t.Parallel()
	dests := threeDests(t)
	s := startHub(t, dests, "--connect-destinations")
	ir := s.initialize(nil)
	var want protocol.DestinationList
	for _, d := range dests {
		si := ir.ServerInfo
		want = append(want, protocol.DestinationInfo{Name: d.Name, State: protocol.DestinationReady, Command: d.Argv, Root: d.Root, ServerInfo: &si})
	}
	if diff := cmp.Diff(want, protocol.DestinationList(ir.Workspace.Destinations), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("initialize's workspace.destinations mismatch (-want +got):\n%s", diff)
	}
	s.shutdown()
}

// streamedStep is what a test compares of a stepTransition.
type streamedStep struct {
	Step         string
	Status       protocol.StepStatus
	Index, Total int
}

// TestDestinationLongRunningStreams runs a longRunning with streamed
// output and step markers on each destination at once: every notification
// of its handle names the handle with the destination's prefix, comes
// after the longRunning answer, in order (seq without gaps per stream),
// the marker lines become steps and stay out of stderr, and exactly one
// toolResult ends it, last.
func TestDestinationLongRunningStreams(t *testing.T) {
	t.Parallel()
	dests := threeDests(t)
	s := startHub(t, dests)
	s.initialize(nil)
	// Output starts at once, so that it races the answer; many lines, so
	// that it comes in many notifications.
	const script = `i=0; while [ $i -lt 200 ]; do echo "out $i"; i=$((i+1)); done
echo "err 1" >&2
echo "[STEP 0/2] build" >&2
echo "err 2" >&2
echo "  ✓ build (0.1s)" >&2
echo "[STEP 1/2] test" >&2
echo last`
	var wantOut strings.Builder
	for i := range 200 {
		wantOut.WriteString("out " + itoa(i) + "\n")
	}
	wantOut.WriteString("last\n")

	type started struct {
		d    dest
		h    protocol.LongRunningResult
		resp int // the index of the longRunning answer on the wire
	}
	var runs []started
	var pend []func()
	for _, d := range dests {
		p := s.request("longRunning", map[string]any{"destination": d.Name, "argv": []string{"sh", "-c", script}, "streamOutput": true})
		pend = append(pend, func() {
			var h protocol.LongRunningResult
			if e := s.answer(p, &h); e != nil {
				t.Fatalf("longRunning on %s: %v", d.Name, e)
			}
			_, at := s.responseAt(wireID(p))
			runs = append(runs, started{d: d, h: h, resp: at})
		})
	}
	for _, f := range pend {
		f()
	}
	for _, r := range runs {
		if !strings.HasPrefix(r.h.HandleID, r.d.Name+"/h-") || !strings.HasPrefix(r.h.CommandID, r.d.Name+"/") {
			t.Errorf("longRunning on %s answered handle %q command %q, want the prefix %s/", r.d.Name, r.h.HandleID, r.h.CommandID, r.d.Name)
		}
		res := s.toolResultOf(r.h.HandleID)
		if res.Status != protocol.StatusCompleted || res.CommandID != r.h.CommandID {
			t.Errorf("%s: toolResult %s command %q, want completed %q", r.d.Name, res.Status, res.CommandID, r.h.CommandID)
		}
		if res.Stdout != wantOut.String() || res.Stderr != "err 1\nerr 2\n" {
			t.Errorf("%s: toolResult stdout %q stderr %q", r.d.Name, tail(res.Stdout, 40), res.Stderr)
		}
	}
	s.shutdown()

	// Everything about each handle, on the wire, in order.
	s.mu.Lock()
	msgs := append([]msg(nil), s.msgs...)
	s.mu.Unlock()
	for _, r := range runs {
		var out, errs strings.Builder
		var steps []streamedStep
		seq := map[protocol.Stream]int64{}
		results, last := 0, ""
		for i, m := range msgs {
			if m.Method == "" || m.ID != nil || idsOf(m.Params).HandleID != r.h.HandleID {
				continue
			}
			if i < r.resp {
				t.Errorf("%s: %s at %d came before the longRunning answer at %d", r.d.Name, m.Method, i, r.resp)
			}
			if results > 0 {
				t.Errorf("%s: %s after the toolResult", r.d.Name, m.Method)
			}
			if c := idsOf(m.Params).CommandID; c != "" && c != r.h.CommandID {
				t.Errorf("%s: %s names command %q, want %q", r.d.Name, m.Method, c, r.h.CommandID)
			}
			last = m.Method
			switch m.Method {
			case "output":
				var o protocol.OutputParams
				if err := json.Unmarshal(m.Params, &o); err != nil {
					t.Fatal(err)
				}
				if o.Seq != seq[o.Stream]+1 {
					t.Errorf("%s: %s output seq %d after %d", r.d.Name, o.Stream, o.Seq, seq[o.Stream])
				}
				seq[o.Stream] = o.Seq
				if o.Stream == protocol.StreamStdout {
					out.WriteString(o.Data)
				} else {
					errs.WriteString(o.Data)
				}
			case "stepTransition":
				var st protocol.StepTransitionParams
				if err := json.Unmarshal(m.Params, &st); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, streamedStep{st.Step, st.Status, st.Index, st.Total})
			case "toolResult":
				results++
			}
		}
		if results != 1 || last != "toolResult" {
			t.Errorf("%s: %d toolResults, the last notification %q: want exactly one, last", r.d.Name, results, last)
		}
		if diff := cmp.Diff(wantOut.String(), out.String()); diff != "" {
			t.Errorf("%s: streamed stdout mismatch (-want +got):\n%s", r.d.Name, diff)
		}
		if diff := cmp.Diff("err 1\nerr 2\n", errs.String()); diff != "" {
			t.Errorf("%s: streamed stderr mismatch (-want +got):\n%s", r.d.Name, diff)
		}
		wantSteps := []streamedStep{
			{"build", protocol.StepStart, 1, 2},
			{"build", protocol.StepDone, 1, 2},
			{"test", protocol.StepStart, 2, 2},
			{"test", protocol.StepDone, 2, 2}, // the open step closes as the command ends
		}
		if diff := cmp.Diff(wantSteps, steps); diff != "" {
			t.Errorf("%s: stepTransitions mismatch (-want +got):\n%s", r.d.Name, diff)
		}
	}
	// No notification of a handle or command reached the client without
	// a destination's prefix: no command ran here.
	for _, m := range msgs {
		if m.Method == "" || m.ID != nil {
			continue
		}
		if id := idsOf(m.Params); (id.HandleID != "" && !strings.Contains(id.HandleID, "/")) || (id.CommandID != "" && !strings.Contains(id.CommandID, "/")) {
			t.Errorf("%s without a destination's prefix: %s", m.Method, m.raw)
		}
	}
}
