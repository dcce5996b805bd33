package capture

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParseMarker(t *testing.T) {
	ts := time.Date(2026, 3, 23, 14, 5, 58, 0, time.UTC)
	tests := []struct {
		name string
		line string
		want Marker // Raw is filled in from line
		ok   bool
	}{
		{"json start", `{"type":"step_transition","step":"build","status":"start","ts":1743554401.12}`,
			Marker{Kind: MarkerStep, Step: "build", Status: "start", TS: time.UnixMicro(1743554401120000)}, true},
		{"json done elapsedMs index total", `{"type":"step_transition","step":"build","status":"done","elapsedMs":38200,"index":2,"total":5}`,
			Marker{Kind: MarkerStep, Step: "build", Status: "done", Elapsed: 38200 * time.Millisecond, Index: 2, Total: 5}, true},
		{"json fail with unknown fields", `{"type":"step_transition","step":"t","status":"fail","x":[1,{"y":null}]}`,
			Marker{Kind: MarkerStep, Step: "t", Status: "fail"}, true},
		{"json skip warning", `{"type":"step_transition","step":"t","status":"skip","warning":true}`,
			Marker{Kind: MarkerStep, Step: "t", Status: "skip", Warning: true}, true},
		{"json ts as rfc3339", `{"type":"step_transition","step":"t","status":"start","ts":"2026-03-23T14:05:58Z"}`,
			Marker{Kind: MarkerStep, Step: "t", Status: "start", TS: ts}, true},
		{"json wrongly typed optional fields ignored", `{"type":"step_transition","step":"t","status":"done","ts":"soon","index":-1,"total":1.5,"elapsed":"x"}`,
			Marker{Kind: MarkerStep, Step: "t", Status: "done"}, true},
		{"json heartbeat elapsed seconds", `{"type":"heartbeat","step":"build","elapsed":10.5}`,
			Marker{Kind: MarkerHeartbeat, Step: "build", Elapsed: 10500 * time.Millisecond}, true},
		{"json heartbeat elapsed string", `{"type":"heartbeat","step":"build","elapsed":"1m2s"}`,
			Marker{Kind: MarkerHeartbeat, Step: "build", Elapsed: 62 * time.Second}, true},
		{"json heartbeat without step", `{"type":"heartbeat"}`, Marker{Kind: MarkerHeartbeat}, true},
		{"json indented, CRLF", "  {\"type\":\"heartbeat\",\"step\":\"b\"}\r", Marker{Kind: MarkerHeartbeat, Step: "b"}, true},
		{"json bad status", `{"type":"step_transition","step":"b","status":"started"}`, Marker{}, false},
		{"json empty step", `{"type":"step_transition","step":" \u0007 ","status":"start"}`, Marker{}, false},
		{"json step not a string", `{"type":"step_transition","step":3,"status":"start"}`, Marker{}, false},
		{"json other type", `{"type":"log","step":"b","status":"start"}`, Marker{}, false},
		{"json invalid", `{"type":"heartbeat"`, Marker{}, false},
		{"json trailing garbage", `{"type":"heartbeat"} x`, Marker{}, false},
		{"json null", `{}`, Marker{}, false},

		{"step with time", "[STEP 02/22] step-id @ 2026-03-23T14:05:58Z",
			Marker{Kind: MarkerStep, Step: "step-id", Status: "start", Index: 3, Total: 22, TS: ts}, true},
		{"step unknown total", "[STEP 00/??] fetch", Marker{Kind: MarkerStep, Step: "fetch", Status: "start", Index: 1}, true},
		{"step bad time kept in name", "[STEP 1/2] a @ b", Marker{Kind: MarkerStep, Step: "a @ b", Status: "start", Index: 2, Total: 2}, true},
		{"step CRLF", "[STEP 1/2] a\r", Marker{Kind: MarkerStep, Step: "a", Status: "start", Index: 2, Total: 2}, true},
		{"step no name", "[STEP 02/22]", Marker{}, false},
		{"step no space", "[STEP 02/22]x", Marker{}, false},
		{"step lower case", "[step 02/22] x", Marker{}, false},
		{"step too many digits", "[STEP 1234567890/2] x", Marker{}, false},
		{"step missing total", "[STEP 1/] x", Marker{}, false},

		{"heartbeat em dash", "[HEARTBEAT] step-id — 10s elapsed", Marker{Kind: MarkerHeartbeat, Step: "step-id", Elapsed: 10 * time.Second}, true},
		{"heartbeat double dash", "[HEARTBEAT] step-id -- 1m30s elapsed", Marker{Kind: MarkerHeartbeat, Step: "step-id", Elapsed: 90 * time.Second}, true},
		{"heartbeat dash bare seconds", "[HEARTBEAT] step-id - 2.5", Marker{Kind: MarkerHeartbeat, Step: "step-id", Elapsed: 2500 * time.Millisecond}, true},
		{"heartbeat dashed name", "[HEARTBEAT] a - b — 3s elapsed", Marker{Kind: MarkerHeartbeat, Step: "a - b", Elapsed: 3 * time.Second}, true},
		{"heartbeat no elapsed", "[HEARTBEAT] step-id", Marker{Kind: MarkerHeartbeat, Step: "step-id"}, true},
		{"heartbeat negative elapsed stays in name", "[HEARTBEAT] s — -3s elapsed", Marker{Kind: MarkerHeartbeat, Step: "s — -3s elapsed"}, true},
		{"heartbeat no name", "[HEARTBEAT] ", Marker{}, false},

		{"check with elapsed", "  ✓ step-id (38.2s)", Marker{Kind: MarkerStep, Step: "step-id", Status: "done", Elapsed: 38200 * time.Millisecond}, true},
		{"cross", "✗ tests", Marker{Kind: MarkerStep, Step: "tests", Status: "fail"}, true},
		{"skip", "⊘ deploy (0s)", Marker{Kind: MarkerStep, Step: "deploy", Status: "skip"}, true},
		{"warning", "⚠ lint (1m)", Marker{Kind: MarkerStep, Step: "lint", Status: "done", Warning: true, Elapsed: time.Minute}, true},
		{"warning with VS16", "⚠️ lint", Marker{Kind: MarkerStep, Step: "lint", Status: "done", Warning: true}, true},
		{"parenthesis not a duration", "✓ build (linux)", Marker{Kind: MarkerStep, Step: "build (linux)", Status: "done"}, true},
		{"glyph without space", "✓build", Marker{}, false},
		{"glyph alone", "✓", Marker{}, false},
		{"glyph only elapsed", "✓ (1s)", Marker{}, false},
		{"glyph not at start", "ok ✓ build", Marker{}, false},
		{"too much indent", strings.Repeat(" ", 33) + "✓ build", Marker{}, false},
		{"max indent", strings.Repeat(" ", 32) + "✓ build", Marker{Kind: MarkerStep, Step: "build", Status: "done"}, true},

		{"name sanitised", "✓ a\x1b[31mb\u202ec\x7f\xffd", Marker{Kind: MarkerStep, Step: "a[31mbc\uFFFDd", Status: "done"}, true},
		{"name cut at 128 runes", "✓ " + strings.Repeat("é", 200), Marker{Kind: MarkerStep, Step: strings.Repeat("é", 128), Status: "done"}, true},
		{"invalid utf-8 before glyph", "\xff✓ build", Marker{}, false},
		{"plain", "plain stderr", Marker{}, false},
		{"empty", "", Marker{}, false},
		{"over 64 KiB", "✓ " + strings.Repeat("a", maxMarkerLine), Marker{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMarker([]byte(tt.line))
			want := tt.want
			if tt.ok {
				want.Raw = tt.line
			}
			if ok != tt.ok {
				t.Fatalf("parseMarker(%q) ok = %v, want %v (got %+v)", tt.line, ok, tt.ok, got)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parseMarker(%q) mismatch (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// readMarkerLines reads testdata/markers/name, skipping "# " comments.
func readMarkerLines(t testing.TB, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "markers", name))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte("# ")) {
			continue
		}
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if len(lines) == 0 {
		t.Fatalf("no lines in %s", name)
	}
	return lines
}

func TestParseMarkerTestdata(t *testing.T) {
	for _, line := range readMarkerLines(t, "valid.txt") {
		m, ok := parseMarker(line)
		if !ok {
			t.Errorf("parseMarker(%q) not recognised", line)
			continue
		}
		checkMarkerInvariants(t, line, m)
	}
	for _, line := range readMarkerLines(t, "invalid.txt") {
		if m, ok := parseMarker(line); ok {
			t.Errorf("parseMarker(%q) = %+v, want not a marker", line, m)
		}
	}
}

// TestMarkerCandidatePrefixes checks the property the capture relies on to
// pass plain bytes on at once: every prefix of a marker line is a candidate.
func TestMarkerCandidatePrefixes(t *testing.T) {
	for _, line := range readMarkerLines(t, "valid.txt") {
		for n := 0; n <= len(line); n++ {
			if !markerCandidate(line[:n]) {
				t.Errorf("markerCandidate(%q) = false, but %q is a marker", line[:n], line)
			}
		}
	}
	for _, plain := range []string{"hello", "x", " x", "[INFO", "[STEPS", "[HEARTBEATS", "✓x", "⚠️x", "\xff", strings.Repeat(" ", 33)} {
		if markerCandidate([]byte(plain)) {
			t.Errorf("markerCandidate(%q) = true, want false: plain output would be held back", plain)
		}
	}
}

// checkMarkerInvariants checks what every recognised marker promises.
func checkMarkerInvariants(t testing.TB, line []byte, m Marker) {
	t.Helper()
	if !utf8.ValidString(m.Step) {
		t.Errorf("parseMarker(%q).Step = %q: invalid UTF-8", line, m.Step)
	}
	if n := utf8.RuneCountInString(m.Step); n > maxStepRunes {
		t.Errorf("parseMarker(%q).Step has %d runes, want <= %d", line, n, maxStepRunes)
	}
	if strings.IndexFunc(m.Step, unicode.IsControl) >= 0 {
		t.Errorf("parseMarker(%q).Step = %q: has control characters", line, m.Step)
	}
	switch m.Kind {
	case MarkerStep:
		switch m.Status {
		case "start", "done", "fail", "skip":
		default:
			t.Errorf("parseMarker(%q).Status = %q", line, m.Status)
		}
		if m.Step == "" {
			t.Errorf("parseMarker(%q): step marker without a step name", line)
		}
	case MarkerHeartbeat:
		if m.Status != "" {
			t.Errorf("parseMarker(%q): heartbeat with status %q", line, m.Status)
		}
	default:
		t.Errorf("parseMarker(%q).Kind = %v", line, m.Kind)
	}
	if m.Index < 0 || m.Total < 0 || m.Elapsed < 0 {
		t.Errorf("parseMarker(%q) = %+v: negative index, total or elapsed", line, m)
	}
	if m.Raw != string(line) {
		t.Errorf("parseMarker(%q).Raw = %q", line, m.Raw)
	}
}

func FuzzParseMarker(f *testing.F) {
	for _, name := range []string{"valid.txt", "invalid.txt"} {
		for _, line := range readMarkerLines(f, name) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return // parseMarker takes one line
		}
		m, ok := parseMarker(line)
		if !ok {
			return
		}
		checkMarkerInvariants(t, line, m)
		for n := 0; n <= len(line) && n <= markerDecidePrefix+1; n++ {
			if !markerCandidate(line[:n]) {
				t.Errorf("markerCandidate(%q) = false, but %q is a marker", line[:n], line)
			}
		}
	})
}

func TestMarkerGlyphsShareLeadByte(t *testing.T) {
	for _, g := range markerGlyphs {
		if g.enc[0] != glyphLeadByte {
			t.Errorf("glyph %q starts with %#x, but parseMarker only tries glyphs after %#x", g.enc, g.enc[0], glyphLeadByte)
		}
	}
}
