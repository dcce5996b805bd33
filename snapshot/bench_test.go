package snapshot

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The generated tree's scale. The figures BENCHMARKS.md compares with are
// for 10,000 files and 200 MB: go test -bench . ./snapshot -args
// -snapshot.files=10000
var (
	benchFiles = flag.Int("snapshot.files", 1000, "files in the benchmarks' generated tree")
	benchBytes = flag.Int64("snapshot.bytes", 0, "bytes in the benchmarks' generated tree (0: 20 KiB a file)")
	benchKeep  = flag.String("snapshot.tree", "", "a directory to keep the generated tree in between runs (made if missing; benchmarks that change it restore it)")
)

// genTree writes a tree of n files in directories of about 100 (two levels),
// sizes spread from a few bytes to a few MB adding up to about total bytes,
// then ages it (an hour back, as a tree not just written).
func genTree(tb testing.TB, root string, n int, total int64) []string {
	rng := rand.New(rand.NewPCG(27, 27))
	weights := make([]float64, n)
	sum := 0.0
	for i := range weights {
		weights[i] = rng.ExpFloat64()
		if rng.IntN(200) == 0 {
			weights[i] *= 40 // a few large files
		}
		sum += weights[i]
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(rng.IntN(256))
	}
	var paths []string
	for i := range n {
		rel := fmt.Sprintf("pkg%02d/mod%02d/file%05d.dat", i/1000, (i/100)%10, i)
		size := int(weights[i] / sum * float64(total))
		full := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		f, err := os.Create(full)
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(f, "file %d\n", i) // every file distinct
		for left := size; left > 0; {
			off := rng.IntN(len(chunk) / 2)
			k := min(left, len(chunk)-off)
			f.Write(chunk[off : off+k])
			left -= k
		}
		f.Close()
		paths = append(paths, rel)
	}
	ageTree(tb, root)
	return paths
}

func benchTree(b *testing.B) (root string, paths []string) {
	total := *benchBytes
	if total == 0 {
		total = int64(*benchFiles) * 20 << 10
	}
	if *benchKeep != "" {
		root = filepath.Join(*benchKeep, fmt.Sprintf("tree-%d-%d", *benchFiles, total))
		if _, err := os.Stat(root + ".done"); err == nil {
			os.RemoveAll(filepath.Join(root, ".git"))
			for i := range *benchFiles {
				paths = append(paths, fmt.Sprintf("pkg%02d/mod%02d/file%05d.dat", i/1000, (i/100)%10, i))
			}
			return root, paths
		}
		os.RemoveAll(root)
	} else {
		root = filepath.Join(b.TempDir(), "tree")
	}
	paths = genTree(b, root, *benchFiles, total)
	b.Logf("tree: %d files, %d MB", *benchFiles, total>>20)
	if *benchKeep != "" {
		os.WriteFile(root+".done", nil, 0o644)
	}
	return root, paths
}

// benchLogger logs to stderr with -test.v.
func benchLogger() *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func run(b *testing.B, dir string, name string, args ...string) time.Duration {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return time.Since(start)
}

// BenchmarkFirstTake: a first snapshot into an empty store, against cp -a
// of the tree (and cp -a followed by sync -f, since a snapshot is durable
// and a copy is not), interleaved.
func BenchmarkFirstTake(b *testing.B) {
	root, _ := benchTree(b)
	work := b.TempDir()
	var take, cp, cpSync []time.Duration
	var info Info
	for i := 0; b.Loop(); i++ {
		s, err := Open(filepath.Join(work, fmt.Sprint("store", i)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		exec.Command("sync").Run()
		start := time.Now()
		info, err = s.Take(context.Background(), root, TakeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		take = append(take, time.Since(start))
		exec.Command("sync").Run()
		cp = append(cp, run(b, work, "cp", "-a", root, fmt.Sprint("copy", i)))
		cpSync = append(cpSync, run(b, work, "sh", "-c", fmt.Sprintf("cp -a %s copy%d-s && sync -f copy%d-s", root, i, i)))
		os.RemoveAll(filepath.Join(work, fmt.Sprint("store", i)))
		os.RemoveAll(filepath.Join(work, fmt.Sprint("copy", i)))
		os.RemoveAll(filepath.Join(work, fmt.Sprint("copy", i, "-s")))
	}
	b.ReportMetric(ms(median(take)), "take-ms")
	b.ReportMetric(ms(median(cp)), "cp-ms")
	b.ReportMetric(ms(median(cpSync)), "cp+sync-ms")
	b.ReportMetric(float64(median(take))/float64(median(cp)), "take/cp")
	b.ReportMetric(float64(median(take))/float64(median(cpSync)), "take/cp+sync")
	b.Logf("%d files, %d bytes", info.Files, info.Bytes)
}

// BenchmarkUnchangedTake: a snapshot of an unchanged tree against git
// status of the same tree (committed, its index refreshed), interleaved.
func BenchmarkUnchangedTake(b *testing.B) {
	root, _ := benchTree(b)
	git := func(args ...string) {
		// gc.auto=0: a commit of the tree's 10,000 loose objects would
		// start git gc in the background, packing 200 MB on both cores
		// while the figures are taken.
		run(b, root, "git", append([]string{"-c", "user.email=b@example.com", "-c", "user.name=bench", "-c", "gc.auto=0", "-c", "maintenance.auto=false"}, args...)...)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "tree")
	git("status", "--porcelain")
	s, err := Open(filepath.Join(b.TempDir(), "store"), Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Take(context.Background(), root, TakeOptions{}); err != nil {
		b.Fatal(err)
	}
	var take, status []time.Duration
	var newBytes int64
	for b.Loop() {
		start := time.Now()
		info, err := s.Take(context.Background(), root, TakeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		take = append(take, time.Since(start))
		newBytes += info.NewBytes
		status = append(status, run(b, root, "git", "status", "--porcelain"))
	}
	b.ReportMetric(ms(median(take)), "take-ms")
	b.ReportMetric(ms(median(status)), "git-status-ms")
	b.ReportMetric(float64(median(take))/float64(median(status)), "take/git-status")
	if newBytes != 0 {
		b.Errorf("unchanged re-takes added %d bytes", newBytes)
	}
}

// BenchmarkRestore100: a restore after 100 files changed, against its
// target of 50 ms (the restore/50ms metric).
func BenchmarkRestore100(b *testing.B) {
	root, paths := benchTree(b)
	s, err := Open(filepath.Join(b.TempDir(), "store"), Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	info, err := s.Take(context.Background(), root, TakeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var took, plain []time.Duration
	for b.Loop() {
		b.StopTimer()
		chosen := rng.Perm(len(paths))[:min(100, len(paths))]
		orig := make([][]byte, len(chosen))
		for k, i := range chosen {
			orig[k], _ = os.ReadFile(filepath.Join(root, paths[i]))
			os.WriteFile(filepath.Join(root, paths[i]), []byte("changed\n"), 0o644)
		}
		b.StartTimer()
		start := time.Now()
		res, err := s.Restore(context.Background(), info.ID, root, RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		if res.Written != len(chosen) {
			b.Fatalf("restore wrote %d", res.Written)
		}
		// The baseline: the same 100 files' contents written to new files
		// with os.WriteFile (no check, no plan, no temporary files), beside
		// the tree so as not to touch it.
		b.StopTimer()
		scratch := filepath.Join(filepath.Dir(root), "scratch")
		os.RemoveAll(scratch)
		os.Mkdir(scratch, 0o755)
		start = time.Now()
		for k := range chosen {
			if err := os.WriteFile(filepath.Join(scratch, fmt.Sprint(k)), orig[k], 0o644); err != nil {
				b.Fatal(err)
			}
		}
		plain = append(plain, time.Since(start))
		b.StartTimer()
	}
	b.ReportMetric(ms(median(took)), "restore-ms")
	b.ReportMetric(ms(median(plain)), "writes-ms")
	b.ReportMetric(float64(median(took))/float64(median(plain)), "restore/writes")
	b.ReportMetric(ms(median(took))/50, "restore/50ms")
}

// BenchmarkGrowthOneFile: what a snapshot after a one-file change adds to
// the store, against that file's size.
func BenchmarkGrowthOneFile(b *testing.B) {
	root, paths := benchTree(b)
	s, err := Open(filepath.Join(b.TempDir(), "store"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Take(context.Background(), root, TakeOptions{}); err != nil {
		b.Fatal(err)
	}
	var growth, size int64
	for i := 0; b.Loop(); i++ {
		p := filepath.Join(root, paths[(i*7919)%len(paths)])
		data := []byte(strings.Repeat(fmt.Sprintf("change %d\n", i), 2000)) // ~20 KB, the mean
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		info, err := s.Take(context.Background(), root, TakeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		growth += info.NewBytes
		size += int64(len(data))
	}
	if *benchKeep != "" {
		os.Remove(root + ".done") // changed: generate it again next time
	}
	b.ReportMetric(float64(growth)/float64(b.N), "growth-bytes")
	b.ReportMetric(float64(size)/float64(b.N), "file-bytes")
	b.ReportMetric(float64(growth)/float64(size), "growth/file")
}

// BenchmarkPeakRSS runs a first Take in a child process (this test binary,
// re-executed) and reads its peak RSS (VmHWM), against the same child's
// peak before the Take.
func BenchmarkPeakRSS(b *testing.B) {
	root, _ := benchTree(b)
	var peak, idle float64
	for i := 0; b.Loop(); i++ {
		store := filepath.Join(b.TempDir(), fmt.Sprint("store", i))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SNAPSHOT_RSS_STORE="+store, "SNAPSHOT_RSS_ROOT="+root)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child: %v: %s", err, out)
		}
		var before, after int
		if _, err := fmt.Sscanf(string(out), "idle %d kB\npeak %d kB", &before, &after); err != nil {
			b.Fatalf("child said %q: %v", out, err)
		}
		idle, peak = float64(before)/1024, max(peak, float64(after)/1024)
	}
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(idle, "idle-MiB")
	b.ReportMetric(peak/64, "peak/64MiB")
}

func vmHWM() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

func TestMain(m *testing.M) {
	if store := os.Getenv("SNAPSHOT_RSS_STORE"); store != "" {
		root := os.Getenv("SNAPSHOT_RSS_ROOT")
		idle := vmHWM()
		s, err := Open(store, Options{})
		if err == nil {
			_, err = s.Take(context.Background(), root, TakeOptions{})
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Printf("idle %d kB\npeak %d kB\n", idle, vmHWM())
		os.Exit(0)
	}
	os.Exit(m.Run())
}
