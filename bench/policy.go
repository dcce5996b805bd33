package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolhost/toolhost/protocol"
)

// readFilePolicy measures readFile of a 4 KiB file on a server with 10
// denyRead and 10 protect entries (nested under the root, as a user's
// would be) against the same read on a server with none, the two asked in
// turn so that both see the same machine.
func (b *bench) readFilePolicy() error {
	plain, err := b.startServer("readfile-nopolicy")
	if err != nil {
		return err
	}
	defer plain.end()
	var extra []string
	for i := range 10 {
		extra = append(extra, "--deny-read", fmt.Sprintf("/nonexistent/secret%d", i), "--protect", fmt.Sprintf("build/out%d", i))
	}
	// Entries that exist, so that reads pass their ids too.
	home, _ := os.UserHomeDir()
	extra[1] = filepath.Join(home, ".ssh")
	pol, err := b.startServer("readfile-policy", extra...)
	if err != nil {
		return err
	}
	defer pol.end()
	line := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_", 1) + "\n"
	for _, s := range []*server{plain, pol} {
		if err := os.MkdirAll(filepath.Join(s.root, "src", "pkg"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.root, "src", "pkg", "small.txt"), []byte(strings.Repeat(line, 64)), 0o644); err != nil {
			return err
		}
	}
	params := protocol.ReadFileParams{Path: "src/pkg/small.txt"}
	var got, base durations
	warm, n := b.iters(300, 20), b.iters(5000, 100)
	for i := range warm + n {
		// Each asked first in turn, so that neither gains from going
		// second (a warm cache, a CPU the other just woke).
		order := []*server{pol, plain}
		if i%2 == 1 {
			order = []*server{plain, pol}
		}
		for _, s := range order {
			r, d, err := s.readFileRoundTrip(params)
			if err != nil {
				return err
			}
			if len(r.Content) != 4096 {
				return fmt.Errorf("readFile returned %d bytes, want 4096", len(r.Content))
			}
			if i < warm {
				continue
			}
			if s == pol {
				got = append(got, d)
			} else {
				base = append(base, d)
			}
		}
	}
	g, bs := got.pct(50), base.pct(50)
	b.add(row{Figure: "`readFile` 4 KiB with 10 `denyRead` and 10 `protect` entries, p50", Value: fmtDur(g), Baseline: "no entries: " + fmtDur(bs),
		Ratio: ratio(float64(g), float64(bs)), Target: "≤ 1.05×", Met: met(float64(g) <= 1.05*float64(bs)),
		Why: "each component resolve looks at is matched by device and inode against the entries, and the path it ends at by name"})
	b.note("`readFile` with a policy: two servers, one with 10 `--deny-read` and 10 `--protect` entries (one of them an existing ~/.ssh), one with none, asked in turn (each first every other time) for the same 4 KiB file two directories down (%d samples each).", n)
	return nil
}
