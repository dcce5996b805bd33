package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/internal/dockertest"
	"github.com/toolhost/toolhost/protocol"
)

// TestDockerDestination drives a destination in a real container through
// the binary under test: --destination box=docker … exec -i NAME toolhost
// --root /ws, on a dockerd of the fixture's own (package dockertest; it
// skips without Docker, or fails with CI set). One dockerd and one
// container serve the subtests, each with a hub of its own. The container
// holds a static toolhost (built here with CGO_ENABLED=0: the -race binary
// needs cgo), busybox and nothing else, and has no network.
func TestDockerDestination(t *testing.T) {
	t.Parallel()
	d := dockertest.Start(t)
	c := d.Run(t, d.Image(t, dockertest.BuildToolhost(t, "..")))
	box := dest{Name: "box", Argv: c.ToolhostArgv(), Root: dockertest.Workspace}

	t.Run("RunsInTheContainer", func(t *testing.T) { dockerRuns(t, c, box) })
	t.Run("Files", func(t *testing.T) { dockerFiles(t, c, box) })
	t.Run("Cancel", func(t *testing.T) { dockerCancel(t, c, box) })
	t.Run("SandboxReport", func(t *testing.T) { dockerSandbox(t, c, box) })
}

// dockerRuns runs a command on the destination: it runs in the
// container's workspace, where the hostname is the container's name and
// the image's marker file is there, which the hub's machine has not; the
// transport is the one docker client TransportPIDs finds under the hub,
// and destinations {} shows the destination ready on /ws with the same
// server.
func dockerRuns(t *testing.T, c *dockertest.Container, box dest) {
	s := startHub(t, []dest{box})
	ir := s.initialize(nil)

	script := "pwd; hostname; cat " + dockertest.MarkerFile
	res := s.run(map[string]any{"destination": box.Name, "argv": []string{"sh", "-c", script}})
	if res.Status != protocol.StatusCompleted || !res.Success {
		t.Fatalf("runCommand on %s: %s (exit %v) stderr %q", box.Name, res.Status, res.ExitCode, res.Stderr)
	}
	if diff := cmp.Diff(dockertest.Workspace+"\n"+c.Name+"\n"+dockertest.MarkerContent, res.Stdout); diff != "" {
		t.Errorf("runCommand on %s: stdout mismatch (-want +got):\n%s", box.Name, diff)
	}
	// The same command on the hub's own machine: no marker file there.
	if here := s.run(map[string]any{"argv": []string{"sh", "-c", "test -e " + dockertest.MarkerFile}}); here.Success {
		t.Errorf("the hub's machine has %s too: the check above proves nothing", dockertest.MarkerFile)
	}

	// The link: one docker client, the hub's child, and a toolhost on /ws
	// in the container.
	if got := c.TransportPIDs(s.cmd.Process.Pid); len(got) != 1 {
		t.Errorf("TransportPIDs(the hub %d): %v, want its one docker client", s.cmd.Process.Pid, got)
	}
	if !slices.ContainsFunc(c.Procs(t), func(p dockertest.Proc) bool {
		return slices.Equal(p.Argv, []string{dockertest.ToolhostPath, "--root", dockertest.Workspace})
	}) {
		t.Errorf("no far toolhost on %s among the container's processes: %+v", dockertest.Workspace, c.Procs(t))
	}

	want := protocol.DestinationInfo{Name: box.Name, State: protocol.DestinationReady, Command: box.Argv, Root: box.Root, ServerInfo: &ir.ServerInfo}
	if diff := cmp.Diff(want, destinationNamed(t, s.destinations(), box.Name), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("destinations after use mismatch (-want +got):\n%s", diff)
	}
	s.shutdown()
}

// dockerFiles writes a file on the destination, which lands in the
// container's /ws (and not in the hub's root), reads it back, reads a
// file the container made itself, and is refused paths outside /ws.
func dockerFiles(t *testing.T, c *dockertest.Container, box dest) {
	s := startHub(t, []dest{box})
	s.initialize(nil)
	dir := "files-" + filepath.Base(s.root) // the container's /ws outlives this hub

	const content = "written into the container\n"
	var w protocol.WriteFileResult
	s.mustCall("writeFile", map[string]any{"destination": box.Name, "path": dir + "/f.txt", "content": content, "createDirs": true}, &w)
	far := dockertest.Workspace + "/" + dir + "/f.txt"
	if diff := cmp.Diff(protocol.WriteFileResult{Path: box.Name + "/" + far, Size: int64(len(content))}, w, cmpopts.IgnoreFields(protocol.WriteFileResult{}, "Sha256")); diff != "" {
		t.Errorf("writeFile's answer mismatch (-want +got):\n%s", diff)
	}
	if got := c.Exec(t, "cat", far); got != content {
		t.Errorf("%s in the container: %q, want %q", far, got, content)
	}
	if _, err := os.Stat(filepath.Join(s.root, dir)); err == nil {
		t.Errorf("writeFile with a destination wrote into the hub's own root")
	}

	c.Exec(t, "sh", "-c", "echo made in the container > "+dockertest.Workspace+"/"+dir+"/inside.txt")
	for path, want := range map[string]string{dir + "/f.txt": content, dir + "/inside.txt": "made in the container\n", far: content} {
		var r protocol.ReadFileResult
		s.mustCall("readFile", map[string]any{"destination": box.Name, "path": path}, &r)
		if r.Content != want {
			t.Errorf("readFile %s on %s: %q, want %q", path, box.Name, r.Content, want)
		}
	}

	// Outside the container's root: refused there (-32001), nothing written.
	for _, p := range []string{"../x", dockertest.MarkerFile, "/tmp/x"} {
		e := s.call("readFile", map[string]any{"destination": box.Name, "path": p}, nil)
		if data := wantRPCError(t, "readFile "+p, e, int(protocol.CodePathOutsideWorkspace)); data.Destination != "" {
			t.Errorf("readFile %s: data.destination %q: the far side refused it, the destination was reached", p, data.Destination)
		}
		e = s.call("writeFile", map[string]any{"destination": box.Name, "path": p, "content": "escaped\n", "createDirs": true}, nil)
		wantRPCError(t, "writeFile "+p, e, int(protocol.CodePathOutsideWorkspace))
	}
	if got := c.Exec(t, "sh", "-c", "cat "+dockertest.MarkerFile+"; ls /x /tmp/x 2>/dev/null; true"); got != dockertest.MarkerContent {
		t.Errorf("outside the container's root after the refused writes: %q, want the marker file untouched and no /x, /tmp/x", got)
	}
	s.shutdown()
}

// dockerCancel cancels a longRunning command with a child on the
// destination: its shell and sleep run in the container (and nothing of
// it on the hub's side), and once cancel answers, neither runs there any
// more, by the container's /proc and by its own ps; one toolResult.
func dockerCancel(t *testing.T, c *dockertest.Container, box dest) {
	s := startHub(t, []dest{box})
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"destination": box.Name, "argv": []string{"sh", "-c", "sleep " + mk.Sleep + " & echo ready; wait"}, "env": mk.env(), "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")

	var inside []dockertest.Proc // the sleep may still be exec'ing after "ready"
	pollUntil(t, func() string { return fmt.Sprintf("want the shell and its sleep in the container, found %+v", inside) }, func() bool {
		inside = markedIn(c.Procs(t), mk)
		return len(inside) >= 2
	})
	for _, p := range scanProcs(mk, "") {
		if !slices.ContainsFunc(inside, func(q dockertest.Proc) bool { return q.PID == p.PID }) {
			t.Errorf("%v runs outside the container", p)
		}
	}

	if ps := c.Exec(t, "ps", "-o", "pid,args"); !strings.Contains(ps, mk.Sleep) {
		t.Fatalf("the container's ps does not show %s while it runs:\n%s", mk.Sleep, ps)
	}

	var res protocol.ToolResult
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
	if res.Status != protocol.StatusCancelled || res.HandleID != h.HandleID || res.CommandID != h.CommandID {
		t.Errorf("cancel answered %s for %s/%s, want cancelled for %s/%s", res.Status, res.HandleID, res.CommandID, h.HandleID, h.CommandID)
	}
	if left := markedIn(c.Procs(t), mk); len(left) > 0 {
		t.Errorf("once cancel answered, still in the container: %+v", left)
	}
	if ps := c.Exec(t, "ps", "-o", "pid,args"); strings.Contains(ps, mk.Sleep) {
		t.Errorf("once cancel answered, the container's ps still shows %s:\n%s", mk.Sleep, ps)
	}
	assertNoneLeft(t, mk, "", "once cancel answered")
	if tr := s.toolResultOf(h.HandleID); tr.Status != protocol.StatusCancelled {
		t.Errorf("toolResult %s, want cancelled", tr.Status)
	}
	s.shutdown()
	if n := s.toolResultCount(h.HandleID); n != 1 {
		t.Errorf("%s: %d toolResults, want 1", h.HandleID, n)
	}
}

// markedIn returns the processes of ps whose argv names mk's sleep.
func markedIn(ps []dockertest.Proc, mk marker) []dockertest.Proc {
	var out []dockertest.Proc
	for _, p := range ps {
		if slices.ContainsFunc(p.Argv, func(a string) bool { return strings.Contains(a, mk.Sleep) }) {
			out = append(out, p)
		}
	}
	return out
}

// dockerSandboxSeen is what dockerSandbox compares: what the far side
// reported and what the command could do.
type dockerSandboxSeen struct {
	// Filesystem and Network are the report's.
	Filesystem protocol.SandboxFilesystem
	Network    bool
	// MountNS and PIDNS say the report claims those layers.
	MountNS, PIDNS bool
	// MetadataNotEnforced and PIDsNotEnforced say notEnforced has a
	// sentence about metadata for want of a mount namespace, and one about
	// other processes for want of a PID namespace.
	MetadataNotEnforced, PIDsNotEnforced bool
	// Created and Touched say the command created a file in the root, and
	// changed the time of an existing one there.
	Created, Touched bool
}

// dockerSandbox runs a read-only command without network on the
// destination. An unprivileged container cannot unshare namespaces (the
// container's own unshare fails), so the far toolhost has no mount and no
// PID namespace: its report must not claim them and must list, as not
// enforced, metadata outside the writable directories and the visibility
// of other processes. And the report must hold: the command cannot create
// a file in the read-only root (Landlock, which the container allows), but
// can change an existing file's time there (metadata, which nothing
// covers).
func dockerSandbox(t *testing.T, c *dockertest.Container, box dest) {
	if got := c.Exec(t, "sh", "-c", "unshare -m true 2>/dev/null && echo unshared; unshare -p -f true 2>/dev/null && echo unshared; true"); got != "" {
		t.Fatalf("the container can unshare namespaces (%q): it is privileged, and this test's premise fails", got)
	}
	s := startHub(t, []dest{box})
	s.initialize(nil)
	dir := dockertest.Workspace + "/sandbox-" + filepath.Base(s.root)
	c.Exec(t, "sh", "-c", "mkdir "+dir+" && echo old > "+dir+"/old.txt && touch -d '2020-01-01 00:00:00' "+dir+"/old.txt")

	script := `echo new > new.txt && echo CREATED; touch old.txt && echo TOUCHED; true`
	res := s.run(map[string]any{"destination": box.Name, "argv": []string{"sh", "-c", script}, "cwd": dir,
		"sandbox": map[string]any{"filesystem": "read-only", "network": false}})
	if res.Status != protocol.StatusCompleted || res.Sandbox == nil {
		t.Fatalf("runCommand: %s, sandbox %+v, stderr %q", res.Status, res.Sandbox, res.Stderr)
	}
	sb := res.Sandbox
	layers := strings.Split(sb.EnforcedBy, "+")
	got := dockerSandboxSeen{
		Filesystem: sb.Filesystem,
		Network:    sb.Network,
		MountNS:    slices.Contains(layers, "mntns"),
		PIDNS:      slices.Contains(layers, "pidns"),
		MetadataNotEnforced: slices.ContainsFunc(sb.NotEnforced, func(s string) bool {
			return strings.Contains(s, "metadata") && strings.Contains(s, "no mount namespace")
		}),
		PIDsNotEnforced: slices.ContainsFunc(sb.NotEnforced, func(s string) bool {
			return strings.Contains(s, "processes outside the sandbox") && strings.Contains(s, "no PID namespace")
		}),
		Created: strings.Contains(res.Stdout, "CREATED"),
		Touched: strings.Contains(res.Stdout, "TOUCHED"),
	}
	want := dockerSandboxSeen{
		Filesystem:          protocol.SandboxReadOnly,
		Network:             false,
		MetadataNotEnforced: true,
		PIDsNotEnforced:     true,
		Touched:             true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the destination's sandbox (-want +got):\n%s\nreport: enforcedBy %q, notEnforced %q\nstdout %q stderr %q", diff, sb.EnforcedBy, sb.NotEnforced, res.Stdout, res.Stderr)
	}
	t.Logf("the container's report: filesystem %s, network %v, enforcedBy %q, notEnforced %q", sb.Filesystem, sb.Network, sb.EnforcedBy, sb.NotEnforced)
	s.shutdown()
}
