package sandbox

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlanProxy checks what Plan promises for the proxy option: a network
// namespace made by unshare with the proxy in it and Landlock leaving TCP
// alone; Landlock's TCP rights kept where nothing else makes a Landlock
// domain; the network off, never on, where no such namespace can be made;
// and a policy error with the network on.
func TestPlanProxy(t *testing.T) {
	full := Capabilities{LandlockABI: 7, NetNS: NetNSUnshare, MountNS: true, Seccomp: true, CapDrop: true, PtraceStop: true, PIDNS: true, PIDNSProc: true}
	ws := Policy{Root: "/ws", TempDir: "/tmp/cmd", Proxy: true}
	type layer struct{ Proxy, NetTCP bool }
	for _, tc := range []struct {
		name    string
		policy  Policy
		caps    func(Capabilities) Capabilities
		want    Report
		layer   layer
		missing []string
	}{{
		name:   "every layer",
		policy: ws,
		caps:   func(c Capabilities) Capabilities { return c },
		want:   Report{Filesystem: WorkspaceWrite, Proxy: true, EnforcedBy: "landlock-abi-7+mntns+pidns+netns+proxy+seccomp-unix+capdrop"},
		layer:  layer{Proxy: true},
	}, {
		name:   "full mode on ABI 4: in a Landlock domain already (for the PID namespace), TCP is left to the namespace",
		policy: Policy{Filesystem: Full, Proxy: true},
		caps:   func(c Capabilities) Capabilities { c.LandlockABI = 4; return c },
		want: Report{Filesystem: Full, Proxy: true, EnforcedBy: "landlock-abi-4+mntns+pidns+netns+proxy", NotEnforced: []string{
			"signals to processes outside the sandbox (Landlock ABI < 6; abstract unix sockets are cut off by the network namespace)",
		}},
		layer: layer{Proxy: true},
	}, {
		name:   "a user namespace cannot host the listener: the network is off",
		policy: ws,
		caps:   func(c Capabilities) Capabilities { c.NetNS = NetNSUserNS; return c },
		want: Report{Filesystem: WorkspaceWrite, EnforcedBy: "landlock-abi-7+mntns+pidns+userns-netns+seccomp-unix+capdrop", NotEnforced: []string{
			"network allow-list (a proxy in a network namespace of its own): the network namespace is a user namespace's, made at the fork, where the server cannot listen; the network is off instead",
		}},
		layer:   layer{NetTCP: true},
		missing: []string{"network allow-list (a proxy in a network namespace of its own): the network namespace is a user namespace's, made at the fork, where the server cannot listen; the network is off instead"},
	}, {
		name:   "no network namespace: seccomp cuts the network off",
		policy: ws,
		caps: func(c Capabilities) Capabilities {
			c.NetNS = NetNSNone
			c.Reasons = map[string]string{"netns": "no network namespace: EPERM"}
			return c
		},
		want: Report{Filesystem: WorkspaceWrite, EnforcedBy: "landlock-abi-7+mntns+pidns+seccomp+seccomp-unix+capdrop", NotEnforced: []string{
			"network allow-list (a proxy in a network namespace of its own): no network namespace: EPERM; the network is off instead",
		}},
		layer:   layer{NetTCP: true},
		missing: []string{"network allow-list (a proxy in a network namespace of its own): no network namespace: EPERM; the network is off instead"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ly, got, err := plan(tc.policy, Limits{}, tc.caps(full))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.layer, layer{ly.proxy, ly.netTCP}); diff != "" {
				t.Errorf("layers mismatch (-want +got):\n%s", diff)
			}
			var missing []string
			var ue *UnavailableError
			if errors.As(err, &ue) {
				missing = ue.Missing
			} else if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if diff := cmp.Diff(tc.missing, missing); diff != "" {
				t.Errorf("missing: mismatch (-want +got):\n%s", diff)
			}
		})
	}
	_, err := Plan(Policy{Network: true, Proxy: true}, Limits{}, full)
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Plan with the network on and the proxy: %v, want a policy error", err)
	}
}
