package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// One client, one topic, two engines (one pushing, one pulling, say): one
// closes while the other starts. Whatever the order in which the hub hears
// of the two, the channels the starting engine listens on stay subscribed
// once both calls returned.
func TestShardWakerKeepsChannelsOfAnEngineStartingWhileAnotherCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{})
	cc := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	h := newHub(t, cc, prefix)
	tp := topic.MustNew("handover", topic.FixedTime, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newOne := func() *Engine {
		c, err := h.newEngine(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }))
		require.NoError(t, err)
		return c
	}
	admin := masterAdmins(t, cl)
	unsubscribed := func(c *Engine) []string {
		var out []string
		for i, n := range shardSubscribers(t, ctx, cl, admin, c) {
			if n != 1 {
				out = append(out, fmt.Sprintf("slot %d: %d subscribers", i, n))
			}
		}
		return out
	}
	cur := newOne()
	require.NoError(t, cur.Start(ctx))
	for round := range 40 {
		next := newOne()
		closed, started := make(chan error, 1), make(chan error, 1)
		go func() { closed <- cur.Close(ctx) }()
		go func() { started <- next.Start(ctx) }()
		require.NoError(t, <-closed)
		require.NoError(t, <-started, "round %d", round)
		// An unsubscribe written for the closed engine (Close returns once
		// it was written) has been run by Redis once a command sent to the
		// same master after it was answered: a node reads every client
		// whose input is waiting before it writes the replies of that
		// round, and the unsubscribe was waiting first.
		for _, a := range admin {
			require.NoError(t, a.Ping(ctx).Err())
		}
		require.Empty(t, unsubscribed(next), "round %d: channels of the started engine", round)
		cur = next
	}
	require.NoError(t, cur.Close(ctx))
}
