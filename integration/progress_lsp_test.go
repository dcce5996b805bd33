package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// progWork is a $/progress value of any kind: the fields of a report and
// of an end are a subset of a begin's.
type progWork = protocol.WorkDoneProgressBegin

// progNotice is the params of $/progress with the value decoded.
type progNotice struct {
	Token protocol.ProgressToken `json:"token"`
	Value progWork               `json:"value"`
}

// progNoticeOf decodes the params of $/progress.
func progNoticeOf(p json.RawMessage) (progNotice, error) {
	var n progNotice
	err := json.Unmarshal(p, &n)
	return n, err
}

// progWorkFor returns the $/progress values received so far for token.
func progWorkFor(s *server, token protocol.ProgressToken) []progWork {
	s.t.Helper()
	var out []progWork
	for _, p := range s.notifications("$/progress") {
		n, err := progNoticeOf(p)
		if err != nil {
			s.t.Fatalf("decoding $/progress %s: %v", p, err)
		}
		if n.Token == token {
			out = append(out, n.Value)
		}
	}
	return out
}

// progCheckWork checks the shape of a token's progress: one begin first,
// reports, one end last.
func progCheckWork(t *testing.T, work []progWork, title, endMessage string) {
	t.Helper()
	if len(work) < 2 {
		t.Fatalf("$/progress %+v, want at least begin and end", work)
	}
	if diff := cmp.Diff(progWork{Kind: "begin", Title: title, Cancellable: true}, work[0]); diff != "" {
		t.Errorf("begin mismatch (-want +got):\n%s", diff)
	}
	for _, w := range work[1 : len(work)-1] {
		if w.Kind != "report" {
			t.Errorf("$/progress %+v between begin and end, want a report", w)
		}
	}
	if diff := cmp.Diff(progWork{Kind: "end", Message: endMessage}, work[len(work)-1]); diff != "" {
		t.Errorf("end mismatch (-want +got):\n%s", diff)
	}
}

// TestProgressTokenBeginReportEnd gives longRunning a token and a label:
// begin with the label, a report per step with the step and a percentage,
// end exactly once with the final status.
func TestProgressTokenBeginReportEnd(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		fifo, release := progFIFO(t, s.root, "trigger")
		h := s.longRun(map[string]any{"label": "Build all", "workDoneToken": "tok-lr", "steps": []any{
			recipeStep("fetch", "exit 0", false),
			recipeStep("build", "read x < "+fifo, false),
			recipeStep("test", "exit 0", false),
			recipeStep("lint", "exit 0", false),
		}})
		s.notification("$/progress", 1, func(p json.RawMessage) bool {
			n, err := progNoticeOf(p)
			return err == nil && n.Token == protocol.NewStringToken("tok-lr") && n.Value.Message == "step 2/4: build"
		}, nil)
		work := progWorkFor(s, protocol.NewStringToken("tok-lr"))
		if got := work[len(work)-1]; got.Percentage == nil || *got.Percentage != 25 || !got.Cancellable {
			t.Errorf("report %+v at the start of step 2/4, want 25%% and cancellable", got)
		}
		release()
		res := s.toolResultOf(h.HandleID)
		if !res.Success {
			t.Fatalf("recipe failed: %+v", res)
		}
		work = progWorkFor(s, protocol.NewStringToken("tok-lr"))
		progCheckWork(t, work, "Build all", "completed (exit 0)")
		if got := work[len(work)-2]; got.Message != "step 4/4: lint (done)" || got.Percentage == nil || *got.Percentage != 100 {
			t.Errorf("last report %+v, want step 4/4: lint (done) at 100%%", got)
		}
		pct := -1
		for _, w := range work[1 : len(work)-1] {
			if w.Percentage == nil || *w.Percentage < pct {
				t.Errorf("reports %+v: percentages must be given and never go back", work)
				break
			}
			pct = *w.Percentage
		}
	})
}

// TestProgressTokenOnRunCommand gives runCommand an integer token: the
// title is the command, and begin and end come before the response.
func TestProgressTokenOnRunCommand(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "ndjson"})
	s.initialize(nil)
	p := s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo '[STEP 00/02] only' >&2; exit 5"}, "workDoneToken": 42})
	var res protocol.ToolResult
	if e := s.answer(p, &res); e != nil {
		t.Fatalf("runCommand: %v", e)
	}
	work := progWorkFor(s, protocol.NewNumberToken(42))
	progCheckWork(t, work, "sh -c 'echo '\\''[STEP 00/02] only'\\'' >&2; exit 5'", "completed (exit 5)")
	for _, w := range work {
		if w.Kind == "report" && (w.Message != "step 1/2: only" && w.Message != "step 1/2: only (fail)") {
			t.Errorf("report %+v, want step 1/2: only", w)
		}
	}
	if _, ri := progFirst(s, func(m msg) bool { return string(m.ID) == wireID(p) && m.Method == "" }); ri >= 0 {
		if _, ei := progFirst(s, func(m msg) bool {
			return m.Method == "$/progress" && len(m.Params) > 0 && json.Valid(m.Params) && progIsEnd(m.Params)
		}); ei > ri {
			t.Errorf("$/progress end (message %d) came after runCommand's response (message %d)", ei, ri)
		}
	}
}

// progIsEnd reports whether $/progress params are an end.
func progIsEnd(p json.RawMessage) bool {
	n, err := progNoticeOf(p)
	return err == nil && n.Value.Kind == "end"
}

// TestProgressServerCreatedTokenAndCancel advertises
// window.workDoneProgress: the server asks for a token for a handle without
// one, after the response that names the handle, and the client cancels
// the handle through window/workDoneProgress/cancel.
//
// The client answers the create request with a null result, as LSP clients
// answer a request whose result is void, or with an empty object.
func TestProgressServerCreatedTokenAndCancel(t *testing.T) {
	t.Run("null", func(t *testing.T) { progServerCreatedToken(t, "null") })
	t.Run("object", func(t *testing.T) { progServerCreatedToken(t, "{}") })
}

// progServerCreatedToken runs TestProgressServerCreatedTokenAndCancel with
// the client answering window/workDoneProgress/create with result.
func progServerCreatedToken(t *testing.T, result string) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		// The client answers the create request, whose params it hands on.
		created := make(chan json.RawMessage, 1)
		s.c.OnRequestRaw(protocol.MethodWorkDoneProgressCreate, func(_ context.Context, params json.RawMessage) (any, error) {
			created <- params
			return json.RawMessage(result), nil
		})
		s.initialize(&protocol.InitializeParams{Capabilities: &protocol.ClientCapabilities{Window: &protocol.WindowClientCapabilities{WorkDoneProgress: true}}})
		p := s.request("longRunning", map[string]any{"argv": []string{"sleep", "60"}})
		var h protocol.LongRunningResult
		if e := s.answer(p, &h); e != nil {
			t.Fatalf("longRunning: %v", e)
		}
		_, ci := s.waitFor(0, "window/workDoneProgress/create", func(m msg) bool {
			return m.Method == "window/workDoneProgress/create" && m.ID != nil
		})
		_, ri := progFirst(s, func(m msg) bool { return m.Method == "" && string(m.ID) == wireID(p) })
		if ci < ri {
			t.Errorf("window/workDoneProgress/create (message %d) came before the longRunning response (message %d)", ci, ri)
		}
		var cp protocol.WorkDoneProgressCreateParams
		select {
		case params := <-created:
			if err := json.Unmarshal(params, &cp); err != nil {
				t.Fatalf("create params %s: %v", params, err)
			}
		case <-time.After(waitLimit):
			t.Fatal("the client's handler never got the create request")
		}
		// The answer is written after the create request was read.
		s.waitFor(ci, "$/progress begin", func(m msg) bool {
			n, err := progNoticeOf(m.Params)
			return m.Method == "$/progress" && err == nil && n.Token == cp.Token
		})
		ctx, cancel := limit()
		defer cancel()
		if err := s.c.WorkDoneProgressCancel(ctx, cp.Token); err != nil {
			t.Fatal(err)
		}
		res := s.toolResultOf(h.HandleID)
		if res.Status != protocol.StatusCancelled || res.Signal == nil || *res.Signal != "SIGTERM" {
			t.Errorf("result %s by %v, want cancelled by SIGTERM", res.Status, res.Signal)
		}
		progCheckWork(t, progWorkFor(s, cp.Token), "sleep 60", "cancelled")
	})
}
