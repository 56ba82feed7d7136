package groupcommit_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/internal/groupcommit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type req struct {
	n     int
	round int // which round ran it; 0: none yet
}

// recorder runs rounds, numbering them, and tracks how many overlap.
type recorder struct {
	mu      sync.Mutex
	rounds  int
	sizes   []int
	running atomic.Int32
	most    atomic.Int32
	gate    chan struct{} // when not nil, each round waits for a token
}

func (r *recorder) run(_ context.Context, batch []*req) {
	n := r.running.Add(1)
	for {
		old := r.most.Load()
		if n <= old || r.most.CompareAndSwap(old, n) {
			break
		}
	}
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	r.rounds++
	for _, q := range batch {
		if q.round != 0 {
			panic("ran twice")
		}
		q.round = r.rounds
	}
	r.sizes = append(r.sizes, len(batch))
	r.mu.Unlock()
	r.running.Add(-1)
}

// arrivals keeps rounds busy while requests arrive, so that rounds overlap
// with arrivals and requests that arrived together share the next round.
type arrivals struct {
	total, inFlight int
	taken           atomic.Int32 // requests the rounds started so far took
}

// round waits, for a round of batch, until eight requests per round slot
// queued behind it, or every request that is not in a round queued.
func (a *arrivals) round(g *groupcommit.Group[*req], batch []*req) {
	a.taken.Add(int32(len(batch)))
	for {
		q := g.Queued()
		if q >= 8*a.inFlight || int(a.taken.Load())+q >= a.total {
			return
		}
		runtime.Gosched()
	}
}

func TestEveryRequestRunsOnceWithinTheRoundLimit(t *testing.T) {
	for _, inFlight := range []int{1, 2, 4} {
		r := &recorder{}
		reqs := make([]*req, 2000)
		a := &arrivals{total: len(reqs), inFlight: inFlight}
		var g *groupcommit.Group[*req]
		g = groupcommit.New(inFlight, func(ctx context.Context, b []*req) {
			a.round(g, b)
			r.run(ctx, b)
		}, nil)
		var wg sync.WaitGroup
		for i := range reqs {
			reqs[i] = &req{n: i}
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, g.Do(context.Background(), reqs[i]))
				assert.NotZero(t, reqs[i].round, "Do returned before the request ran")
			}()
		}
		wg.Wait()
		assert.LessOrEqual(t, int(r.most.Load()), inFlight, "rounds at once")
		assert.Less(t, r.rounds, len(reqs)/4, "requests that arrive together share rounds")
	}
}

func TestTakeBoundsARound(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	g := groupcommit.New(1, r.run, func(q []*req) int { return 3 })
	var wg sync.WaitGroup
	first := &req{}
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Do(context.Background(), first) }()
	require.Eventually(t, func() bool { return r.running.Load() == 1 }, 5*time.Second, time.Millisecond)
	for range 7 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Do(context.Background(), &req{}) }()
	}
	require.Eventually(t, func() bool { return g.Queued() == 7 }, 5*time.Second, time.Millisecond, "all seven queue behind the first round")
	close(r.gate)
	wg.Wait()
	assert.Equal(t, []int{1, 3, 3, 1}, r.sizes)
}

// A caller that gives up while its request queues must not leave the
// queue without anyone to run it: its request still runs, and later
// requests do not wait for it.
func TestGivingUpDoesNotStallTheQueue(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	g := groupcommit.New(1, r.run, nil)
	first := &req{}
	done := make(chan error, 1)
	go func() { done <- g.Do(context.Background(), first) }()
	require.Eventually(t, func() bool { return r.running.Load() == 1 }, 5*time.Second, time.Millisecond)

	gaveUp := &req{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err := g.Do(ctx, gaveUp)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, gaveUp.round)

	close(r.gate) // the first round ends; nobody waits for gaveUp
	require.NoError(t, <-done)
	assert.NotZero(t, gaveUp.round, "the first caller ran the abandoned request before it left")
	later := &req{}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, g.Do(ctx, later))
	assert.NotZero(t, later.round)
}

// Go returns without waiting, runs every value once within the round
// limit, calls each callback once after its value ran, and leaves no
// value queued with nobody to run it, mixed with callers of Do.
func TestGoRunsEveryValueAndCallsBackAfterItsRound(t *testing.T) {
	for _, inFlight := range []int{1, 2} {
		r := &recorder{}
		reqs := make([]*req, 2000)
		a := &arrivals{total: len(reqs), inFlight: inFlight}
		var g *groupcommit.Group[*req]
		g = groupcommit.New(inFlight, func(ctx context.Context, b []*req) {
			a.round(g, b)
			r.run(ctx, b)
		}, nil)
		var called atomic.Int32
		var wg sync.WaitGroup
		for i := range reqs {
			reqs[i] = &req{n: i}
			wg.Add(1)
			if i%4 == 0 {
				go func() {
					defer wg.Done()
					assert.NoError(t, g.Do(context.Background(), reqs[i]))
				}()
				continue
			}
			go g.Go(context.Background(), reqs[i], func() {
				defer wg.Done()
				called.Add(1)
				// The round that ran it is over before its callback.
				r.mu.Lock()
				ran := reqs[i].round
				r.mu.Unlock()
				assert.NotZero(t, ran, "callback before the value ran")
			})
		}
		wg.Wait()
		assert.Equal(t, int32(len(reqs)-len(reqs)/4), called.Load(), "one callback per Go")
		assert.LessOrEqual(t, int(r.most.Load()), inFlight, "rounds at once")
		assert.Less(t, r.rounds, len(reqs)/4, "values that arrive together share rounds")
	}
}

// A Go that finds every round slot taken returns at once; the caller
// running the round takes its value next.
func TestGoDoesNotWaitForABusyRound(t *testing.T) {
	r := &recorder{gate: make(chan struct{})}
	g := groupcommit.New(1, r.run, nil)
	first, second := &req{n: 1}, &req{n: 2}
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, g.Do(context.Background(), first))
	}()
	require.Eventually(t, func() bool { return r.running.Load() == 1 }, 5*time.Second, time.Millisecond)
	called := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		g.Go(context.Background(), second, func() { close(called) })
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Go waited for the busy round")
	}
	r.gate <- struct{}{} // the first round ends; its caller runs the second
	r.gate <- struct{}{}
	<-done
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the queued value's callback was never called")
	}
	assert.Equal(t, 1, first.round)
	assert.Equal(t, 2, second.round)
}
