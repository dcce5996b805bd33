package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// Helpers of the progress tests (stepTransition, heartbeat, output,
// $/progress, progress): they decode the wire into the protocol's own types
// and pick a handle's notifications out of everything received.

// progDecodeAll decodes every notification of method received so far whose
// params match into a slice of T.
func progDecodeAll[T any](s *server, method string, match func(json.RawMessage) bool) []T {
	s.t.Helper()
	var out []T
	for _, p := range s.notifications(method) {
		if match != nil && !match(p) {
			continue
		}
		var v T
		if err := json.Unmarshal(p, &v); err != nil {
			s.t.Fatalf("decoding %s %s: %v", method, p, err)
		}
		out = append(out, v)
	}
	return out
}

// progStep is the comparable part of a stepTransition.
type progStep struct {
	Step   string
	Status protocol.StepStatus
	Index  int
	Total  int
}

// progSteps returns the stepTransitions received so far that match, as
// progSteps.
func progSteps(s *server, match func(json.RawMessage) bool) []progStep {
	s.t.Helper()
	var out []progStep
	for _, st := range progDecodeAll[protocol.StepTransitionParams](s, "stepTransition", match) {
		out = append(out, progStep{Step: st.Step, Status: st.Status, Index: st.Index, Total: st.Total})
	}
	return out
}

// progStepResults returns the comparable part of a result's steps: name,
// status and exit code.
type progStepResult struct {
	Name     string
	Status   protocol.StepStatus
	ExitCode *int
}

func progStepResults(steps []protocol.StepResult) []progStepResult {
	out := []progStepResult{}
	for _, st := range steps {
		out = append(out, progStepResult{Name: st.Name, Status: st.Status, ExitCode: st.ExitCode})
	}
	return out
}

// progWriteFile writes a file into the root and returns its name.
func progWriteFile(t testing.TB, root, name string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

// progReadFile reads a file, failing the test if it cannot.
func progReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// progPiece is a piece of a child's output: bytes written with one printf,
// optionally followed by a pause so that the next piece arrives in another
// read.
type progPiece struct {
	data  string
	pause bool
}

// progShellScript returns a POSIX sh script that writes the pieces to fd
// with printf, each byte that is not plain printable ASCII as an octal
// escape, pausing 50 ms after the pieces that ask for it.
func progShellScript(fd int, pieces []progPiece) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, p := range pieces {
		b.WriteString("printf '")
		for i := 0; i < len(p.data); i++ {
			c := p.data[i]
			if c < 0x20 || c >= 0x7f || c == '\'' || c == '\\' || c == '%' {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
		fmt.Fprintf(&b, "' >&%d\n", fd)
		if p.pause {
			b.WriteString("sleep 0.05\n")
		}
	}
	return b.String()
}

// progJoin returns the bytes the pieces write, in order.
func progJoin(pieces []progPiece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.data)
	}
	return b.String()
}

// progReassemble puts a stream's output notifications back together: it
// checks that seq goes 1, 2, 3…, decodes base64 data, and places each chunk
// after the bytes its notification says were skipped. It returns the bytes
// received, with skipped bytes taken from the artifact, and how many were
// skipped.
func progReassemble(t testing.TB, outs []protocol.OutputParams, stream protocol.Stream, artifact []byte) ([]byte, int64) {
	t.Helper()
	var got []byte
	var skipped int64
	seq := int64(0)
	for _, o := range outs {
		if o.Stream != stream {
			continue
		}
		seq++
		if o.Seq != seq {
			t.Fatalf("%s output seq %d, want %d", stream, o.Seq, seq)
		}
		data := []byte(o.Data)
		switch o.Encoding {
		case "":
		case protocol.EncodingBase64:
			var err error
			if data, err = base64.StdEncoding.DecodeString(o.Data); err != nil {
				t.Fatalf("%s output seq %d: bad base64: %v", stream, o.Seq, err)
			}
		default:
			t.Fatalf("%s output seq %d: unknown encoding %q", stream, o.Seq, o.Encoding)
		}
		if o.Skipped > 0 {
			skipped += o.Skipped
			end := int64(len(got)) + o.Skipped
			if end > int64(len(artifact)) {
				t.Fatalf("%s output seq %d skips past the artifact's end (%d > %d)", stream, o.Seq, end, len(artifact))
			}
			got = append(got, artifact[len(got):end]...)
		}
		got = append(got, data...)
	}
	return got, skipped
}
