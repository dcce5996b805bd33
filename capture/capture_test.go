package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// captureRecorder collects what a Capture reports through its callbacks.
type captureRecorder struct {
	mu      sync.Mutex
	markers []Marker
	out     map[string]*bytes.Buffer
}

func (r *captureRecorder) options(limit int) Options {
	r.out = map[string]*bytes.Buffer{"stdout": {}, "stderr": {}}
	return Options{
		InlineLimit: limit,
		OnMarker: func(m Marker) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.markers = append(r.markers, m)
		},
		OnOutput: func(stream string, p []byte) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.out[stream].Write(p)
		},
	}
}

func (r *captureRecorder) output(stream string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[stream].String()
}

func (r *captureRecorder) steps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, m := range r.markers {
		s = append(s, m.Kind.String()+":"+m.Status+":"+m.Step)
	}
	return s
}

func newTestCapture(t testing.TB, limit int) (*Capture, *captureRecorder) {
	t.Helper()
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newTestCaptureIn(t, a, "cmd-1", limit)
}

func newTestCaptureIn(t testing.TB, a *Artifacts, id string, limit int) (*Capture, *captureRecorder) {
	t.Helper()
	r := &captureRecorder{}
	c, err := a.NewCapture(id, r.options(limit))
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

func mustWrite(t testing.TB, w interface{ Write([]byte) (int, error) }, s string) {
	t.Helper()
	n, err := w.Write([]byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// captured is everything a Capture produced, for comparisons.
type captured struct {
	Stdout, Stderr, Output string // artifact files
	InlineStdout           string
	InlineStderr           string
	OnStdout, OnStderr     string
	Markers                []Marker
	Summary                Output
}

func collect(t testing.TB, c *Capture, r *captureRecorder) captured {
	t.Helper()
	o, err := c.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	r.mu.Lock()
	markers := append([]Marker(nil), r.markers...)
	r.mu.Unlock()
	return captured{
		Stdout:       readFile(t, o.StdoutPath),
		Stderr:       readFile(t, o.StderrPath),
		Output:       readFile(t, o.OutputPath),
		InlineStdout: o.Stdout,
		InlineStderr: o.Stderr,
		OnStdout:     r.output("stdout"),
		OnStderr:     r.output("stderr"),
		Markers:      markers,
		Summary:      o,
	}
}

func TestCaptureRoutesMarkers(t *testing.T) {
	stderr := "compiling\n" +
		"[STEP 00/02] build @ 2026-03-23T14:05:58Z\n" +
		"warning: x\r\n" +
		"  ✓ build (1.5s)\r\n" +
		`{"type":"heartbeat","step":"test","elapsed":2}` + "\n" +
		`{"type":"log","msg":"not a marker"}` + "\n" +
		"[HEARTBEAT] test — 3s elapsed\n" +
		"✗ test\n" +
		"tail without newline"
	tests := []struct {
		name   string
		chunks func(string) []string
	}{
		{"one write", func(s string) []string { return []string{s} }},
		{"byte by byte", func(s string) []string {
			var out []string
			for i := range len(s) {
				out = append(out, s[i:i+1])
			}
			return out
		}},
		{"line by line", func(s string) []string { return strings.SplitAfter(s, "\n") }},
	}
	wantPlain := "compiling\nwarning: x\r\n" + `{"type":"log","msg":"not a marker"}` + "\ntail without newline"
	wantSteps := []string{"step:start:build", "step:done:build", "heartbeat::test", "heartbeat::test", "step:fail:test"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := newTestCapture(t, 0)
			for _, chunk := range tt.chunks(stderr) {
				mustWrite(t, c.Stderr(), chunk)
			}
			got := collect(t, c, r)
			if diff := cmp.Diff(wantPlain, got.Stderr); diff != "" {
				t.Errorf("stderr.log mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantPlain, got.InlineStderr); diff != "" {
				t.Errorf("inline stderr mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantPlain, got.OnStderr); diff != "" {
				t.Errorf("OnOutput stderr mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(stderr, got.Output); diff != "" {
				t.Errorf("output.log mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantSteps, r.steps()); diff != "" {
				t.Errorf("markers mismatch (-want +got):\n%s", diff)
			}
			if want := int64(len(wantPlain)); c.Bytes() != want {
				t.Errorf("Bytes() = %d, want %d", c.Bytes(), want)
			}
		})
	}
}

func TestCaptureMarkerFields(t *testing.T) {
	c, r := newTestCapture(t, 0)
	mustWrite(t, c.Stderr(), "[STEP 02/22] step-id @ 2026-03-23T14:05:58Z\r\n  ⚠ lint (38.2s)\n")
	collect(t, c, r)
	want := []Marker{
		{Kind: MarkerStep, Step: "step-id", Status: "start", Index: 3, Total: 22,
			TS: time.Date(2026, 3, 23, 14, 5, 58, 0, time.UTC), Raw: "[STEP 02/22] step-id @ 2026-03-23T14:05:58Z\r"},
		{Kind: MarkerStep, Step: "lint", Status: "done", Warning: true, Elapsed: 38200 * time.Millisecond, Raw: "  ⚠ lint (38.2s)"},
	}
	if diff := cmp.Diff(want, r.markers); diff != "" {
		t.Errorf("markers mismatch (-want +got):\n%s", diff)
	}
}

// TestCaptureDoesNotHoldBackPlainOutput checks that a partial line is passed
// on at once unless it may still become a marker.
func TestCaptureDoesNotHoldBackPlainOutput(t *testing.T) {
	c, r := newTestCapture(t, 0)
	steps := []struct {
		write, wantSoFar string
	}{
		{"Password: ", "Password: "},
		{"\n", "Password: \n"},
		{"  ", "Password: \n"},    // may be an indented marker
		{"✓", "Password: \n"},     // still may be
		{"x", "Password: \n  ✓x"}, // no: "✓x" is not a marker
		{" more\n[", "Password: \n  ✓x more\n"},
		{"STE", "Password: \n  ✓x more\n"},
		{"PS", "Password: \n  ✓x more\n[STEPS"},
		{"\n{\"a\":", "Password: \n  ✓x more\n[STEPS\n"},
		{"1}\n", "Password: \n  ✓x more\n[STEPS\n{\"a\":1}\n"},
		{"⊘ held", "Password: \n  ✓x more\n[STEPS\n{\"a\":1}\n"},
	}
	for _, s := range steps {
		mustWrite(t, c.Stderr(), s.write)
		if diff := cmp.Diff(s.wantSoFar, r.output("stderr")); diff != "" {
			t.Fatalf("after writing %q: OnOutput stderr mismatch (-want +got):\n%s", s.write, diff)
		}
	}
	c.Flush() // the process ended: the partial line is plain output as it is
	want := "Password: \n  ✓x more\n[STEPS\n{\"a\":1}\n⊘ held"
	if diff := cmp.Diff(want, r.output("stderr")); diff != "" {
		t.Fatalf("after Flush: OnOutput stderr mismatch (-want +got):\n%s", diff)
	}
	// After Flush the next bytes start a new line, so a marker is recognised.
	mustWrite(t, c.Stderr(), "✓ next\n")
	got := collect(t, c, r)
	if diff := cmp.Diff([]string{"step:done:next"}, r.steps()); diff != "" {
		t.Errorf("markers mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got.Stderr); diff != "" {
		t.Errorf("stderr.log mismatch (-want +got):\n%s", diff)
	}
}

// TestCaptureLongLineStreams checks that a line over 64 KiB is never a marker
// and is passed on before its end arrives, without being buffered whole.
func TestCaptureLongLineStreams(t *testing.T) {
	c, r := newTestCapture(t, 0)
	head := `{"type":"step_transition","step":"x","status":"start","pad":"`
	mustWrite(t, c.Stderr(), head)
	if got := r.output("stderr"); got != "" {
		t.Fatalf("OnOutput got %q before the line could be judged", got)
	}
	pad := strings.Repeat("a", 32<<10)
	for range 4 {
		mustWrite(t, c.Stderr(), pad)
	}
	if got, want := len(r.output("stderr")), len(head)+4*len(pad); got != want {
		t.Fatalf("OnOutput has %d bytes of a %d-byte unfinished line, want all of them", got, want)
	}
	if n := cap(c.stderr.pending); n > maxMarkerLine+markerDecidePrefix {
		t.Errorf("pending buffer cap %d, want <= %d", n, maxMarkerLine+markerDecidePrefix)
	}
	mustWrite(t, c.Stderr(), "\"}\n✓ after\n")
	got := collect(t, c, r)
	line := head + strings.Repeat(pad, 4) + "\"}\n"
	if got.Stderr != line {
		t.Errorf("stderr.log has %d bytes, want the %d-byte line", len(got.Stderr), len(line))
	}
	if diff := cmp.Diff([]string{"step:done:after"}, r.steps()); diff != "" {
		t.Errorf("markers mismatch (-want +got):\n%s", diff)
	}
	// A complete line of exactly 64 KiB can still be a marker; one byte more cannot.
	for _, tt := range []struct {
		extra int
		want  bool
	}{{0, true}, {1, false}} {
		c, r := newTestCapture(t, 0)
		prefix := "✓ "
		line := prefix + strings.Repeat("s", maxMarkerLine-len(prefix)+tt.extra)
		mustWrite(t, c.Stderr(), line[:100])
		mustWrite(t, c.Stderr(), line[100:]+"\n")
		collect(t, c, r)
		if got := len(r.steps()) == 1; got != tt.want {
			t.Errorf("%d-byte marker line recognised = %v, want %v", len(line), got, tt.want)
		}
	}
}

func TestCaptureInterleavesAndSummarises(t *testing.T) {
	c, r := newTestCapture(t, 0)
	mustWrite(t, c.Stdout(), "out 1\n")
	mustWrite(t, c.Stderr(), "err 1\n✓ build\n")
	mustWrite(t, c.Stdout(), "out 2 ")
	mustWrite(t, c.Stderr(), "err 2\n")
	mustWrite(t, c.Stdout(), "no newline")
	got := collect(t, c, r)
	want := "out 1\nerr 1\n✓ build\nout 2 err 2\nno newline"
	if diff := cmp.Diff(want, got.Output); diff != "" {
		t.Errorf("output.log mismatch (-want +got):\n%s", diff)
	}
	sum := sha256.Sum256([]byte(want))
	wantSummary := Output{
		Stdout:     "out 1\nout 2 no newline",
		Stderr:     "err 1\nerr 2\n",
		ByteCount:  int64(len(want)),
		LineCount:  5,
		Sha256:     hex.EncodeToString(sum[:]),
		StdoutPath: filepath.Join(c.dir, "stdout.log"),
		StderrPath: filepath.Join(c.dir, "stderr.log"),
		OutputPath: filepath.Join(c.dir, "output.log"),
	}
	if diff := cmp.Diff(wantSummary, got.Summary); diff != "" {
		t.Errorf("Output mismatch (-want +got):\n%s", diff)
	}
	if !filepath.IsAbs(got.Summary.OutputPath) {
		t.Errorf("OutputPath %q is not absolute", got.Summary.OutputPath)
	}
}

func TestCaptureInlineTruncation(t *testing.T) {
	c, r := newTestCapture(t, 16)
	mustWrite(t, c.Stdout(), "0123456789")
	mustWrite(t, c.Stdout(), strings.Repeat("-", 1<<20))
	mustWrite(t, c.Stdout(), "abcdefgh")
	mustWrite(t, c.Stderr(), "short\n")
	got := collect(t, c, r)
	wantStdout := "01234567\n… [1048578 bytes omitted; full output in " + got.Summary.StdoutPath + "] …\nabcdefgh"
	if diff := cmp.Diff(wantStdout, got.InlineStdout); diff != "" {
		t.Errorf("inline stdout mismatch (-want +got):\n%s", diff)
	}
	if !got.Summary.StdoutTruncated || got.Summary.StderrTruncated {
		t.Errorf("truncated = %v, %v; want true, false", got.Summary.StdoutTruncated, got.Summary.StderrTruncated)
	}
	if n := len(got.Stdout); n != 10+1<<20+8 {
		t.Errorf("stdout.log has %d bytes, want all %d", n, 10+1<<20+8)
	}
}

func TestCaptureEvents(t *testing.T) {
	c, r := newTestCapture(t, 0)
	ev := `{"type":"step_transition","step":"a","status":"start","ts":1743554401.12}` + "\n" +
		"not json\n" +
		`{"type":"heartbeat","step":"a"}` + "\r\n" +
		`{"type":"step_transition","step":"long","status":"start","pad":"` + strings.Repeat("p", maxMarkerLine) + "\"}\n" +
		`{"type":"step_transition","step":"a","status":"done"}`
	for i := 0; i < len(ev); i += 7 {
		mustWrite(t, c.Events(), ev[i:min(i+7, len(ev))])
	}
	mustWrite(t, c.Stderr(), "plain\n")
	c.Flush() // the final event had no newline
	got := collect(t, c, r)
	if diff := cmp.Diff([]string{"step:start:a", "heartbeat::a", "step:done:a"}, r.steps()); diff != "" {
		t.Errorf("markers mismatch (-want +got):\n%s", diff)
	}
	wantOutput := `{"type":"step_transition","step":"a","status":"start","ts":1743554401.12}` + "\n" +
		`{"type":"heartbeat","step":"a"}` + "\r\n" + "plain\n" +
		`{"type":"step_transition","step":"a","status":"done"}` + "\n"
	if diff := cmp.Diff(wantOutput, got.Output); diff != "" {
		t.Errorf("output.log mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("plain\n", got.Stderr); diff != "" {
		t.Errorf("stderr.log mismatch (-want +got):\n%s", diff)
	}
	if c.Bytes() != int64(len("plain\n")) {
		t.Errorf("Bytes() = %d: events must not count as output", c.Bytes())
	}
}

func TestCaptureCloseIdempotentAndFinal(t *testing.T) {
	c, _ := newTestCapture(t, 0)
	mustWrite(t, c.Stderr(), "✓ pending")
	o1, err1 := c.Close()
	o2, err2 := c.Close()
	if err1 != nil || err2 != nil {
		t.Fatalf("Close errors: %v, %v", err1, err2)
	}
	if diff := cmp.Diff(o1, o2); diff != "" {
		t.Errorf("second Close mismatch (-want +got):\n%s", diff)
	}
	if o1.Stderr != "✓ pending" {
		t.Errorf("Close did not flush the pending line: Stderr = %q", o1.Stderr)
	}
	for name, w := range map[string]interface{ Write([]byte) (int, error) }{
		"stdout": c.Stdout(), "stderr": c.Stderr(), "events": c.Events(),
	} {
		if _, err := w.Write([]byte("x")); !errors.Is(err, ErrClosed) {
			t.Errorf("%s Write after Close: err = %v, want ErrClosed", name, err)
		}
	}
	c.Flush() // harmless after Close
}

// TestCaptureConcurrentStreams writes all three streams at once (run with
// -race) and checks that each stream's bytes arrive whole and in order.
func TestCaptureConcurrentStreams(t *testing.T) {
	c, r := newTestCapture(t, 1<<20)
	var wg sync.WaitGroup
	const n = 2000
	wg.Go(func() {
		for i := range n {
			mustWrite(t, c.Stdout(), "o"+strings.Repeat("x", i%50)+"\n")
		}
	})
	wg.Go(func() {
		for i := range n {
			mustWrite(t, c.Stderr(), "e"+strings.Repeat("y", i%50)+"\n✓ s\n")
		}
	})
	wg.Go(func() {
		for range n {
			mustWrite(t, c.Events(), `{"type":"heartbeat","step":"h"}`+"\n")
			_ = c.Bytes()
		}
	})
	wg.Wait()
	got := collect(t, c, r)
	var wantOut, wantErr strings.Builder
	for i := range n {
		wantOut.WriteString("o" + strings.Repeat("x", i%50) + "\n")
		wantErr.WriteString("e" + strings.Repeat("y", i%50) + "\n")
	}
	if got.Stdout != wantOut.String() || got.InlineStdout != wantOut.String() {
		t.Errorf("stdout differs from what was written")
	}
	if got.Stderr != wantErr.String() || got.OnStderr != wantErr.String() {
		t.Errorf("stderr differs from what was written")
	}
	if len(r.markers) != 2*n {
		t.Errorf("got %d markers, want %d", len(r.markers), 2*n)
	}
	wantLen := wantOut.Len() + wantErr.Len() + n*len("✓ s\n") + n*len(`{"type":"heartbeat","step":"h"}`+"\n")
	if len(got.Output) != wantLen || got.Summary.ByteCount != int64(wantLen) {
		t.Errorf("output.log has %d bytes (ByteCount %d), want %d", len(got.Output), got.Summary.ByteCount, wantLen)
	}
	sum := sha256.Sum256([]byte(got.Output))
	if got.Summary.Sha256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Sha256 does not match output.log")
	}
	if want := int64(strings.Count(got.Output, "\n")); got.Summary.LineCount != want {
		t.Errorf("LineCount = %d, want %d", got.Summary.LineCount, want)
	}
}

func TestCaptureStdoutWriteDoesNotAllocate(t *testing.T) {
	c, _ := newTestCapture(t, 0)
	chunk := bytes.Repeat([]byte("line of output\n"), 2000)
	mustWrite(t, c.Stdout(), string(chunk)) // allocate the inline buffers
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Stdout().Write(chunk); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("stdout Write allocates %v times per call, want 0", allocs)
	}
}

// TestCaptureMemoryBounded writes 256 MiB through a Capture and checks that
// the heap does not grow with it.
func TestCaptureMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 512 MiB of files")
	}
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	var markers int
	c, err := a.NewCapture("big", Options{
		OnOutput: func(_ string, p []byte) { seen += int64(len(p)) },
		OnMarker: func(Marker) { markers++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("0123456789abcdef0123456789abcde\n"), 1024) // 32 KiB
	errChunk := bytes.Repeat([]byte("warning: something on stderr\n"), 1000)
	errChunk = append(errChunk, "✓ step\n{\"type\":\"heartbeat\"}\n[STEP 1/2] "...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const total = 256 << 20
	for written := 0; written < total; written += len(chunk) {
		if _, err := c.Stdout().Write(chunk); err != nil {
			t.Fatal(err)
		}
		if written%(8<<20) == 0 {
			if _, err := c.Stderr().Write(errChunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	o, err := c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if o.ByteCount < total || seen < total || markers == 0 {
		t.Fatalf("ByteCount = %d, OnOutput saw %d, %d markers; want >= %d bytes and some markers", o.ByteCount, seen, markers, total)
	}
	heapGrowth := int64(after.HeapInuse) - int64(before.HeapInuse)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("heap in use grew %d bytes; %d bytes allocated in all while writing %d", heapGrowth, allocated, total)
	if heapGrowth > 16<<20 {
		t.Errorf("heap in use grew by %d bytes, want < 16 MiB", heapGrowth)
	}
	if allocated > 16<<20 {
		t.Errorf("allocated %d bytes while writing, want < 16 MiB", allocated)
	}
}

func TestCaptureSplitMatchesWhole(t *testing.T) {
	stream := []byte("a\r\n[STEP 00/??] x\n  ✓ x (1s)\nplain [STEP]\n\xff✓ bad\n⚠️ w\n{\"type\":\"heartbeat\"}\nend")
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSplitEquivalence(t, a, stream, []byte{1, 2, 3, 5, 8, 13})
	checkSplitEquivalence(t, a, stream, []byte{0, 0, 0, 255})
	checkSplitEquivalence(t, a, stream, nil)
}

// splitSeq names the captures of checkSplitEquivalence; tests using it do
// not run in parallel.
var splitSeq int

// checkSplitEquivalence feeds stream to stderr in one write and in pieces
// whose sizes cycle through splits, and compares everything produced.
func checkSplitEquivalence(t *testing.T, a *Artifacts, stream, splits []byte) {
	t.Helper()
	splitSeq++
	whole, rw := newTestCaptureIn(t, a, "whole-"+strconv.Itoa(splitSeq), 64)
	defer os.RemoveAll(whole.dir)
	if len(stream) > 0 {
		mustWrite(t, whole.Stderr(), string(stream))
	}
	want := collect(t, whole, rw)

	split, rs := newTestCaptureIn(t, a, "split-"+strconv.Itoa(splitSeq), 64)
	defer os.RemoveAll(split.dir)
	rest := stream
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(splits) > 0 {
			n = min(1+int(splits[i%len(splits)]), len(rest))
		}
		mustWrite(t, split.Stderr(), string(rest[:n]))
		rest = rest[n:]
	}
	got := collect(t, split, rs)
	if diff := cmp.Diff(normalizeCaptured(want), normalizeCaptured(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("split writes (splits %v) differ from one write of %q (-want +got):\n%s", splits, stream, diff)
	}
}

// normalizeCaptured removes the per-capture directory from c so that two
// captures of the same bytes compare equal.
func normalizeCaptured(c captured) captured {
	c.InlineStdout = strings.ReplaceAll(c.InlineStdout, c.Summary.StdoutPath, "STDOUT")
	c.InlineStderr = strings.ReplaceAll(c.InlineStderr, c.Summary.StderrPath, "STDERR")
	c.Summary.Stdout = strings.ReplaceAll(c.Summary.Stdout, c.Summary.StdoutPath, "STDOUT")
	c.Summary.Stderr = strings.ReplaceAll(c.Summary.Stderr, c.Summary.StderrPath, "STDERR")
	c.Summary.StdoutPath, c.Summary.StderrPath, c.Summary.OutputPath = "", "", ""
	return c
}

func FuzzCaptureSplit(f *testing.F) {
	f.Add([]byte("a\n✓ b\n[STEP 01/02] c\r\nd"), []byte{1, 2, 3})
	f.Add([]byte(`{"type":"step_transition","step":"b","status":"done"}`+"\n  ⊘ s (2s)\n"), []byte{0})
	f.Add([]byte("[HEARTBEAT] h — 1s elapsed\n\xe2\x9c\n\xe2\x9c\x93 x"), []byte{2, 0, 7})
	a, err := newTestArtifacts(f, f.TempDir(), 0, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stream, splits []byte) {
		checkSplitEquivalence(t, a, stream, splits)
	})
}

// sameFile reports whether the names a and b are one inode.
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// TestCaptureFilesSharedUntilSplit follows the files through a run: the
// three names exist from the start; stdout.log and output.log are one
// inode while only stdout has spoken; at the first stderr byte output.log
// keeps its inode (a descriptor opened on it reads everything) and
// stdout.log becomes a copy that goes on alone.
func TestCaptureFilesSharedUntilSplit(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"made in place", "spare"} {
		t.Run(from, func(t *testing.T) {
			if from == "spare" {
				a.prep.Wait() // the first capture started the refill
			}
			c, r := newTestCaptureIn(t, a, "cmd-"+strings.ReplaceAll(from, " ", "-"), 0)
			out, errPath, both := c.stdout.file.path, c.stderr.file.path, c.out.path
			for _, p := range []string{out, errPath, both} {
				if got := readFile(t, p); got != "" {
					t.Fatalf("%s holds %q before any output", p, got)
				}
			}
			mustWrite(t, c.Stdout(), "out 1\n")
			if !sameFile(t, out, both) {
				t.Errorf("stdout.log and output.log are two files while only stdout has spoken")
			}
			if got := readFile(t, both); got != "out 1\n" {
				t.Errorf("output.log = %q mid-run", got)
			}
			held, err := os.Open(both)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			before, err := os.Stat(both)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, c.Stderr(), "err 1\n")
			after, err := os.Stat(both)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) {
				t.Errorf("output.log changed inode at the split")
			}
			if sameFile(t, out, both) {
				t.Errorf("stdout.log still is output.log after a stderr byte")
			}
			mustWrite(t, c.Stdout(), "out 2\n")
			if got := readFile(t, out); got != "out 1\nout 2\n" {
				t.Errorf("stdout.log = %q mid-run after the split", got)
			}
			got := collect(t, c, r)
			want := "out 1\nerr 1\nout 2\n"
			if got.Output != want || got.Stdout != "out 1\nout 2\n" || got.Stderr != "err 1\n" {
				t.Errorf("files: output %q stdout %q stderr %q", got.Output, got.Stdout, got.Stderr)
			}
			whole, err := io.ReadAll(held)
			if err != nil {
				t.Fatal(err)
			}
			if string(whole) != want {
				t.Errorf("a descriptor opened on output.log before the split read %q, want %q", whole, want)
			}
		})
	}
}

// TestCaptureNoOutput: a command that prints nothing has its three files,
// empty and private, and the hash of nothing.
func TestCaptureNoOutput(t *testing.T) {
	a, err := newTestArtifacts(t, t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewCapture("first", Options{}); err != nil {
		t.Fatal(err)
	}
	a.prep.Wait()
	c, r := newTestCaptureIn(t, a, "quiet", 0)
	got := collect(t, c, r)
	empty := sha256.Sum256(nil)
	if got.Summary.Sha256 != hex.EncodeToString(empty[:]) || got.Summary.ByteCount != 0 || got.Summary.LineCount != 0 {
		t.Errorf("summary %+v, want the hash of nothing and no bytes", got.Summary)
	}
	for _, p := range []string{got.Summary.StdoutPath, got.Summary.StderrPath, got.Summary.OutputPath} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o600 || fi.Size() != 0 {
			t.Errorf("%s: mode %v size %d, want an empty -rw-------", p, fi.Mode(), fi.Size())
		}
	}
	if got := a.totalBytes(); got != 0 {
		t.Errorf("totalBytes() = %d for empty files", got)
	}
}

// TestCaptureLargeOutputHash writes past the size at which a goroutine
// takes over the hash, with the split in the middle, and checks the
// summary and the files against what was written.
func TestCaptureLargeOutputHash(t *testing.T) {
	c, r := newTestCapture(t, 0)
	chunk := bytes.Repeat([]byte("0123456789abcdef0123456789abcde\n"), 2048) // 64 KiB
	var want, stdout bytes.Buffer
	for i := range 64 { // 4 MiB
		if i == 32 {
			mustWrite(t, c.Stderr(), "half way\n")
			want.WriteString("half way\n")
		}
		mustWrite(t, c.Stdout(), string(chunk))
		want.Write(chunk)
		stdout.Write(chunk)
	}
	got := collect(t, c, r)
	sum := sha256.Sum256(want.Bytes())
	if got.Summary.Sha256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Sha256 is not the hash of what was written")
	}
	if got.Summary.ByteCount != int64(want.Len()) || got.Summary.LineCount != int64(bytes.Count(want.Bytes(), []byte{'\n'})) {
		t.Errorf("ByteCount %d LineCount %d, want %d and %d", got.Summary.ByteCount, got.Summary.LineCount, want.Len(), bytes.Count(want.Bytes(), []byte{'\n'}))
	}
	if got.Output != want.String() {
		t.Errorf("output.log differs from what was written (%d bytes, want %d)", len(got.Output), want.Len())
	}
	if got.Stdout != stdout.String() {
		t.Errorf("stdout.log differs from stdout (%d bytes, want %d)", len(got.Stdout), stdout.Len())
	}
}
