package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/protocol"
)

// pipeFill returns how many bytes wait in the pipe that is fd of pid, and
// the pipe's capacity, by opening it anew through /proc (a reader that
// reads nothing).
func pipeFill(t testing.TB, pid, fd int) (queued, capacity int) {
	t.Helper()
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("opening the stdin of %d: %v", pid, err)
	}
	defer f.Close()
	queued, err = unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ) // FIONREAD
	if err != nil {
		t.Fatalf("FIONREAD on the stdin of %d: %v", pid, err)
	}
	capacity, err = unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatalf("F_GETPIPE_SZ on the stdin of %d: %v", pid, err)
	}
	return queued, capacity
}

// TestPtyWriteInputToAChildThatDoesNotRead writes 8 MiB to the open stdin
// of a `sleep`: the request waits once the pipe is full, $/cancelRequest
// ends it with -32800 while the command goes on, and the server's memory
// grows by no more than the request's own copies of the data and a few
// MiB while it waits and after.
func TestPtyWriteInputToAChildThatDoesNotRead(t *testing.T) {
	t.Parallel()
	s := start(t, options{plain: true})
	s.initialize(nil)
	mk := newMarker()
	h := s.longRun(map[string]any{"argv": []string{"sleep", mk.Sleep}, "openStdin": true})
	base := s.memory("VmRSS")
	const size = 8 << 20
	p := s.request("writeInput", map[string]any{"handleId": h.HandleID, "data": strings.Repeat("x", size)})
	var queued, capacity int
	pollUntil(t, func() string {
		return "the pipe to sleep holds " + strconv.Itoa(queued) + " of " + strconv.Itoa(capacity) + " bytes"
	}, func() bool {
		queued, capacity = pipeFill(t, h.PID, 0)
		return capacity > 0 && queued >= capacity-4096
	})
	select {
	case <-p.Done():
		var r protocol.WriteInputResult
		e := s.answer(p, &r)
		t.Fatalf("writeInput of %d bytes to a child that reads nothing answered (%+v, %v) with %d bytes in its pipe", size, r, e, queued)
	default:
	}
	waiting := s.memory("VmRSS")
	e := s.cancelRequest(p)
	if e == nil || e.Code != protocol.CodeRequestCancelled || errData(e).HandleID != h.HandleID {
		t.Fatalf("cancelled writeInput: %v (data %+v), want -32800 naming the handle", e, errData(e))
	}
	after := s.memory("VmRSS")
	// The request's frame, its params and the decoded bytes are each the
	// data's size; beyond them a few MiB of buffers and garbage.
	const allowed = 3*size + 8<<20
	if waiting-base > allowed || after-base > allowed {
		t.Errorf("server RSS grew by %s while the write waited and %s after its cancel, over %s for %s of data",
			mibs(waiting-base), mibs(after-base), mibs(allowed), mibs(size))
	}
	t.Logf("server RSS: %s before, +%s while %s waited, +%s after the cancel", mibs(base), mibs(waiting-base), mibs(size), mibs(after-base))
	if pr := s.progressOf(h.HandleID); pr.Status != protocol.StatusRunning || !pr.InputOpen {
		t.Errorf("the handle after its cancelled write: %+v", pr)
	}
	s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, nil)
}

// mibs renders bytes in MiB.
func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
