package tools

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// sessionOutputLimit is the inline output limit of the sessions below,
// unlike the default so that a test sees where a limit came from.
const sessionOutputLimit = 1000

// TestCommandSpec checks how commandSpec turns the params runCommand and
// longRunning share, and a recipe's steps, into a process spec, under
// --sandbox off so that no confinement is added.
func TestCommandSpec(t *testing.T) {
	f := newFixture(t, Config{OutputLimit: sessionOutputLimit, Sandbox: SandboxConfig{Mode: SandboxOff}}, nil)
	tests := []struct {
		name  string
		p     protocol.RunCommandParams
		steps []protocol.StepSpec
		want  process.Spec
	}{
		{
			name: "argv env and stdin pass through",
			p:    protocol.RunCommandParams{Argv: []string{"echo", "$HOME", "*"}, Env: map[string]*string{"A": ptr("1"), "GONE": nil}, Stdin: ptr("input\n")},
			want: process.Spec{Argv: []string{"echo", "$HOME", "*"}, Dir: f.root, Env: map[string]*string{"A": ptr("1"), "GONE": nil}, Stdin: "input\n", OutputLimit: sessionOutputLimit},
		},
		{
			name: "no cwd is the root",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.root, OutputLimit: sessionOutputLimit},
		},
		{
			name: "relative cwd is under the root",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}, Cwd: "sub"},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.path("sub"), OutputLimit: sessionOutputLimit},
		},
		{
			name: "absolute cwd inside the root",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}, Cwd: f.path("sub/deeper")},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.path("sub/deeper"), OutputLimit: sessionOutputLimit},
		},
		{
			name: "dot-dot that stays inside the root",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}, Cwd: "sub/deeper/.."},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.path("sub"), OutputLimit: sessionOutputLimit},
		},
		{
			name: "symlink inside the root is its real directory",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}, Cwd: "link-in"},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.path("sub"), OutputLimit: sessionOutputLimit},
		},
		{
			name: "cwd in a read root",
			p:    protocol.RunCommandParams{Argv: []string{"ls"}, Cwd: f.readRoot + "/lib"},
			want: process.Spec{Argv: []string{"ls"}, Dir: f.readRoot + "/lib", OutputLimit: sessionOutputLimit},
		},
		{
			name: "cwd in the artifacts directory",
			p:    protocol.RunCommandParams{Argv: []string{"ls"}, Cwd: f.artifacts},
			want: process.Spec{Argv: []string{"ls"}, Dir: f.artifacts, OutputLimit: sessionOutputLimit},
		},
		{
			name: "cwd as a file URI",
			p:    protocol.RunCommandParams{Argv: []string{"pwd"}, Cwd: "file://" + f.path("sub")},
			want: process.Spec{Argv: []string{"pwd"}, Dir: f.path("sub"), OutputLimit: sessionOutputLimit},
		},
		{
			name: "timeoutMs is the timeout",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, TimeoutMs: ptr[int64](1500)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, Timeout: 1500 * time.Millisecond, OutputLimit: sessionOutputLimit},
		},
		{
			name: "timeoutMs of one millisecond",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, TimeoutMs: ptr[int64](1)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, Timeout: time.Millisecond, OutputLimit: sessionOutputLimit},
		},
		{
			name: "timeoutMs longer than a Duration saturates instead of wrapping",
			// 18446744073710 ms is 2^64 ns and a little: it wrapped to 448 µs.
			p:    protocol.RunCommandParams{Argv: []string{"true"}, TimeoutMs: ptr[int64](18446744073710)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, Timeout: math.MaxInt64, OutputLimit: sessionOutputLimit},
		},
		{
			name: "largest timeoutMs saturates instead of turning negative",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, TimeoutMs: ptr[int64](math.MaxInt64)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, Timeout: math.MaxInt64, OutputLimit: sessionOutputLimit},
		},
		{
			name: "inactivityTimeoutMs is the inactivity timeout",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, InactivityTimeoutMs: ptr[int64](250)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, InactivityTimeout: 250 * time.Millisecond, OutputLimit: sessionOutputLimit},
		},
		{
			name: "inactivityTimeoutMs longer than a Duration saturates instead of wrapping",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, InactivityTimeoutMs: ptr[int64](18446744073710)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, InactivityTimeout: math.MaxInt64, OutputLimit: sessionOutputLimit},
		},
		{
			name: "yieldMs 0 is accepted and left to runCommand",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, YieldMs: ptr[int64](0)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, OutputLimit: sessionOutputLimit},
		},
		{
			name: "yieldMs of an hour is accepted",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, YieldMs: ptr[int64](3_600_000)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, OutputLimit: sessionOutputLimit},
		},
		{
			name: "outputLimitBytes replaces the session's",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, OutputLimitBytes: ptr[int64](10)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, OutputLimit: 10},
		},
		{
			name: "outputLimitBytes of one byte",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, OutputLimitBytes: ptr[int64](1)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, OutputLimit: 1},
		},
		{
			name: "outputLimitBytes at its 4 MiB maximum",
			p:    protocol.RunCommandParams{Argv: []string{"true"}, OutputLimitBytes: ptr[int64](4 << 20)},
			want: process.Spec{Argv: []string{"true"}, Dir: f.root, OutputLimit: 4 << 20},
		},
		{
			name:  "steps take the request's cwd and env",
			p:     protocol.RunCommandParams{Cwd: "sub", Env: map[string]*string{"A": ptr("1")}},
			steps: []protocol.StepSpec{{Name: "build", Argv: []string{"make"}}, {Name: "test", Argv: []string{"make", "test"}}},
			want: process.Spec{Dir: f.path("sub"), Env: map[string]*string{"A": ptr("1")}, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "build", Argv: []string{"make"}, Dir: f.path("sub"), Env: map[string]*string{"A": ptr("1")}},
				{Name: "test", Argv: []string{"make", "test"}, Dir: f.path("sub"), Env: map[string]*string{"A": ptr("1")}},
			}},
		},
		{
			name:  "a step's cwd replaces the request's",
			p:     protocol.RunCommandParams{Cwd: "sub"},
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"ls"}, Cwd: f.readRoot + "/lib"}, {Name: "b", Argv: []string{"ls"}, Cwd: "link-in/deeper"}},
			want: process.Spec{Dir: f.path("sub"), OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"ls"}, Dir: f.readRoot + "/lib"},
				{Name: "b", Argv: []string{"ls"}, Dir: f.path("sub/deeper")},
			}},
		},
		{
			name:  "a step's env goes on top of the request's and null unsets",
			p:     protocol.RunCommandParams{Env: map[string]*string{"A": ptr("1"), "B": ptr("2")}},
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"env"}, Env: map[string]*string{"A": ptr("3"), "B": nil, "C": ptr("4")}}},
			want: process.Spec{Dir: f.root, Env: map[string]*string{"A": ptr("1"), "B": ptr("2")}, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"env"}, Dir: f.root, Env: map[string]*string{"A": ptr("3"), "B": nil, "C": ptr("4")}},
			}},
		},
		{
			name:  "a step's env without the request's",
			p:     protocol.RunCommandParams{},
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"env"}, Env: map[string]*string{"C": ptr("4")}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"env"}, Dir: f.root, Env: map[string]*string{"C": ptr("4")}},
			}},
		},
		{
			name:  "continueOnError is the step's",
			steps: []protocol.StepSpec{{Name: "lint", Argv: []string{"lint"}, ContinueOnError: true}, {Name: "test", Argv: []string{"test"}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "lint", Argv: []string{"lint"}, Dir: f.root, ContinueOnError: true},
				{Name: "test", Argv: []string{"test"}, Dir: f.root},
			}},
		},
		{
			name:  "a step's pty size is its terminal",
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"top"}, Pty: &protocol.PtySize{Rows: 30, Cols: 100}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"top"}, Dir: f.root, Pty: &process.Winsize{Rows: 30, Cols: 100}},
			}},
		},
		{
			name:  "a step's pty at the largest size",
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"top"}, Pty: &protocol.PtySize{Rows: 10000, Cols: 1}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"top"}, Dir: f.root, Pty: &process.Winsize{Rows: 10000, Cols: 1}},
			}},
		},
		{
			name:  "a step's pty false is no terminal, whatever the request's",
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"cat"}, Pty: &protocol.PtySize{}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"cat"}, Dir: f.root, Pty: &process.Winsize{}},
			}},
		},
		{
			name:  "a step without pty takes the request's",
			steps: []protocol.StepSpec{{Name: "a", Argv: []string{"cat"}}},
			want: process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{
				{Name: "a", Argv: []string{"cat"}, Dir: f.root},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := f.tools.commandSpec(context.Background(), f.ws, &tt.p, tt.steps)
			if err != nil {
				t.Fatalf("commandSpec: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spec mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandSpecRejects checks each param commandSpec refuses, with the
// code and data the client is told.
func TestCommandSpecRejects(t *testing.T) {
	f := newFixture(t, Config{Sandbox: SandboxConfig{Mode: SandboxOff}}, nil)
	invalid := func(field, reason string) wantError {
		return wantError{is: protocol.ErrInvalidParams, data: &protocol.ErrorData{Field: field, Reason: reason}}
	}
	// wsErr is an error the workspace decides, in its own words.
	wsErr := func(is *protocol.Error, data protocol.ErrorData) wantError {
		return wantError{is: is, data: &data, wsReason: true}
	}
	argv := []string{"true"}
	tests := []struct {
		name  string
		p     protocol.RunCommandParams
		steps []protocol.StepSpec
		want  wantError
	}{
		{"timeoutMs zero", protocol.RunCommandParams{Argv: argv, TimeoutMs: ptr[int64](0)},
			nil, invalid("timeoutMs", "must be a positive number of milliseconds, not 0")},
		{"timeoutMs negative", protocol.RunCommandParams{Argv: argv, TimeoutMs: ptr[int64](-5)},
			nil, invalid("timeoutMs", "must be a positive number of milliseconds, not -5")},
		{"inactivityTimeoutMs zero", protocol.RunCommandParams{Argv: argv, InactivityTimeoutMs: ptr[int64](0)},
			nil, invalid("inactivityTimeoutMs", "must be a positive number of milliseconds, not 0")},
		{"inactivityTimeoutMs negative", protocol.RunCommandParams{Argv: argv, InactivityTimeoutMs: ptr[int64](-1)},
			nil, invalid("inactivityTimeoutMs", "must be a positive number of milliseconds, not -1")},
		{"yieldMs negative", protocol.RunCommandParams{Argv: argv, YieldMs: ptr[int64](-1)},
			nil, invalid("yieldMs", "must be between 0 and 3600000, not -1")},
		{"yieldMs over an hour", protocol.RunCommandParams{Argv: argv, YieldMs: ptr[int64](3_600_001)},
			nil, invalid("yieldMs", "must be between 0 and 3600000, not 3600001")},
		{"outputLimitBytes zero", protocol.RunCommandParams{Argv: argv, OutputLimitBytes: ptr[int64](0)},
			nil, invalid("outputLimitBytes", "must be between 1 and 4194304, not 0")},
		{"outputLimitBytes negative", protocol.RunCommandParams{Argv: argv, OutputLimitBytes: ptr[int64](-1)},
			nil, invalid("outputLimitBytes", "must be between 1 and 4194304, not -1")},
		{"outputLimitBytes over 4 MiB", protocol.RunCommandParams{Argv: argv, OutputLimitBytes: ptr[int64](4<<20 + 1)},
			nil, invalid("outputLimitBytes", "must be between 1 and 4194304, not 4194305")},

		{"cwd that does not exist", protocol.RunCommandParams{Argv: argv, Cwd: "missing"},
			nil, wsErr(protocol.ErrNotFound, protocol.ErrorData{Path: "missing"})},
		{"cwd that is a file", protocol.RunCommandParams{Argv: argv, Cwd: "file.txt"},
			nil, wsErr(protocol.ErrInvalidParams, protocol.ErrorData{Field: "cwd", Path: "file.txt"})},
		{"cwd outside every root", protocol.RunCommandParams{Argv: argv, Cwd: f.outside},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: f.outside})},
		{"cwd climbing out with dot-dot", protocol.RunCommandParams{Argv: argv, Cwd: "sub/../.."},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "sub/../.."})},
		{"cwd through a symlink out of the root", protocol.RunCommandParams{Argv: argv, Cwd: "link-out"},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "link-out"})},
		{"cwd with a leading tilde", protocol.RunCommandParams{Argv: argv, Cwd: "~/src"},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "~/src"})},
		{"cwd with a NUL byte", protocol.RunCommandParams{Argv: argv, Cwd: "sub\x00"},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "sub\x00"})},
		{"cwd under /proc", protocol.RunCommandParams{Argv: argv, Cwd: "/proc/self/cwd"},
			nil, wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "/proc/self/cwd"})},

		{"argv and steps both", protocol.RunCommandParams{Argv: argv},
			[]protocol.StepSpec{{Name: "a", Argv: argv}}, invalid("steps", "give argv or steps, not both")},
		{"a step without a name", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv}, {Argv: argv}}, invalid("steps[1].name", "required")},
		{"a step with a blank name", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: " \t", Argv: argv}}, invalid("steps[0].name", "required")},
		{"a step's cwd that does not exist", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv}, {Name: "b", Argv: argv, Cwd: "sub/missing"}},
			wsErr(protocol.ErrNotFound, protocol.ErrorData{Path: "sub/missing"})},
		{"a step's cwd that is a file", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv}, {Name: "b", Argv: argv, Cwd: "file.txt"}},
			wsErr(protocol.ErrInvalidParams, protocol.ErrorData{Field: "steps[1].cwd", Path: "file.txt"})},
		{"a step's cwd outside every root", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv, Cwd: "link-out"}},
			wsErr(protocol.ErrPathOutsideWorkspace, protocol.ErrorData{Path: "link-out"})},
		{"a step's pty without rows", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv, Pty: &protocol.PtySize{Cols: 80}}},
			invalid("steps[0].pty.rows", "must be between 1 and 10000, not 0")},
		{"a step's pty with negative rows", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv}, {Name: "b", Argv: argv, Pty: &protocol.PtySize{Rows: -1, Cols: 80}}},
			invalid("steps[1].pty.rows", "must be between 1 and 10000, not -1")},
		{"a step's pty too wide", protocol.RunCommandParams{},
			[]protocol.StepSpec{{Name: "a", Argv: argv, Pty: &protocol.PtySize{Rows: 24, Cols: 10001}}},
			invalid("steps[0].pty.cols", "must be between 1 and 10000, not 10001")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := f.tools.commandSpec(context.Background(), f.ws, &tt.p, tt.steps)
			checkError(t, err, tt.want)
		})
	}
}

// TestCommandSpecConfinement checks the confinement commandSpec gives a
// command: the session's default, tightened by the request and by each
// step, the server's limits lowered by the request, required when asked
// for, and the caches of a workspace-write command in the session's cache
// directory.
func TestCommandSpecConfinement(t *testing.T) {
	serverLimits := sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}
	argv := []string{"make"}
	tests := []struct {
		name   string
		server SandboxConfig
		// session is the client's initializationOptions.sandbox.
		session *protocol.Sandbox
		p       protocol.RunCommandParams
		steps   []protocol.StepSpec
		want    func(f *fixture) process.Spec
	}{
		{
			name: "nothing asked is the session's default, not required",
			p:    protocol.RunCommandParams{Argv: argv},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, false, f.goModCache())}
			},
		},
		{
			name:   "nothing asked takes the server's limits",
			server: SandboxConfig{Limits: serverLimits},
			p:      protocol.RunCommandParams{Argv: argv},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}, false, f.goModCache())}
			},
		},
		{
			name:   "--sandbox required requires a command that asks nothing",
			server: SandboxConfig{Mode: SandboxRequired},
			p:      protocol.RunCommandParams{Argv: argv},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(isolatePIDs(f.policy(fsWorkspaceWrite, false)), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:    "the session's sandbox is the default and required",
			session: &protocol.Sandbox{Filesystem: fsReadOnly},
			p:       protocol.RunCommandParams{Argv: argv},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Confine: f.confined(f.policy(fsReadOnly, false), sandbox.Limits{}, true, nil)}
			},
		},
		{
			name:   "--sandbox-default full with the network on",
			server: SandboxConfig{Filesystem: fsFull, Network: true},
			p:      protocol.RunCommandParams{Argv: argv},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Confine: f.confined(f.policy(fsFull, true), sandbox.Limits{}, false, nil)}
			},
		},
		{
			name: "a read-only request gets no cache directory and is required",
			p:    protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsReadOnly}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Confine: f.confined(f.policy(fsReadOnly, false), sandbox.Limits{}, true, nil)}
			},
		},
		{
			name: "a request equal to the default is still required",
			p:    protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite, Network: protocol.NetworkOff()}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:   "a request turns the network off",
			server: SandboxConfig{Network: true},
			p:      protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOff()}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:   "a request keeps the network on where the server has it",
			server: SandboxConfig{Network: true},
			p:      protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsReadOnly}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Confine: f.confined(f.policy(fsReadOnly, true), sandbox.Limits{}, true, nil)}
			},
		},
		{
			name: "cache variables the request sets are its own",
			p:    protocol.RunCommandParams{Argv: argv, Env: map[string]*string{"GOCACHE": ptr("/elsewhere"), "A": ptr("1")}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Env:     f.cacheEnv(map[string]*string{"GOCACHE": ptr("/elsewhere"), "A": ptr("1")}),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, false, f.goModCache())}
			},
		},
		{
			name: "cache variables the request unsets stay unset",
			p:    protocol.RunCommandParams{Argv: argv, Env: map[string]*string{"XDG_CACHE_HOME": nil}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit,
					Env:     f.cacheEnv(map[string]*string{"XDG_CACHE_HOME": nil}),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, false, f.goModCache())}
			},
		},
		{
			name:   "limits lower the server's and make the command required",
			server: SandboxConfig{Limits: serverLimits},
			p:      protocol.RunCommandParams{Argv: argv, Limits: &protocol.Limits{Pids: ptr[int64](10)}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{MemoryBytes: 1 << 30, Pids: 10, CPU: 10 * time.Second}, true, f.goModCache())}
			},
		},
		{
			name:  "a stricter step gets a policy of its own and makes the command required",
			steps: []protocol.StepSpec{{Name: "build", Argv: argv}, {Name: "check", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsReadOnly}}},
			want: func(f *fixture) process.Spec {
				ro := f.policy(fsReadOnly, false)
				return process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Steps: []process.Step{
						{Name: "build", Argv: argv, Dir: f.root},
						{Name: "check", Argv: argv, Dir: f.root, Policy: &ro},
					},
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:  "a step asking for the request's confinement gets no policy of its own",
			steps: []protocol.StepSpec{{Name: "build", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite}}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Steps:   []process.Step{{Name: "build", Argv: argv, Dir: f.root}},
					Confine: f.confined(f.policy(fsWorkspaceWrite, false), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:   "a step cuts the network the request keeps",
			server: SandboxConfig{Filesystem: fsFull, Network: true},
			steps:  []protocol.StepSpec{{Name: "fetch", Argv: argv}, {Name: "build", Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOff()}}},
			want: func(f *fixture) process.Spec {
				offline := f.policy(fsFull, false)
				return process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit,
					Steps: []process.Step{
						{Name: "fetch", Argv: argv, Dir: f.root},
						{Name: "build", Argv: argv, Dir: f.root, Policy: &offline},
					},
					Confine: f.confined(f.policy(fsFull, true), sandbox.Limits{}, true, nil)}
			},
		},
		{
			name:   "a workspace-write step of a full request gets the cache directory",
			server: SandboxConfig{Filesystem: fsFull, Network: true},
			steps:  []protocol.StepSpec{{Name: "build", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite}}},
			want: func(f *fixture) process.Spec {
				ww := f.policy(fsWorkspaceWrite, true)
				return process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Env: f.cacheEnv(nil),
					Steps:   []process.Step{{Name: "build", Argv: argv, Dir: f.root, Policy: &ww}},
					Confine: f.confined(f.policy(fsFull, true), sandbox.Limits{}, true, f.goModCache())}
			},
		},
		{
			name:   "--sandbox off confines nothing and leaves env alone",
			server: SandboxConfig{Mode: SandboxOff},
			p:      protocol.RunCommandParams{Argv: argv, Env: map[string]*string{"A": ptr("1")}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit, Env: map[string]*string{"A": ptr("1")}}
			},
		},
		{
			name:   "--sandbox off takes a request for full with the network as asking nothing",
			server: SandboxConfig{Mode: SandboxOff},
			p:      protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsFull, Network: protocol.NetworkOn()}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Argv: argv, Dir: f.root, OutputLimit: sessionOutputLimit}
			},
		},
		{
			name:   "--sandbox off takes a step asking for full as asking nothing",
			server: SandboxConfig{Mode: SandboxOff},
			steps:  []protocol.StepSpec{{Name: "a", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsFull}}},
			want: func(f *fixture) process.Spec {
				return process.Spec{Dir: f.root, OutputLimit: sessionOutputLimit, Steps: []process.Step{{Name: "a", Argv: argv, Dir: f.root}}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{OutputLimit: sessionOutputLimit, Sandbox: tt.server}, tt.session)
			got, _, err := f.tools.commandSpec(context.Background(), f.ws, &tt.p, tt.steps)
			if err != nil {
				t.Fatalf("commandSpec: %v", err)
			}
			if diff := cmp.Diff(tt.want(f), got); diff != "" {
				t.Errorf("spec mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandSpecConfinementRejects checks the confinement commandSpec
// refuses: anything looser than the session's default or the request's,
// limits above the server's, and any confinement under --sandbox off.
func TestCommandSpecConfinementRejects(t *testing.T) {
	argv := []string{"make"}
	invalid := func(field, reason string) wantError {
		return wantError{is: protocol.ErrInvalidParams, data: &protocol.ErrorData{Field: field, Reason: reason}}
	}
	off := wantError{is: protocol.ErrSandboxUnavailable, data: &protocol.ErrorData{
		Field: "sandbox", Reason: "the server runs with --sandbox off", Missing: []string{"confinement is off (--sandbox off)"},
	}}
	const networkOn = "the network is off for this session (--sandbox-network off or initializationOptions.sandbox); a client may turn it off, never on"
	tests := []struct {
		name    string
		server  SandboxConfig
		session *protocol.Sandbox
		p       protocol.RunCommandParams
		steps   []protocol.StepSpec
		want    wantError
	}{
		{
			name: "a looser filesystem than the server's default",
			p:    protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsFull}},
			want: invalid("sandbox.filesystem", `"full" is looser than "workspace-write", which the server or the session set; a client may tighten confinement, never loosen it`),
		},
		{
			name:    "a looser filesystem than the session's",
			session: &protocol.Sandbox{Filesystem: fsReadOnly},
			p:       protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite}},
			want:    invalid("sandbox.filesystem", `"workspace-write" is looser than "read-only", which the server or the session set; a client may tighten confinement, never loosen it`),
		},
		{
			name: "an unknown filesystem mode",
			p:    protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: "none"}},
			want: invalid("sandbox.filesystem", `must be "workspace-write", "read-only" or "full", not "none"`),
		},
		{
			name: "the network on where the server has it off",
			p:    protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOn()}},
			want: invalid("sandbox.network", networkOn),
		},
		{
			name:    "the network on where the session turned it off",
			server:  SandboxConfig{Network: true},
			session: &protocol.Sandbox{Network: protocol.NetworkOff()},
			p:       protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOn()}},
			want:    invalid("sandbox.network", networkOn),
		},
		{
			name:  "a step looser than the request",
			p:     protocol.RunCommandParams{Sandbox: &protocol.Sandbox{Filesystem: fsReadOnly}},
			steps: []protocol.StepSpec{{Name: "a", Argv: argv}, {Name: "b", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite}}},
			want:  invalid("steps[1].sandbox.filesystem", `"workspace-write" is looser than "read-only", which the server or the session set; a client may tighten confinement, never loosen it`),
		},
		{
			name:   "a step turning on the network the request turned off",
			server: SandboxConfig{Network: true},
			p:      protocol.RunCommandParams{Sandbox: &protocol.Sandbox{Network: protocol.NetworkOff()}},
			steps:  []protocol.StepSpec{{Name: "a", Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOn()}}},
			want:   invalid("steps[0].sandbox.network", networkOn),
		},
		{
			name:  "a step with an unknown filesystem mode",
			steps: []protocol.StepSpec{{Name: "a", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: "Full"}}},
			want:  invalid("steps[0].sandbox.filesystem", `must be "workspace-write", "read-only" or "full", not "Full"`),
		},
		{
			name:   "a limit above the server's",
			server: SandboxConfig{Limits: sandbox.Limits{Pids: 100}},
			p:      protocol.RunCommandParams{Argv: argv, Limits: &protocol.Limits{Pids: ptr[int64](101)}},
			want:   invalid("limits.pids", "must be at most 100 (--limit-pids); a client may lower a limit, never raise it"),
		},
		{
			name: "a limit of zero",
			p:    protocol.RunCommandParams{Argv: argv, Limits: &protocol.Limits{MemoryBytes: ptr[int64](0)}},
			want: invalid("limits.memoryBytes", "must be positive, not 0"),
		},
		{
			name:   "--sandbox off and a filesystem mode",
			server: SandboxConfig{Mode: SandboxOff},
			p:      protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsWorkspaceWrite}},
			want:   off,
		},
		{
			name:   "--sandbox off and the network off",
			server: SandboxConfig{Mode: SandboxOff},
			p:      protocol.RunCommandParams{Argv: argv, Sandbox: &protocol.Sandbox{Network: protocol.NetworkOff()}},
			want:   off,
		},
		{
			name:   "--sandbox off and limits",
			server: SandboxConfig{Mode: SandboxOff},
			p:      protocol.RunCommandParams{Argv: argv, Limits: &protocol.Limits{Pids: ptr[int64](10)}},
			want:   off,
		},
		{
			name:   "--sandbox off and a confined step",
			server: SandboxConfig{Mode: SandboxOff},
			steps:  []protocol.StepSpec{{Name: "a", Argv: argv}, {Name: "b", Argv: argv, Sandbox: &protocol.Sandbox{Filesystem: fsReadOnly}}},
			want:   off,
		},
		{
			name:    "--sandbox off and a session sandbox refuses every command",
			server:  SandboxConfig{Mode: SandboxOff},
			session: &protocol.Sandbox{Filesystem: fsReadOnly},
			p:       protocol.RunCommandParams{Argv: argv},
			want:    off,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{Sandbox: tt.server}, tt.session)
			_, _, err := f.tools.commandSpec(context.Background(), f.ws, &tt.p, tt.steps)
			checkError(t, err, tt.want)
		})
	}
}

// isolatePIDs is p with a PID namespace required, as --sandbox required
// asks of every command.
func isolatePIDs(p sandbox.Policy) sandbox.Policy {
	p.IsolatePIDs = true
	return p
}
