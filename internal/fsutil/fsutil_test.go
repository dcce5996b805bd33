package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(content), 0o640, SyncFileDir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	assertOnly(t, dir, "state")
}

func TestDiscardKeepsTheOldContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := WriteFile(path, []byte("old"), 0o600, RenameOnly); err != nil {
		t.Fatal(err)
	}
	tmp, err := CreateTemp(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString("half of the new"); err != nil {
		t.Fatal(err)
	}
	tmp.Discard()
	tmp.Discard() // a second Discard, as a deferred one after an explicit one, is harmless
	if err := tmp.Commit(SyncFile); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Commit after Discard: %v, want os.ErrClosed", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("content %q, want old", got)
	}
	assertOnly(t, dir, "state")
}

func TestCommitFailsIntoAMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := CreateTemp(filepath.Join(dir, "gone", "state"), 0o600); err == nil {
		t.Fatal("CreateTemp in a missing directory succeeded")
	}
	// A rename that fails (the target is a non-empty directory) removes
	// the temporary file.
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "child"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(target, []byte("x"), 0o600, SyncFile); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	assertOnly(t, dir, "target")
}

func TestLockFileExcludes(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("Lock is a no-op where flock(2) is missing")
	}
	path := filepath.Join(t.TempDir(), "lock")
	held, err := LockFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	// flock belongs to the open file description, so a second open in
	// this process contends as another process would.
	if _, err := LockFile(path, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockFile: %v, want ErrLocked", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Lock(f, false, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("shared lock beside an exclusive one: %v, want ErrLocked", err)
	}
	held.Close()
	if err := Lock(f, false, false); err != nil {
		t.Fatalf("shared lock once the holder closed: %v", err)
	}
	if _, err := LockFile(path, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("exclusive beside a shared lock: %v, want ErrLocked", err)
	}
}

// assertOnly fails unless dir holds exactly the names want: no temporary
// file is left behind.
func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(want) {
		t.Fatalf("dir holds %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("dir holds %q, want %q", got, want)
		}
	}
}
