package tools

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// TestRefusedInitializeLeaksNothing refuses initialize 100 times for each
// reason Initialize may find once it has opened the workspace, and checks
// that no file descriptor and no temporary directory is left behind: under
// --persist one Tools lives for days and may be refused any number of
// times. It reads /proc/self/fd, hence the _linux name.
//
// The garbage collector is off while it counts: os.Root closes a root it
// finds unreachable, so a collection in the loop would hide a leak. With
// it off nothing of the runtime opens or closes a descriptor here (the
// warm-up made the ones made once), so the count must be the same exactly.
func TestRefusedInitializeLeaksNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the artifacts and session directories
	root, readRoot := t.TempDir(), t.TempDir()
	// The network is off (Sandbox.Network false): a client asking it on is
	// refused.
	tl := New(Config{Root: root, ReadRoots: []string{readRoot}})

	refusals := []struct {
		name string
		opts protocol.InitializationOptions
	}{
		{"negative killGraceMs", protocol.InitializationOptions{KillGraceMs: ptr[int64](-1)}},
		{"negative defaultTimeoutMs", protocol.InitializationOptions{DefaultTimeoutMs: ptr[int64](-1)}},
		{"zero outputLimitBytes", protocol.InitializationOptions{OutputLimitBytes: ptr[int64](0)}},
		{"outputLimitBytes over the cap", protocol.InitializationOptions{OutputLimitBytes: ptr[int64](maxOutputLimit + 1)}},
		{"unknown destination", protocol.InitializationOptions{Destinations: []string{"nowhere"}}},
		{"malformed env.allow", protocol.InitializationOptions{Env: &protocol.EnvOptions{Allow: []string{"A=B"}}}},
		{"looser sandbox", protocol.InitializationOptions{Sandbox: &protocol.Sandbox{Network: protocol.NetworkOn()}}},
	}
	initialize := func(opts protocol.InitializationOptions) error {
		_, err := tl.Initialize(context.Background(), nil, &protocol.InitializeParams{InitializationOptions: &opts})
		return err
	}
	for _, r := range refusals {
		if err := initialize(r.opts); err == nil {
			t.Fatalf("%s: Initialize succeeded, want it refused", r.name)
		}
	}

	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	fdsBefore, filesBefore := openFDs(t), treeEntries(t, tmp)
	for _, r := range refusals {
		for range 100 {
			if err := initialize(r.opts); err == nil {
				t.Fatalf("%s: Initialize succeeded, want it refused", r.name)
			}
		}
		if fds := openFDs(t); fds != fdsBefore {
			t.Errorf("%s: %d open file descriptors after 100 refused initializes, want %d as before them", r.name, fds, fdsBefore)
			fdsBefore = fds
		}
	}
	if files := treeEntries(t, tmp); files != filesBefore {
		t.Errorf("%d entries in TMPDIR after the refused initializes, want %d as before them", files, filesBefore)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // less ReadDir's own
}

// treeEntries counts the files and directories under dir.
func treeEntries(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(string, fs.DirEntry, error) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
