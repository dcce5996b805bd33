//go:build linux

package process

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/sandbox"
)

// TestConfinedTmpDirIsFreshForEachCommand checks a confined command gets a
// TMPDIR of its own that it may write, that the result says what confined
// it, and that the next command, which may be given the same directory
// again, finds it empty and private whatever the last one left in it.
func TestConfinedTmpDirIsFreshForEachCommand(t *testing.T) {
	if sandbox.DefaultCapabilities().LandlockABI == 0 {
		t.Skip("no Landlock on this kernel")
	}
	m := newTestManager(t, Config{})
	root := t.TempDir()
	confine := &Confinement{Policy: sandbox.Policy{Filesystem: sandbox.WorkspaceWrite, Network: true, Root: root}, Require: true}

	first := run(t, m, Spec{Dir: root, Confine: confine,
		Argv: []string{"sh", "-c", `echo left > "$TMPDIR/f" && mkdir "$TMPDIR/d" && chmod 777 "$TMPDIR" && echo "$TMPDIR"`}})
	if first.ExitCode == nil || *first.ExitCode != 0 {
		t.Fatalf("first command: exit %v, stderr %q", first.ExitCode, first.Output.Stderr)
	}
	if first.Sandbox == nil || !strings.Contains(first.Sandbox.EnforcedBy, "landlock") {
		t.Errorf("first.Sandbox = %+v, want a report naming Landlock", first.Sandbox)
	}
	second := run(t, m, Spec{Dir: root, Confine: confine,
		Argv: []string{"sh", "-c", `ls -A "$TMPDIR"; stat -c %a "$TMPDIR"; echo "$TMPDIR"`}})
	want := "700\n" + first.Output.Stdout
	if diff := cmp.Diff(want, second.Output.Stdout); diff != "" {
		t.Errorf("the next command's TMPDIR (same directory, emptied, 0700) mismatch (-want +got):\n%s", diff)
	}
}
