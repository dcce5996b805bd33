package tools

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/workspace"
)

// EnvProgressFile names a handle's progress file in its environment.
const EnvProgressFile = "TOOLHOST_PROGRESS_FILE"

// progressSnapshot is a progress file's content, with the field names of
// amplihack's recipe runner, so that its readers work unchanged.
type progressSnapshot struct {
	RecipeName     string  `json:"recipe_name"`
	CurrentStep    int     `json:"current_step"`
	TotalSteps     int     `json:"total_steps"`
	StepName       string  `json:"step_name"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Status is "running", then "completed", "failed" (completed with a
	// failure), "timed_out" or "cancelled".
	Status    string `json:"status"`
	PID       int    `json:"pid"`
	UpdatedAt string `json:"updated_at"`
}

// progressFile is a handle's progress file: rewritten whole, atomically,
// after each step transition and at the end.
type progressFile struct {
	r *workspace.Replacer

	mu sync.Mutex // guards the fields below, and orders the writes
	// snap is what the file says; written by each write.
	snap    progressSnapshot
	started time.Time
	ended   bool
	err     error // the first failed write, reported once
}

// openProgressFile prepares the progress file a longRunning asks for: a
// path in the root, or one beside the artifacts.
func (t *Tools) openProgressFile(ws *workspace.Workspace, opt *protocol.ProgressFileOption, label string) (*progressFile, error) {
	var (
		r   *workspace.Replacer
		err error
	)
	switch {
	case opt.Path != "":
		if r, err = ws.OpenReplacer(opt.Path); err != nil {
			e := wsError(err)
			if we, ok := e.(*protocol.Error); ok && we.Data != nil {
				we.Data.Field = "progressFile"
			}
			return nil, e
		}
	case opt.Artifacts:
		t.mu.Lock()
		t.progressFiles++
		n := t.progressFiles
		t.mu.Unlock()
		if r, err = workspace.NewReplacer(ws.ArtifactsDir(), fmt.Sprintf("progress-%d.json", n)); err != nil {
			return nil, protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{Field: "progressFile", Path: ws.ArtifactsDir(), Reason: err.Error()}, "progress file: %v", err)
		}
	default:
		return nil, nil
	}
	pf := &progressFile{r: r, snap: progressSnapshot{RecipeName: label, Status: string(protocol.StatusRunning)}}
	// The file exists before the command starts, so that it can read it.
	pf.mu.Lock()
	pf.writeLocked()
	err = pf.err
	pf.mu.Unlock()
	if err != nil {
		_ = r.Close()
		return nil, protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{Field: "progressFile", Path: r.Path(), Reason: err.Error()}, "progress file: %v", err)
	}
	return pf, nil
}

// path returns the file's absolute path.
func (pf *progressFile) path() string { return filepath.Clean(pf.r.Path()) }

// start records the command's start and pid, once it runs, unless a step
// transition already did.
func (pf *progressFile) start(cmd *process.Command) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	pf.started = cmd.StartedAt()
	if pf.ended || pf.snap.PID != 0 {
		return
	}
	pf.snap.PID = cmd.PID()
	pf.writeLocked()
}

// step records a step transition and rewrites the file, before the
// transition is notified: a reader that saw the notification finds it in
// the file.
func (pf *progressFile) step(ev process.StepEvent, pid int) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.ended {
		return
	}
	pf.snap.CurrentStep, pf.snap.StepName, pf.snap.PID = ev.Index, ev.Step, pid
	if ev.Total > 0 {
		pf.snap.TotalSteps = ev.Total
	}
	pf.writeLocked()
}

// finish writes the final snapshot and releases the file.
func (pf *progressFile) finish(res protocol.ToolResult) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.ended {
		return
	}
	pf.ended = true
	switch {
	case res.Status == protocol.StatusCompleted && res.Success:
		pf.snap.Status = "completed"
	case res.Status == protocol.StatusCompleted:
		pf.snap.Status = "failed"
	case res.Status == protocol.StatusTimedOut:
		pf.snap.Status = "timed_out"
	default:
		pf.snap.Status = string(res.Status)
	}
	if pf.started.IsZero() {
		pf.started = res.StartedAt
	}
	pf.writeLocked()
	_ = pf.r.Close()
}

// abandon releases the file of a command that never started.
func (pf *progressFile) abandon() {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	pf.ended = true
	_ = pf.r.Close()
}

// writeLocked writes the snapshot. pf.mu is held.
func (pf *progressFile) writeLocked() {
	now := time.Now()
	if !pf.started.IsZero() {
		pf.snap.ElapsedSeconds = float64(now.Sub(pf.started).Milliseconds()) / 1000
	}
	pf.snap.UpdatedAt = now.UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(pf.snap)
	if err == nil {
		err = pf.r.Replace(append(b, '\n'))
	}
	if err != nil && pf.err == nil {
		pf.err = err
	}
}
