package groupcommit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With Serve running, Go never runs a round on its caller's goroutine,
// even with every round slot free: Serve's goroutine does. When Serve's
// ctx ends it runs what is still queued before it returns.
func TestServeRunsWhatNoCallerWaitsFor(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var rounds [][]int
	g := New(2, func(_ context.Context, b []int) {
		<-gate
		mu.Lock()
		rounds = append(rounds, b)
		mu.Unlock()
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.Serve(ctx)
	}()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.serving
	}, 5*time.Second, time.Millisecond)

	called := make(chan int, 8)
	returned := make(chan struct{})
	go func() {
		for i := range 3 {
			g.Go(context.Background(), i, func() { called <- i })
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Go ran a round on its caller's goroutine (the round waits for its gate)")
	}
	cancel()
	// Open the gate until Serve returns: it must have run every value.
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case gate <- struct{}{}:
		case <-served:
			open = false
		case <-deadline:
			t.Fatal("Serve did not return")
		}
	}
	var got []int
	for range 3 {
		select {
		case i := <-called:
			got = append(got, i)
		case <-time.After(5 * time.Second):
			t.Fatalf("a queued value was left with nobody to run it: called %v", got)
		}
	}
	assert.ElementsMatch(t, []int{0, 1, 2}, got)
	mu.Lock()
	defer mu.Unlock()
	var all []int
	for _, r := range rounds {
		all = append(all, r...)
	}
	assert.ElementsMatch(t, []int{0, 1, 2}, all, "each value ran once")
}
