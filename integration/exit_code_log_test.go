package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exitCodesLogged returns every exitCode=N the log file names.
func exitCodesLogged(t *testing.T, logFile string) []int {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var codes []int
	for _, m := range regexp.MustCompile(`exitCode=(-?\d+)`).FindAllSubmatch(b, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		codes = append(codes, n)
	}
	return codes
}

// TestLogNamesTheExitCode: the log names the code the process exits
// with, and no other: 1 for a JSON-RPC client that ends stdin without
// shutdown, 0 after shutdown and exit, and 0 for an MCP client that
// closes stdin (the inner session ends without shutdown, but the process
// exits 0; its log said exitCode=1).
func TestLogNamesTheExitCode(t *testing.T) {
	t.Parallel()
	t.Run("json-rpc without shutdown", func(t *testing.T) {
		t.Parallel()
		logFile := filepath.Join(t.TempDir(), "toolhost.log")
		s := start(t, options{args: []string{"--log-file", logFile}})
		s.initialize(nil)
		s.closeStdin()
		code := s.wait()
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		if diff := cmp.Diff([]int{code}, exitCodesLogged(t, logFile)); diff != "" {
			t.Errorf("exit codes logged mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("json-rpc after shutdown", func(t *testing.T) {
		t.Parallel()
		logFile := filepath.Join(t.TempDir(), "toolhost.log")
		s := start(t, options{args: []string{"--log-file", logFile}})
		s.initialize(nil)
		s.shutdown() // waits for exit code 0
		if diff := cmp.Diff([]int{0}, exitCodesLogged(t, logFile)); diff != "" {
			t.Errorf("exit codes logged mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("mcp client closes stdin", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		logFile := filepath.Join(dir, "toolhost.log")
		cmd := exec.Command(binary, "mcp", "--root", dir, "--log-file", logFile)
		cmd.Env = quickExitEnv()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(stdout).ReadBytes('\n'); err != nil { // initialize's answer
			t.Fatal(err)
		}
		if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		stdin.Close()
		code := 0
		if err := cmd.Wait(); err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if diff := cmp.Diff([]int{code}, exitCodesLogged(t, logFile)); diff != "" {
			t.Errorf("exit codes logged mismatch (-want +got):\n%s", diff)
		}
	})
}
