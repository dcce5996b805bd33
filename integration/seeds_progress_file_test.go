package integration

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// progressFileJSON is a progress file's content, with amplihack's names.
type progressFileJSON struct {
	RecipeName     string  `json:"recipe_name"`
	CurrentStep    int     `json:"current_step"`
	TotalSteps     int     `json:"total_steps"`
	StepName       string  `json:"step_name"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Status         string  `json:"status"`
	PID            int     `json:"pid"`
	UpdatedAt      string  `json:"updated_at"`
}

func readProgressFile(t *testing.T, path string) progressFileJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p progressFileJSON
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("progress file %s is not JSON: %v\n%s", path, err, b)
	}
	return p
}

// TestProgressFileFollowsTransitions runs a recipe whose steps each wait
// for a line on their open stdin: after each step's start transition the
// file names that step, and at the end the final status; the child finds
// the file through TOOLHOST_PROGRESS_FILE, and the ToolResult names it.
func TestProgressFileFollowsTransitions(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	steps := []map[string]any{
		{"name": "fetch", "argv": []string{"sh", "-c", `read x; test -s "$TOOLHOST_PROGRESS_FILE"`}},
		{"name": "build", "argv": []string{"sh", "-c", "read x"}},
		{"name": "test", "argv": []string{"sh", "-c", "read x"}},
	}
	h := s.longRun(map[string]any{"label": "ci", "openStdin": true, "steps": steps, "progressFile": ".toolhost/ci-progress.json"})
	path := filepath.Join(s.root, ".toolhost", "ci-progress.json")
	from := 0
	for i, st := range steps {
		var tr protocol.StepTransitionParams
		_, at := s.waitFor(from, "the start of "+st["name"].(string), func(m msg) bool {
			if m.Method != "stepTransition" || json.Unmarshal(m.Params, &tr) != nil {
				return false
			}
			return tr.HandleID == h.HandleID && tr.Status == protocol.StepStart && tr.Index == i+1
		})
		from = at + 1
		got := readProgressFile(t, path)
		want := progressFileJSON{RecipeName: "ci", CurrentStep: i + 1, TotalSteps: 3, StepName: tr.Step, Status: "running"}
		if diff := cmp.Diff(want, got, ignoreVolatileProgress); diff != "" {
			t.Errorf("after %s started, progress file mismatch (-want +got):\n%s", tr.Step, diff)
		}
		if got.PID <= 0 || got.UpdatedAt == "" {
			t.Errorf("progress file pid %d, updated_at %q", got.PID, got.UpdatedAt)
		}
		s.mustCall("writeInput", map[string]any{"handleId": h.HandleID, "data": "go\n"}, nil)
	}
	res := s.toolResultOf(h.HandleID)
	if !res.Success {
		t.Fatalf("recipe failed: %+v", res)
	}
	if res.Artifacts.ProgressPath != path {
		t.Errorf("artifacts.progressPath = %q, want %q", res.Artifacts.ProgressPath, path)
	}
	got := readProgressFile(t, path)
	if diff := cmp.Diff(progressFileJSON{RecipeName: "ci", CurrentStep: 3, TotalSteps: 3, StepName: "test", Status: "completed"}, got, ignoreVolatileProgress); diff != "" {
		t.Errorf("final progress file mismatch (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("progress file mode %v, want 0600", fi.Mode().Perm())
	}
}

// ignoreVolatileProgress leaves out what changes with time and pids.
var ignoreVolatileProgress = cmpIgnoreFields("PID", "UpdatedAt", "ElapsedSeconds")

func cmpIgnoreFields(names ...string) cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		for _, n := range names {
			if p.Last().String() == "."+n {
				return true
			}
		}
		return false
	}, cmp.Ignore())
}

// TestProgressFileReadersNeverSeePartialJSON reads the progress file in a
// loop while a recipe of many steps rewrites it: every read is whole JSON.
func TestProgressFileReadersNeverSeePartialJSON(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	init := s.initialize(nil)
	var steps []map[string]any
	for i := range 150 {
		steps = append(steps, map[string]any{"name": "s" + string(rune('a'+i%26)), "argv": []string{"true"}})
	}
	h := s.longRun(map[string]any{"steps": steps, "progressFile": true})
	var (
		wg    sync.WaitGroup
		reads int
		bad   []string
		path  string
	)
	done := make(chan struct{})
	pathCh := make(chan string, 1)
	wg.Add(1)
	go func() { // owned by the test: it waits on wg
		defer wg.Done()
		var p string
		select {
		case p = <-pathCh:
		case <-done:
			return
		}
		for {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				bad = append(bad, "the file was missing")
				continue
			}
			reads++
			if !json.Valid(b) {
				bad = append(bad, string(b))
			}
		}
	}()
	var snap protocol.Progress
	s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &snap)
	path = snap.ProgressPath
	if path == "" {
		close(done)
		wg.Wait()
		t.Fatal("progress names no progressPath")
	}
	pathCh <- path
	res := s.toolResultOf(h.HandleID)
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d of %d reads were not whole JSON; the first: %q", len(bad), reads, bad[0])
	}
	if res.Artifacts.ProgressPath != path || !strings.HasPrefix(path, init.Workspace.ArtifactsDir) {
		t.Errorf("progressPath %q (progress said %q), want one beside the artifacts in %s", res.Artifacts.ProgressPath, path, init.Workspace.ArtifactsDir)
	}
	if got := readProgressFile(t, path); got.Status != "completed" || got.CurrentStep != 150 {
		t.Errorf("final progress file %+v, want completed at step 150", got)
	}
	t.Logf("%d reads of the progress file, all whole JSON", reads)
}

// TestProgressFileRefusesSymlinks refuses a progress file that would be
// written through a symlink: out of the root (-32001) or inside it
// (-32602); nothing is started.
func TestProgressFileRefusesSymlinks(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(s.root, "out")))
	must(t, os.Symlink(filepath.Join(outside, "p.json"), filepath.Join(s.root, "p.json")))
	must(t, os.WriteFile(filepath.Join(s.root, "real.json"), nil, 0o644))
	must(t, os.Symlink("real.json", filepath.Join(s.root, "in.json")))
	for _, c := range []struct {
		path string
		code int
	}{
		{"out/progress.json", protocol.CodePathOutsideWorkspace},
		{"p.json", protocol.CodePathOutsideWorkspace},
		{"../progress.json", protocol.CodePathOutsideWorkspace},
		{"in.json", protocol.CodeInvalidParams},
	} {
		e := s.call("longRunning", map[string]any{"argv": []string{"true"}, "progressFile": c.path}, nil)
		if e == nil || e.Code != c.code {
			t.Errorf("progressFile %q: %v, want code %d", c.path, e, c.code)
			continue
		}
		if d := errData(e); d.Field != "progressFile" {
			t.Errorf("progressFile %q: data.field %q, want progressFile", c.path, d.Field)
		}
	}
	ents, err := os.ReadDir(outside)
	if err != nil || len(ents) != 0 {
		t.Errorf("the directory outside holds %v (%v), want nothing", ents, err)
	}
	var list protocol.ProgressList
	s.mustCall("progress", map[string]any{}, &list)
	if len(list.Handles) != 0 {
		t.Errorf("refused requests started handles: %+v", list.Handles)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
