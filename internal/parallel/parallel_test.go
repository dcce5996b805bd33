package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestForRunsEachOnce checks that every index runs once, on no more
// goroutines than asked.
func TestForRunsEachOnce(t *testing.T) {
	const n, workers = 1000, 3
	var seen [n]atomic.Int32
	var running, most atomic.Int32
	err := For(context.Background(), workers, n, func(ctx context.Context, i int) error {
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		seen[i].Add(1)
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("index %d ran %d times", i, c)
		}
	}
	if m := most.Load(); m > workers {
		t.Errorf("%d calls ran at once, want at most %d", m, workers)
	}
}

// TestForStopsAtTheFirstError checks that an error cancels the others'
// ctx and is what For returns.
func TestForStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	err := For(context.Background(), 2, 100, func(ctx context.Context, i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("For: %v, want %v", err, boom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, 2, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("For of nothing on a cancelled ctx: %v, want context.Canceled", err)
	}
}
