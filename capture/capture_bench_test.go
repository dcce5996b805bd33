package capture

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The two benchmarks below write the same 256 KiB chunks (a pump's reads), one through a
// Capture (stdout.log and output.log, the sha256 of output.log up to Close,
// the inline tail) and one straight to a file, so that their MB/s can be
// compared:
//
//	go test ./process/ -run '^$' -bench 'CaptureStdout|FileWrite'
//
// Both start a new file every rotateChunks chunks so the disk use stays
// bounded however large b.N grows.

const (
	benchChunk   = 256 << 10
	rotateChunks = 512 // 128 MiB
)

func benchData() []byte {
	return bytes.Repeat([]byte("0123456789abcdef0123456789abcde\n"), benchChunk/32)
}

// benchCapture writes chunk b.N times to the stream pick chooses.
func benchCapture(b *testing.B, pick func(*Capture) io.Writer) {
	chunk := benchData()
	a, err := newTestArtifacts(b, b.TempDir(), 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	var c *Capture
	n := 0
	// Close is timed: it waits for the hash of output.log to catch up.
	closeCapture := func() {
		if _, err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	rotate := func() {
		if c != nil {
			if err := os.RemoveAll(c.dir); err != nil {
				b.Fatal(err)
			}
		}
		n++
		if c, err = a.NewCapture("bench-"+strconv.Itoa(n), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	rotate()
	b.SetBytes(benchChunk)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%rotateChunks == 0 {
			closeCapture()
			b.StopTimer()
			rotate()
			b.StartTimer()
		}
		if _, err := pick(c).Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	closeCapture()
}

func BenchmarkCaptureStdout(b *testing.B) {
	benchCapture(b, (*Capture).Stdout)
}

func BenchmarkFileWrite(b *testing.B) {
	chunk := benchData()
	dir := b.TempDir()
	var f *os.File
	n := 0
	rotate := func() {
		if f != nil {
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(f.Name()); err != nil {
				b.Fatal(err)
			}
		}
		n++
		var err error
		if f, err = os.Create(filepath.Join(dir, "file-"+strconv.Itoa(n))); err != nil {
			b.Fatal(err)
		}
	}
	rotate()
	b.SetBytes(benchChunk)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%rotateChunks == 0 {
			b.StopTimer()
			rotate()
			b.StartTimer()
		}
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	f.Close()
}

// BenchmarkCaptureStderr measures the marker-aware path on ordinary lines.
func BenchmarkCaptureStderr(b *testing.B) {
	benchCapture(b, (*Capture).Stderr)
}

// BenchmarkCapCheck2000 measures the artifacts-cap check that every
// NewCapture, Finished and 8 MiB of output run, in a session that has run
// 2000 commands: it must not grow with the commands the session ran.
func BenchmarkCapCheck2000(b *testing.B) {
	a, err := newTestArtifacts(b, b.TempDir(), 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.RemoveAll()
	for i := range 2000 {
		id := "cmd-" + strconv.Itoa(i)
		c, err := a.NewCapture(id, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Stdout().Write([]byte("x\n")); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Close(); err != nil {
			b.Fatal(err)
		}
		a.Finished(id)
	}
	for b.Loop() {
		a.checkCap()
	}
}

// BenchmarkNewCapture measures what a command's start pays for its
// artifacts: NewCapture, then Close and Finished, one command after
// another.
func BenchmarkNewCapture(b *testing.B) {
	a, err := newTestArtifacts(b, b.TempDir(), 1<<40, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.RemoveAll()
	for i := 0; b.Loop(); i++ {
		id := "cmd-" + strconv.Itoa(i)
		c, err := a.NewCapture(id, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Close(); err != nil {
			b.Fatal(err)
		}
		a.Finished(id)
	}
}
