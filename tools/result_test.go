package tools

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// resultStart is when the commands below started.
var resultStart = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// completedResult is a command that exited 0 on its own after 1.5 s.
func completedResult() process.Result {
	return process.Result{
		CommandID: "cmd-1",
		Status:    process.StatusCompleted,
		ExitCode:  ptr(0),
		StartedAt: resultStart,
		EndedAt:   resultStart.Add(1500 * time.Millisecond),
		Duration:  1500 * time.Millisecond,
		Output: capture.Output{
			Stdout:     "out\n",
			Stderr:     "err\n",
			StdoutPath: "/artifacts/cmd-1/stdout.log",
			StderrPath: "/artifacts/cmd-1/stderr.log",
			OutputPath: "/artifacts/cmd-1/output.log",
			ByteCount:  8,
			LineCount:  2,
			Sha256:     "5b2a8c9f",
		},
	}
}

// completedToolResult is completedResult on the wire.
func completedToolResult() protocol.ToolResult {
	return protocol.ToolResult{
		CommandID:  "cmd-1",
		Status:     protocol.StatusCompleted,
		Success:    true,
		ExitCode:   ptr(0),
		StartedAt:  resultStart,
		EndedAt:    resultStart.Add(1500 * time.Millisecond),
		DurationMs: 1500,
		Stdout:     "out\n",
		Stderr:     "err\n",
		Artifacts: protocol.Artifacts{
			StdoutPath: "/artifacts/cmd-1/stdout.log",
			StderrPath: "/artifacts/cmd-1/stderr.log",
			OutputPath: "/artifacts/cmd-1/output.log",
			ByteCount:  8,
			LineCount:  2,
			Sha256:     "5b2a8c9f",
		},
		Steps: []protocol.StepResult{},
	}
}

// TestToolResult checks how toolResult puts a command's result on the
// wire. Each case changes completedResult and says how the wire form
// changes from completedToolResult.
func TestToolResult(t *testing.T) {
	tests := []struct {
		name string
		in   func(r *process.Result)
		want func(w *protocol.ToolResult)
	}{
		{
			name: "exit code 0 on its own is a success",
			in:   func(r *process.Result) {},
			want: func(w *protocol.ToolResult) {},
		},
		{
			name: "a nonzero exit code is no success",
			in:   func(r *process.Result) { r.ExitCode = ptr(2) },
			want: func(w *protocol.ToolResult) { w.ExitCode, w.Success = ptr(2), false },
		},
		{
			name: "a signal names itself with no exit code and no success",
			in:   func(r *process.Result) { r.ExitCode, r.Signal = nil, "SIGSEGV" },
			want: func(w *protocol.ToolResult) { w.ExitCode, w.Signal, w.Success = nil, ptr("SIGSEGV"), false },
		},
		{
			name: "timed out at the deadline",
			in: func(r *process.Result) {
				r.Status, r.TimeoutReason, r.ExitCode, r.Signal = process.StatusTimedOut, process.TimeoutDeadline, nil, "SIGTERM"
			},
			want: func(w *protocol.ToolResult) {
				w.Status, w.TimeoutReason, w.ExitCode, w.Signal, w.Success = protocol.StatusTimedOut, protocol.TimeoutDeadline, nil, ptr("SIGTERM"), false
			},
		},
		{
			name: "timed out for inactivity",
			in: func(r *process.Result) {
				r.Status, r.TimeoutReason, r.ExitCode, r.Signal = process.StatusTimedOut, process.TimeoutInactivity, nil, "SIGKILL"
			},
			want: func(w *protocol.ToolResult) {
				w.Status, w.TimeoutReason, w.ExitCode, w.Signal, w.Success = protocol.StatusTimedOut, protocol.TimeoutInactivity, nil, ptr("SIGKILL"), false
			},
		},
		{
			name: "timed out with exit code 0 is no success",
			in:   func(r *process.Result) { r.Status, r.TimeoutReason = process.StatusTimedOut, process.TimeoutDeadline },
			want: func(w *protocol.ToolResult) {
				w.Status, w.TimeoutReason, w.Success = protocol.StatusTimedOut, protocol.TimeoutDeadline, false
			},
		},
		{
			name: "cancelled keeps the exit code a trapping shell chose",
			in:   func(r *process.Result) { r.Status, r.ExitCode = process.StatusCancelled, ptr(7) },
			want: func(w *protocol.ToolResult) {
				w.Status, w.ExitCode, w.Success = protocol.StatusCancelled, ptr(7), false
			},
		},
		{
			name: "cancelled with exit code 0 is no success",
			in:   func(r *process.Result) { r.Status = process.StatusCancelled },
			want: func(w *protocol.ToolResult) { w.Status, w.Success = protocol.StatusCancelled, false },
		},
		{
			name: "a running snapshot has no exit code and no success",
			in: func(r *process.Result) {
				r.Status, r.ExitCode, r.HandleID, r.Output.Sha256 = process.StatusRunning, nil, "h-1", ""
			},
			want: func(w *protocol.ToolResult) {
				w.Status, w.ExitCode, w.HandleID, w.Artifacts.Sha256, w.Success = protocol.StatusRunning, nil, "h-1", "", false
			},
		},
		{
			name: "a handle's id",
			in:   func(r *process.Result) { r.HandleID = "h-3" },
			want: func(w *protocol.ToolResult) { w.HandleID = "h-3" },
		},
		{
			name: "duration in milliseconds",
			in:   func(r *process.Result) { r.EndedAt, r.Duration = resultStart.Add(2*time.Hour), 2*time.Hour },
			want: func(w *protocol.ToolResult) { w.EndedAt, w.DurationMs = resultStart.Add(2*time.Hour), 7_200_000 },
		},
		{
			name: "truncated stdout is flagged",
			in:   func(r *process.Result) { r.Output.StdoutTruncated = true },
			want: func(w *protocol.ToolResult) { w.StdoutTruncated = true },
		},
		{
			name: "truncated stderr is flagged",
			in:   func(r *process.Result) { r.Output.StderrTruncated = true },
			want: func(w *protocol.ToolResult) { w.StderrTruncated = true },
		},
		{
			name: "the progress file is among the artifacts",
			in:   func(r *process.Result) { r.ProgressPath = "/ws/progress.json" },
			want: func(w *protocol.ToolResult) { w.Artifacts.ProgressPath = "/ws/progress.json" },
		},
		{
			name: "the memory limit exceeded",
			in:   func(r *process.Result) { r.LimitExceeded, r.ExitCode, r.Signal = sandbox.LimitMemory, nil, "SIGKILL" },
			want: func(w *protocol.ToolResult) {
				w.LimitExceeded, w.ExitCode, w.Signal, w.Success = ptr("memory"), nil, ptr("SIGKILL"), false
			},
		},
		{
			name: "the pids limit exceeded",
			in:   func(r *process.Result) { r.LimitExceeded, r.ExitCode = sandbox.LimitPids, ptr(1) },
			want: func(w *protocol.ToolResult) { w.LimitExceeded, w.ExitCode, w.Success = ptr("pids"), ptr(1), false },
		},
		{
			name: "the cpu limit exceeded",
			in:   func(r *process.Result) { r.LimitExceeded, r.ExitCode, r.Signal = sandbox.LimitCPU, nil, "SIGXCPU" },
			want: func(w *protocol.ToolResult) {
				w.LimitExceeded, w.ExitCode, w.Signal, w.Success = ptr("cpu"), nil, ptr("SIGXCPU"), false
			},
		},
		{
			name: "jsonl stdout's lines are counted",
			in:   func(r *process.Result) { r.Events = &process.EventCounts{Events: 5, Invalid: 2, Oversize: 1} },
			want: func(w *protocol.ToolResult) {
				w.Events = &protocol.EventCounts{Count: 5, InvalidLines: 2, OversizeLines: 1}
			},
		},
		{
			name: "jsonl stdout without lines counts zeros",
			in:   func(r *process.Result) { r.Events = &process.EventCounts{} },
			want: func(w *protocol.ToolResult) { w.Events = &protocol.EventCounts{} },
		},
		{
			name: "the confinement applied",
			in: func(r *process.Result) {
				r.Sandbox = &sandbox.Report{
					Filesystem:  sandbox.WorkspaceWrite,
					EnforcedBy:  "landlock-abi-7+mntns+netns",
					Limits:      map[sandbox.Limit]string{sandbox.LimitMemory: "cgroup-v2", sandbox.LimitCPU: "rlimit"},
					NotEnforced: []string{"seccomp: not on this architecture"},
				}
			},
			want: func(w *protocol.ToolResult) {
				w.Sandbox = &protocol.SandboxApplied{
					Filesystem:  protocol.SandboxWorkspaceWrite,
					EnforcedBy:  "landlock-abi-7+mntns+netns",
					Limits:      map[string]string{"memory": "cgroup-v2", "cpu": "rlimit"},
					NotEnforced: []string{"seccomp: not on this architecture"},
				}
			},
		},
		{
			name: "confinement without limits has no limits",
			in: func(r *process.Result) {
				r.Sandbox = &sandbox.Report{Filesystem: sandbox.Full, Network: true, Limits: map[sandbox.Limit]string{}}
			},
			want: func(w *protocol.ToolResult) {
				w.Sandbox = &protocol.SandboxApplied{Filesystem: protocol.SandboxFull, Network: true}
			},
		},
		{
			name: "a recipe's steps, each with its own status, exit code and confinement",
			in: func(r *process.Result) {
				r.ExitCode = ptr(1)
				r.Steps = []process.StepResult{
					{Name: "build", Status: "done", Duration: 1200 * time.Millisecond, ExitCode: ptr(0), Sandbox: &sandbox.Report{Filesystem: sandbox.WorkspaceWrite, EnforcedBy: "landlock-abi-7"}},
					{Name: "test", Status: "fail", Duration: 300 * time.Millisecond, ExitCode: ptr(1), Sandbox: &sandbox.Report{Filesystem: sandbox.ReadOnly, EnforcedBy: "landlock-abi-7"}},
					{Name: "deploy", Status: "skip"},
				}
			},
			want: func(w *protocol.ToolResult) {
				w.ExitCode, w.Success = ptr(1), false
				w.Steps = []protocol.StepResult{
					{Name: "build", Status: protocol.StepDone, DurationMs: 1200, ExitCode: ptr(0), Sandbox: &protocol.SandboxApplied{Filesystem: protocol.SandboxWorkspaceWrite, EnforcedBy: "landlock-abi-7"}},
					{Name: "test", Status: protocol.StepFail, DurationMs: 300, ExitCode: ptr(1), Sandbox: &protocol.SandboxApplied{Filesystem: protocol.SandboxReadOnly, EnforcedBy: "landlock-abi-7"}},
					{Name: "deploy", Status: protocol.StepSkip},
				}
			},
		},
		{
			name: "a step the timeout stopped is cancelled",
			in: func(r *process.Result) {
				r.Status, r.TimeoutReason, r.ExitCode, r.Signal = process.StatusTimedOut, process.TimeoutDeadline, nil, "SIGTERM"
				r.Steps = []process.StepResult{{Name: "slow", Status: "cancelled", Duration: time.Second}}
			},
			want: func(w *protocol.ToolResult) {
				w.Status, w.TimeoutReason, w.ExitCode, w.Signal, w.Success = protocol.StatusTimedOut, protocol.TimeoutDeadline, nil, ptr("SIGTERM"), false
				w.Steps = []protocol.StepResult{{Name: "slow", Status: protocol.StepCancelled, DurationMs: 1000}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, want := completedResult(), completedToolResult()
			tt.in(&in)
			tt.want(&want)
			if diff := cmp.Diff(want, toolResult(in)); diff != "" {
				t.Errorf("toolResult mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestToolResultTimesAreUTC checks that a result's times go on the wire in
// UTC, whatever the server's zone.
func TestToolResultTimesAreUTC(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	in := completedResult()
	in.StartedAt, in.EndedAt = resultStart.In(zone), resultStart.Add(time.Second).In(zone)
	got := toolResult(in)
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{
		{"startedAt", got.StartedAt, resultStart},
		{"endedAt", got.EndedAt, resultStart.Add(time.Second)},
	} {
		if !tm.got.Equal(tm.want) || tm.got.Location() != time.UTC {
			t.Errorf("%s = %v, want %v", tm.name, tm.got, tm.want)
		}
	}
}

// runningSnapshot is a handle's snapshot in its second step.
func runningSnapshot() process.Snapshot {
	return process.Snapshot{
		HandleID:    "h-1",
		CommandID:   "cmd-1",
		Label:       "build, test",
		Status:      process.StatusRunning,
		PID:         4242,
		CurrentStep: 2,
		TotalSteps:  2,
		StepName:    "test",
		Elapsed:     3500 * time.Millisecond,
		UpdatedAt:   resultStart.Add(3 * time.Second),
		OutputBytes: 120,
	}
}

// runningProgress is runningSnapshot on the wire.
func runningProgress() protocol.Progress {
	return protocol.Progress{
		HandleID:    "h-1",
		CommandID:   "cmd-1",
		Label:       "build, test",
		Status:      protocol.StatusRunning,
		PID:         4242,
		CurrentStep: 2,
		TotalSteps:  2,
		StepName:    "test",
		ElapsedMs:   3500,
		UpdatedAt:   resultStart.Add(3 * time.Second),
		OutputBytes: 120,
	}
}

// TestProgressOf checks how progressOf puts a handle's snapshot on the
// wire. Each case changes runningSnapshot and says how the wire form
// changes from runningProgress.
func TestProgressOf(t *testing.T) {
	tests := []struct {
		name string
		in   func(s *process.Snapshot)
		want func(w *protocol.Progress)
	}{
		{
			name: "running without a heartbeat, terminal or port",
			in:   func(s *process.Snapshot) {},
			want: func(w *protocol.Progress) {},
		},
		{
			name: "the latest heartbeat",
			in:   func(s *process.Snapshot) { s.LastHeartbeatAt = resultStart.Add(2 * time.Second) },
			want: func(w *protocol.Progress) { w.LastHeartbeatAt = ptr(resultStart.Add(2 * time.Second)) },
		},
		{
			name: "the running step's terminal size",
			in:   func(s *process.Snapshot) { s.Pty = process.Winsize{Rows: 40, Cols: 120} },
			want: func(w *protocol.Progress) { w.Pty = &protocol.PtySize{Rows: 40, Cols: 120} },
		},
		{
			name: "the ports listened on",
			in: func(s *process.Snapshot) {
				s.Ports = []process.Port{{Port: 8080, Address: "127.0.0.1", PID: 4243}, {Port: 9090, Address: "::", PID: 4242}}
			},
			want: func(w *protocol.Progress) {
				w.Ports = []protocol.Port{{Port: 8080, Address: "127.0.0.1", PID: 4243}, {Port: 9090, Address: "::", PID: 4242}}
			},
		},
		{
			name: "no ports listened on is absent",
			in:   func(s *process.Snapshot) { s.Ports = []process.Port{} },
			want: func(w *protocol.Progress) {},
		},
		{
			name: "the progress file and open input",
			in:   func(s *process.Snapshot) { s.ProgressPath, s.InputOpen = "/ws/progress.json", true },
			want: func(w *protocol.Progress) { w.ProgressPath, w.InputOpen = "/ws/progress.json", true },
		},
		{
			name: "an ended handle's status and exit code",
			in:   func(s *process.Snapshot) { s.Status, s.ExitCode = process.StatusCompleted, ptr(3) },
			want: func(w *protocol.Progress) { w.Status, w.ExitCode = protocol.StatusCompleted, ptr(3) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, want := runningSnapshot(), runningProgress()
			tt.in(&in)
			tt.want(&want)
			if diff := cmp.Diff(want, progressOf(in)); diff != "" {
				t.Errorf("progressOf mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgressOfTimesAreUTC checks that a snapshot's times go on the wire
// in UTC, whatever the server's zone.
func TestProgressOfTimesAreUTC(t *testing.T) {
	zone := time.FixedZone("UTC-3", -3*3600)
	in := runningSnapshot()
	in.UpdatedAt, in.LastHeartbeatAt = resultStart.In(zone), resultStart.Add(time.Second).In(zone)
	got := progressOf(in)
	if !got.UpdatedAt.Equal(resultStart) || got.UpdatedAt.Location() != time.UTC {
		t.Errorf("updatedAt = %v, want %v", got.UpdatedAt, resultStart)
	}
	if got.LastHeartbeatAt == nil || !got.LastHeartbeatAt.Equal(resultStart.Add(time.Second)) || got.LastHeartbeatAt.Location() != time.UTC {
		t.Errorf("lastHeartbeatAt = %v, want %v", got.LastHeartbeatAt, resultStart.Add(time.Second))
	}
}

// TestDisplayCommand checks the command line a longRunning answers, for
// display: each argument quoted only where a POSIX shell would need it,
// and a recipe's steps joined with " && ".
func TestDisplayCommand(t *testing.T) {
	tests := []struct {
		name  string
		argv  []string
		steps []process.Step
		want  string
	}{
		{"plain words are left as they are", []string{"go", "test", "-run=X", "./...", "a@b:c,d+e%f"}, nil, "go test -run=X ./... a@b:c,d+e%f"},
		{"a space is quoted", []string{"echo", "a b"}, nil, "echo 'a b'"},
		{"an empty argument is quoted", []string{"printf", ""}, nil, "printf ''"},
		{"a single quote is escaped", []string{"echo", "it's"}, nil, `echo 'it'\''s'`},
		{"shell syntax is quoted", []string{"echo", "$HOME", "*", "a;b", "$(x)", "`y`"}, nil, "echo '$HOME' '*' 'a;b' '$(x)' '`y`'"},
		{"a newline is quoted", []string{"echo", "a\nb"}, nil, "echo 'a\nb'"},
		{"non-ASCII is quoted", []string{"echo", "é"}, nil, "echo 'é'"},
		{"a recipe's steps are joined", nil, []process.Step{{Argv: []string{"make"}}, {Argv: []string{"make", "test suite"}}}, "make && make 'test suite'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, displayCommand(tt.argv, tt.steps)); diff != "" {
				t.Errorf("displayCommand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
