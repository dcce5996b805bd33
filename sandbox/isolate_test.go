package sandbox

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlanIsolation checks what Plan promises about what lies outside the
// sandbox: processes (a PID namespace), pathname unix sockets (by Landlock
// ABI), protected and denied paths; and what it refuses.
func TestPlanIsolation(t *testing.T) {
	all := Capabilities{
		LandlockABI: 7, NetNS: NetNSUnshare, MountNS: true, Seccomp: true, CapDrop: true,
		CPULimit: true, PtraceStop: true, PIDNS: true, PIDNSProc: true, Masks: true,
	}
	ws := Policy{Network: true, Root: "/ws", TempDir: "/tmp/cmd"}
	off := ws
	off.Network = false
	secrets := ws
	secrets.Protect = []string{"/ws/.git/hooks", "/ws/.git/config", "/etc/hosts"}
	secrets.DenyRead = []string{"/home/u/.ssh", "/home/u/.netrc"}
	asksPIDs := ws
	asksPIDs.IsolatePIDs = true
	for _, tc := range []struct {
		name    string
		policy  Policy
		caps    func(Capabilities) Capabilities
		want    Report
		missing []string
	}{{
		name:   "processes: a PID namespace and its /proc",
		policy: asksPIDs,
		caps:   func(c Capabilities) Capabilities { return c },
		want:   Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop"},
	}, {
		name:   "processes: no PID namespace, not asked",
		policy: ws,
		caps: func(c Capabilities) Capabilities {
			c.PIDNS, c.Reasons = false, map[string]string{"pidns": "no PID namespace: EPERM"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+capdrop", NotEnforced: []string{
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace: EPERM",
		}},
	}, {
		name:   "processes: no PID namespace, asked",
		policy: asksPIDs,
		caps: func(c Capabilities) Capabilities {
			c.PIDNS, c.Reasons = false, map[string]string{"pidns": "no PID namespace: EPERM"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+capdrop", NotEnforced: []string{
			"a PID namespace of its own: no PID namespace: EPERM",
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace: EPERM",
		}},
		missing: []string{"a PID namespace of its own: no PID namespace: EPERM"},
	}, {
		name:   "processes: a kernel whose procfs takes no pidns",
		policy: asksPIDs,
		caps: func(c Capabilities) Capabilities {
			c.PIDNSProc, c.Reasons = false, map[string]string{"proc": "no /proc of a PID namespace: fsconfig pidns: EINVAL"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop", NotEnforced: []string{
			"a /proc of its own PID namespace: no /proc of a PID namespace: fsconfig pidns: EINVAL",
			"/proc/<pid> of processes outside the sandbox (the PID namespace has no /proc of its own): no /proc of a PID namespace: fsconfig pidns: EINVAL",
		}},
		missing: []string{"a /proc of its own PID namespace: no /proc of a PID namespace: fsconfig pidns: EINVAL"},
	}, {
		name:   "unix sockets: Landlock ABI 9",
		policy: off,
		caps:   func(c Capabilities) Capabilities { c.LandlockABI = 9; return c },
		want:   Report{Filesystem: WorkspaceWrite, Network: false, EnforcedBy: "landlock-abi-9+mntns+pidns+netns+capdrop"},
	}, {
		name:   "unix sockets: seccomp below ABI 9",
		policy: off,
		caps:   func(c Capabilities) Capabilities { return c },
		want:   Report{Filesystem: WorkspaceWrite, Network: false, EnforcedBy: "landlock-abi-7+mntns+pidns+netns+seccomp-unix+capdrop"},
	}, {
		name:   "unix sockets: full mode writes everywhere",
		policy: Policy{Filesystem: Full},
		caps:   func(c Capabilities) Capabilities { return c },
		want:   Report{Filesystem: Full, Network: false, EnforcedBy: "landlock-abi-7+mntns+pidns+netns"},
	}, {
		name:   "protected and denied paths",
		policy: secrets,
		caps:   func(c Capabilities) Capabilities { return c },
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop",
			Protect:  []string{"/ws/.git/hooks", "/ws/.git/config", "/etc/hosts"},
			DenyRead: []string{"/home/u/.ssh", "/home/u/.netrc"}},
	}, {
		name:   "protected and denied paths without a mount namespace",
		policy: secrets,
		caps: func(c Capabilities) Capabilities {
			c.MountNS, c.PIDNS, c.Masks, c.CapDrop = false, false, false, false
			c.Reasons = map[string]string{"mountns": "no mount namespace: EPERM", "pidns": "no PID namespace: EPERM"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7",
			NotEnforced: []string{
				"protected path /ws/.git/hooks stays writable: no mount namespace: EPERM",
				"protected path /ws/.git/config stays writable: no mount namespace: EPERM",
				"denied path /home/u/.ssh stays readable: no mount namespace: EPERM",
				"denied path /home/u/.netrc stays readable: no mount namespace: EPERM",
				"metadata outside the writable directories (chmod, chown, utimensat, setxattr): Landlock does not cover it and no mount namespace: EPERM",
				"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace: EPERM",
				"a private /tmp (the host's /tmp stays visible, and read-only but for TMPDIR): no mount namespace: EPERM",
			},
			Protect: []string{"/etc/hosts"}},
		missing: []string{
			"protected path /ws/.git/hooks stays writable: no mount namespace: EPERM",
			"protected path /ws/.git/config stays writable: no mount namespace: EPERM",
			"denied path /home/u/.ssh stays readable: no mount namespace: EPERM",
			"denied path /home/u/.netrc stays readable: no mount namespace: EPERM",
		},
	}, {
		name:   "a denied path that holds the root: masked, the root shown again",
		policy: Policy{Network: true, Root: "/home/u/ws", DenyRead: []string{"/home/u"}},
		caps:   func(c Capabilities) Capabilities { return c },
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop",
			DenyRead: []string{"/home/u"}},
	}, {
		name:   "a denied path that holds the root, without a mount namespace",
		policy: Policy{Network: true, Root: "/home/u/ws", DenyRead: []string{"/home/u"}},
		caps: func(c Capabilities) Capabilities {
			c.MountNS, c.PIDNS, c.Masks, c.CapDrop = false, false, false, false
			c.Reasons = map[string]string{"mountns": "no mount namespace: EPERM", "pidns": "no PID namespace: EPERM"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7", NotEnforced: []string{
			"denied path /home/u stays readable: no mount namespace: EPERM",
			"metadata outside the writable directories (chmod, chown, utimensat, setxattr): Landlock does not cover it and no mount namespace: EPERM",
			"processes outside the sandbox are visible: their /proc/<pid>, and setpriority (renice) of them: no PID namespace: EPERM",
		}},
		missing: []string{"denied path /home/u stays readable: no mount namespace: EPERM"},
	}, {
		name:   "a denied path that is the root",
		policy: Policy{Network: true, Root: "/home/u/ws", DenyRead: []string{"/home/u/ws"}},
		caps:   func(c Capabilities) Capabilities { return c },
		want: Report{Filesystem: WorkspaceWrite, Network: true, EnforcedBy: "landlock-abi-7+mntns+pidns+capdrop", NotEnforced: []string{
			"denied path /home/u/ws stays readable: the command uses it",
		}},
		missing: []string{"denied path /home/u/ws stays readable: the command uses it"},
	}, {
		name:   "full mode: Landlock keeps the masks in place",
		policy: Policy{Filesystem: Full, Network: true, Protect: []string{"/ws/.git/hooks"}, DenyRead: []string{"/home/u/.ssh"}},
		caps:   func(c Capabilities) Capabilities { c.LandlockABI = 5; return c },
		want: Report{Filesystem: Full, Network: true, EnforcedBy: "landlock-abi-5+mntns+pidns",
			NotEnforced: []string{"signals to, and abstract unix sockets of, processes outside the sandbox (Landlock ABI < 6)"},
			Protect:     []string{"/ws/.git/hooks"}, DenyRead: []string{"/home/u/.ssh"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.policy, Limits{}, tc.caps(all))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			var missing []string
			var ue *UnavailableError
			if errors.As(err, &ue) {
				missing = ue.Missing
			} else if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if diff := cmp.Diff(tc.missing, missing); diff != "" {
				t.Errorf("missing: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanProtectBinds checks the binds of protected and denied paths:
// after the writable directories, each directory between a writable one
// and a protected path pinned, then the protected paths read-only, the
// denied ones masked; a read root nested deeper gets its pins too.
func TestPlanProtectBinds(t *testing.T) {
	p := Policy{
		Network: true, Root: "/ws", TempDir: "/tmp/cmd",
		ReadRoots: []string{"/ws/third_party/vendor"},
		Protect:   []string{"/ws/.git/hooks", "/ws/.git/config", "/ws/.git"},
		DenyRead:  []string{"/ws/.env", "/home/u/.ssh"},
	}
	ly, _, err := plan(p, Limits{}, Capabilities{LandlockABI: 7, MountNS: true, Masks: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []bind{
		{path: "/ws", kind: bindWritable},
		{path: "/tmp/cmd", kind: bindWritable},
		{path: "/ws/.env", kind: bindMask},
		{path: "/ws/.git", kind: bindReadOnly},
		{path: "/ws/third_party", kind: bindPin},
		{path: "/home/u/.ssh", kind: bindMask},
		{path: "/ws/.git/config", kind: bindReadOnly},
		{path: "/ws/.git/hooks", kind: bindReadOnly},
		{path: "/ws/third_party/vendor", kind: bindReadOnly},
	}
	if diff := cmp.Diff(want, ly.binds, cmp.AllowUnexported(bind{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if !ly.maskDevices {
		t.Errorf("block devices are not masked along with the denied paths")
	}
}
