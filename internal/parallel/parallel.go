// Package parallel runs the iterations of a loop on a bounded number of
// goroutines, for the packages that fetch, copy or hash many files at
// once (snapshot, mounts). It knows nothing else of them.
package parallel

import (
	"context"
	"sync"
	"sync/atomic"
)

// For runs f(ctx, i) for i in 0..n-1 on at most workers goroutines
// (at least one), taking the next i as each call returns. The first
// error cancels the ctx of the others and is returned, or ctx's cause
// when ctx ends first; For returns once every call has. With n 0 it
// returns ctx.Err().
func For(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	if n == 0 {
		return ctx.Err()
	}
	workers = max(1, min(workers, n))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { // owned by For, which waits for it
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
