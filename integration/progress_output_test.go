package integration

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

// progCheckStream reassembles a stream's output notifications and compares
// them with the stream's artifact, byte for byte. It returns the
// notifications of the stream.
func progCheckStream(t *testing.T, s *server, handleID string, stream protocol.Stream, artifactPath string) []protocol.OutputParams {
	t.Helper()
	outs := progDecodeAll[protocol.OutputParams](s, "output", forHandle(handleID))
	artifact := progReadFile(t, artifactPath)
	got, skipped := progReassemble(t, outs, stream, artifact)
	if skipped != 0 {
		t.Errorf("%s: %d bytes skipped for a client that kept up", stream, skipped)
	}
	if !bytes.Equal(got, artifact) {
		t.Errorf("%s output notifications (%d bytes) differ from %s (%d bytes)", stream, len(got), artifactPath, len(artifact))
	}
	var mine []protocol.OutputParams
	for _, o := range outs {
		if o.Stream == stream {
			mine = append(mine, o)
		}
	}
	return mine
}

// TestOutputStreamedEqualsArtifacts streams text, text with multibyte runes
// cut across writes, binary bytes and markers, and reassembles each stream
// from its output notifications.
func TestOutputStreamedEqualsArtifacts(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)

		t.Run("text", func(t *testing.T) {
			script := `i=0
while [ $i -lt 2000 ]; do echo "line $i of some text"; i=$((i+1)); done
echo '[STEP 00/01] marked' >&2
echo 'plain stderr' >&2
echo '  ✓ marked' >&2`
			h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}, "streamOutput": true})
			res := s.toolResultOf(h.HandleID)
			for _, o := range progCheckStream(t, s, h.HandleID, "stdout", res.Artifacts.StdoutPath) {
				if o.Encoding != "" {
					t.Errorf("text output seq %d travels as %q", o.Seq, o.Encoding)
				}
			}
			progCheckStream(t, s, h.HandleID, "stderr", res.Artifacts.StderrPath)
			if res.Stderr != "plain stderr\n" {
				t.Errorf("stderr %q", res.Stderr)
			}
		})

		t.Run("split runes", func(t *testing.T) {
			// é (c3 a9), € (e2 82 ac) and 😀 (f0 9f 98 80), each cut inside
			// its encoding between two writes.
			pieces := []progPiece{
				{data: "caf\xc3", pause: true}, {data: "\xa9 \xe2", pause: true}, {data: "\x82", pause: true},
				{data: "\xac \xf0\x9f", pause: true}, {data: "\x98\x80 done\n"},
			}
			progWriteFile(t, s.root, "runes.sh", []byte(progShellScript(1, pieces)))
			h := s.longRun(map[string]any{"argv": []string{"sh", "runes.sh"}, "streamOutput": true})
			res := s.toolResultOf(h.HandleID)
			outs := progCheckStream(t, s, h.HandleID, "stdout", res.Artifacts.StdoutPath)
			var text strings.Builder
			for _, o := range outs {
				if o.Encoding != "" {
					t.Errorf("output seq %d of valid UTF-8 travels as %q: %q", o.Seq, o.Encoding, o.Data)
				}
				text.WriteString(o.Data)
			}
			if text.String() != "café € 😀 done\n" {
				t.Errorf("stdout text %q", text.String())
			}
		})

		t.Run("binary", func(t *testing.T) {
			var bin bytes.Buffer
			for i := range 3000 {
				bin.WriteByte(byte(i * 7))
			}
			pieces := []progPiece{{data: bin.String()[:1000], pause: true}, {data: bin.String()[1000:]}}
			progWriteFile(t, s.root, "binary.sh", []byte(progShellScript(1, pieces)))
			h := s.longRun(map[string]any{"argv": []string{"sh", "binary.sh"}, "streamOutput": true})
			res := s.toolResultOf(h.HandleID)
			outs := progCheckStream(t, s, h.HandleID, "stdout", res.Artifacts.StdoutPath)
			base64s := 0
			for _, o := range outs {
				if o.Encoding == protocol.EncodingBase64 {
					base64s++
				}
			}
			if base64s == 0 {
				t.Errorf("binary output never travelled as base64: %+v", outs)
			}
			if got := progReadFile(t, res.Artifacts.StdoutPath); !bytes.Equal(got, bin.Bytes()) {
				t.Errorf("stdout.log holds %d bytes, not the %d the child wrote", len(got), bin.Len())
			}
		})
	})
}

// TestOutputWithoutStreamOutputSendsNone checks that output notifications
// need streamOutput.
func TestOutputWithoutStreamOutputSendsNone(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "ndjson"})
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "echo out; echo err >&2"}})
	s.toolResultOf(h.HandleID)
	if outs := progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID)); len(outs) != 0 {
		t.Errorf("output notifications without streamOutput: %+v", outs)
	}
}

// TestOutputSlowClientSkips stops reading while a child prints 50 MB: the
// server skips what waited too long, a notification says how much, and
// the skipped bytes and the data received add up to the artifact.
func TestOutputSlowClientSkips(t *testing.T) {
	t.Parallel()
	s := start(t, options{framing: "header"})
	s.initialize(nil)
	name, _ := progFIFO(t, s.root, "printed")
	fifo := filepath.Join(s.root, name)
	script := `yes 'abcdefghijklmnopqrstuvwxyz0123456789 all work and no play' | head -c 50000000
echo finished > printed`
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}, "streamOutput": true})
	s.pause()
	// The child says it has printed everything through the FIFO, not
	// through the server the client is not reading.
	f, err := os.Open(fifo)
	if err != nil {
		s.resume()
		t.Fatal(err)
	}
	said, err := io.ReadAll(f)
	f.Close()
	s.resume()
	if err != nil || string(said) != "finished\n" {
		t.Fatalf("the child said %q, %v", said, err)
	}
	res := s.toolResultOf(h.HandleID)
	if !res.Success {
		t.Fatalf("result %+v", res)
	}
	artifact := progReadFile(t, res.Artifacts.StdoutPath)
	if len(artifact) != 50000000 {
		t.Fatalf("stdout.log holds %d bytes, want 50000000", len(artifact))
	}
	outs := progDecodeAll[protocol.OutputParams](s, "output", forHandle(h.HandleID))
	got, skipped := progReassemble(t, outs, "stdout", artifact)
	if skipped == 0 {
		t.Errorf("no output notification says bytes were skipped, for a client that read nothing while 50 MB were printed (%d notifications)", len(outs))
	}
	if !bytes.Equal(got, artifact) {
		t.Errorf("received %d bytes + skipped %d = %d, want the artifact's %d, equal byte for byte", int64(len(got))-skipped, skipped, len(got), len(artifact))
	}
	if received := int64(len(got)) - skipped; received > 16<<20 {
		t.Errorf("%d bytes of output reached a client that stopped reading, want the skipping to bound it", received)
	}
	t.Logf("%d output notifications, %d bytes received, %d skipped", len(outs), int64(len(got))-skipped, skipped)
}
