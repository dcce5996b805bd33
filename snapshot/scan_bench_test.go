package snapshot

import (
	"context"
	"os"
	"testing"
)

// BenchmarkScan: one scan of the generated tree, nothing else: listing
// every directory ("listed"), or with the listings of the scan before
// ("cached", as a server's second scan of an unchanged root).
func BenchmarkScan(b *testing.B) {
	root, _ := benchTree(b)
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	f := &filter{}
	_, prev, err := scanRoot(context.Background(), r, f, 2, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		prev dirListings
	}{{"listed", nil}, {"cached", prev}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := scanRoot(context.Background(), r, f, 2, c.prev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
