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
	"github.com/rmq-go/rmq/rmq"
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
		rec := newRecorder(waitFor(gate))
		c := e.client()
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(2), consumer.WithPrefetch(3)))
		sendDueNow(ctx, t, c, tp, 10)
		e.start(c)
		// Two handlers run; three more deliveries wait here, leased.
		e.eventuallyCounts(tp, counts{Store: 5, Prepare: 5, Msg: 10})
		require.Eventually(t, func() bool { return rec.running.Load() == 2 }, waitLong, time.Millisecond)
		quiet(100 * time.Millisecond) // the waiting three stay waiting
		assert.EqualValues(t, 2, rec.running.Load())
		assert.Equal(t, counts{Store: 5, Prepare: 5, Msg: 10}, e.counts(tp))
		close(gate)
		got := map[string]int{}
		for _, d := range rec.nextN(t, 10, waitLong) {
			got[d.ID]++
		}
		rec.drained(t, e, tp, counts{})
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
		started := make(chan struct{}, 3)
		c := e.client()
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			calls.Add(1)
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}), consumer.WithConcurrency(1), consumer.WithPrefetch(2)))
		sendDueNow(ctx, t, c, tp, 3)
		e.start(c)
		e.eventuallyCounts(tp, counts{Prepare: 3, Msg: 3})
		// The fetch prepares all three before a handler calls the listener:
		// a Close before that call has nothing to give up on.
		select {
		case <-started:
		case <-time.After(waitLong):
			t.Fatal("the listener was not called")
		}
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

// A handler whose listener returned takes the next delivery while its ack
// is still on its way: a slow ack round does not idle the handlers. Writes
// are paused in Redis while the first message is handled, so its ack waits
// the pause out; the second listener call must come before that ack ends.
// A server of its own: the pause would stall every test on a shared one.
func TestNextDeliveryStartsWhileAckIsInFlight(t *testing.T) {
	e := newEnvOn(t, startDedicated(t))
	ctx := ctxT(t)
	tp := mustTopic(t, "ackoverlap", topic.FixedTime, 1)
	outcomes := make(chan consumer.Outcome, 2)
	var first atomic.Bool
	type seen struct {
		id            string
		firstFinished bool
	}
	calls := make(chan seen, 2)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if first.CompareAndSwap(false, true) {
			require.NoError(t, e.rdb.Do(ctx, "CLIENT", "PAUSE", 1500, "WRITE").Err())
			calls <- seen{id: m.ID}
			return nil
		}
		// Only the first delivery can have finished before this call.
		calls <- seen{id: m.ID, firstFinished: len(outcomes) > 0}
		return nil
	}), consumer.WithConcurrency(1), consumer.WithPrefetch(1)))
	sendDueNow(ctx, t, c, tp, 2)
	e.start(c)
	firstCall := <-calls
	var second seen
	select {
	case second = <-calls:
	case <-time.After(waitLong):
		t.Fatal("the second message was not handled")
	}
	assert.NotEqual(t, firstCall.id, second.id)
	assert.False(t, second.firstFinished, "the second listener call waited for the first ack")
	for range 2 {
		select {
		case out := <-outcomes:
			assert.Equal(t, consumer.Acked, out, "both acked once the pause ends")
		case <-time.After(waitLong):
			t.Fatal("a delivery did not end")
		}
	}
	e.eventuallyCounts(tp, counts{})
}

// With a prefetch of p and a backlog, a fetch waits until at most p/2
// fetched messages still wait to start, so each fetch moves at least p/2:
// a few large script calls instead of one per freed handler.
func TestPrefetchFetchesInLargeBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prefetchbatch", topic.FixedTime, 1)
		const n, prefetch = 400, 32
		c, fetches := e.clientCountingFetches()
		rec := newRecorder(func(context.Context, *consumer.Message) error {
			time.Sleep(200 * time.Microsecond) // a handler that works, so fetched messages wait for it: the wait times the behaviour under test
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(2), consumer.WithPrefetch(prefetch)))
		_, err := c.Producer().SendBatch(ctx, tp, dueBatch(n, func(int) time.Time { return time.Now() }))
		require.NoError(t, err)
		e.start(c)
		got := map[string]int{}
		for _, d := range rec.nextN(t, n, waitLong) {
			got[d.ID]++
		}
		e.eventuallyCounts(tp, counts{})
		assert.Len(t, got, n, "every message handled")
		for id, k := range got {
			assert.Equal(t, 1, k, "%s handled %d times", id, k)
		}
		// n/(p/2) full fetches, and a few that find the slot's head or
		// nothing left.
		assert.LessOrEqual(t, fetches.N(), int64(n/(prefetch/2)+6), "fetch calls")
	})
}

// The prefetch refills while the handlers are busy: with one handler and
// a prefetch of one, the third message is fetched while the second runs,
// not once it has returned.
func TestPrefetchRefillsWhileHandlerRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prefetchrefill", topic.FixedTime, 1)
		release := make(chan struct{})
		rec := newRecorder(waitFor(release))
		c := e.client()
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1), consumer.WithPrefetch(1)))
		sendDueNow(ctx, t, c, tp, 3)
		e.start(c)
		first := rec.next(t, waitLong)
		e.eventuallyCounts(tp, counts{Store: 1, Prepare: 2, Msg: 3}) // one runs, one waits
		release <- struct{}{}
		second := rec.next(t, waitLong)
		assert.NotEqual(t, first.ID, second.ID)
		// The first is acked; the second runs and the third waits behind it.
		e.eventuallyCounts(tp, counts{Prepare: 2, Msg: 2})
		close(release)
		rec.nextN(t, 1, waitLong)
		e.eventuallyCounts(tp, counts{})
	})
}

// sendDueNow sends n FixedTime messages due now, with keys k0, k1, ...
// and bodies m0, m1, ...
func sendDueNow(ctx context.Context, t *testing.T, c *rmq.Client, tp topic.Topic, n int) {
	t.Helper()
	for i := range n {
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m%d", i)), time.Now(), producer.WithKey(fmt.Sprintf("k%d", i)))
		require.NoError(t, err)
	}
}

// waitFor is a listener that returns once it can take a value from ch (or
// its context ends).
func waitFor(ch <-chan struct{}) func(ctx context.Context, m *consumer.Message) error {
	return func(ctx context.Context, _ *consumer.Message) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dueBatch is n messages with bodies m0, m1, ... due at(i).
func dueBatch(n int, at func(i int) time.Time) []producer.BatchMessage {
	msgs := make([]producer.BatchMessage, n)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d", i)), At: at(i)}
	}
	return msgs
}
