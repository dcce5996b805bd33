// Command bench measures toolhost against the physical limits of the machine
// it runs on and writes BENCHMARKS.md. It builds the toolhost binary, drives
// it over real pipes with newline-delimited JSON-RPC, and measures each
// figure beside a baseline taken in the same run on the same machine (an
// echo over the same kind of pipes, os.ReadFile, os/exec, a shell writing
// the same bytes to a file), so that the ratio means something on a noisy
// machine. Run it from the repository root:
//
//	make bench                     # or: go run ./bench -out BENCHMARKS.md
//
// It is not part of the test run; go vet ./... and go build ./... check that
// it still builds. It writes its progress to stderr and the report to -out.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == markerChildArg {
		os.Exit(markerChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == fetchChildArg {
		os.Exit(fetchChild(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "BENCHMARKS.md", "the `file` the report is written to (- for stdout)")
	repo := fs.String("repo", ".", "the repository `dir` toolhost is built from")
	workDir := fs.String("work", "", "the `dir` for the servers' roots, artifacts and the baseline's file (default: a new temporary directory, removed at the end); the throughput figure writes 3 GiB at a time into it")
	bin := fs.String("bin", "", "measure this toolhost `binary` instead of building one")
	scale := fs.Float64("scale", 1, "multiply every iteration count by this `factor` (0.1 for a quick look)")
	only := fs.String("only", "", "run only the figures whose key contains this `text` (startup, rtt, readfile, runcommand, escape, output, handles, markers, cancel, readoutput, yield, hub, events, ports, pty, mcp, mcp-task, mcp-http, network, approvals, persist, snapshot, repos, cache, mounts)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }

	work := *workDir
	if work == "" {
		d, err := os.MkdirTemp("", "toolhost-bench-")
		if err != nil {
			logf("%v", err)
			return 1
		}
		defer os.RemoveAll(d)
		work = d
	}
	work, err := filepath.Abs(work)
	if err != nil {
		logf("%v", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		logf("cannot find this program for the marker child: %v", err)
		return 1
	}
	b := &bench{work: work, self: self, scale: *scale, logf: logf}
	b.bin, b.repo = *bin, *repo
	if b.bin == "" {
		b.bin = filepath.Join(work, "toolhost")
		logf("building toolhost from %s", *repo)
		build := exec.Command("go", append(goBuildArgs(), "-o", b.bin, ".")...)
		build.Dir = *repo
		build.Env = goBuildEnv()
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			logf("cannot build toolhost: %v", err)
			return 1
		}
	}

	started, loadBefore := time.Now(), loadAverage()
	for _, f := range figures {
		if *only != "" && !strings.Contains(f.key, *only) {
			continue
		}
		logf("measuring %s", f.key)
		t0 := time.Now()
		if err := f.run(b); err != nil {
			logf("%s failed: %v", f.key, err)
			b.rows = append(b.rows, row{Figure: f.key, Value: "failed: " + err.Error(), Met: "**no**"})
			b.failed = true
		}
		logf("%s took %v", f.key, time.Since(t0).Round(time.Millisecond))
	}

	m := describeMachine()
	m.Disk = fileSystemOf(work)
	m.Load = loadBefore + " at the start, " + loadAverage() + " at the end (1-minute load average)"
	report := b.report(m, started, time.Since(started))
	if *out == "-" {
		io.WriteString(stdout, report)
	} else if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
		logf("%v", err)
		return 1
	} else {
		logf("wrote %s in %v", *out, time.Since(started).Round(time.Second))
	}
	if b.failed {
		return 1
	}
	return 0
}

// goBuildArgs and goBuildEnv build toolhost as the editor extension ships
// it (editor-extension/package.json): statically, without cgo, which the
// program does not need; a cgo build loads the C library at every start.
func goBuildArgs() []string { return []string{"build", "-trimpath"} }

// goBuildEnv is the environment of goBuildArgs.
func goBuildEnv() []string { return append(os.Environ(), "CGO_ENABLED=0") }

// bench is one run of the suite.
type bench struct {
	bin   string  // the toolhost binary measured
	repo  string  // the repository it is built from
	self  string  // this program, run as the marker child
	work  string  // where roots, artifacts and baseline files go
	scale float64 // multiplies iteration counts
	logf  func(format string, a ...any)

	rows   []row
	notes  []string
	failed bool
	nextID int // numbers the servers' directories
	// rttP50 is the progress round trip's median, which other figures'
	// explanations quote; 0 until measured.
	rttP50 time.Duration
}

// iters scales an iteration count, keeping at least min.
func (b *bench) iters(n, min int) int {
	return max(min, int(float64(n)*b.scale))
}

// row is one line of the report's table.
type row struct {
	Figure, Value, Baseline, Ratio, Target, Met string
	// Why says what stands in the way of the target, from profiling; the
	// report gives it only when this run missed the target.
	Why string
}

// add appends a row.
func (b *bench) add(r row) {
	if r.Baseline == "" {
		r.Baseline = "—"
	}
	if r.Ratio == "" {
		r.Ratio = "—"
	}
	if r.Target == "" {
		r.Target = "—"
	}
	if r.Met == "" {
		r.Met = "—"
	}
	b.rows = append(b.rows, r)
}

// note appends a line to the report's notes on how figures were measured.
func (b *bench) note(format string, a ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, a...))
}

// met renders whether a target was met.
func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// report renders BENCHMARKS.md.
func (b *bench) report(m machine, date time.Time, took time.Duration) string {
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	p("# Benchmarks\n\n")
	p("Generated by `make bench` (`go run ./bench`) on %s in %v. Do not edit: run `make bench` again.\n\n",
		date.UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	p("Every figure is measured through the built `toolhost` binary over real pipes\n")
	p("(newline-delimited JSON-RPC on the child's stdin and stdout), beside a baseline\n")
	p("measured in the same run on the same machine, interleaved with it where it can be.\n")
	p("The ratio is figure ÷ baseline for times and figure rate ÷ baseline rate for\n")
	p("throughput; it is the number to compare across machines, not the raw values.\n\n")
	p("## Machine\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s |\n| cores (nproc) | %s |\n| memory | %s |\n| kernel | %s |\n| go | %s |\n| work directory's file system | %s |\n| load | %s |\n\n",
		m.CPU, m.Cores, m.Memory, m.Kernel, m.Go, m.Disk, m.Load)
	p("## Figures\n\n")
	p("| figure | value | baseline | ratio | target | met? |\n|---|---|---|---|---|---|\n")
	for _, r := range b.rows {
		p("| %s | %s | %s | %s | %s | %s |\n", r.Figure, r.Value, r.Baseline, r.Ratio, r.Target, r.Met)
	}
	var missed []row
	for _, r := range b.rows {
		if r.Met == met(false) && r.Why != "" {
			missed = append(missed, r)
		}
	}
	if len(missed) > 0 {
		p("\n## Targets missed in this run, and what stands in the way\n\n")
		for _, r := range missed {
			p("- **%s** (%s, target %s): %s\n", r.Figure, r.Value, r.Target, r.Why)
		}
	}
	p("\n## How each figure is measured\n\n")
	for _, n := range b.notes {
		p("- %s\n", n)
	}
	return sb.String()
}
