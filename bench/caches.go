package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// rootCache measures a go build of a small module (a main package that
// imports fmt, no dependencies) through run_command in a new MCP session
// on a root whose cache an earlier session filled, against the same build
// run directly with the same, warm, cache, the two in turn. Each session
// has a state directory of the bench's own (XDG_STATE_HOME), where the
// root's cache lives.
func (b *bench) rootCache() error {
	b.nextID++
	base := filepath.Join(b.work, fmt.Sprintf("%02d-cache", b.nextID))
	root, state := filepath.Join(base, "root"), filepath.Join(base, "state")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(base)
	for name, body := range map[string]string{
		"go.mod":  "module example.com/small\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"small\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	build := []string{"go", "build", "-o", "/dev/null", "."}
	session := func(i int) (time.Duration, string, error) {
		ef, err := os.Create(filepath.Join(base, fmt.Sprintf("stderr-%d.log", i)))
		if err != nil {
			return 0, "", err
		}
		defer ef.Close()
		cmd := exec.Command(b.bin, "mcp", "--root", root, "--artifacts-dir", filepath.Join(base, fmt.Sprintf("artifacts-%d", i)), "--log-level", "warn")
		cmd.Dir, cmd.Stderr = root, ef
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		ctx, cancel := limit()
		defer cancel()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "toolhost-bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			return 0, "", err
		}
		s := &mcpSession{cs: cs, root: root}
		defer s.cs.Close()
		// The first call opens the workspace and reads the registries.
		raw, err := s.call("run_command", map[string]any{"argv": []string{"go", "env", "GOCACHE"}})
		if err != nil {
			return 0, "", err
		}
		var out struct {
			Stdout string `json:"stdout"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return 0, "", err
		}
		t0 := time.Now()
		if _, err := s.call("run_command", map[string]any{"argv": build, "timeoutMs": 300000}); err != nil {
			return 0, "", err
		}
		return time.Since(t0), filepath.Clean(trimNL(out.Stdout)), nil
	}
	// The first session fills the root's cache (the standard library
	// too, compiled once).
	_, gocache, err := session(0)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(gocache) {
		return fmt.Errorf("go env GOCACHE said %q in the session", gocache)
	}
	direct := func() (time.Duration, error) {
		cmd := exec.Command(build[0], build[1:]...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOCACHE="+gocache, "GOMODCACHE="+filepath.Join(filepath.Dir(gocache), "go-mod"))
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("go build: %v: %s", err, out)
		}
		return time.Since(t0), nil
	}
	if _, err := direct(); err != nil {
		return err
	}
	var got, base0 durations
	n := b.iters(9, 3)
	for i := range n {
		d, _, err := session(i + 1)
		if err != nil {
			return err
		}
		got = append(got, d)
		dd, err := direct()
		if err != nil {
			return err
		}
		base0 = append(base0, dd)
	}
	g, bs := got.pct(50), base0.pct(50)
	b.add(row{Figure: "`go build` of a small module in a new MCP session, the root's cache warm from an earlier one, p50", Value: fmtDur(g), Baseline: "the same build run directly with that cache: " + fmtDur(bs),
		Ratio: ratio(float64(g), float64(bs)), Target: "≤ 1.5×", Met: met(float64(g) <= 1.5*float64(bs)),
		Why: "the build runs confined, behind a run_command round trip"})
	b.note("The root's cache: a first `toolhost mcp` session on a root builds a module that imports fmt and fills the root's cache in the state directory; then, %d times in turn, a new session's `run_command` of `go build -o /dev/null .` (timed from the call to its answer, after a first call that opens the workspace) and the same build run directly with GOCACHE and GOMODCACHE at that cache.", n)
	return nil
}

// trimNL drops the trailing newlines of s.
func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
