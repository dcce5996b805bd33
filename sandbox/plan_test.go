package sandbox

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlan checks what Plan promises for each kind of kernel: the layers,
// the degradation per Landlock ABI, the gaps it owns up to and what it
// refuses.
func TestPlan(t *testing.T) {
	full := Capabilities{
		LandlockABI: 7, NetNS: NetNSUnshare, MountNS: true, Seccomp: true, CapDrop: true,
		CPULimit: true, PtraceStop: true, PIDNS: true, PIDNSProc: true, Masks: true,
		Pids: Controller{Version: 1, Parent: "/sys/fs/cgroup/pids"}, Memory: Controller{Version: 1, Parent: "/sys/fs/cgroup/memory"},
	}
	ws := Policy{Root: "/ws", TempDir: "/tmp/cmd", CacheDir: "/cache"}
	wsOff := ws
	wsOff.Network = false
	wsOn := ws
	wsOn.Network = true
	limits := Limits{MemoryBytes: 1 << 30, Pids: 256, CPU: 1500e6}
	for _, tc := range []struct {
		name    string
		policy  Policy
		limits  Limits
		caps    func(Capabilities) Capabilities
		want    Report
		missing []string
	}{{
		name:   "every layer",
		policy: wsOff, limits: limits,
		caps: func(c Capabilities) Capabilities { return c },
		want: Report{Filesystem: WorkspaceWrite, Network: false, EnforcedBy: "landlock-abi-7+mntns+pidns+netns+seccomp-unix+capdrop",
			Limits: map[Limit]string{LimitMemory: "cgroup-v1", LimitPids: "cgroup-v1", LimitCPU: "rlimit"}},
	}, {
		name:   "a newer kernel gets the rights of ABI 9",
		policy: wsOn,
		caps:   func(c Capabilities) Capabilities { c.LandlockABI = 12; c.CapDrop = false; return c },
		want:   Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-9+mntns+pidns"},
	}, {
		name:   "ABI 3 without namespaces, with seccomp",
		policy: wsOff,
		caps: func(c Capabilities) Capabilities {
			c.LandlockABI, c.MountNS, c.NetNS, c.CapDrop, c.PIDNS, c.PIDNSProc, c.Masks = 3, false, NetNSNone, false, false, false, false
			c.Reasons = map[string]string{"mountns": "no mount namespace: not root", "pidns": "no PID namespace: not root"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: false, EnforcedBy: "landlock-abi-3+seccomp+seccomp-unix", NotEnforced: []string{
			"ioctl on devices (Landlock ABI < 5)",
			"metadata outside the writable directories (chmod, chown, utimensat, setxattr): Landlock does not cover it and no mount namespace: not root",
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace: not root",
			"a private /tmp (the host's /tmp stays visible, and read-only but for TMPDIR): no mount namespace: not root",
			"signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)",
		}},
	}, {
		name:   "ABI 2: no truncate",
		policy: wsOn,
		caps:   func(c Capabilities) Capabilities { c.LandlockABI, c.CapDrop = 2, false; return c },
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-2+mntns+pidns", NotEnforced: []string{
			"truncating files outside the writable directories (Landlock ABI < 3)",
			"ioctl on devices (Landlock ABI < 5)",
			"signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)",
		}},
	}, {
		name:   "TCP alone is not the network off",
		policy: wsOff,
		caps: func(c Capabilities) Capabilities {
			c.NetNS, c.Seccomp = NetNSNone, false
			c.Reasons = map[string]string{"netns": "no network namespace: EPERM", "seccomp": "no seccomp: ENOSYS"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop", NotEnforced: []string{
			"UDP cut off: no network namespace: EPERM, no seccomp: ENOSYS",
			"pathname unix sockets outside the writable directories cut off: Landlock ABI < 9, no seccomp: ENOSYS",
			"UDP and raw sockets (only TCP is denied, by Landlock)",
		}},
		missing: []string{
			"UDP cut off: no network namespace: EPERM, no seccomp: ENOSYS",
			"pathname unix sockets outside the writable directories cut off: Landlock ABI < 9, no seccomp: ENOSYS",
		},
	}, {
		name:   "a user namespace needs the stop at exec",
		policy: wsOff,
		caps: func(c Capabilities) Capabilities {
			c.NetNS, c.PtraceStop, c.Seccomp = NetNSUserNS, false, false
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop", NotEnforced: []string{
			"UDP cut off: no network namespace, no seccomp",
			"pathname unix sockets outside the writable directories cut off: Landlock ABI < 9, no seccomp",
			"UDP and raw sockets (only TCP is denied, by Landlock)",
		}},
		missing: []string{
			"UDP cut off: no network namespace, no seccomp",
			"pathname unix sockets outside the writable directories cut off: Landlock ABI < 9, no seccomp",
		},
	}, {
		name:   "no Landlock, full mode",
		policy: Policy{Filesystem: Full, Network: true},
		caps:   func(Capabilities) Capabilities { return Capabilities{} },
		want: Report{Filesystem: Full, Network: true, NotEnforced: []string{
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace can be made",
			"signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)",
		}},
	}, {
		name:   "no Landlock, workspace-write",
		policy: wsOn,
		caps: func(Capabilities) Capabilities {
			return Capabilities{Reasons: map[string]string{"landlock": "no Landlock: disabled at boot"}}
		},
		want: Report{Filesystem: Full, Network: true, NotEnforced: []string{
			"filesystem confinement: no Landlock: disabled at boot",
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace can be made",
			"signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)",
		}},
		missing: []string{"filesystem confinement: no Landlock: disabled at boot"},
	}, {
		name:   "full mode keeps read roots read-only",
		policy: Policy{Filesystem: Full, Network: true, ReadRoots: []string{"/ref"}},
		caps:   func(c Capabilities) Capabilities { return c },
		want:   Report{Filesystem: Full, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns"},
	}, {
		name:   "read-only mode, cpu limit without ptrace, no cgroups",
		policy: Policy{Filesystem: ReadOnly, Network: true, Root: "/ws", TempDir: "/tmp/cmd"}, limits: limits,
		caps: func(c Capabilities) Capabilities {
			c.PtraceStop, c.Pids, c.Memory = false, Controller{}, Controller{}
			c.Reasons = map[string]string{"ptrace": "ptrace_scope 3", "memory": "no memory controller"}
			return c
		},
		want: Report{Filesystem: ReadOnly, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop",
			Limits: map[Limit]string{LimitCPU: "rlimit"},
			NotEnforced: []string{
				"memory limit: no memory controller",
				"pids limit: no cgroup pids controller",
				"cpu limit for processes forked before it was set, right after exec: ptrace_scope 3",
			}},
		missing: []string{"memory limit: no memory controller", "pids limit: no cgroup pids controller"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.policy, tc.limits, tc.caps(full))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			var missing []string
			var ue *UnavailableError
			if errors.As(err, &ue) {
				missing = ue.Missing
				if !errors.Is(err, ErrUnavailable) {
					t.Errorf("%v does not wrap ErrUnavailable", err)
				}
			} else if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if diff := cmp.Diff(tc.missing, missing); diff != "" {
				t.Errorf("missing: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanBinds checks the mount namespace's binds: writable directories
// read-write, read roots inside them read-only and on top, read roots
// elsewhere left to the read-only remount.
func TestPlanBinds(t *testing.T) {
	p := Policy{Network: true, Root: "/ws", TempDir: "/tmp/cmd", Writable: []string{"/ws/out"}, ReadRoots: []string{"/ws/vendor", "/ref", "/ws"}}
	ly, _, err := plan(p, Limits{}, Capabilities{LandlockABI: 7, MountNS: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []bind{{path: "/ws"}, {path: "/ws", kind: bindReadOnly}, {path: "/tmp/cmd"}, {path: "/ws/out"}, {path: "/ws/vendor", kind: bindReadOnly}}
	if diff := cmp.Diff(want, ly.binds, cmp.AllowUnexported(bind{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if !ly.roRoot || ly.fsGrantAll {
		t.Errorf("roRoot %v, fsGrantAll %v; want true, false", ly.roRoot, ly.fsGrantAll)
	}
}

// TestPlanRejects checks that a malformed policy is an error, not
// ErrUnavailable.
func TestPlanRejects(t *testing.T) {
	for _, p := range []Policy{
		{Filesystem: "everything"},
		{Root: "relative/path"},
		{ReadRoots: []string{"ref"}},
	} {
		_, err := Plan(p, Limits{}, Capabilities{LandlockABI: 7})
		if err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("Plan(%+v): %v, want a policy error", p, err)
		}
	}
}
