package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A pulled delivery stores its progress like a pushed one, until its ack;
// after that it is no longer current.
func TestPulledProgress(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := topic.New("pullprogress", topic.Priority, 1)
	require.NoError(t, err)
	c, err := newPullEngine(t, rdb, prefix, tp, nil)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	_, err = newProducer(rdb, prefix).SendPriority(ctx, tp, []byte("x"), 100, producer.WithKey("pp"))
	require.NoError(t, err)
	got, _, err := c.Pull(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, got, 1)
	d := got[0]
	require.NoError(t, d.SetProgress(ctx, []byte("step 1")))
	lk := keyspace.LifeKeysFor(prefix, tp.Name(), 0)
	raw, err := rdb.HGet(ctx, lk.Progress, "pp").Result()
	require.NoError(t, err)
	p, ok := life.Progress(raw, d.Token)
	require.True(t, ok)
	require.Equal(t, "step 1", string(p))
	require.ErrorIs(t, d.SetProgress(ctx, make([]byte, consumer.MaxProgressSize+1)), consumer.ErrProgressTooLarge)
	require.NoError(t, d.Ack(ctx))
	require.ErrorIs(t, d.SetProgress(ctx, []byte("late")), consumer.ErrNotCurrent)
	n, err := rdb.HLen(ctx, lk.Progress).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the ack cleared it, and the late one was refused")
}
