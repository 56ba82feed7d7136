package rmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// wakeSubscribers counts the subscribers of tp's wake-up channels.
func (e *env) wakeSubscribers(tp topic.Topic) int64 {
	e.t.Helper()
	var chans []string
	for s := range tp.SlotAmount() {
		chans = append(chans, e.keys(tp, s).Wake)
	}
	m, err := e.rdb.PubSubNumSub(context.Background(), chans...).Result()
	require.NoError(e.t, err)
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// ReleaseIdlePulls closes the engine of a topic nobody pulls, and only
// then: not while a Pull waits on it, not before its leases ran out and
// could be swept. A later Pull makes a new engine.
func TestReleaseIdlePulls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "released", topic.FixedTime, 2)
	c := e.client()
	e.start(c)

	ds, err := c.Pull(ctx, []topic.Topic{tp}, 1)
	require.NoError(t, err)
	require.Empty(t, ds)
	require.Equal(t, 1, rmq.PullEngines(c))
	require.Equal(t, int64(2), e.wakeSubscribers(tp), "one subscription per slot")
	n, err := c.ReleaseIdlePulls(ctx, time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n, "not idle for long enough")

	// A waiting Pull holds the engine.
	fetches := rmq.PullFetches(c)
	got := make(chan []*rmq.Delivery, 1)
	go func() {
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(10*time.Second), rmq.WithLease(time.Second))
		assert.NoError(t, err)
		got <- ds
	}()
	require.Eventually(t, func() bool { return rmq.PullFetches(c) > fetches }, waitLong, time.Millisecond)
	n, err = c.ReleaseIdlePulls(ctx, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a Pull waits on it")
	send(t, c.Producer(), tp, "a", "a")
	ds = <-got
	require.Len(t, ds, 1)

	// Its lease (1 s) has not run out: kept, so that its sweeper rolls it
	// back if it is never acked.
	n, err = c.ReleaseIdlePulls(ctx, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a lease it handed out is still running")
	require.NoError(t, ds[0].Ack(ctx))
	require.Eventually(t, func() bool {
		n, err := c.ReleaseIdlePulls(ctx, 0)
		require.NoError(t, err)
		return n == 1
	}, waitLong, 50*time.Millisecond)
	assert.Zero(t, rmq.PullEngines(c))
	assert.Zero(t, e.wakeSubscribers(tp), "its subscription is gone")

	// Pulled again: a new engine, which a send wakes.
	go func() {
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(10*time.Second))
		assert.NoError(t, err)
		got <- ds
	}()
	require.Eventually(t, func() bool { return e.wakeSubscribers(tp) == 2 }, waitLong, time.Millisecond)
	send(t, c.Producer(), tp, "b", "b")
	ds = <-got
	require.Len(t, ds, 1)
	assert.Equal(t, "b", ds[0].ID)
	require.NoError(t, ds[0].Ack(ctx))
	found, err := c.NackByID(ctx, tp, "nope", 0, nil)
	require.NoError(t, err)
	assert.False(t, found)
	assert.Equal(t, 1, rmq.PullEngines(c))
}
