package snapshot

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiffSimple(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"a\n", "a\n", ""},
		{"", "x\n", "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n"},
		{"x\n", "", "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n"},
		{"a\nb\nc\n", "a\nc\n", "--- a\n+++ b\n@@ -1,3 +1,2 @@\n a\n-b\n c\n"},
		{"a", "b", "--- a\n+++ b\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
	} {
		if got := unifiedDiff("a", "b", []byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("diff of %q and %q:\n%s\nwant:\n%s", tc.a, tc.b, got, tc.want)
		}
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// applyPatch applies a unified diff to a, checking every context and
// deleted line.
func applyPatch(t *testing.T, a, patch string) string {
	t.Helper()
	al := splitLines(a)
	var out []string
	pos := 0
	lines := strings.Split(patch, "\n")
	lines = lines[2 : len(lines)-1] // the --- and +++ lines; the last empty
	for i := 0; i < len(lines); i++ {
		m := hunkHeader.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("not a hunk header: %q\n%s", lines[i], patch)
		}
		start, _ := strconv.Atoi(m[1])
		count := 1
		if m[2] != "" {
			count, _ = strconv.Atoi(m[2])
		}
		if count > 0 {
			start--
		}
		if start < pos {
			t.Fatalf("hunks overlap\n%s", patch)
		}
		out = append(out, al[pos:start]...)
		pos = start
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "@@") {
			i++
			l := lines[i]
			nl := "\n"
			if i+1 < len(lines) && lines[i+1] == `\ No newline at end of file` {
				nl = ""
			}
			switch l[0] {
			case ' ', '-':
				if al[pos] != l[1:]+nl {
					t.Fatalf("line %d is %q, the patch says %q\n%s", pos, al[pos], l[1:]+nl, patch)
				}
				if l[0] == ' ' {
					out = append(out, al[pos])
				}
				pos++
			case '+':
				out = append(out, l[1:]+nl)
			case '\\':
			default:
				t.Fatalf("bad line %q", l)
			}
		}
	}
	out = append(out, al[pos:]...)
	return strings.Join(out, "")
}

// TestUnifiedDiffRandom applies the diff of random texts and compares.
func TestUnifiedDiffRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		var b strings.Builder
		for range rng.IntN(60) {
			fmt.Fprintf(&b, "l%d\n", rng.IntN(8))
		}
		if rng.IntN(3) == 0 {
			b.WriteString("end")
		}
		return b.String()
	}
	for i := range 500 {
		a, b := text(), text()
		p := unifiedDiff("a", "b", []byte(a), []byte(b))
		if a == b {
			if p != "" {
				t.Fatalf("equal texts, patch %q", p)
			}
			continue
		}
		if got := applyPatch(t, a, p); got != b {
			t.Fatalf("case %d: patch of %q to %q gives %q\n%s", i, a, b, got, p)
		}
	}
}

// TestUnifiedDiffLarge: past maxEdits the middle is replaced whole, and
// the patch still applies.
func TestUnifiedDiffLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	p := unifiedDiff("a", "b", []byte(a.String()), []byte(b.String()))
	if got := applyPatch(t, a.String(), p); got != b.String() {
		t.Fatal("large patch does not apply")
	}
}
