//go:build linux

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestWorkspaceEscapeRaceSwap swaps root/sw between a real directory and a
// symlink to a directory outside (atomically, with RENAME_EXCHANGE, so the
// name always exists) while readFile and writeFile requests through sw run
// over the wire, many in flight at once. No read may ever return outside
// content, and no write may land outside. Both loops are bounded by count.
func TestWorkspaceEscapeRaceSwap(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		fx := newWSFixture(t)
		sw := filepath.Join(fx.root, "sw")
		alt := filepath.Join(fx.root, "swalt")
		wsWrite(t, filepath.Join(sw, "file.txt"), "inside\n")
		fx.symlink(t, filepath.Join(fx.outside, "dir"), "swalt") // outside/dir/file.txt is the secret
		if err := unix.Renameat2(unix.AT_FDCWD, sw, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
			t.Skipf("this filesystem cannot exchange names atomically: %v", err)
		}
		s := fx.start(t, framing)

		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		swaps := 0
		stop := sync.OnceFunc(func() { close(done); wg.Wait() })
		t.Cleanup(stop)
		go func() {
			defer wg.Done()
			for range 50_000_000 {
				select {
				case <-done:
					return
				default:
				}
				if err := unix.Renameat2(unix.AT_FDCWD, sw, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchange: %v", err)
					return
				}
				swaps++
			}
		}()

		paths := []string{"sw/file.txt", "swalt/file.txt", sw + "/file.txt", "file://" + alt + "/file.txt", "sub/../sw/file.txt"}
		outcomes := wsCodes{}
		const rounds, perRound = 40, 25
		for round := range rounds {
			var reads, writes []*client.Pending
			for i := range perRound {
				if i%5 == 4 {
					writes = append(writes, s.request("writeFile", map[string]any{"path": paths[i%2] + ".new", "content": "PWNED\n"}))
					continue
				}
				reads = append(reads, s.request("readFile", map[string]any{"path": paths[(round+i)%len(paths)]}))
			}
			for _, p := range reads {
				var r protocol.ReadFileResult
				if e := s.answer(p, &r); e != nil {
					switch e.Code {
					case wsCodeOutside, wsCodeNotFound, wsCodeConflict:
						outcomes[e.Code]++
					default:
						t.Fatalf("readFile during the swaps: unexpected error %v", e)
					}
					continue
				}
				if r.Content != "inside\n" || !strings.HasPrefix(r.Path, fx.root+"/") {
					t.Fatalf("readFile during the swaps returned %q from %s", r.Content, r.Path)
				}
				outcomes[0]++
			}
			for _, p := range writes {
				if e := s.answer(p, nil); e != nil {
					switch e.Code {
					case wsCodeOutside, wsCodeNotFound, wsCodeConflict:
					default:
						t.Fatalf("writeFile during the swaps: unexpected error %v", e)
					}
				}
			}
		}
		stop()
		t.Logf("%d reads by outcome (0 = read inside content) %v; %d swaps", rounds*perRound*4/5, outcomes, swaps)
		if outcomes[0] == 0 || outcomes[wsCodeOutside] == 0 {
			t.Errorf("the reads did not see both states (%v): the race was not exercised", outcomes)
		}
		// Writes that landed inside are fine; anything beside the root
		// must be as it was.
		fx.checkUntouched(t)
		if _, err := os.Stat(filepath.Join(fx.outside, "dir", "file.txt.new")); err == nil {
			t.Error("a write through the swapped directory landed outside")
		}
	})
}
