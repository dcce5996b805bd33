package integration

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// TestPersistOtherUserCannotResume: another OS user (nobody, through
// setpriv) cannot use this user's state or socket directory: its toolhost
// --persist refuses them at start, with exit code 2 and the reason; with
// directories of its own, a resume of this user's session is
// SessionNotFound, for no holder of its own has it.
func TestPersistOtherUserCannotResume(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("switching to nobody needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	p := newPersistEnv(t)
	// nobody may reach the test's directories (each keeps its own mode).
	if err := os.Chmod(filepath.Dir(p.state), 0o755); err != nil {
		t.Fatal(err)
	}
	a := start(t, p.options())
	init := a.initialize(nil)

	// A copy of the binary nobody may run.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "toolhost")
	copyFile(t, binary, bin, 0o755)
	asNobody := func(env []string, args ...string) *exec.Cmd {
		cmd := exec.Command(setpriv, append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", bin}, args...)...)
		cmd.Env = env
		return cmd
	}

	// This user's directories: refused at start.
	cmd := asNobody(p.env(), "--persist", "--state-dir", p.state, "--root", p.root)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "not this user") {
		t.Errorf("nobody with this user's state directory: %v, output %q; want exit 2 saying the directory is not its own", err, out)
	}

	// Its own directories: the session is not there.
	own := t.TempDir()
	for _, d := range []string{own, filepath.Join(own, "state"), filepath.Join(own, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(own, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + own, "TMPDIR=" + own, "XDG_RUNTIME_DIR=" + filepath.Join(own, "run")}
	cmd = asNobody(env, "--persist", "--state-dir", filepath.Join(own, "state"), "--root", p.root, "--framing", "ndjson", "--sandbox", "off")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"initializationOptions":{"resume":{"sessionId":"`+init.SessionID+`"}}}}`+"\n")
	stdin.Close()
	b, _ := io.ReadAll(stdout)
	cmd.Wait()
	if !strings.Contains(string(b), `"code":-32030`) || !strings.Contains(string(b), `"reason":"`+protocol.SessionUnknown+`"`) {
		t.Errorf("nobody's resume answered %s (stderr %s); want -32030, unknown", b, stderr.String())
	}
	// Its holder ends on its own once idle; this user's session is untouched.
	a.shutdown()
}

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}
