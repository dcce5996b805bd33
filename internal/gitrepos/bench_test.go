package gitrepos

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// MakeTree10k-like: 10,000 directories, 10 of them repositories.
func makeBenchTree(b *testing.B) string {
	root := b.TempDir()
	for i := range 100 {
		for j := range 99 {
			if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("p%03d/d%02d", i, j)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if i%10 == 0 {
			if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("p%03d/.git/hooks", i)), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

func BenchmarkScan10k(b *testing.B) {
	root := makeBenchTree(b)
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			for b.Loop() {
				res, err := Scan(root, Options{Workers: w, Timeout: 10e9})
				if err != nil || res.Truncated != "" || len(res.Repos) != 10 {
					b.Fatal(err, res.Truncated, len(res.Repos))
				}
			}
		})
	}
	// A first scan with a cache, which fills it.
	b.Run("filling", func(b *testing.B) {
		for b.Loop() {
			c := new(Cache)
			res, err := c.Scan(root, Options{Timeout: 10e9})
			c.Close()
			if err != nil || res.Truncated != "" || len(res.Repos) != 10 {
				b.Fatal(err, res.Truncated, len(res.Repos))
			}
		}
	})
	// The scan again with a cache that holds the whole tree, watched by
	// inotify (and without: one stat a directory).
	for _, name := range []string{"cached", "cached-stat"} {
		b.Run(name, func(b *testing.B) {
			var c Cache
			defer c.Close()
			c.closed = name == "cached-stat"
			for {
				res, err := c.Scan(root, Options{Timeout: 10e9})
				if err != nil || res.Truncated != "" || len(res.Repos) != 10 {
					b.Fatal(err, res.Truncated, len(res.Repos))
				}
				if res.Listed == 0 || runtime.GOOS != "linux" {
					break
				}
			}
			for b.Loop() {
				res, err := c.Scan(root, Options{Timeout: 10e9})
				if err != nil || res.Truncated != "" || len(res.Repos) != 10 {
					b.Fatal(err, res.Truncated, len(res.Repos))
				}
			}
		})
	}
}
