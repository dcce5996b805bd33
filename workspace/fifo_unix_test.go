//go:build unix

package workspace

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadFIFO(t *testing.T) {
	fx := newFixture(t)
	fifo := filepath.Join(fx.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	mustSymlink(t, "fifo", filepath.Join(fx.root, "fifolink"))
	for _, p := range []string{"fifo", "fifolink", fifo} {
		err := readPromptly(t, fx.w, p)
		if pe := checkErr(t, "ReadFile("+p+")", err, ErrNotRegular); pe != nil && !strings.Contains(pe.Reason, "FIFO") {
			t.Errorf("reason %q does not say FIFO", pe.Reason)
		}
		_, err = fx.w.WriteFile(WriteOptions{Path: p, Content: "x"})
		checkErr(t, "WriteFile("+p+")", err, ErrNotRegular)
		_, err = fx.w.WriteFile(WriteOptions{Path: p, Content: "x", ExpectedSha256: AbsentSha256})
		checkErr(t, "WriteFile("+p+", absent)", err, ErrNotRegular)
	}
	// The scanner itself never opens a FIFO: prove the O_NONBLOCK open is
	// harmless too, by opening the fifo exactly as ReadFile does.
	f, err := fx.w.ws.h.OpenFile("fifo", openReadFlags, 0)
	if err != nil {
		t.Fatalf("non-blocking open of a FIFO without a writer: %v", err)
	}
	f.Close()
}
