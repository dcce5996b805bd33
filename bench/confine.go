package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// confinementFloor explains the confined runCommand figure with the floor
// of confinement on this machine: sandbox's BenchmarkLayers, run now,
// times each layer of a workspace-write confinement alone (see its doc).
// unconfined is the unconfined runCommand's median.
func (b *bench) confinementFloor(unconfined time.Duration) string {
	const how = "a confined command is forked from a thread of its own, made for it and ended after it (Pdeathsig is tied to the thread that forks, and Landlock and the namespaces cannot be undone on a thread), " +
		"which drops capabilities from its bounding set (17 prctl calls), unshares a mount namespace (every mount made a read-only slave, the root, the command's TMPDIR (bound on /tmp) and the root's cache bound read-write) and builds and applies a Landlock ruleset (one rule per writable directory and device) before the fork; "
	cmd := exec.Command("go", "test", "-count=1", "-run", "^$", "-bench", "^BenchmarkLayers$", "-benchtime", "300x", "./sandbox")
	cmd.Dir = b.repo
	out, err := cmd.CombinedOutput()
	m := benchMetrics(string(out), "BenchmarkLayers")
	keys := []string{"thread-us", "capdrop-us", "mntns-us", "landlock-us", "confined-exec-us", "exec-us"}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			b.logf("BenchmarkLayers gave no %s (%v): %.300s", k, err, out)
			return how + "the layers could not be timed alone here (see the bench's log)."
		}
	}
	layers := m["thread-us"] + m["capdrop-us"] + m["mntns-us"] + m["landlock-us"]
	b.note("confinement floor: `go test -run '^$' -bench '^BenchmarkLayers$' -benchtime 300x ./sandbox`, run by the bench after the runCommand figure: each layer of a workspace-write confinement timed alone on a throwaway thread as sandbox.Start applies it, and the exec of `true` from such a thread against one from an ordinary goroutine; medians.")
	return how + fmt.Sprintf("timed alone in this run (sandbox's BenchmarkLayers): the thread %.0f µs (made, locked, ended: two hand-offs between threads), the capability drop %.0f µs, the mount namespace %.0f µs (unshare and the remounts), Landlock %.0f µs: %.0f µs together, "+
		"%.2f× the unconfined round trip's %s before anything else, which is the kernel's floor for these layers applied per command; the exec of true from the confined thread took %.0f µs against %.0f µs from an ordinary one. "+
		"Meeting 1.1× would take keeping a confined thread and mount namespace across commands, which each command's own TMPDIR (bound read-write in its namespace, granted by its ruleset) rules out as the layers are today.",
		m["thread-us"], m["capdrop-us"], m["mntns-us"], m["landlock-us"], layers,
		1+layers/float64(unconfined.Microseconds()), fmtDur(unconfined), m["confined-exec-us"], m["exec-us"])
}

// benchMetrics parses the custom metrics ("value unit" pairs) of the line
// of go test -bench output for name.
func benchMetrics(out, name string) map[string]float64 {
	m := make(map[string]float64)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], name) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	return m
}
