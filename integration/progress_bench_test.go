package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// BenchmarkMarkerLatency measures the time from a child writing a step
// marker to the client receiving its stepTransition, through the binary
// and real pipes. A long-running child reads lines from a FIFO in the root
// and answers each with a marker on stderr; each iteration writes a line
// and waits for the stepTransition it causes, so the figure includes the
// FIFO hop into the child (a few microseconds) and the shell's printf.
// It reports p50 and p99 in microseconds.
func BenchmarkMarkerLatency(b *testing.B) {
	for _, framing := range framings {
		b.Run(framing, func(b *testing.B) {
			s := start(b, options{framing: framing})
			s.initialize(nil)
			fifo := filepath.Join(s.root, "ticks")
			progFIFO(b, s.root, "ticks")
			script := `exec 3< ticks
while read -r n <&3; do
  printf '{"type":"step_transition","step":"s%s","status":"start"}\n' "$n" >&2
done`
			h := s.longRun(map[string]any{"argv": []string{"sh", "-c", script}})
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				step := "s" + strconv.Itoa(i)
				from := s.count()
				t0 := time.Now()
				if _, err := fmt.Fprintf(w, "%d\n", i); err != nil {
					b.Fatal(err)
				}
				s.waitFor(from, "stepTransition "+step, func(m msg) bool {
					return m.Method == "stepTransition" && forHandle(h.HandleID)(m.Params) && progStepIs(m, step)
				})
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			w.Close()
			s.toolResultOf(h.HandleID)
			slices.Sort(lat)
			pct := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds())
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}

// progStepIs reports whether a stepTransition names step and is a start.
func progStepIs(m msg, step string) bool {
	var p protocol.StepTransitionParams
	return json.Unmarshal(m.Params, &p) == nil && p.Step == step && p.Status == protocol.StepStart
}
