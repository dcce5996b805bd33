//go:build linux

package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// deadPid returns the pid of a process that has exited and been waited
// for.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// liveChild starts a process that runs until the test's end and returns
// its pid and start time.
func liveChild(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	start, err := processStart(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, start
}

// selfStart returns this process's start time.
func selfStart(t *testing.T) uint64 {
	t.Helper()
	start, err := processStart(os.Getpid())
	if err != nil || start == 0 {
		t.Fatalf("processStart(self) = %d, %v", start, err)
	}
	return start
}

// ownedName returns the name of a private artifacts directory of pid,
// started at start.
func ownedName(pid int, start uint64, random string) string {
	return fmt.Sprintf("%s%s-%d-%d-%s", tempDirPrefix, ownerForm, pid, start, random)
}

// artifactsLike makes a directory named name in parent holding what a
// session's artifacts directory holds.
func artifactsLike(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	for _, d := range []string{dir, filepath.Join(dir, "cmd-1"), filepath.Join(dir, spareDirName, spareNewName)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd-1", OutputFile), []byte("out\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestParseOwner checks which names record an owner, and which owner.
func TestParseOwner(t *testing.T) {
	t.Parallel()
	type result struct {
		Owner owner
		OK    bool
	}
	for _, tc := range []struct {
		name string
		want result
	}{
		{"toolhost-artifacts-v1-123-4567-890", result{owner{123, 4567}, true}},
		{"toolhost-artifacts-v1-123-0-890", result{owner{123, 0}, true}},
		{"toolhost-session-v1-123-4567-890", result{owner{123, 4567}, true}}, // a session's cache and TMPDIRs
		{"toolhost-tmp-v1-123-4567-890", result{owner{123, 4567}, true}},     // unconfined commands' TMPDIRs
		{"toolhost-artifacts-890", result{}},                                 // --keep-artifacts, or an older server
		{"toolhost-artifacts-v2-123-4567-890", result{}},                     // another version
		{"toolhost-artifacts-v1-123-4567-", result{}},                        // no random part
		{"toolhost-artifacts-v1-123-4567-8-9", result{}},                     // too many parts
		{"toolhost-artifacts-v1-0-4567-890", result{}},                       // no pid
		{"toolhost-artifacts-v1-0123-4567-890", result{}},                    // not how a pid is written
		{"toolhost-artifacts-v1-123-+4567-890", result{}},                    // nor a start time
		{"toolhost-artifacts-v1-123-04567-890", result{}},                    // nor this
		{"toolhost-artifacts-v1-x-4567-890", result{}},                       // no number
		{"toolhost-other-v1-123-4567-890", result{}},                         // another prefix
		{"toolhost-artifacts-v1-99999999999999999999-1-2", result{}},         // no int
	} {
		o, ok := parseOwner(tc.name)
		if diff := cmp.Diff(tc.want, result{o, ok}); diff != "" {
			t.Errorf("parseOwner(%q) mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestSweepTempDirs checks which directories a sweep removes: only a
// private artifacts directory of this user whose name records an owner
// that is dead, or whose pid went to another process, and that holds no
// keepFile.
func TestSweepTempDirs(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	elsewhere := t.TempDir()
	dead := deadPid(t)
	self, selfStarted := os.Getpid(), selfStart(t)
	child, childStarted := liveChild(t)
	type sweepCase struct {
		name  string
		path  string // what must go, or stay
		swept bool
	}
	var cases []sweepCase
	for i, tc := range []struct {
		name string
		// dir names the directory to make, unless make makes what
		// the case is about and returns the path to look at.
		dir   string
		make  func(t *testing.T, random string) string
		swept bool
	}{
		{name: "dead owner", dir: ownedName(dead, 12345, "a"), swept: true},
		{name: "dead owner, start unknown", dir: ownedName(dead, 0, "b"), swept: true},
		{name: "pid reused by a process started later", dir: ownedName(child, childStarted+1, "c"), swept: true},
		{name: "this process", dir: ownedName(self, selfStarted, "d")},
		{name: "this process, start unknown", dir: ownedName(self, 0, "e")},
		{name: "live child", dir: ownedName(child, childStarted, "f")},
		{name: "no owner (--keep-artifacts, or an older server)", dir: tempDirPrefix + "123456"},
		{name: "another version", dir: fmt.Sprintf("%sv2-%d-0-g", tempDirPrefix, dead)},
		{name: "another prefix", dir: fmt.Sprintf("toolhost-other-%s-%d-0-h", ownerForm, dead)},
		{name: "holds a keepFile", make: func(t *testing.T, random string) string {
			dir := artifactsLike(t, parent, ownedName(dead, 0, random))
			if err := os.WriteFile(filepath.Join(dir, keepFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{name: "symlink to a dead server's directory", make: func(t *testing.T, random string) string {
			target := artifactsLike(t, elsewhere, ownedName(dead, 0, random))
			if err := os.Symlink(target, filepath.Join(parent, filepath.Base(target))); err != nil {
				t.Fatal(err)
			}
			return target
		}},
		{name: "a file", make: func(t *testing.T, random string) string {
			f := filepath.Join(parent, ownedName(dead, 0, random))
			if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}},
	} {
		var path string
		if tc.make != nil {
			path = tc.make(t, fmt.Sprint("made", i))
		} else {
			path = artifactsLike(t, parent, tc.dir)
		}
		cases = append(cases, sweepCase{name: tc.name, path: path, swept: tc.swept})
	}
	var logs bytes.Buffer
	removed := SweepTempDirs(parent, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var want, wantGone, wantKept, gotGone, gotKept []string
	for _, c := range cases {
		if c.swept {
			want = append(want, c.path)
			wantGone = append(wantGone, c.name)
		} else {
			wantKept = append(wantKept, c.name)
		}
		_, err := os.Lstat(c.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			gotGone = append(gotGone, c.name)
		case err == nil:
			gotKept = append(gotKept, c.name)
		default:
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	slices.Sort(removed)
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("removed mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantGone, gotGone); diff != "" {
		t.Errorf("gone mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantKept, gotKept); diff != "" {
		t.Errorf("kept mismatch (-want +got):\n%s", diff)
	}
	if n := strings.Count(logs.String(), "removed the directory of a dead server"); n != len(removed) {
		t.Errorf("%d removals logged, want %d:\n%s", n, len(removed), logs.String())
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("removed=%d", len(removed))) {
		t.Errorf("the sweep's end is not logged:\n%s", logs.String())
	}
}

// TestSweepTempDirsOtherUser checks that a directory of another user is
// never swept, whatever its name says.
func TestSweepTempDirsOtherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user (chown) needs root, and this test does not run as root")
	}
	const nobody = 65534
	parent := t.TempDir()
	theirs := artifactsLike(t, parent, ownedName(deadPid(t), 0, "theirs"))
	if err := os.Lchown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if removed := SweepTempDirs(parent, nil); len(removed) != 0 {
		t.Errorf("swept %q, want nothing", removed)
	}
	if _, err := os.Stat(filepath.Join(theirs, "cmd-1", OutputFile)); err != nil {
		t.Errorf("another user's directory: %v", err)
	}
}

// TestMkdirTemp checks the directory MkdirTemp makes: private, empty,
// named after this process (without keep) or after no one (with keep); a
// session's artifacts work in it; a sweep leaves it while this process
// runs; RemoveAll takes it whole.
func TestMkdirTemp(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	for _, keep := range []bool{false, true} {
		dir, err := MkdirTemp(parent, keep)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(dir), tempDirPrefix) || filepath.Dir(dir) != parent {
			t.Errorf("MkdirTemp made %s, want %s%s*", dir, parent+string(filepath.Separator), tempDirPrefix)
		}
		type result struct {
			Owner owner
			OK    bool
		}
		want := result{owner{os.Getpid(), selfStart(t)}, true}
		if keep {
			want = result{}
		}
		o, ok := parseOwner(filepath.Base(dir))
		if diff := cmp.Diff(want, result{o, ok}); diff != "" {
			t.Errorf("keep %v: owner mismatch (-want +got):\n%s", keep, diff)
		}
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("mode %v, %v; want 0700", fi.Mode(), err)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("entries %v, %v; want none", ents, err)
		}
		a, err := NewArtifacts(dir, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.NewCapture("cmd-1", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stdout().Write([]byte("hi\n")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if removed := SweepTempDirs(parent, nil); len(removed) != 0 {
			t.Errorf("swept %q while its owner runs", removed)
		}
		if err := a.RemoveAll(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after RemoveAll: %v", err)
		}
	}
}

// TestKeepDir checks that a directory a dead server made, named again by
// the user (itself or a directory inside it), is kept from the sweep, and
// that KeepDir leaves alone any other directory.
func TestKeepDir(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dead := deadPid(t)
	named := artifactsLike(t, parent, ownedName(dead, 7, "named"))
	nested := artifactsLike(t, parent, ownedName(dead, 7, "nested"))
	swept := artifactsLike(t, parent, ownedName(dead, 7, "swept"))
	plain := artifactsLike(t, parent, tempDirPrefix+"plain")
	outside := artifactsLike(t, t.TempDir(), ownedName(dead, 7, "outside"))
	for _, d := range []string{named, named, filepath.Join(nested, "cmd-1"), plain, outside, parent} {
		if err := KeepDir(parent, d); err != nil {
			t.Errorf("KeepDir(%s): %v", d, err)
		}
	}
	var got []string
	for _, d := range []string{named, nested, swept, plain, outside} {
		if _, err := os.Lstat(filepath.Join(d, keepFile)); err == nil {
			got = append(got, filepath.Base(d))
		}
	}
	if diff := cmp.Diff([]string{filepath.Base(named), filepath.Base(nested)}, got); diff != "" {
		t.Errorf("directories with a keepFile mismatch (-want +got):\n%s", diff)
	}
	removed := SweepTempDirs(parent, nil)
	if diff := cmp.Diff([]string{swept}, removed); diff != "" {
		t.Errorf("removed mismatch (-want +got):\n%s", diff)
	}
}

// TestOwnerAlive checks the owner check: a pid gone, or given to a
// process that started at another time, is dead.
func TestOwnerAlive(t *testing.T) {
	t.Parallel()
	self, started := os.Getpid(), selfStart(t)
	child, childStarted := liveChild(t)
	dead := deadPid(t)
	for _, tc := range []struct {
		name  string
		pid   int
		start uint64
		want  bool
	}{
		{"this process", self, started, true},
		{"this process, start unknown", self, 0, true},
		{"this pid, started at another time", self, started + 1, false},
		{"a live child", child, childStarted, true},
		{"a live child's pid, started earlier", child, childStarted - 1, false},
		{"a pid gone", dead, 0, false},
		{"a pid gone, start given", dead, 99, false},
	} {
		if got := ownerAlive(tc.pid, tc.start); got != tc.want {
			t.Errorf("%s: ownerAlive(%d, %d) = %v, want %v", tc.name, tc.pid, tc.start, got, tc.want)
		}
	}
}

// TestParseStart checks reading starttime from /proc/<pid>/stat, with
// command names that hold spaces and parentheses.
func TestParseStart(t *testing.T) {
	t.Parallel()
	rest := "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	type result struct {
		Start uint64
		Err   bool
	}
	for _, tc := range []struct {
		stat string
		want result
	}{
		{"123 (sh) " + rest, result{Start: 424242}},
		{"123 (a b) (c) d) " + rest, result{Start: 424242}},
		{"123 ()) " + rest, result{Start: 424242}},
		{"123 (sh) S 1 2 3", result{Err: true}},
		{"123 sh " + rest, result{Err: true}},
		{"123 (sh) " + strings.Replace(rest, "424242", "x", 1), result{Err: true}},
	} {
		n, err := parseStart([]byte(tc.stat))
		if diff := cmp.Diff(tc.want, result{n, err != nil}); diff != "" {
			t.Errorf("parseStart(%q) mismatch (-want +got):\n%s", tc.stat, diff)
		}
	}
}
