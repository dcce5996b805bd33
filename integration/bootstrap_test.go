package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// bootstrapDestination returns a destination whose transport is a shell on
// this machine with a home of its own and a PATH without toolhost: the
// far side of a machine that has never seen toolhost. The word toolhost
// in it is the far program bootstrap replaces.
func bootstrapDestination(home, farRoot string) string {
	return fmt.Sprintf(`far=env HOME=%s PATH=/usr/bin:/bin sh -c 'exec "$0" "$@"' toolhost --root %s --log-level warn`, home, farRoot)
}

// TestDestinationBootstrapInstallsOnce runs a command on a destination
// whose PATH has no toolhost: with --destination-bootstrap the server
// installs itself there over the destination's own transport and the
// command runs; a second session finds the installed binary and reuses it;
// without the flag the destination is unavailable, with the reason.
func TestDestinationBootstrapInstallsOnce(t *testing.T) {
	t.Parallel()
	home, farRoot := t.TempDir(), t.TempDir()
	dest := bootstrapDestination(home, farRoot)

	s := start(t, options{args: []string{"--destination", dest}})
	s.initialize(nil)
	e := s.call("runCommand", map[string]any{"destination": "far", "argv": []string{"pwd"}}, nil)
	if e == nil || e.Code != protocol.CodeDestinationUnavailable {
		t.Fatalf("without --destination-bootstrap: %v, want DestinationUnavailable", e)
	}
	if d := errData(e); d.Destination != "far" || !strings.Contains(d.Reason, "127") {
		t.Errorf("error data %+v: want destination far and a reason naming exit 127", d)
	}

	run := func() (protocol.ToolResult, protocol.InitializeResult) {
		s := start(t, options{args: []string{"--destination", dest, "--destination-bootstrap", "--connect-destinations"}})
		init := s.initialize(nil)
		return s.run(map[string]any{"destination": "far", "argv": []string{"pwd"}}), init
	}
	res, init := run()
	if res.Status != protocol.StatusCompleted || strings.TrimSpace(res.Stdout) != farRoot {
		t.Fatalf("bootstrapped runCommand pwd: %s %q, want completed %q", res.Status, res.Stdout, farRoot)
	}
	if !strings.HasPrefix(res.CommandID, "far/") {
		t.Errorf("commandId %q lacks the destination's prefix", res.CommandID)
	}
	if got := init.Workspace.Destinations; len(got) != 1 || got[0].State != protocol.DestinationReady || got[0].Root != farRoot {
		t.Errorf("initialize's destinations %+v: want far ready at %s", got, farRoot)
	}
	installed, err := filepath.Glob(filepath.Join(home, ".cache", "toolhost", "*", "toolhost"))
	if err != nil || len(installed) != 1 {
		t.Fatalf("installed binaries %v (%v), want one under %s/.cache/toolhost", installed, err, home)
	}
	want, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(installed[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the installed binary (%d bytes) differs from the server's (%d bytes)", len(got), len(want))
	}
	before, err := os.Stat(installed[0])
	if err != nil {
		t.Fatal(err)
	}

	// A second session finds it installed.
	res, _ = run()
	if res.Status != protocol.StatusCompleted {
		t.Fatalf("second session: %s", res.Status)
	}
	after, err := os.Stat(installed[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.ModTime(), after.ModTime()); diff != "" {
		t.Errorf("the second session installed again: mtime mismatch (-want +got):\n%s", diff)
	}
}

// TestDestinationBootstrapOverSSH bootstraps a far side reached through a
// real sshd whose PATH has no toolhost: the binary is installed over the
// same ssh transport and the command runs there.
func TestDestinationBootstrapOverSSH(t *testing.T) {
	t.Parallel()
	d := needSSHD(t)
	home, root := t.TempDir(), farRoot(t)
	argv := d.Argv("env", "HOME="+home, "PATH=/usr/bin:/bin", "toolhost", "--root", root, "--log-level", "warn")
	s := startHub(t, []dest{{Name: "far", Argv: argv, Root: root}}, "--destination-bootstrap")
	s.initialize(nil)
	res := s.run(map[string]any{"destination": "far", "argv": []string{"pwd"}})
	if res.Status != protocol.StatusCompleted || strings.TrimSpace(res.Stdout) != root {
		t.Fatalf("runCommand pwd over ssh after bootstrap: %s %q, want completed %q", res.Status, res.Stdout, root)
	}
	installed, err := filepath.Glob(filepath.Join(home, ".cache", "toolhost", "*", "toolhost"))
	if err != nil || len(installed) != 1 {
		t.Fatalf("installed binaries %v (%v), want one under %s/.cache/toolhost", installed, err, home)
	}
	info := destinationNamed(t, s.destinations(), "far")
	if info.State != protocol.DestinationReady || info.Root != root {
		t.Errorf("destination %+v: want ready at %s", info, root)
	}
	s.shutdown()
}
