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

// With one message due 3 s ahead, the fetcher sleeps until it is due: over
// 2 s of idleness it calls the fetch script only a handful of times, and the
// message still arrives on time.
func TestNoPollingSleepsUntilDue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "sleepy", topic.FixedTime, 1)
		c, fetches := e.clientCountingFetches()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec))
		e.start(c)

		due := time.Now().Add(3 * time.Second)
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("later"), due, producer.WithKey("later"))
		require.NoError(t, err)
		time.Sleep(2 * time.Second) // the idleness whose fetch calls are counted: it times the behaviour under test
		idle := fetches.N()
		assert.LessOrEqual(t, idle, int64(3), "fetch script called %d times in 2 s of idleness", idle)

		d := rec.next(t, waitLong)
		assert.False(t, d.At.Before(due.Truncate(time.Millisecond)), "delivered %v early", due.Sub(d.At))
		assert.Less(t, d.At.Sub(due), time.Second, "delivered late: the fetcher overslept")
		t.Logf("fetch calls: %d while idle, %d in all; lateness %v", idle, fetches.N(), d.At.Sub(due))
	})
}

// An idle consumer is woken by the producer: a message due now arrives at
// once, with only a few fetch calls.
func TestNoPollingWakeUp(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "wake", topic.FixedTime, 8)
		c, fetches := e.clientCountingFetches()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec))
		e.start(c)

		e.waitFetchersAsleep(1) // idle
		before := fetches.N()
		for i := range 3 {
			sent := time.Now()
			key := fmt.Sprintf("now-%d", i)
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(key), sent, producer.WithKey(key))
			require.NoError(t, err)
			d := rec.next(t, waitLong)
			assert.Equal(t, key, d.ID)
			assert.Less(t, d.At.Sub(sent), time.Second, "a due message waited for a poll")
			// Idle again: the ack landed (the handler's end released the
			// fetcher before it), and the fetcher sleeps.
			e.eventuallyCounts(tp, counts{})
			e.waitFetchersAsleep(1)
		}
		calls := fetches.N() - before
		assert.LessOrEqual(t, calls, int64(3*3), "fetch calls for 3 wake-ups: %d", calls)
		t.Logf("fetch calls: %d before, %d for 3 wake-ups", before, calls)
	})
}

// One fetch call moves as many messages as there are free handlers: with 200
// due messages and 50 handlers, 50 handlers run after at most three fetch
// calls (the first one only reads the slot's head, the third is the
// backlog's prefetch), and no more than 50 run.
func TestNoPollingBatchFillsCapacity(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "batch", topic.FixedTime, 1)
		c, fetches := e.clientCountingFetches()
		const total, capacity = 200, 50
		release := make(chan struct{})
		var running atomic.Int64
		var callsAtFull atomic.Int64
		full := make(chan struct{})
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if running.Add(1) == capacity {
				callsAtFull.Store(fetches.N())
				close(full)
			}
			<-release
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(capacity)))
		past := time.Now().Add(-time.Minute)
		for i := range total {
			key := fmt.Sprintf("b%03d", i)
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(key), past.Add(time.Duration(i)*time.Millisecond), producer.WithKey(key))
			require.NoError(t, err)
		}
		e.start(c)
		defer func() {
			select {
			case <-release:
			default:
				close(release)
			}
		}()

		select {
		case <-full:
		case <-time.After(waitLong):
			t.Fatalf("only %d handlers started", running.Load())
		}
		// The head read, the fetch of the first 50, and perhaps the
		// backlog's prefetch (engine.adaptBacklog) taken while they start.
		assert.LessOrEqual(t, callsAtFull.Load(), int64(3), "fetch calls before %d handlers ran", capacity)
		quiet(300 * time.Millisecond) // time to start a handler too many
		assert.Equal(t, int64(capacity), running.Load(), "more handlers than capacity")
		// The first fetch came back full with every handler idle: a
		// backlog, so the next took one prefetch of the concurrency ahead
		// (engine.adaptBacklog); with every handler taken, no more.
		assert.Equal(t, counts{Store: total - 2*capacity, Prepare: 2 * capacity, Msg: total}, e.counts(tp))
		t.Logf("fetch calls when %d handlers ran: %d", capacity, callsAtFull.Load())

		close(release)
		rec.nextN(t, total, waitLong)
		e.eventuallyCounts(tp, counts{})
		t.Logf("fetch calls for %d messages: %d", total, fetches.N())
	})
}

// Wake-ups keep arriving while the fetcher applies earlier ones. Not
// parallel, so that a data race between the waker and the fetcher (go test
// -race) is reported against this test.
func TestWakeUpsAfterDeliveries(t *testing.T) {
	forEachBackendSerial(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "wakes", topic.FixedTime, 2)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))
		e.start(c)
		for i := range 20 {
			key := fmt.Sprintf("w%02d", i)
			sent := time.Now()
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(key), sent, producer.WithKey(key))
			require.NoError(t, err)
			d := rec.next(t, waitLong)
			require.Equal(t, key, d.ID)
			assert.Less(t, d.At.Sub(sent), time.Second)
			// Every other send follows the delivery at once, so its
			// wake-up comes while the fetcher still applies the last
			// one's; the others find the fetcher asleep.
			if i%2 == 1 {
				e.waitFetchersAsleep(1)
			}
		}
		e.eventuallyCounts(tp, counts{})
	})
}
