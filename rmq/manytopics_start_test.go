package rmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// A client of many topics starts them side by side; when one cannot start
// (its name is stored with another definition), Start fails with that
// error and every topic that did start is closed again: no wake channel of
// the client stays subscribed.
func TestManyTopicsStartFailureClosesTheStarted(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 150
	require.NoError(t, e.rdb.HSet(ctx, keyspace.TopicsKey(e.prefix), "start077", "priority:8").Err())
	c := e.client()
	l := consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })
	for i := range n {
		require.NoError(t, c.Register(mustTopic(t, fmt.Sprintf("start%03d", i), topic.FixedTime, 4), l))
	}
	err := c.Start(ctx)
	require.ErrorIs(t, err, topic.ErrConflict)
	require.ErrorContains(t, err, "start077")
	chans, err := e.rdb.PubSubChannels(ctx, e.prefix+":*").Result()
	require.NoError(t, err)
	require.Empty(t, chans, "wake channels still subscribed after the failed Start")
}
