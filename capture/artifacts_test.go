package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArtifactsNewCaptureLayout(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	a, err := newTestArtifacts(t, link, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if a.Dir() != realDir {
		t.Errorf("Dir() = %q, want the resolved %q", a.Dir(), realDir)
	}
	if a.capBytes != DefaultArtifactsCap {
		t.Errorf("capBytes = %d, want %d", a.capBytes, DefaultArtifactsCap)
	}
	c, err := a.NewCapture("cmd-42", Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmdDir := filepath.Join(realDir, "cmd-42")
	got := map[string]fs.FileMode{}
	for _, p := range []string{cmdDir, o.StdoutPath, o.StderrPath, o.OutputPath} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		got[p] = fi.Mode()
	}
	want := map[string]fs.FileMode{
		cmdDir:                              fs.ModeDir | 0o700,
		filepath.Join(cmdDir, "stdout.log"): 0o600,
		filepath.Join(cmdDir, "stderr.log"): 0o600,
		filepath.Join(cmdDir, "output.log"): 0o600,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifact files mismatch (-want +got):\n%s", diff)
	}
}

func TestArtifactsRejectsBadCommandIDs(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", ".", "..", ".spares", ".x", "a/b", "../x", "x/..", "a..b", "/abs", `a\b`, "nul\x00", strings.Repeat("x", 201)} {
		if _, err := a.NewCapture(id, Options{}); !errors.Is(err, ErrBadCommandID) {
			t.Errorf("NewCapture(%q) error = %v, want ErrBadCommandID", id, err)
		}
	}
	entries, _ := os.ReadDir(a.Dir())
	if len(entries) != 0 {
		t.Errorf("rejected IDs left %d entries in the artifacts dir", len(entries))
	}
	if _, err := a.NewCapture("ok", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewCapture("ok", Options{}); !errors.Is(err, ErrBadCommandID) {
		t.Errorf("reused command ID: error = %v, want ErrBadCommandID", err)
	}
}

// TestArtifactsRefusesSymlinks checks that a name planted in the artifacts
// directory is never followed.
func TestArtifactsRefusesSymlinks(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(a.Dir(), "planted")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewCapture("planted", Options{}); err == nil {
		t.Fatal("NewCapture over a symlinked directory succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("files were created through the symlink: %v", entries)
	}
	// And a planted file symlink is refused by openArtifactFile itself.
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(a.Dir(), "file")
	if err := os.Symlink(target, planted); err != nil {
		t.Fatal(err)
	}
	if f, err := openArtifactFile(planted); err == nil {
		f.Close()
		t.Fatal("openArtifactFile followed a symlink")
	}
}

// logRecords is a slog handler target that keeps JSON records.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecords) evicted(t *testing.T) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSpace(l.buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal(line, &raw); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if raw["level"] == "WARN" && strings.HasPrefix(raw["msg"].(string), "evicted") {
			ids = append(ids, raw["commandId"].(string))
		}
	}
	return ids
}

func writeCommand(t *testing.T, a *Artifacts, id string, n int) *Capture {
	t.Helper()
	c, err := a.NewCapture(id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c.Stdout(), strings.Repeat("x", n)) // stdout.log + output.log: 2n bytes
	return c
}

func present(t *testing.T, a *Artifacts) []string {
	t.Helper()
	entries, err := os.ReadDir(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != spareDirName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

func TestArtifactsEviction(t *testing.T) {
	logs := &logRecords{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	a, err := newTestArtifacts(t, t.TempDir(), 1000, logger)
	if err != nil {
		t.Fatal(err)
	}
	// Each command holds 200 bytes (100 in stdout.log, 100 in output.log).
	first := writeCommand(t, a, "first", 100)
	second := writeCommand(t, a, "second", 100)
	running := writeCommand(t, a, "running", 100)
	for _, c := range []*Capture{second, first} { // second finishes first
		if _, err := c.Close(); err != nil {
			t.Fatal(err)
		}
		a.Finished(c.id)
	}
	if diff := cmp.Diff([]string{"first", "running", "second"}, present(t, a)); diff != "" {
		t.Fatalf("under the cap, nothing is evicted (-want +got):\n%s", diff)
	}
	// The running command grows the total to 1200: the oldest finished
	// command ("second") goes, and 1000 is not over the cap.
	mustWrite(t, running.Stdout(), strings.Repeat("y", 300))
	a.Finished("no-such-command") // ignored, but checks the cap
	a.checkCap()
	if diff := cmp.Diff([]string{"first", "running"}, present(t, a)); diff != "" {
		t.Errorf("after growing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second"}, logs.evicted(t)); diff != "" {
		t.Errorf("eviction log mismatch (-want +got):\n%s", diff)
	}
	if got := a.totalBytes(); got != 1000 {
		t.Errorf("totalBytes() = %d, want 1000", got)
	}
	// A running command is never evicted, even alone over the cap.
	mustWrite(t, running.Stdout(), strings.Repeat("z", 1000))
	a.checkCap()
	if diff := cmp.Diff([]string{"running"}, present(t, a)); diff != "" {
		t.Errorf("over the cap with one running command (-want +got):\n%s", diff)
	}
	// Finished before Close: evicted only once closed.
	a.Finished("running")
	if diff := cmp.Diff([]string{"running"}, present(t, a)); diff != "" {
		t.Errorf("an open capture was evicted (-want +got):\n%s", diff)
	}
	if _, err := running.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), present(t, a)); diff != "" {
		t.Errorf("after Close (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second", "first", "running"}, logs.evicted(t)); diff != "" {
		t.Errorf("eviction log mismatch (-want +got):\n%s", diff)
	}
}

// TestArtifactsEvictionWhileWriting checks that a command that writes a lot
// evicts finished commands as it goes, without waiting for Finished.
func TestArtifactsEvictionWhileWriting(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 4<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := writeCommand(t, a, "old", 1<<20)
	if _, err := old.Close(); err != nil {
		t.Fatal(err)
	}
	a.Finished("old")
	big := writeCommand(t, a, "big", 0)
	chunk := bytes.Repeat([]byte("b"), 1<<20)
	for range 5 { // 10 MiB of files: past the first evictCheckEvery boundary
		if _, err := big.Stdout().Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"big"}, present(t, a)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestArtifactsRemoveAll(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "artifacts")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := newTestArtifacts(t, dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := writeCommand(t, a, "c", 10)
	if _, err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("artifacts dir still there after RemoveAll: %v", err)
	}
	if _, err := a.NewCapture("d", Options{}); !errors.Is(err, ErrArtifactsClosed) {
		t.Errorf("NewCapture after RemoveAll: error = %v, want ErrArtifactsClosed", err)
	}
}

func TestNewArtifactsErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		dir string
		cap int64
	}{
		"missing":      {filepath.Join(t.TempDir(), "nope"), 0},
		"not a dir":    {file, 0},
		"negative cap": {t.TempDir(), -1},
	} {
		if _, err := NewArtifacts(tt.dir, tt.cap, nil); err == nil {
			t.Errorf("%s: NewArtifacts succeeded", name)
		}
	}
}

// TestArtifactsFinishingCommandIsSpared checks that a command whose own
// files are over the cap keeps them when it finishes (its result names
// them), and that the next command's capture evicts them first.
func TestArtifactsFinishingCommandIsSpared(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	huge := writeCommand(t, a, "huge", 800) // 1600 bytes of files
	if _, err := huge.Close(); err != nil {
		t.Fatal(err)
	}
	a.Finished("huge")
	if diff := cmp.Diff([]string{"huge"}, present(t, a)); diff != "" {
		t.Errorf("after its own Finished (-want +got):\n%s", diff)
	}
	writeCommand(t, a, "next", 10)
	if diff := cmp.Diff([]string{"next"}, present(t, a)); diff != "" {
		t.Errorf("after the next capture (-want +got):\n%s", diff)
	}
}

// newTestArtifacts is NewArtifacts with a Close at the end of the test, so
// the goroutine making spares is done before the directory is removed.
func newTestArtifacts(tb testing.TB, dir string, capBytes int64, logger *slog.Logger) (*Artifacts, error) {
	a, err := NewArtifacts(dir, capBytes, logger)
	if err == nil {
		tb.Cleanup(a.Close)
	}
	return a, err
}

// TestArtifactsSpares checks the directories prepared ahead of need: a
// capture made from a spare has the layout and modes of a fresh one, its
// files start empty and are written where its paths say, and Close removes
// the spares and the staging directory, leaving only the commands'.
func TestArtifactsSpares(t *testing.T) {
	a, err := NewArtifacts(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewCapture("cmd-1", Options{}); err != nil {
		t.Fatal(err)
	}
	// The first capture started the refill; wait for it to finish.
	a.prep.Wait()
	a.mu.Lock()
	spares := len(a.dirs)
	a.mu.Unlock()
	if spares != spareDirCount {
		t.Fatalf("%d spares after the refill, want %d", spares, spareDirCount)
	}
	c, err := a.NewCapture("cmd-2", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c.Stdout(), "out\n")
	mustWrite(t, c.Stderr(), "err\n")
	o, err := c.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmdDir := filepath.Join(a.Dir(), "cmd-2")
	type file struct {
		Mode    fs.FileMode
		Content string
	}
	got := map[string]file{}
	for _, p := range []string{cmdDir, o.StdoutPath, o.StderrPath, o.OutputPath} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		f := file{Mode: fi.Mode()}
		if !fi.IsDir() {
			f.Content = readFile(t, p)
		}
		got[p] = f
	}
	want := map[string]file{
		cmdDir:                              {fs.ModeDir | 0o700, ""},
		filepath.Join(cmdDir, "stdout.log"): {0o600, "out\n"},
		filepath.Join(cmdDir, "stderr.log"): {0o600, "err\n"},
		filepath.Join(cmdDir, "output.log"): {0o600, "out\nerr\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a capture from a spare (-want +got):\n%s", diff)
	}
	a.Close()
	entries, err := os.ReadDir(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"cmd-1", "cmd-2"}, names); diff != "" {
		t.Errorf("after Close (-want +got):\n%s", diff)
	}
	if _, err := a.NewCapture("cmd-3", Options{}); !errors.Is(err, ErrArtifactsClosed) {
		t.Errorf("NewCapture after Close: error = %v, want ErrArtifactsClosed", err)
	}
}

// TestArtifactsSpareRefusesPlantedName checks that a spare is never renamed
// over a name already in the artifacts directory, a symlink included.
func TestArtifactsSpareRefusesPlantedName(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewCapture("cmd-1", Options{}); err != nil {
		t.Fatal(err)
	}
	a.prep.Wait()
	outside := t.TempDir()
	for _, planted := range []string{"link", "dir"} {
		p := filepath.Join(a.Dir(), planted)
		var err error
		if planted == "link" {
			err = os.Symlink(outside, p)
		} else {
			err = os.Mkdir(p, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.NewCapture(planted, Options{}); err == nil {
			t.Errorf("NewCapture over a planted %s succeeded", planted)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the symlink's target got %d entries", len(entries))
	}
	if entries, _ := os.ReadDir(filepath.Join(a.Dir(), "dir")); len(entries) != 0 {
		t.Errorf("the planted directory got %d entries", len(entries))
	}
}
