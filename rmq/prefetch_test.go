package rmq_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// With a prefetch, fetches take messages beyond the free handlers, but no
// more than WithConcurrency listener calls ever run at once, and every
// message is handled once.
func TestPrefetchKeepsConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prefetch", topic.FixedTime, 4)
		gate := make(chan struct{})
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		c := e.client()
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(2), consumer.WithPrefetch(3)))
		for i := range 10 {
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m%d", i)), time.Now(), producer.WithKey(fmt.Sprintf("k%d", i)))
			require.NoError(t, err)
		}
		e.start(c)
		// Two handlers run; three more deliveries wait here, leased.
		e.eventuallyCounts(tp, counts{Store: 5, Prepare: 5, Msg: 10})
		require.Eventually(t, func() bool { return rec.running.Load() == 2 }, waitLong, time.Millisecond)
		time.Sleep(100 * time.Millisecond) // the waiting three stay waiting
		assert.EqualValues(t, 2, rec.running.Load())
		assert.Equal(t, counts{Store: 5, Prepare: 5, Msg: 10}, e.counts(tp))
		close(gate)
		got := map[string]int{}
		for _, d := range rec.nextN(t, 10, waitLong) {
			got[d.ID]++
		}
		e.eventuallyCounts(tp, counts{})
		rec.none(t, 100*time.Millisecond)
		assert.Len(t, got, 10)
		for id, n := range got {
			assert.Equal(t, 1, n, "%s handled %d times", id, n)
		}
		assert.EqualValues(t, 2, rec.maxRun.Load(), "listener calls at once")
	})
}

// A Close that gives up rolls back the prefetched deliveries that never
// started along with the running one: nothing stays in prepare.
func TestPrefetchedRollBackOnCloseDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prefetchclose", topic.FixedTime, 2)
		var calls atomic.Int32
		c := e.client()
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			calls.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}), consumer.WithConcurrency(1), consumer.WithPrefetch(2)))
		for i := range 3 {
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m%d", i)), time.Now(), producer.WithKey(fmt.Sprintf("k%d", i)))
			require.NoError(t, err)
		}
		e.start(c)
		e.eventuallyCounts(tp, counts{Prepare: 3, Msg: 3})
		cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, c.Close(cctx), context.DeadlineExceeded)
		assert.Equal(t, counts{Store: 3, Msg: 3}, e.counts(tp), "all three back in store")
		assert.EqualValues(t, 1, calls.Load(), "the prefetched ones never reached the listener")
	})
}

func TestPrefetchRejectsNegative(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.client()
		err := c.Register(mustTopic(t, "prefetchbad", topic.FixedTime, 2), consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }), consumer.WithPrefetch(-1))
		require.ErrorIs(t, err, consumer.ErrInvalidOption)
	})
}
