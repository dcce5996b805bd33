package tools

import (
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/sandbox"
)

// toolResult converts a command's result to the wire.
func toolResult(r process.Result) rpc.ToolResult {
	var sig *string
	if r.Signal != "" {
		s := r.Signal
		sig = &s
	}
	status := rpc.Status(r.Status)
	steps := make([]rpc.StepResult, 0, len(r.Steps))
	for _, st := range r.Steps {
		steps = append(steps, rpc.StepResult{
			Name:       st.Name,
			Status:     rpc.StepStatus(st.Status),
			DurationMs: st.Duration.Milliseconds(),
			ExitCode:   st.ExitCode,
			Sandbox:    sandboxApplied(st.Sandbox),
		})
	}
	o := r.Output
	return rpc.ToolResult{
		CommandID:       r.CommandID,
		HandleID:        r.HandleID,
		Status:          status,
		TimeoutReason:   rpc.TimeoutReason(r.TimeoutReason),
		Success:         status == rpc.StatusCompleted && r.ExitCode != nil && *r.ExitCode == 0,
		ExitCode:        r.ExitCode,
		Signal:          sig,
		StartedAt:       r.StartedAt.UTC(),
		EndedAt:         r.EndedAt.UTC(),
		DurationMs:      r.Duration.Milliseconds(),
		Stdout:          o.Stdout,
		Stderr:          o.Stderr,
		StdoutTruncated: o.StdoutTruncated,
		StderrTruncated: o.StderrTruncated,
		Artifacts: rpc.Artifacts{
			StdoutPath: o.StdoutPath,
			StderrPath: o.StderrPath,
			OutputPath: o.OutputPath,
			ByteCount:  o.ByteCount,
			LineCount:  o.LineCount,
			Sha256:     o.Sha256,
		},
		Steps:         steps,
		Sandbox:       sandboxApplied(r.Sandbox),
		LimitExceeded: limitOf(r.LimitExceeded),
	}
}

// limitOf returns the name of an exceeded limit, or nil.
func limitOf(l sandbox.Limit) *string {
	if l == "" {
		return nil
	}
	s := string(l)
	return &s
}

// progressOf converts a command's snapshot to the wire.
func progressOf(s process.Snapshot) rpc.Progress {
	var hb *time.Time
	if !s.LastHeartbeatAt.IsZero() {
		t := s.LastHeartbeatAt.UTC()
		hb = &t
	}
	var pty *rpc.PtySize
	if s.Pty.On() {
		pty = &rpc.PtySize{Rows: s.Pty.Rows, Cols: s.Pty.Cols}
	}
	return rpc.Progress{
		Pty:             pty,
		InputOpen:       s.InputOpen,
		HandleID:        s.HandleID,
		CommandID:       s.CommandID,
		Label:           s.Label,
		Status:          rpc.Status(s.Status),
		PID:             s.PID,
		CurrentStep:     s.CurrentStep,
		TotalSteps:      s.TotalSteps,
		StepName:        s.StepName,
		ElapsedMs:       s.Elapsed.Milliseconds(),
		UpdatedAt:       s.UpdatedAt.UTC(),
		LastHeartbeatAt: hb,
		OutputBytes:     s.OutputBytes,
		ExitCode:        s.ExitCode,
	}
}
