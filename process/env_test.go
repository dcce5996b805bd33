package process

import (
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEnvAllowlist: children inherit only the allowlist of BaseEnv, plus
// EnvAllow patterns, with Spec.Env on top and the package's variables last.
func TestEnvAllowlist(t *testing.T) {
	t.Parallel()
	path := os.Getenv("PATH")
	base := []string{
		"PATH=" + path, "HOME=/home/u", "USER=u", "SHELL=/bin/sh", "LANG=C.UTF-8",
		"LC_ALL=C", "LC_CTYPE=C", "TERM=xterm", "TMPDIR=/tmp",
		"http_proxy=h", "HTTPS_PROXY=hs", "no_proxy=n", "ALL_PROXY=a",
		"SSL_CERT_FILE=/c", "NODE_EXTRA_CA_CERTS=/n", "GIT_SSL_CAINFO=/g",
		"AWS_SECRET_ACCESS_KEY=secret1", "GITHUB_TOKEN=secret2", "ANTHROPIC_API_KEY=secret3",
		"OPENAI_API_KEY=secret4", "NPM_TOKEN=secret5", "LD_PRELOAD=/evil.so",
		"MY_FLAG=1", "MY_OTHER=2", "MYNOT=3", "EXACT=4", "EXACTLY=5",
		"TOOLHOST_COMMAND=forged", "NOVALUE",
	}
	m := newTestManager(t, Config{BaseEnv: base, EnvAllow: []string{"MY_*", "EXACT"}})
	c, err := m.Start(Spec{
		Argv: []string{"env"},
		Env: map[string]*string{
			"GITHUB_TOKEN":     ptr("passed-on-purpose"),
			"HOME":             nil,
			"EXTRA":            ptr("a=b"),
			"TOOLHOST_COMMAND": ptr("forged-again"),
			EnvEventsFD:        ptr("9"),
		},
	}, Observer{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitDone(t, c, 10*time.Second)
	got := strings.Split(strings.TrimSpace(r.Output.Stdout), "\n")
	sort.Strings(got)
	want := []string{
		"PATH=" + path, "USER=u", "SHELL=/bin/sh", "LANG=C.UTF-8",
		"LC_ALL=C", "LC_CTYPE=C", "TERM=xterm", "TMPDIR=/tmp",
		"http_proxy=h", "HTTPS_PROXY=hs", "no_proxy=n", "ALL_PROXY=a",
		"SSL_CERT_FILE=/c", "NODE_EXTRA_CA_CERTS=/n", "GIT_SSL_CAINFO=/g",
		"GITHUB_TOKEN=passed-on-purpose", "EXTRA=a=b",
		"MY_FLAG=1", "MY_OTHER=2", "EXACT=4",
		"TOOLHOST_COMMAND=" + c.marker, "TOOLHOST_EVENTS_FD=3",
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("child environment mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(c.marker, m.nonce+"/") || !strings.HasSuffix(c.marker, "/"+c.ID()) {
		t.Errorf("marker %q, want <nonce>/<commandID>", c.marker)
	}
}

func TestEnvAllowPatternsValidated(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "A=B", "[", "A\x00"} {
		if _, err := NewManager(Config{ArtifactsDir: t.TempDir(), EnvAllow: []string{p}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("EnvAllow %q: got %v, want ErrInvalid", p, err)
		}
	}
}

func TestResolveArgv0(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := dir + "/tool"
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		argv0, dir, path string
		want             string
		reason           string
	}{
		{"tool", "", dir, exe, ""},
		{"tool", dir, "/nonexistent:" + dir, exe, ""},
		{"tool", dir, ":/nonexistent", exe, ""},       // empty entry: the working directory
		{"tool", dir, "sub/..:/nonexistent", exe, ""}, // relative entry: from the working directory
		{"tool", "", "", "", "not found: PATH is empty in the child's environment"},
		{"sub", dir, dir, "", "is a directory"},
		{"./tool", dir, "", exe, ""},
		{"./nope", dir, "", "", "not found: file does not exist"},
	}
	for _, tt := range tests {
		got, err := resolveArgv0(tt.argv0, tt.dir, tt.path)
		var reason string
		if err != nil {
			var se *SpawnError
			if !errors.As(err, &se) || !errors.Is(err, ErrSpawn) {
				t.Errorf("resolveArgv0(%q, %q, %q): %v is not a SpawnError", tt.argv0, tt.dir, tt.path, err)
				continue
			}
			reason = se.Reason
		}
		if diff := cmp.Diff([]string{tt.want, tt.reason}, []string{got, reason}); diff != "" {
			t.Errorf("resolveArgv0(%q, %q, %q) mismatch (-want +got):\n%s", tt.argv0, tt.dir, tt.path, diff)
		}
	}
}

// TestEnvSecretsNeverPass checks that a mount's secret variable,
// TOOLHOST_SECRET_<ID>, reaches no child, even when the allowlist lets
// every variable through.
func TestEnvSecretsNeverPass(t *testing.T) {
	t.Parallel()
	l, err := newEnvAllowList([]string{"*", "TOOLHOST_SECRET_*"})
	if err != nil {
		t.Fatal(err)
	}
	got := l.filter([]string{"TOOLHOST_SECRET_DATA={\"secretAccessKey\":\"planted\"}", "OTHER=1"})
	if diff := cmp.Diff(map[string]string{"OTHER": "1"}, got); diff != "" {
		t.Errorf("filtered environment mismatch (-want +got):\n%s", diff)
	}
}
