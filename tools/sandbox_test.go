package tools

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// The filesystem modes, loosest first.
const (
	fsFull           = protocol.SandboxFull
	fsWorkspaceWrite = protocol.SandboxWorkspaceWrite
	fsReadOnly       = protocol.SandboxReadOnly
)

// looserReason is the reason tighten gives for a looser filesystem mode.
func looserReason(asked, base protocol.SandboxFilesystem) string {
	return `"` + string(asked) + `" is looser than "` + string(base) + `", which the server or the session set; a client may tighten confinement, never loosen it`
}

// networkOnReason is the reason tighten gives for the network turned on.
const networkOnReason = "the network is off for this session (--sandbox-network off or initializationOptions.sandbox); a client may turn it off, never on"

// TestTighten checks every filesystem mode and network setting a client
// may ask for against every base it may narrow: the same or stricter is
// taken, the rest left as the base has it.
func TestTighten(t *testing.T) {
	tests := []struct {
		name  string
		base  level
		asked *protocol.Sandbox
		want  level
	}{
		{"nil keeps full with the network", level{fs: fsFull, network: true}, nil, level{fs: fsFull, network: true}},
		{"nil keeps read-only without the network", level{fs: fsReadOnly, network: false}, nil, level{fs: fsReadOnly, network: false}},
		{"empty keeps workspace-write", level{fs: fsWorkspaceWrite, network: true}, &protocol.Sandbox{}, level{fs: fsWorkspaceWrite, network: true}},

		{"full base takes full", level{fs: fsFull, network: false}, &protocol.Sandbox{Filesystem: fsFull}, level{fs: fsFull, network: false}},
		{"full base takes workspace-write", level{fs: fsFull, network: false}, &protocol.Sandbox{Filesystem: fsWorkspaceWrite}, level{fs: fsWorkspaceWrite, network: false}},
		{"full base takes read-only", level{fs: fsFull, network: false}, &protocol.Sandbox{Filesystem: fsReadOnly}, level{fs: fsReadOnly, network: false}},
		{"workspace-write base takes workspace-write", level{fs: fsWorkspaceWrite, network: false}, &protocol.Sandbox{Filesystem: fsWorkspaceWrite}, level{fs: fsWorkspaceWrite, network: false}},
		{"workspace-write base takes read-only", level{fs: fsWorkspaceWrite, network: false}, &protocol.Sandbox{Filesystem: fsReadOnly}, level{fs: fsReadOnly, network: false}},
		{"read-only base takes read-only", level{fs: fsReadOnly, network: false}, &protocol.Sandbox{Filesystem: fsReadOnly}, level{fs: fsReadOnly, network: false}},

		{"network on base keeps it when not asked", level{fs: fsWorkspaceWrite, network: true}, &protocol.Sandbox{Filesystem: fsReadOnly}, level{fs: fsReadOnly, network: true}},
		{"network on base takes it on", level{fs: fsWorkspaceWrite, network: true}, &protocol.Sandbox{Network: protocol.NetworkOn()}, level{fs: fsWorkspaceWrite, network: true}},
		{"network on base takes it off", level{fs: fsWorkspaceWrite, network: true}, &protocol.Sandbox{Network: protocol.NetworkOff()}, level{fs: fsWorkspaceWrite, network: false}},
		{"network off base keeps it off when not asked", level{fs: fsFull, network: false}, &protocol.Sandbox{Filesystem: fsFull}, level{fs: fsFull, network: false}},
		{"network off base takes it off", level{fs: fsFull, network: false}, &protocol.Sandbox{Network: protocol.NetworkOff()}, level{fs: fsFull, network: false}},

		{"both tightened at once", level{fs: fsFull, network: true}, &protocol.Sandbox{Filesystem: fsReadOnly, Network: protocol.NetworkOff()}, level{fs: fsReadOnly, network: false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&confinement{}).tighten(tt.base, tt.asked, "sandbox")
			if err != nil {
				t.Fatalf("tighten: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(level{})); diff != "" {
				t.Errorf("level mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTightenRejects checks that a looser filesystem mode, an unknown one,
// and the network on where the base has it off are InvalidParams naming
// the field under the prefix the caller gives.
func TestTightenRejects(t *testing.T) {
	tests := []struct {
		name  string
		base  level
		asked *protocol.Sandbox
		field string
		want  *protocol.ErrorData
	}{
		{"workspace-write base refuses full", level{fs: fsWorkspaceWrite, network: true}, &protocol.Sandbox{Filesystem: fsFull}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.filesystem", Reason: looserReason(fsFull, fsWorkspaceWrite)}},
		{"read-only base refuses full", level{fs: fsReadOnly, network: true}, &protocol.Sandbox{Filesystem: fsFull}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.filesystem", Reason: looserReason(fsFull, fsReadOnly)}},
		{"read-only base refuses workspace-write", level{fs: fsReadOnly, network: true}, &protocol.Sandbox{Filesystem: fsWorkspaceWrite}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.filesystem", Reason: looserReason(fsWorkspaceWrite, fsReadOnly)}},
		{"network off base refuses it on", level{fs: fsFull, network: false}, &protocol.Sandbox{Network: protocol.NetworkOn()}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.network", Reason: networkOnReason}},
		{"a stricter mode does not excuse the network on", level{fs: fsFull, network: false}, &protocol.Sandbox{Filesystem: fsReadOnly, Network: protocol.NetworkOn()}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.network", Reason: networkOnReason}},
		{"unknown filesystem mode", level{fs: fsFull, network: true}, &protocol.Sandbox{Filesystem: "none"}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.filesystem", Reason: `must be "workspace-write", "read-only" or "full", not "none"`}},
		{"filesystem modes are case-sensitive", level{fs: fsFull, network: true}, &protocol.Sandbox{Filesystem: "Read-Only"}, "sandbox",
			&protocol.ErrorData{Field: "sandbox.filesystem", Reason: `must be "workspace-write", "read-only" or "full", not "Read-Only"`}},
		{"field of a step", level{fs: fsReadOnly, network: false}, &protocol.Sandbox{Filesystem: fsFull}, "steps[2].sandbox",
			&protocol.ErrorData{Field: "steps[2].sandbox.filesystem", Reason: looserReason(fsFull, fsReadOnly)}},
		{"field of initialize", level{fs: fsWorkspaceWrite, network: false}, &protocol.Sandbox{Network: protocol.NetworkOn()}, "initializationOptions.sandbox",
			&protocol.ErrorData{Field: "initializationOptions.sandbox.network", Reason: networkOnReason}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&confinement{}).tighten(tt.base, tt.asked, tt.field)
			checkError(t, err, wantError{is: protocol.ErrInvalidParams, data: tt.want})
		})
	}
}

// TestNarrowLimits checks that a request's limits lower the server's, that
// an absent field (or absent limits) is the server's, and that where the
// server sets none any positive limit is taken.
func TestNarrowLimits(t *testing.T) {
	server := sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}
	tests := []struct {
		name   string
		server sandbox.Limits
		asked  *protocol.Limits
		want   sandbox.Limits
	}{
		{"nil is the server's", server, nil,
			sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}},
		{"empty is the server's", server, &protocol.Limits{},
			sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}},
		{"lower memory, the rest the server's", server, &protocol.Limits{MemoryBytes: ptr[int64](1 << 20)},
			sandbox.Limits{MemoryBytes: 1 << 20, Pids: 100, CPU: 10 * time.Second}},
		{"lower pids, the rest the server's", server, &protocol.Limits{Pids: ptr[int64](1)},
			sandbox.Limits{MemoryBytes: 1 << 30, Pids: 1, CPU: 10 * time.Second}},
		{"lower cpu, the rest the server's", server, &protocol.Limits{CPUMs: ptr[int64](2500)},
			sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 2500 * time.Millisecond}},
		{"every limit lowered", server, &protocol.Limits{MemoryBytes: ptr[int64](4096), Pids: ptr[int64](2), CPUMs: ptr[int64](1)},
			sandbox.Limits{MemoryBytes: 4096, Pids: 2, CPU: time.Millisecond}},
		{"every limit equal to the server's", server, &protocol.Limits{MemoryBytes: ptr[int64](1 << 30), Pids: ptr[int64](100), CPUMs: ptr[int64](10_000)},
			sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}},
		{"none on the server, nil is none", sandbox.Limits{}, nil, sandbox.Limits{}},
		{"none on the server, any positive limit", sandbox.Limits{}, &protocol.Limits{MemoryBytes: ptr[int64](math.MaxInt64), Pids: ptr[int64](1 << 40), CPUMs: ptr[int64](86_400_000)},
			sandbox.Limits{MemoryBytes: math.MaxInt64, Pids: 1 << 40, CPU: 24 * time.Hour}},
		{"none on the server, a cpu limit too long for a Duration saturates", sandbox.Limits{}, &protocol.Limits{CPUMs: ptr[int64](18446744073710)},
			sandbox.Limits{CPU: math.MaxInt64}},
		{"a server cpu limit below a millisecond is kept when cpu is not asked", sandbox.Limits{Pids: 100, CPU: 500 * time.Microsecond}, &protocol.Limits{Pids: ptr[int64](10)},
			sandbox.Limits{Pids: 10, CPU: 500 * time.Microsecond}},
		{"a server cpu limit off the millisecond is kept when cpu is not asked", sandbox.Limits{CPU: 1500500 * time.Microsecond}, &protocol.Limits{Pids: ptr[int64](10)},
			sandbox.Limits{Pids: 10, CPU: 1500500 * time.Microsecond}},
		{"a server cpu limit below a millisecond is not raised by asking a millisecond", sandbox.Limits{CPU: 500 * time.Microsecond}, &protocol.Limits{CPUMs: ptr[int64](1)},
			sandbox.Limits{CPU: 500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{Sandbox: SandboxConfig{Limits: tt.server}}, nil)
			got, err := f.conf.narrowLimits(tt.asked)
			if err != nil {
				t.Fatalf("narrowLimits: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("limits mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNarrowLimitsRejects checks that a limit above the server's, zero or
// negative, is InvalidParams naming the field and the command line flag.
func TestNarrowLimitsRejects(t *testing.T) {
	server := sandbox.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 10 * time.Second}
	raise := func(field string, most int64, flag string) *protocol.ErrorData {
		return &protocol.ErrorData{Field: "limits." + field, Reason: fmt.Sprintf("must be at most %d (%s); a client may lower a limit, never raise it", most, flag)}
	}
	positive := func(field string, v int64) *protocol.ErrorData {
		return &protocol.ErrorData{Field: "limits." + field, Reason: fmt.Sprintf("must be positive, not %d", v)}
	}
	tests := []struct {
		name   string
		server sandbox.Limits
		asked  *protocol.Limits
		want   *protocol.ErrorData
	}{
		{"memory above the server's", server, &protocol.Limits{MemoryBytes: ptr[int64](1<<30 + 1)}, raise("memoryBytes", 1<<30, "--limit-memory")},
		{"pids above the server's", server, &protocol.Limits{Pids: ptr[int64](101)}, raise("pids", 100, "--limit-pids")},
		{"cpu above the server's", server, &protocol.Limits{CPUMs: ptr[int64](10_001)}, raise("cpuMs", 10_000, "--limit-cpu")},
		{"cpu above a server limit below a millisecond", sandbox.Limits{CPU: 500 * time.Microsecond}, &protocol.Limits{CPUMs: ptr[int64](2)}, raise("cpuMs", 1, "--limit-cpu")},
		{"a raise refused though the other limits are lowered", server, &protocol.Limits{MemoryBytes: ptr[int64](1), Pids: ptr[int64](1000)}, raise("pids", 100, "--limit-pids")},
		{"memory zero", server, &protocol.Limits{MemoryBytes: ptr[int64](0)}, positive("memoryBytes", 0)},
		{"pids zero", server, &protocol.Limits{Pids: ptr[int64](0)}, positive("pids", 0)},
		{"cpu zero", server, &protocol.Limits{CPUMs: ptr[int64](0)}, positive("cpuMs", 0)},
		{"memory negative", server, &protocol.Limits{MemoryBytes: ptr[int64](-1)}, positive("memoryBytes", -1)},
		{"pids negative", sandbox.Limits{}, &protocol.Limits{Pids: ptr[int64](-7)}, positive("pids", -7)},
		{"cpu negative", sandbox.Limits{}, &protocol.Limits{CPUMs: ptr[int64](math.MinInt64)}, positive("cpuMs", math.MinInt64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{Sandbox: SandboxConfig{Limits: tt.server}}, nil)
			_, err := f.conf.narrowLimits(tt.asked)
			checkError(t, err, wantError{is: protocol.ErrInvalidParams, data: tt.want})
		})
	}
}
