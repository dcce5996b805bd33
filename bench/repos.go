package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/internal/gitrepos"
	"github.com/toolhost/toolhost/protocol"
)

// reposTree makes in root a tree of 10,000 directories (100 of 100,
// counting each top one), 10 of them repositories with a hooks directory
// and a config.
func reposTree(root string) error {
	for i := range 100 {
		for j := range 99 {
			if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("p%03d", i), fmt.Sprintf("d%02d", j)), 0o755); err != nil {
				return err
			}
		}
		if i%10 == 0 {
			git := filepath.Join(root, fmt.Sprintf("p%03d", i), ".git")
			if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(git, "config"), []byte("[core]\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// reposScan measures the scan for repositories that starts each command
// under the agents' "**/.git" protect rules, in a root of 10,000
// directories: the scan as toolhost runs it (two workers), beside
// filepath.WalkDir of the same tree (the standard library's walk, one
// goroutine), the scan with one worker, the scan again with a
// gitrepos.Cache that has seen the tree (what each command after a
// session's first pays) and a first scan filling a new cache,
// interleaved; then what the rules add to a confined runCommand of true
// in that root, against a server protecting the root's .git alone.
func (b *bench) reposScan() error {
	rules, err := b.startServer("repos-rules", "--protect", "**/.git/hooks", "--protect", "**/.git/config")
	if err != nil {
		return err
	}
	defer rules.end()
	plain, err := b.startServer("repos-root-only", "--protect", ".git/hooks", "--protect", ".git/config")
	if err != nil {
		return err
	}
	defer plain.end()
	for _, s := range []*server{rules, plain} {
		if err := reposTree(s.root); err != nil {
			return err
		}
	}
	root := rules.root
	walk := func() (int, error) {
		n := 0
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".git" {
				n++
				return filepath.SkipDir
			}
			return nil
		})
		return n, err
	}
	// With a cache (the session's, in toolhost): kept across the samples,
	// so that each scan but the first looks again at an unchanged tree,
	// and a new one each time (a session's first scan, which fills it).
	var cache gitrepos.Cache
	defer cache.Close()
	var fresh *gitrepos.Cache // the new one of the sample, closed after it
	var relisted int
	scanWith := func(c *gitrepos.Cache, workers int) (gitrepos.Result, error) {
		res, err := c.Scan(root, gitrepos.Options{Workers: workers, Timeout: time.Minute})
		if err == nil && res.Truncated != "" {
			err = fmt.Errorf("the scan stopped at its %s limit", res.Truncated)
		}
		return res, err
	}
	scan := func(workers int) (int, error) {
		res, err := scanWith(nil, workers)
		return len(res.Repos), err
	}
	warm, n := b.iters(5, 2), b.iters(60, 10)
	var two, one, base, cached, filling durations
	for i := range warm + n {
		for j, f := range []func() (int, error){
			func() (int, error) { return scan(2) },
			func() (int, error) { return scan(1) },
			walk,
			func() (int, error) {
				res, err := scanWith(&cache, 2)
				if i >= warm {
					relisted += res.Listed
				}
				return len(res.Repos), err
			},
			func() (int, error) {
				fresh = new(gitrepos.Cache)
				res, err := scanWith(fresh, 2)
				return len(res.Repos), err
			},
		} {
			t0 := time.Now()
			found, err := f()
			d := time.Since(t0)
			if fresh != nil {
				fresh.Close() // its inotify instance and watches, untimed
				fresh = nil
			}
			if err != nil {
				return err
			}
			if found != 10 {
				return fmt.Errorf("found %d repositories, want 10", found)
			}
			if i < warm {
				continue
			}
			switch j {
			case 0:
				two = append(two, d)
			case 1:
				one = append(one, d)
			case 2:
				base = append(base, d)
			case 3:
				cached = append(cached, d)
			default:
				filling = append(filling, d)
			}
		}
	}
	s50, o50, w50, c50, f50 := two.pct(50), one.pct(50), base.pct(50), cached.pct(50), filling.pct(50)
	b.add(row{Figure: "scan for repositories of a root of 10,000 directories (2 workers), p50", Value: fmtDur(s50), Baseline: "`filepath.WalkDir` of the tree: " + fmtDur(w50),
		Ratio: ratio(float64(s50), float64(w50)), Target: "≤ 20 ms", Met: met(s50 <= 20*time.Millisecond),
		Why: "each directory costs three system calls (openat, getdents until it returns nothing, close), and a system call costs about 1 µs on this virtual machine (a getppid loop), " +
			"10 to 20 times a bare-metal one: those three cost 8 to 18 µs a directory in a loop of their own (80 to 180 ms for 10,000 on one core), and two workers halve that only when both cores are free; " +
			"the scan makes no other system call a directory (no stat: getdents's d_type says what is a directory), so it is the kernel's time, not the server's"})
	b.add(row{Figure: "the same scan with 1 worker, p50", Value: fmtDur(o50), Baseline: "2 workers: " + fmtDur(s50), Ratio: ratio(float64(o50), float64(s50))})
	b.add(row{Figure: "the same scan again with the `gitrepos.Cache` of the unchanged tree (2 workers), p50", Value: fmtDur(c50), Baseline: "the scan without a cache: " + fmtDur(s50),
		Ratio: ratio(float64(c50), float64(s50)), Target: "≤ 20 ms", Met: met(c50 <= 20*time.Millisecond),
		Why: "the cache learns of changes from inotify: every unchanged directory has a watch and no event, so it costs no system call (the scan reads the empty queue once, polls the mount table, opens the root); " +
			"what is left is walking the cache's 10,000 directories in memory. A directory without a watch (past the cache's share of fs.inotify.max_user_watches, or after a lost event) costs one fstatat, about 2 µs on this virtual machine: 20 ms for 10,000 on one core"})
	b.add(row{Figure: "a first scan that fills a `gitrepos.Cache` (2 workers), p50", Value: fmtDur(f50), Baseline: "the scan without a cache: " + fmtDur(s50), Ratio: ratio(float64(f50), float64(s50))})
	if relisted != 0 {
		return fmt.Errorf("the scans with the cache read %d directories again, want none", relisted)
	}

	// What the rules add to a confined command's start and end: the scan
	// before it and the scan after.
	ctx, cancel := limit()
	defer cancel()
	run := func(s *server) (time.Duration, error) {
		t0 := time.Now()
		r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"true"}})
		d := time.Since(t0)
		if err == nil && !r.Success {
			err = fmt.Errorf("runCommand true did not succeed: %+v", r)
		}
		if err == nil && s == rules && (r.Sandbox == nil || len(r.Sandbox.Protect) != 20) {
			err = fmt.Errorf("the rules protected %d paths, want 20", len(r.Sandbox.Protect))
		}
		return d, err
	}
	var with, without durations
	warm, n2 := b.iters(3, 2), b.iters(40, 10)
	for i := range warm + n2 {
		d, err := run(rules)
		if err != nil {
			return err
		}
		e, err := run(plain)
		if err != nil {
			return err
		}
		if i >= warm {
			with, without = append(with, d), append(without, e)
		}
	}
	r50, p50 := with.pct(50), without.pct(50)
	b.add(row{Figure: "`runCommand` of `true` in that root with the agents' `**/.git` rules, p50", Value: fmtDur(r50), Baseline: "the root's `.git` alone: " + fmtDur(p50), Ratio: ratio(float64(r50), float64(p50))})
	b.note("The scan for repositories: a root of 10,000 directories (100 top ones of 99 each), 10 of them repositories with .git/hooks and .git/config; `internal/gitrepos.Scan` with 2 workers and with 1, `filepath.WalkDir` of the same tree skipping .git, `gitrepos.Cache.Scan` with the cache of the earlier samples (every directory unchanged and watched by inotify: no system call for any) and with a new cache (which also adds watches, for at most 50 ms), in turn (%d samples each). Then a confined `runCommand` of `true` in such a root on a server with `--protect '**/.git/hooks' --protect '**/.git/config'` (a scan before the command, 20 paths bound, a scan after it, both with the session's cache) and on one protecting the root's .git/hooks and .git/config alone, in turn (%d samples each).", n, n2)
	return nil
}
