package rmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A range-merge message is due timeRange after its first send; duplicates
// sent while it waits (by key, or by identical body) merge into that one
// delivery, and a duplicate's own range does not move the due time.
func TestRangeMergeDueAfterFirstSend(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prices", topic.RangeMerge, 4)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec))
		e.start(c)
		p := c.Producer()
		const timeRange = 1500 * time.Millisecond

		t0 := time.Now()
		_, err := p.SendRangeMerge(ctx, tp, []byte("v1"), timeRange, producer.WithKey("sku-1"))
		require.NoError(t, err)
		t1 := time.Now()
		bodyID, err := p.SendRangeMerge(ctx, tp, []byte("same body"), timeRange)
		require.NoError(t, err)
		require.Equal(t, producer.BodyID([]byte("same body")), bodyID)

		// Duplicates with a shorter range: the due time must not come
		// earlier (a due time of theirs would be far below timeRange).
		_, err = p.SendRangeMerge(ctx, tp, []byte("v2"), 100*time.Millisecond, producer.WithKey("sku-1"))
		require.NoError(t, err)
		id, err := p.SendRangeMerge(ctx, tp, []byte("same body"), 0)
		require.NoError(t, err)
		require.Equal(t, bodyID, id)
		// Duplicates sent later, with a range as long or longer: the due
		// time must not move later. The wait times the behaviour under
		// test: a window that restarted at each duplicate would end 600 ms
		// late.
		time.Sleep(600 * time.Millisecond)
		_, err = p.SendRangeMerge(ctx, tp, []byte("v3"), 10*time.Second, producer.WithKey("sku-1")) // longer range: not later
		require.NoError(t, err)
		_, err = p.SendRangeMerge(ctx, tp, []byte("same body"), timeRange)
		require.NoError(t, err)
		require.Equal(t, counts{Store: 2, Msg: 2}, e.counts(tp), "duplicates must merge")

		got := map[string]delivery{}
		for _, d := range rec.nextN(t, 2, waitLong) {
			got[d.ID] = d
		}
		rec.drained(t, e, tp, counts{}) // each delivered once, merged duplicates never again

		d, ok := got["sku-1"]
		require.True(t, ok, "sku-1 not delivered: %v", got)
		assert.Equal(t, "v3", d.Body, "the latest body wins")
		assert.Equal(t, 1, d.Attempt)
		assert.False(t, d.At.Before(t0.Add(timeRange)), "delivered %v before timeRange after the first send", t0.Add(timeRange).Sub(d.At))
		assert.False(t, d.DueAt.Before(t0.Add(timeRange).Truncate(time.Millisecond)), "due %v", d.DueAt)
		// The window starts from Redis's ms rounded up: at most 1 ms after t1.
		assert.False(t, d.DueAt.After(t1.Add(timeRange+time.Millisecond)), "due time moved by a duplicate: %v", d.DueAt.Sub(t1.Add(timeRange)))
		assert.Less(t, d.At.Sub(t0.Add(timeRange)), 3*time.Second, "delivered far too late")

		b, ok := got[bodyID]
		require.True(t, ok, "body-id message not delivered: %v", got)
		assert.Equal(t, "same body", b.Body)
		assert.False(t, b.At.Before(t1.Add(timeRange).Add(-time.Millisecond)), "body-id message delivered early")
	})
}

// A duplicate sent while the message is being handled is not swallowed: it is
// delivered again once the in-flight delivery has ended, never concurrently,
// and exactly twice in all.
func TestRangeMergeResendDuringHandling(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prices", topic.RangeMerge, 4)
		c, fetches := e.clientCountingFetches()
		started := make(chan struct{})
		resent := make(chan struct{})
		fetchedPastDue := make(chan struct{})
		firstEnd := make(chan time.Time, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if string(m.Body) == "v1" {
				close(started)
				<-resent
				// Busy until a fetch ran after the duplicate came due: a
				// fetcher that ignored the in-flight delivery would have
				// handed it out then.
				<-fetchedPastDue
				firstEnd <- time.Now()
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(4)))
		e.start(c)

		_, err := c.Producer().SendRangeMerge(ctx, tp, []byte("v1"), 100*time.Millisecond, producer.WithKey("sku"))
		require.NoError(t, err)
		first := rec.next(t, waitLong)
		select {
		case <-started:
		case <-time.After(waitLong):
			t.Fatal("handler did not start")
		}
		k := e.keys(tp, slotOfKey(tp, "sku"))
		_, inPrepare := e.zscore(k.Prepare, "sku")
		require.True(t, inPrepare)

		_, err = c.Producer().SendRangeMerge(ctx, tp, []byte("v2"), 100*time.Millisecond, producer.WithKey("sku"))
		require.NoError(t, err)
		_, inStore := e.zscore(k.Store, "sku")
		require.True(t, inStore, "the duplicate must wait in store while the first is handled")
		close(resent)
		waitFetchPastDue(e, tp, fetches)
		close(fetchedPastDue)

		second := rec.next(t, waitLong)
		rec.drained(t, e, tp, counts{}) // exactly twice in all
		assert.Equal(t, "v1", first.Body)
		assert.Equal(t, "v2", second.Body)
		assert.Equal(t, 1, second.Attempt, "a re-send is a fresh message")
		assert.False(t, second.At.Before(<-firstEnd), "second delivery started before the first ended")
		assert.Equal(t, int64(1), rec.maxRun.Load(), "the same id was handled concurrently")
	})
}

// A duplicate sent while the message is handled waits for that delivery to
// end. When the delivery fails, the duplicate is what comes next (the failed
// attempt merges into it), and it must come as soon as the delivery ended,
// as it does after an ack, not after a blocked-slot recheck.
func TestRangeMergeResendDuringFailedHandling(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "prices", topic.RangeMerge, 4)
		c, fetches := e.clientCountingFetches()
		started := make(chan struct{})
		resent := make(chan struct{})
		fetchedPastDue := make(chan struct{})
		failedAt := make(chan time.Time, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if string(m.Body) == "v1" {
				close(started)
				<-resent
				// The duplicate (due 50 ms after its send) comes due and
				// the fetcher finds its slot blocked meanwhile.
				<-fetchedPastDue
				failedAt <- time.Now()
				return errors.New("handler failed")
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(4), consumer.WithRetryBackoff(noBackoff)))
		e.start(c)

		_, err := c.Producer().SendRangeMerge(ctx, tp, []byte("v1"), 0, producer.WithKey("sku"))
		require.NoError(t, err)
		first := rec.next(t, waitLong)
		<-started
		_, err = c.Producer().SendRangeMerge(ctx, tp, []byte("v2"), 50*time.Millisecond, producer.WithKey("sku"))
		require.NoError(t, err)
		close(resent)
		waitFetchPastDue(e, tp, fetches)
		close(fetchedPastDue)

		second := rec.next(t, waitLong)
		failed := <-failedAt
		assert.Equal(t, "v1", first.Body)
		assert.Equal(t, "v2", second.Body)
		assert.False(t, second.At.Before(failed), "handled concurrently")
		assert.Less(t, second.At.Sub(failed), time.Second, "the waiting duplicate was delivered %v after the failed delivery ended", second.At.Sub(failed))
		rec.drained(t, e, tp, counts{})
	})
}

// waitFetchPastDue waits until what waits in tp's store is due by Redis's
// clock and a fetch ran after that: a fetcher had its chance to take it.
func waitFetchPastDue(e *env, tp topic.Topic, fetches *rmqtest.ScriptCounter) {
	e.t.Helper()
	e.waitAllDue(tp)
	n := fetches.N()
	redistest.Poll(e.t, func() error {
		if fetches.N() == n {
			return errors.New("no fetch since the duplicate came due")
		}
		return nil
	})
}
