package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sweepDone is the log line a server writes once its start-up sweep of the
// artifacts directories of dead servers is over.
const sweepDone = "swept the directories of dead servers"

// TestStaleArtifactsSwept checks that a SIGKILLed server's private
// artifacts directory, left in the temp dir, is removed by the next
// server at its start; and that the sweep leaves alone the directory of a
// server still running, the one of a SIGKILLed server run with
// --keep-artifacts, and a directory the user named with --artifacts-dir.
// The dead servers' session directories go too. All the servers share a
// TMPDIR of the test's own.
func TestStaleArtifactsSwept(t *testing.T) {
	t.Parallel()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp}
	// startIn starts a server, runs a command there and returns the
	// server, its artifacts directory and the command's id.
	startIn := func(args ...string) (*server, string, string) {
		s := start(t, options{env: env, args: args})
		dir := s.initialize(nil).Workspace.ArtifactsDir
		res := s.run(map[string]any{"argv": []string{"echo", "hi"}})
		if res.Status != "completed" {
			t.Fatalf("echo: status %q", res.Status)
		}
		return s, dir, res.CommandID
	}
	alive, aliveDir, aliveCmd := startIn()
	dead, deadDir, _ := startIn()
	kept, keptDir, _ := startIn("--keep-artifacts")
	named := filepath.Join(tmp, "toolhost-artifacts-named")
	user, userDir, _ := startIn("--artifacts-dir", named)
	if userDir != named {
		t.Fatalf("artifactsDir %q, want the named %q", userDir, named)
	}
	for _, s := range []*server{dead, kept, user} {
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		s.wait()
	}
	// artifactsIn lists the artifacts directories in tmp.
	artifactsIn := func() []string {
		t.Helper()
		ents, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			// The servers' toolhost-session-* directories are not
			// artifacts: they are not this test's.
			if strings.HasPrefix(e.Name(), "toolhost-artifacts-") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	for _, d := range []string{aliveDir, deadDir, keptDir, named} {
		if filepath.Dir(d) != tmp {
			t.Fatalf("artifacts directory %s is not in the servers' TMPDIR %s", d, tmp)
		}
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("before the sweep: %v", err)
		}
	}

	// The next server sweeps at its start, before any message, and says
	// when it is done.
	logs := startForLogs(t, env, sweepDone)
	if !strings.Contains(logs, "removed the directory of a dead server") || !strings.Contains(logs, deadDir) {
		t.Errorf("the sweep did not log the dead server's directory %s:\n%s", deadDir, logs)
	}
	if _, err := os.Stat(deadDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead server's directory is still there: %v", err)
	}
	var want []string
	for _, d := range []string{aliveDir, keptDir, named} {
		want = append(want, filepath.Base(d))
	}
	slices.Sort(want) // os.ReadDir sorts by name
	if diff := cmp.Diff(want, artifactsIn()); diff != "" {
		t.Errorf("TMPDIR entries after the sweep mismatch (-want +got):\n%s", diff)
	}
	// The dead servers' session directories (cache and TMPDIRs) went too:
	// what is left is the live server's.
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "toolhost-session-") && !strings.HasPrefix(e.Name(), fmt.Sprintf("toolhost-session-v1-%d-", alive.cmd.Process.Pid)) {
			t.Errorf("a dead server's session directory is left: %s", e.Name())
		}
	}
	// The live server's artifacts are whole, and it goes on.
	if _, err := os.Stat(filepath.Join(aliveDir, aliveCmd)); err != nil {
		t.Errorf("the live server's first command's artifacts: %v", err)
	}
	if res := alive.run(map[string]any{"argv": []string{"echo", "after"}}); res.Status != "completed" || res.Stdout != "after\n" {
		t.Errorf("the live server after the sweep: status %q stdout %q", res.Status, res.Stdout)
	}
	alive.shutdown()
}

// startForLogs starts a server with env and no client, reads its stderr
// until a line holds want, then closes its stdin and waits for it to
// exit. It returns the stderr read so far.
func startForLogs(t *testing.T, env []string, want string) string {
	t.Helper()
	cmd := exec.Command(binary, "--log-level", "debug", "--root", t.TempDir())
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	eof := make(chan struct{})
	go func() { // owned by this function: it waits for eof below
		defer close(eof)
		var b strings.Builder
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if !sent && strings.Contains(sc.Text(), want) {
				found <- b.String()
				sent = true
			}
		}
		if !sent {
			found <- b.String()
		}
	}()
	defer func() {
		stdin.Close()
		<-eof
		_ = cmd.Wait()
	}()
	select {
	case logs := <-found:
		if !strings.Contains(logs, want) {
			t.Fatalf("the server's stderr ended without %q:\n%s", want, logs)
		}
		return logs
	case <-time.After(waitLimit):
		_ = cmd.Process.Kill()
		t.Fatalf("no %q in the server's stderr within %v", want, waitLimit)
		return ""
	}
}
