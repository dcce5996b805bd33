package process

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTurnQueueOrder checks that turns go in the order they were reserved,
// whatever order their goroutines reach await in, and that a turn given up
// while it waits is passed over.
func TestTurnQueueOrder(t *testing.T) {
	var q turnQueue
	turns := make([]Turn, 6)
	for i := range turns {
		turns[i] = q.reserve()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	gaveUp := make(chan error, 1)
	// Turn 3 waits on a context that ends before its turn comes.
	wg.Add(1)
	go func() {
		defer wg.Done()
		gaveUp <- q.await(ctx, turns[3])
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("await on a cancelled context: %v, want context.Canceled", err)
	}
	// The others start in reverse order; they must still go in order.
	for i := len(turns) - 1; i >= 0; i-- {
		if i == 3 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.await(context.Background(), turns[i]); err != nil {
				t.Errorf("turn %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			q.done(turns[i])
		}()
	}
	wg.Wait()
	if diff := cmp.Diff([]int{0, 1, 2, 4, 5}, order); diff != "" {
		t.Errorf("turn order mismatch (-want +got):\n%s", diff)
	}
	// The queue goes on: the next turn goes at once.
	next := q.reserve()
	if err := q.await(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	q.done(next)
}

func TestLookupSignal(t *testing.T) {
	for _, name := range []string{"SIGINT", "INT", "sigint", "SIGTSTP", "CONT"} {
		if _, err := LookupSignal(name); err != nil {
			t.Errorf("LookupSignal(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "SIGFOO", "9", "SIG"} {
		if _, err := LookupSignal(name); !errors.Is(err, ErrUnknownSignal) {
			t.Errorf("LookupSignal(%q) = %v, want ErrUnknownSignal", name, err)
		}
	}
}

// TestWriteInputEOFAfterStepEnd: a step that ends between a writeInput's
// bytes and its eof (a child that exits once it has read) has its input
// closed by its end, which is what the eof asked for: the write succeeds
// with every byte, rather than answering that the input closed.
func TestWriteInputEOFAfterStepEnd(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := &Command{}
	c.input.setStep(w, false)
	testHookInputWritten = func() { c.input.endStep(w) }
	t.Cleanup(func() { testHookInputWritten = nil })
	n, err := c.WriteInput(context.Background(), c.input.turns.reserve(), []byte("last line\n"), true)
	if n != 10 || err != nil {
		t.Errorf("WriteInput with eof across the step's end: %d, %v; want 10, nil", n, err)
	}
	got, err := io.ReadAll(r)
	if string(got) != "last line\n" || err != nil {
		t.Errorf("the child read %q, %v; want %q and EOF", got, err, "last line\n")
	}
}
