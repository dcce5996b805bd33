package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestRunSpawnErrors checks that an empty argv is invalid params and that an
// argv[0] that cannot run is SpawnFailed naming argv[0] and the reason, with
// argv[0] looked up in the child's PATH, not the server's.
func TestRunSpawnErrors(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	if err := os.WriteFile(filepath.Join(s.root, "notexec.sh"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.root, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	type want struct {
		Code   int
		Field  string
		Argv0  string
		Reason string
	}
	cases := []struct {
		name   string
		params map[string]any
		want   want
	}{
		{"empty argv", map[string]any{"argv": []string{}}, want{Code: -32602, Field: "argv"}},
		{"missing argv", map[string]any{}, want{Code: -32602, Field: "argv"}},
		{"not found", map[string]any{"argv": []string{"no-such-tool-7f3a"}}, want{Code: -32005, Argv0: "no-such-tool-7f3a", Reason: "not found in the child's PATH"}},
		{"not executable", map[string]any{"argv": []string{"./notexec.sh"}}, want{Code: -32005, Argv0: "./notexec.sh", Reason: "not executable"}},
		{"a directory", map[string]any{"argv": []string{"./adir"}}, want{Code: -32005, Argv0: "./adir", Reason: "is a directory"}},
		{"missing path", map[string]any{"argv": []string{"./nothere"}}, want{Code: -32005, Argv0: "./nothere", Reason: "not found: file does not exist"}},
		// sh is in the server's PATH, but the child's PATH is the request's.
		{"child's PATH", map[string]any{"argv": []string{"sh", "-c", "true"}, "env": map[string]any{"PATH": "/nonexistent-dir"}}, want{Code: -32005, Argv0: "sh", Reason: "not found in the child's PATH"}},
		{"PATH unset", map[string]any{"argv": []string{"sh"}, "env": map[string]any{"PATH": nil}}, want{Code: -32005, Argv0: "sh", Reason: "not found: PATH is empty in the child's environment"}},
	}
	for _, c := range cases {
		e := s.call("runCommand", c.params, nil)
		if e == nil {
			t.Errorf("%s: runCommand succeeded, want error %d", c.name, c.want.Code)
			continue
		}
		d := errData(e)
		got := want{Code: e.Code, Field: d.Field, Argv0: d.Argv0, Reason: d.Reason}
		if c.want.Code == -32602 {
			got.Reason, got.Argv0 = "", ""
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: error mismatch (-want +got):\n%s\n(message %q)", c.name, diff, e.Message)
		}
	}
	// A nothing-started spawn error leaves no artifacts behind.
	ents, err := os.ReadDir(s.artifactsDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("artifacts after spawn errors only: %v", ents)
	}

	// argv[0] is found in the child's PATH even where the server's has not it.
	bin := filepath.Join(s.root, "mybin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\necho mytool ran \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := s.run(map[string]any{"argv": []string{"mytool", "a b"}, "env": map[string]any{"PATH": bin + ":" + os.Getenv("PATH")}})
	if res.Stdout != "mytool ran a b\n" || !res.Success {
		t.Errorf("mytool from the child's PATH: status %s exit %v stdout %q stderr %q", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
}

// artifactsDir returns the artifacts directory the server reports.
func (s *server) artifactsDir() string {
	s.t.Helper()
	var res protocol.InitializeResult
	// initialize was answered already: read its answer.
	m, _ := s.waitFor(0, "the initialize answer", func(m msg) bool { return m.Method == "" && strings.Contains(string(m.Result), "artifactsDir") })
	if err := json.Unmarshal(m.Result, &res); err != nil {
		s.t.Fatal(err)
	}
	return res.Workspace.ArtifactsDir
}

// TestRunArgvIsNeverAShell checks that arguments reach the program as they
// are: no expansion, globbing, splitting or command separators.
func TestRunArgvIsNeverAShell(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		if err := os.WriteFile(filepath.Join(s.root, "a.txt"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"$HOME", "*", "a b", "; echo no", "`id`", "$(id)", "'q'", "\"dq\"", "|", "&&", ""}
		res := s.run(map[string]any{"argv": append([]string{"printf", "[%s]\\n"}, args...)})
		var want strings.Builder
		for _, a := range args {
			want.WriteString("[" + a + "]\n")
		}
		if diff := cmp.Diff(want.String(), res.Stdout); diff != "" {
			t.Errorf("stdout mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestRunCwd checks cwd relative to the root, absolute inside it, the root
// by default, outside (-32001, also through a symlink) and missing (-32003).
func TestRunCwd(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	sub := filepath.Join(s.root, "sub", "dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(s.root, "out")); err != nil {
		t.Fatal(err)
	}
	realOutside, _ := filepath.EvalSymlinks(outside)
	for _, c := range []struct {
		cwd  any
		want string
	}{
		{nil, s.root},
		{"sub/dir", sub},
		{"sub/../sub", filepath.Join(s.root, "sub")},
		{sub, sub},
		{".", s.root},
	} {
		p := map[string]any{"argv": []string{"pwd", "-P"}}
		if c.cwd != nil {
			p["cwd"] = c.cwd
		}
		res := s.run(p)
		if got := strings.TrimSpace(res.Stdout); got != c.want {
			t.Errorf("cwd %v: pwd says %q, want %q", c.cwd, got, c.want)
		}
	}
	for _, c := range []struct {
		cwd  string
		code int
	}{
		{realOutside, -32001},
		{"..", -32001},
		{"out", -32001},
		{"out/x", -32001},
		{"missing", -32003},
		{filepath.Join(s.root, "missing", "deeper"), -32003},
	} {
		e := s.call("runCommand", map[string]any{"argv": []string{"pwd"}, "cwd": c.cwd}, nil)
		if e == nil || e.Code != c.code {
			t.Errorf("cwd %q: error %v, want code %d", c.cwd, e, c.code)
			continue
		}
		if d := errData(e); d.Path == "" && d.Field == "" {
			t.Errorf("cwd %q: error data names neither path nor field: %+v", c.cwd, e.Data)
		}
	}
}

// TestRunStdin checks the given stdin text, and that without one a child
// reading stdin gets EOF at once and never eats the JSON-RPC stream.
func TestRunStdin(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		res := s.run(map[string]any{"argv": []string{"cat"}, "stdin": "hello\nworld, ünïcode\n"})
		if res.Stdout != "hello\nworld, ünïcode\n" || !res.Success {
			t.Errorf("cat with stdin: %s exit %v stdout %q", res.Status, res.ExitCode, res.Stdout)
		}
		// Without stdin: EOF at once, twice in a row, while the client
		// keeps writing requests on the server's stdin.
		for range 2 {
			id := s.request("runCommand", map[string]any{"argv": []string{"cat"}})
			id2 := s.request("runCommand", map[string]any{"argv": []string{"sh", "-c", "read x; echo got:$x"}})
			id3 := s.request("runCommand", map[string]any{"argv": []string{"echo", "after"}})
			for _, c := range []struct {
				p    *client.Pending
				want string
			}{{id, ""}, {id2, "got:\n"}, {id3, "after\n"}} {
				var r protocol.ToolResult
				if e := s.answer(c.p, &r); e != nil {
					t.Fatalf("request %v: %v", c.p.ID(), e)
				}
				if r.Stdout != c.want || !r.Success {
					t.Errorf("request %v: %s exit %v stdout %q, want %q", c.p.ID(), r.Status, r.ExitCode, r.Stdout, c.want)
				}
			}
		}
		s.shutdown()
	})
}

// secrets are variables a server's environment may hold that no child may
// see unless a request passes them.
var secrets = []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NPM_TOKEN"}

// childEnv parses `env -0` output.
func childEnv(out string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(out, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestRunEnvAllowlist checks that children (and their children) inherit only
// the allowlist plus initializationOptions.env.allow, with the request's
// env on top and null unsetting.
func TestRunEnvAllowlist(t *testing.T) {
	t.Parallel()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=/home/someone", "TMPDIR=" + os.TempDir(),
		"LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HTTPS_PROXY=http://proxy:3128", "SSL_CERT_FILE=/etc/ca.pem",
		"MYCO_REGION=eu", "MYCOOL=no", "OTHER=no",
	}
	for _, k := range secrets {
		env = append(env, k+"=secret-"+k)
	}
	// Unconfined: a confined command also gets its own TMPDIR and the
	// session's cache variables (TestSandboxAllows checks those).
	s := start(t, options{env: env, args: []string{"--sandbox", "off"}})
	s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Env: &protocol.EnvOptions{Allow: []string{"MYCO_*"}}}})

	wantBase := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/someone", "TMPDIR": os.TempDir(),
		"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HTTPS_PROXY": "http://proxy:3128", "SSL_CERT_FILE": "/etc/ca.pem",
		"MYCO_REGION": "eu",
	}
	check := func(name string, params map[string]any, want map[string]string) {
		t.Helper()
		res := s.run(params)
		got := childEnv(res.Stdout)
		if !strings.Contains(got["TOOLHOST_COMMAND"], "/"+res.CommandID) {
			t.Errorf("%s: TOOLHOST_COMMAND=%q, want it to name %s", name, got["TOOLHOST_COMMAND"], res.CommandID)
		}
		delete(got, "TOOLHOST_COMMAND")
		delete(got, "TOOLHOST_EVENTS_FD")
		delete(got, "PWD") // sh sets it
		delete(got, "SHLVL")
		delete(got, "_")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: child environment mismatch (-want +got):\n%s", name, diff)
		}
	}
	check("child", map[string]any{"argv": []string{"env", "-0"}}, wantBase)
	check("grandchild", map[string]any{"argv": []string{"sh", "-c", "sh -c 'env -0'"}}, wantBase)

	withOver := map[string]string{}
	for k, v := range wantBase {
		withOver[k] = v
	}
	withOver["GITHUB_TOKEN"] = "passed-on-purpose"
	withOver["NEW"] = "x"
	delete(withOver, "HOME")
	delete(withOver, "MYCO_REGION")
	check("request env", map[string]any{"argv": []string{"env", "-0"}, "env": map[string]any{
		"GITHUB_TOKEN": "passed-on-purpose", "NEW": "x", "HOME": nil, "MYCO_REGION": nil, "NOT_SET": nil,
	}}, withOver)

	// The marker variables cannot be forged by a request.
	res := s.run(map[string]any{"argv": []string{"env", "-0"}, "env": map[string]any{"TOOLHOST_COMMAND": "forged"}})
	if got := childEnv(res.Stdout)["TOOLHOST_COMMAND"]; got == "forged" {
		t.Errorf("a request forged TOOLHOST_COMMAND")
	}

	// A bad pattern in env.allow is refused at initialize.
	s2 := start(t, options{env: env})
	var out map[string]any
	e := s2.call("initialize", map[string]any{"initializationOptions": map[string]any{"env": map[string]any{"allow": []string{"A=B"}}}}, &out)
	if e == nil || e.Code != -32602 {
		t.Errorf("initialize with env.allow [\"A=B\"]: %v, want -32602", e)
	}
}

// TestRunResultFields checks a ToolResult's fields for an exit code, a
// success and the wire shape (signal null, no handleId).
func TestRunResultFields(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	var result json.RawMessage
	s.mustCall("runCommand", map[string]any{"argv": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, &result)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(result, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["handleId"]; ok {
		t.Errorf("runCommand result has a handleId: %s", result)
	}
	for _, k := range []string{"commandId", "status", "success", "exitCode", "signal", "startedAt", "endedAt", "durationMs", "stdout", "stderr", "stdoutTruncated", "stderrTruncated", "artifacts", "steps"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result lacks %q: %s", k, result)
		}
	}
	if string(raw["signal"]) != "null" {
		t.Errorf("signal = %s, want null", raw["signal"])
	}
	var res protocol.ToolResult
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatal(err)
	}
	type fields struct {
		Status          string
		Success         bool
		ExitCode        *int
		Signal          *string
		Stdout, Stderr  string
		StdoutTruncated bool
	}
	want := fields{Status: "completed", ExitCode: ptr(3), Stdout: "out\n", Stderr: "err\n"}
	got := fields{string(res.Status), res.Success, res.ExitCode, res.Signal, res.Stdout, res.Stderr, res.StdoutTruncated}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if res.EndedAt.Before(res.StartedAt) || res.DurationMs < 0 || res.DurationMs > res.EndedAt.Sub(res.StartedAt).Milliseconds()+1 {
		t.Errorf("times: startedAt %v endedAt %v durationMs %d", res.StartedAt, res.EndedAt, res.DurationMs)
	}
	ok := s.run(map[string]any{"argv": []string{"true"}})
	if !ok.Success || ok.Status != "completed" || ok.ExitCode == nil || *ok.ExitCode != 0 || ok.CommandID == res.CommandID {
		t.Errorf("true: %+v", ok)
	}
}

// verifyArtifacts checks the artifact files: private modes, and byteCount,
// lineCount and sha256 against outputPath's content, which it returns.
func verifyArtifacts(t *testing.T, a protocol.Artifacts) []byte {
	t.Helper()
	for _, p := range []string{a.StdoutPath, a.StderrPath, a.OutputPath} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("artifact: %v", err)
		}
		if fi.Mode() != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", p, fi.Mode())
		}
		if !filepath.IsAbs(p) {
			t.Errorf("artifact path %q is not absolute", p)
		}
		di, err := os.Stat(filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		if di.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want drwx------", filepath.Dir(p), di.Mode())
		}
	}
	f, err := os.Open(a.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	var n, lines int64
	var last byte
	buf := make([]byte, 1<<20)
	var head []byte
	for {
		k, err := f.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			lines += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
			if len(head) < 1<<20 {
				head = append(head, buf[:min(k, 1<<20-len(head))]...)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n > 0 && last != '\n' {
		lines++ // a last line without a newline counts
	}
	got := protocol.Artifacts{StdoutPath: a.StdoutPath, StderrPath: a.StderrPath, OutputPath: a.OutputPath, ByteCount: n, LineCount: lines, Sha256: hex.EncodeToString(h.Sum(nil))}
	if diff := cmp.Diff(got, a); diff != "" {
		t.Errorf("artifacts do not describe outputPath (-file +result):\n%s", diff)
	}
	return head
}

// TestRunOutputHeadTail checks inline head and tail with the cut line, the
// full output in the artifacts, valid UTF-8 at a cut inside a rune, and
// the interleaved outputPath.
func TestRunOutputHeadTail(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)

	res := s.run(map[string]any{"argv": []string{"seq", "1", "20000"}, "outputLimitBytes": 1000})
	var full strings.Builder
	for i := 1; i <= 20000; i++ {
		full.WriteString(itoa(i) + "\n")
	}
	if !res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("truncated: stdout %v stderr %v, want true false", res.StdoutTruncated, res.StderrTruncated)
	}
	if !strings.HasPrefix(res.Stdout, "1\n2\n3\n") || !strings.HasSuffix(res.Stdout, "19999\n20000\n") {
		t.Errorf("inline stdout lacks head or tail: %q", res.Stdout)
	}
	if len(res.Stdout) > 1300 {
		t.Errorf("inline stdout is %d bytes for a limit of 1000", len(res.Stdout))
	}
	left := len(full.String()) - (len(res.Stdout) - len(cutLine(res.Stdout)))
	cut := cutLine(res.Stdout)
	if cut == "" || !strings.Contains(cut, itoa(left)) || !strings.Contains(cut, res.Artifacts.StdoutPath) {
		t.Errorf("the cut line %q should say %d bytes were left out and name %s", cut, left, res.Artifacts.StdoutPath)
	}
	b, err := os.ReadFile(res.Artifacts.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != full.String() {
		t.Errorf("stdoutPath holds %d bytes, want the %d of the whole output", len(b), full.Len())
	}
	verifyArtifacts(t, res.Artifacts)

	// A cut inside multi-byte runes still leaves valid UTF-8.
	res = s.run(map[string]any{"argv": []string{"sh", "-c", "i=0; while [ $i -lt 3000 ]; do printf 'é€'; i=$((i+1)); done"}, "outputLimitBytes": 1001})
	if !utf8.ValidString(res.Stdout) || !res.StdoutTruncated {
		t.Errorf("inline stdout valid UTF-8 %v, truncated %v: %q", utf8.ValidString(res.Stdout), res.StdoutTruncated, res.Stdout)
	}
	// Invalid UTF-8 from the child is made valid inline; the file keeps it.
	res = s.run(map[string]any{"argv": []string{"printf", "a\\377b\\n"}})
	if !utf8.ValidString(res.Stdout) {
		t.Errorf("inline stdout is not valid UTF-8: %q", res.Stdout)
	}
	if b, _ := os.ReadFile(res.Artifacts.StdoutPath); string(b) != "a\xffb\n" {
		t.Errorf("stdoutPath holds %q, want the child's bytes", b)
	}

	// Interleaved in arrival order; each stream also alone.
	res = s.run(map[string]any{"argv": []string{"sh", "-c", "echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; sleep 0.2; printf four >&2"}})
	got := verifyArtifacts(t, res.Artifacts)
	if diff := cmp.Diff("one\ntwo\nthree\nfour", string(got)); diff != "" {
		t.Errorf("outputPath mismatch (-want +got):\n%s", diff)
	}
	if res.Artifacts.LineCount != 4 {
		t.Errorf("lineCount %d, want 4 (a last line without newline counts)", res.Artifacts.LineCount)
	}
	so, _ := os.ReadFile(res.Artifacts.StdoutPath)
	se, _ := os.ReadFile(res.Artifacts.StderrPath)
	if string(so) != "one\nthree\n" || string(se) != "two\nfour" {
		t.Errorf("stdoutPath %q stderrPath %q", so, se)
	}
	if res.Stdout != "one\nthree\n" || res.Stderr != "two\nfour" {
		t.Errorf("inline stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// cutLine returns the line of s that says what was left out, or "".
func cutLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "bytes") && (strings.Contains(l, "omitted") || strings.Contains(l, "left out") || strings.Contains(l, "truncated")) {
			return l + "\n"
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }
