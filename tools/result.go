package tools

import (
	"errors"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// toolResult converts a command's result to the wire.
func toolResult(r process.Result) protocol.ToolResult {
	var sig *string
	if r.Signal != "" {
		s := r.Signal
		sig = &s
	}
	status := protocol.Status(r.Status)
	steps := make([]protocol.StepResult, 0, len(r.Steps))
	for _, st := range r.Steps {
		steps = append(steps, protocol.StepResult{
			Name:       st.Name,
			Status:     protocol.StepStatus(st.Status),
			DurationMs: st.Duration.Milliseconds(),
			ExitCode:   st.ExitCode,
			Sandbox:    sandboxApplied(st.Sandbox, r.NetworkAllow),
		})
	}
	o := r.Output
	var events *protocol.EventCounts
	if e := r.Events; e != nil {
		events = &protocol.EventCounts{Count: e.Events, InvalidLines: e.Invalid, OversizeLines: e.Oversize}
	}
	return protocol.ToolResult{
		Events:          events,
		CommandID:       r.CommandID,
		HandleID:        r.HandleID,
		Status:          status,
		TimeoutReason:   protocol.TimeoutReason(r.TimeoutReason),
		Success:         status == protocol.StatusCompleted && r.ExitCode != nil && *r.ExitCode == 0,
		ExitCode:        r.ExitCode,
		Signal:          sig,
		StartedAt:       r.StartedAt.UTC(),
		EndedAt:         r.EndedAt.UTC(),
		DurationMs:      r.Duration.Milliseconds(),
		Stdout:          o.Stdout,
		Stderr:          o.Stderr,
		StdoutTruncated: o.StdoutTruncated,
		StderrTruncated: o.StderrTruncated,
		Artifacts: protocol.Artifacts{
			StdoutPath: o.StdoutPath,
			StderrPath: o.StderrPath,
			OutputPath: o.OutputPath,
			ByteCount:  o.ByteCount,
			LineCount:  o.LineCount,
			Sha256:     o.Sha256,

			ProgressPath: r.ProgressPath,
		},
		Steps:         steps,
		Sandbox:       sandboxApplied(r.Sandbox, r.NetworkAllow),
		Network:       networkUse(r.Network),
		LimitExceeded: limitOf(r.LimitExceeded),
		Error:         startError(r.Err),
	}
}

// startError is the wire's form of why a command never started (a
// "failed" result): the error its runCommand would have answered.
func startError(err error) *protocol.ResultError {
	if err == nil {
		return nil
	}
	var e *protocol.Error
	if !errors.As(err, &e) {
		errors.As(procError(err), &e)
	}
	if e == nil {
		return &protocol.ResultError{Code: protocol.CodeInternalError, Message: err.Error()}
	}
	return &protocol.ResultError{Code: e.Code, Message: e.Message, Data: e.Data}
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
func progressOf(s process.Snapshot) protocol.Progress {
	var hb *time.Time
	if !s.LastHeartbeatAt.IsZero() {
		t := s.LastHeartbeatAt.UTC()
		hb = &t
	}
	var pty *protocol.PtySize
	if s.Pty.On() {
		pty = &protocol.PtySize{Rows: s.Pty.Rows, Cols: s.Pty.Cols}
	}
	ports := make([]protocol.Port, 0, len(s.Ports))
	for _, p := range s.Ports {
		ports = append(ports, protocol.Port{Port: p.Port, Address: p.Address, PID: p.PID, InsidePort: p.InsidePort, InsideAddress: p.InsideAddress})
	}
	if len(ports) == 0 {
		ports = nil
	}
	return protocol.Progress{
		Ports:           ports,
		ProgressPath:    s.ProgressPath,
		Pty:             pty,
		InputOpen:       s.InputOpen,
		HandleID:        s.HandleID,
		CommandID:       s.CommandID,
		Label:           s.Label,
		Status:          protocol.Status(s.Status),
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
