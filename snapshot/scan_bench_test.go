package snapshot

import (
	"context"
	"os"
	"testing"
)

// BenchmarkScan: one scan of the generated tree, nothing else.
func BenchmarkScan(b *testing.B) {
	root, _ := benchTree(b)
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	f := &filter{}
	for b.Loop() {
		if _, err := scanRoot(context.Background(), r, f, 2); err != nil {
			b.Fatal(err)
		}
	}
}
