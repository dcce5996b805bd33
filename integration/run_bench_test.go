package integration

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// BenchmarkRunCommandTrue measures runCommand of `true` through the binary
// over pipes against a plain os/exec run of `true`, alternating the two in
// each iteration, and reports both and their ratio (x-exec).
func BenchmarkRunCommandTrue(b *testing.B) {
	s := start(b, options{})
	s.initialize(nil)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	var viaServer, viaExec time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		var res protocol.ToolResult
		s.mustCall("runCommand", map[string]any{"argv": []string{"true"}}, &res)
		t1 := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		viaExec += time.Since(t1)
		viaServer += t1.Sub(t0)
		if !res.Success {
			b.Fatalf("true: %+v", res)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaServer.Nanoseconds())/n, "runCommand-ns/op")
	b.ReportMetric(float64(viaExec.Nanoseconds())/n, "exec-ns/op")
	b.ReportMetric(float64(viaServer)/float64(viaExec), "x-exec")
	b.StopTimer()
	s.shutdown()
}

// BenchmarkOutput1GiB measures a child printing 1 GiB through runCommand
// (captured into the artifacts, hashed, head and tail kept) against
// `head -c 1073741824 /dev/zero > file`, and reports their ratio (x-shell).
func BenchmarkOutput1GiB(b *testing.B) {
	s := start(b, options{})
	s.initialize(nil)
	dir := b.TempDir()
	var viaServer, viaShell time.Duration
	b.SetBytes(1 << 30)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		var res protocol.ToolResult
		s.mustCall("runCommand", map[string]any{"argv": []string{"head", "-c", "1073741824", "/dev/zero"}}, &res)
		t1 := time.Now()
		if err := exec.Command("sh", "-c", "head -c 1073741824 /dev/zero > "+filepath.Join(dir, "out")).Run(); err != nil {
			b.Fatal(err)
		}
		viaShell += time.Since(t1)
		viaServer += t1.Sub(t0)
		if res.Artifacts.ByteCount != 1<<30 {
			b.Fatalf("byteCount %d", res.Artifacts.ByteCount)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaServer.Nanoseconds())/n, "runCommand-ns/op")
	b.ReportMetric(float64(viaShell.Nanoseconds())/n, "shell-ns/op")
	b.ReportMetric(float64(viaServer)/float64(viaShell), "x-shell")
	b.StopTimer()
	s.shutdown() // removes the artifacts
}
