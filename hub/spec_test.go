package hub

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
	}{
		{"build=ssh -T build1 toolhost --root /srv/ws", Spec{Name: "build", Argv: []string{"ssh", "-T", "build1", "toolhost", "--root", "/srv/ws"}}},
		{`pod=kubectl exec -i pod -- toolhost --root '/w s'`, Spec{Name: "pod", Argv: []string{"kubectl", "exec", "-i", "pod", "--", "toolhost", "--root", "/w s"}}},
		{`c=docker exec -i "my c" toolhost --root /ws\ x ""`, Spec{Name: "c", Argv: []string{"docker", "exec", "-i", "my c", "toolhost", "--root", "/ws x", ""}}},
		{`q=sh -c "echo \"\$HOME\" \\ ok"`, Spec{Name: "q", Argv: []string{"sh", "-c", `echo "$HOME" \ ok`}}},
		{"local=toolhost  --root=/tmp/x\t", Spec{Name: "local", Argv: []string{"toolhost", "--root=/tmp/x"}}},
	}
	for _, tt := range tests {
		got, err := ParseSpec(tt.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseSpec(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"noequals", "=toolhost", "a/b=toolhost", "x=", "x=   ", `x=sh -c 'unterminated`, `x=sh -c "unterminated`, "-x=toolhost"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) succeeded, want an error", bad)
		}
	}
}

func TestValidName(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	names := []string{"", "a", "A9", "9", "_a", ".a", "-a", "a_b.c-d", "a/b", "a b", "é", "a\x00", strings.Repeat("a", 64), strings.Repeat("a", 65)}
	for c := range 256 {
		names = append(names, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)})+"a")
	}
	for _, n := range names {
		if got, want := validName(n), re.MatchString(n); got != want {
			t.Errorf("validName(%q) = %v, the regexp says %v", n, got, want)
		}
	}
}

func TestRemoteProgram(t *testing.T) {
	for argv, want := range map[string]int{
		"ssh -T h toolhost --root /ws":                   3,
		"ssh -T h /opt/bin/toolhost --root /ws":          3,
		"kubectl exec -i p -- toolhost --root /ws":       5,
		"toolhost --root /ws":                            -1, // local: nothing to bootstrap over
		"ssh -T h toolhost-old --root /ws":               -1,
		"env HOME=/x sh -c 'exec \"$0\"' toolhost --a b": 5,
	} {
		words, err := splitWords(argv)
		if err != nil {
			t.Fatal(err)
		}
		if got := remoteProgram(words); got != want {
			t.Errorf("remoteProgram(%q) = %d, want %d", argv, got, want)
		}
	}
}

func TestPrefixIDs(t *testing.T) {
	in := `{"handleId":"h-1","commandId":"cmd-1","seq":9007199254740993,"artifacts":{"stdoutPath":"/a/stdout.log","outputPath":"","byteCount":3},` +
		`"steps":[{"name":"x"}],"data":{"partial":{"handleId":"h-2","artifacts":{"stderrPath":"/b"}}},"path":"/not/an/artifact","handles":[{"handleId":"h-3","progressPath":"/p.json"}]}`
	var got, want map[string]any
	if err := json.Unmarshal(prefixIDs(json.RawMessage(in), "far/"), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"handleId":"far/h-1","commandId":"far/cmd-1","seq":9007199254740993,"artifacts":{"stdoutPath":"far//a/stdout.log","outputPath":"","byteCount":3},` +
		`"steps":[{"name":"x"}],"data":{"partial":{"handleId":"far/h-2","artifacts":{"stderrPath":"far//b"}}},"path":"/not/an/artifact","handles":[{"handleId":"far/h-3","progressPath":"far//p.json"}]}`
	if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefixIDs mismatch (-want +got):\n%s", diff)
	}
	// Digits of large numbers survive.
	if b := prefixIDs(json.RawMessage(in), "far/"); !json.Valid(b) || !strings.Contains(string(b), "9007199254740993") {
		t.Errorf("prefixIDs lost a number's digits: %s", b)
	}
	// Not JSON, or no object: unchanged.
	for _, raw := range []string{"", "null", "[1,2]", "{bad"} {
		if got := string(prefixIDs(json.RawMessage(raw), "far/")); got != raw {
			t.Errorf("prefixIDs(%q) = %q, want it unchanged", raw, got)
		}
	}
}
