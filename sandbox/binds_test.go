package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bindCaps are the capabilities of a root server on a recent kernel.
var bindCaps = Capabilities{
	LandlockABI: 7, NetNS: NetNSUnshare, MountNS: true, Seccomp: true, CapDrop: true,
	CPULimit: true, PtraceStop: true, PIDNS: true, PIDNSProc: true, Masks: true,
}

// TestPlanPolicyBinds checks what plan makes of the policy's binds: the
// binds and their access in each mode, Landlock's rules for the writable
// ones, the paths kept read-only in a writable bind, and the report.
func TestPlanPolicyBinds(t *testing.T) {
	p := Policy{
		Network: true, Root: "/ws", TempDir: "/var/t/cmd",
		Protect:   []string{"/ws/data/.git/hooks", "/src/repo/.git/hooks", "/ws/.git/hooks"},
		ReadRoots: []string{"/src/repo/vendor"},
		DenyRead:  []string{"/src/repo/secret"},
		Binds: []Bind{
			{Source: "/src/bucket", Target: "/ws/data", Writable: true},
			{Source: "/src/repo", Target: "/opt/repo", Writable: true},
			{Source: "/src/ref", Target: "/opt/ref"},
		},
	}
	ly, rep, err := plan(p, Limits{}, bindCaps)
	if err != nil {
		t.Fatal(err)
	}
	want := []sourceBind{
		{source: "/src/bucket", target: "/ws/data", writable: true, protects: []string{"/ws/data/.git/hooks"}},
		{source: "/src/repo", target: "/opt/repo", writable: true, keep: []string{"/src/repo/.git/hooks", "/src/repo/vendor"}},
		{source: "/src/ref", target: "/opt/ref"},
	}
	if diff := cmp.Diff(want, ly.sources, cmp.AllowUnexported(sourceBind{})); diff != "" {
		t.Errorf("sources: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/src/bucket", "/src/repo"}, ly.bindRules); diff != "" {
		t.Errorf("Landlock's rules: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/ws/data:rw", "/opt/repo:rw", "/opt/ref:ro"}, rep.Binds); diff != "" {
		t.Errorf("report's binds: mismatch (-want +got):\n%s", diff)
	}
	if !ly.mntns || rep.EnforcedBy != "landlock-abi-7+mntns+pidns+capdrop" {
		t.Errorf("mntns %v, enforced by %q", ly.mntns, rep.EnforcedBy)
	}

	p.Filesystem = ReadOnly
	ly, rep, err = plan(p, Limits{}, bindCaps)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/ws/data:ro", "/opt/repo:ro", "/opt/ref:ro"}, rep.Binds); diff != "" {
		t.Errorf("read-only mode: report's binds: mismatch (-want +got):\n%s", diff)
	}
	if len(ly.bindRules) != 0 || ly.sources[0].writable || ly.sources[0].protects != nil {
		t.Errorf("read-only mode: rules %q, sources %+v; want every bind read-only", ly.bindRules, ly.sources)
	}

	p.Filesystem = Full
	ly, rep, err = plan(p, Limits{}, bindCaps)
	if err != nil {
		t.Fatal(err)
	}
	if !ly.fsGrantAll || len(ly.bindRules) != 0 || rep.Binds[0] != "/ws/data:rw" || rep.EnforcedBy != "landlock-abi-7+mntns+pidns" {
		t.Errorf("full mode: grant all %v, rules %q, report %+v; want Landlock granting everything, keeping the binds in place", ly.fsGrantAll, ly.bindRules, rep)
	}
}

// TestPlanBindsUnavailable checks that binds no mount namespace (or, to
// keep them in place, no Landlock) can make are refused whatever Require
// says, and that nothing is claimed.
func TestPlanBindsUnavailable(t *testing.T) {
	p := Policy{Network: true, Root: "/ws", Binds: []Bind{{Source: "/src", Target: "/ws/a"}, {Source: "/src", Target: "/opt/b", Writable: true}}}
	for _, tc := range []struct {
		name string
		caps func(Capabilities) Capabilities
		want string
	}{
		{"no mount namespace", func(c Capabilities) Capabilities {
			c.MountNS, c.Reasons = false, map[string]string{"mountns": "no mount namespace: EPERM"}
			return c
		}, "the binds on /ws/a, /opt/b: no mount namespace: EPERM"},
		{"no Landlock", func(c Capabilities) Capabilities {
			c.LandlockABI, c.Reasons = 0, map[string]string{"landlock": "no Landlock: ENOSYS"}
			return c
		}, "the binds on /ws/a, /opt/b: no Landlock: ENOSYS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ly, rep, err := plan(p, Limits{}, tc.caps(bindCaps))
			var ue *UnavailableError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan: %v, want it missing %q", err, tc.want)
			}
			var re *UnavailableError
			if err := ly.refusal(); !errors.As(err, &re) || !cmp.Equal(re.Missing, []string{tc.want}) {
				t.Errorf("refusal: %v, want %q whatever Require says", err, tc.want)
			}
			if len(rep.Binds) != 0 || len(ly.sources) != 0 {
				t.Errorf("report %+v, sources %+v; want no bind claimed", rep, ly.sources)
			}
		})
	}
	if err := (layers{}).refusal(); err != nil {
		t.Errorf("refusal of a plan without binds: %v", err)
	}
}

// TestPlanHoldingMasks checks the masks of denied directories that hold
// directories the command uses or bind targets: what each shows again,
// deepest first, and that the directories between are not masked twice.
func TestPlanHoldingMasks(t *testing.T) {
	p := Policy{
		Network: true, Root: "/home/u/ws", TempDir: "/var/t/cmd", CacheDir: "/home/u/.state/caches/abc",
		ReadRoots: []string{"/home/u/ws/vendor", "/home/u/ref"},
		DenyRead:  []string{"/home/u/.state", "/home/u", "/home/u/.ssh", "/home/u/ws/.env"},
		Binds: []Bind{
			{Source: "/srv/bucket", Target: "/home/u/.state/mounts/m1"},
			{Source: "/srv/other", Target: "/home/u/ws/data"},
			{Source: "/srv/third", Target: "/home/u/mnt", Writable: true},
		},
	}
	ly, rep, err := plan(p, Limits{}, bindCaps)
	if err != nil {
		t.Fatal(err)
	}
	want := []holdingMask{
		{path: "/home/u/.state", dirs: []string{"/home/u/.state/caches/abc"}, targets: []string{"/home/u/.state/mounts/m1"}},
		{path: "/home/u", dirs: []string{"/home/u/.state/caches/abc", "/home/u/ref", "/home/u/ws"}, targets: []string{"/home/u/.state/mounts/m1", "/home/u/mnt"}},
	}
	if diff := cmp.Diff(want, ly.holding, cmp.AllowUnexported(holdingMask{})); diff != "" {
		t.Errorf("holding masks: mismatch (-want +got):\n%s", diff)
	}
	var masks []string
	for _, b := range ly.binds {
		if b.kind == bindMask {
			masks = append(masks, b.path)
		}
	}
	if diff := cmp.Diff([]string{"/home/u/.ssh", "/home/u/ws/.env"}, masks); diff != "" {
		t.Errorf("plain masks: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/home/u/.state", "/home/u", "/home/u/.ssh", "/home/u/ws/.env"}, rep.DenyRead); diff != "" {
		t.Errorf("report's denyRead: mismatch (-want +got):\n%s", diff)
	}
	if !ly.maskDevices {
		t.Errorf("block devices are not masked along with the denied paths")
	}
}

// TestPlanBindsInHostTmp checks that the private /tmp carries the bind
// targets in the host's /tmp (with their sources), and that a source
// holding /tmp costs the private /tmp, the report saying why.
func TestPlanBindsInHostTmp(t *testing.T) {
	p := Policy{Network: true, Root: "/tmp/w/root", TempDir: "/var/t/cmd", Binds: []Bind{
		{Source: "/srv/a", Target: "/tmp/mnt/a"}, {Source: "/tmp/src", Target: "/tmp/w/root/b"}, {Source: "/srv/c", Target: "/opt/c"},
	}}
	ly, _, err := plan(p, Limits{}, bindCaps)
	if err != nil {
		t.Fatal(err)
	}
	want := &tmpPlan{src: "/var/t/cmd", carry: []string{"/tmp/mnt/a", "/tmp/w/root"}, binds: map[string]string{"/tmp/mnt/a": "/srv/a"}}
	if diff := cmp.Diff(want, ly.tmp, cmp.AllowUnexported(tmpPlan{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	p.Binds = append(p.Binds, Bind{Source: "/", Target: "/opt/host"})
	ly, rep, _ := plan(p, Limits{}, bindCaps)
	if ly.tmp != nil || !strings.Contains(strings.Join(rep.NotEnforced, "\n"), "a private /tmp (the host's /tmp stays visible, and read-only but for TMPDIR): / holds it") {
		t.Errorf("a source of / got %+v, report %q; want no private /tmp, and the report saying why", ly.tmp, rep.NotEnforced)
	}
}

// TestPlanBindErrors checks the binds plan refuses as policy errors.
func TestPlanBindErrors(t *testing.T) {
	base := Policy{Root: "/ws", TempDir: "/var/t/cmd", CacheDir: "/c", ReadRoots: []string{"/ws/vendor"}, Protect: []string{"/ws/.git/hooks"}, DenyRead: []string{"/home/u", "/s"}}
	for _, tc := range []struct {
		name  string
		mode  Filesystem
		binds []Bind
		want  string // "" for none
	}{
		{"relative source", WorkspaceWrite, []Bind{{Source: "src", Target: "/opt/x"}}, `path "src" is not absolute`},
		{"no target", WorkspaceWrite, []Bind{{Source: "/src"}}, "a source and a target are needed"},
		{"target /", WorkspaceWrite, []Bind{{Source: "/src", Target: "/"}}, "the target is /"},
		{"same target twice", WorkspaceWrite, []Bind{{Source: "/a", Target: "/opt/x"}, {Source: "/b", Target: "/opt/x/"}}, "overlaps the target /opt/x"},
		{"nested targets", WorkspaceWrite, []Bind{{Source: "/a", Target: "/opt/x/y"}, {Source: "/b", Target: "/opt/x"}}, "overlaps the target /opt/x/y"},
		{"target holding the cache", WorkspaceWrite, []Bind{{Source: "/a", Target: "/c"}}, "the target holds /c, which the command uses"},
		{"target holding a read root", WorkspaceWrite, []Bind{{Source: "/a", Target: "/ws/vendor"}}, "the target holds /ws/vendor"},
		{"writable target in a read root", WorkspaceWrite, []Bind{{Source: "/a", Target: "/ws/vendor/x", Writable: true}}, "a writable target in /ws/vendor, which is never written"},
		{"read-only target in a read root", WorkspaceWrite, []Bind{{Source: "/a", Target: "/ws/vendor/x"}}, ""},
		{"writable target in a read-only mode's protected path", ReadOnly, []Bind{{Source: "/a", Target: "/ws/.git/hooks/x", Writable: true}}, ""},
		{"writable source a protected path", WorkspaceWrite, []Bind{{Source: "/ws/.git/hooks", Target: "/opt/x", Writable: true}}, "a writable source in /ws/.git/hooks"},
		{"source in a denied path", WorkspaceWrite, []Bind{{Source: "/home/u/.ssh", Target: "/opt/x"}}, "the source lies in the denied path /home/u"},
		{"source a denied path", WorkspaceWrite, []Bind{{Source: "/s", Target: "/opt/x"}}, "the source lies in the denied path /s"},
		{"source in the root, in a denied path", WorkspaceWrite, []Bind{{Source: "/home/u/ws2/x", Target: "/opt/x"}}, "the source lies in the denied path /home/u"},
		{"source holding a denied path", WorkspaceWrite, []Bind{{Source: "/", Target: "/opt/x"}}, ""},
		{"target in a denied path", WorkspaceWrite, []Bind{{Source: "/a", Target: "/home/u/mnt", Writable: true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.Filesystem, p.Binds = tc.mode, tc.binds
			_, err := Plan(p, Limits{}, bindCaps)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Plan: %v, want none", err)
			case tc.want != "" && (err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Plan: %v, want a policy error saying %q", err, tc.want)
			}
		})
	}
	// A source in a directory the command uses, in a denied directory,
	// stays in its sight.
	p := base
	p.Root = "/home/u/ws"
	p.Binds = []Bind{{Source: "/home/u/ws/sub", Target: "/opt/x"}}
	if _, err := Plan(p, Limits{}, bindCaps); err != nil {
		t.Errorf("a source in the root, in a denied directory: %v", err)
	}
}
