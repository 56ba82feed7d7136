package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A cluster's topic-wide limits (docs/flow-control.md, "Redis Cluster:
// topic-wide state on one node"): the places of a topic concurrency are
// per delivery on the topic's own node.

// pullN pulls up to n of tp from c, without waiting, each leased for 2
// minutes.
func pullN(t *testing.T, c *rmq.Client, tp topic.Topic, n int) []*rmq.Delivery {
	t.Helper()
	got, err := c.Pull(ctxT(t), []topic.Topic{tp}, n, rmq.WithLease(2*time.Minute))
	require.NoError(t, err)
	return got
}

// A pulled delivery holds its place of a topic concurrency for as long as
// its own lease, not the prepare timeout of the engine that pulled it, and
// the place comes back when another process acks it by id (rmqd behind a
// load balancer: a job pulled through one process, deleted through
// another).
func TestClusterPulledDeliveryHoldsItsPlaceForItsLease(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "pullplace", topic.FixedTime, 4)
	require.NoError(t, e.client().Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Concurrency: 1}))
	sendBacklog(t, e, tp, "p", 4, noGroup)
	short := rmq.PullEngineOptions(consumer.WithPrepareTimeout(time.Second))
	a, b := e.client(short), e.client(short)
	e.start(a)
	e.start(b)

	held := pullN(t, a, tp, 1)
	require.Len(t, held, 1)
	require.Empty(t, pullN(t, b, tp, 1), "the one place is held")
	// The behaviour under test is a duration: A's delivery (leased for 2
	// minutes) outlives its engine's prepare timeout (1 s), and so must its
	// place.
	time.Sleep(1500 * time.Millisecond)
	require.Empty(t, pullN(t, b, tp, 1), "A's delivery still holds the one place")

	// Acked by id through a client that never pulled the topic.
	c := e.client()
	e.start(c)
	ok, err := c.AckByID(ctxT(t), tp, held[0].ID)
	require.NoError(t, err)
	require.True(t, ok)
	got := pullN(t, b, tp, 2)
	require.Len(t, got, 1, "the place came back with the ack")
	require.Empty(t, pullN(t, a, tp, 1))
	require.NoError(t, got[0].Ack(ctxT(t)))
	require.Len(t, pullN(t, a, tp, 2), 1)
}

// A concurrency limit set while deliveries are in flight counts the ones
// taken under it: the end of a delivery leased before the limit gives
// back no place (it took none), so it cannot free the place of one taken
// under the limit.
func TestClusterLimitSetWhileInFlightKeepsItsCount(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "setlimit", topic.FixedTime, 4)
	sendBacklog(t, e, tp, "a", 2, noGroup)
	a := e.client()
	e.start(a)
	before := pullN(t, a, tp, 2)
	require.Len(t, before, 2)

	require.NoError(t, e.client().Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Concurrency: 1}))
	// The engine reads the limits again at its next fetch after the 'L'
	// wake-up; the store is empty, so these pulls take nothing.
	require.Eventually(t, func() bool {
		require.Empty(t, pullN(t, a, tp, 1))
		return rmq.PullLimits(a, tp.Name()).Concurrency == 1
	}, waitLong, 10*time.Millisecond)

	sendBacklog(t, e, tp, "b", 4, noGroup)
	under := pullN(t, a, tp, 2)
	require.Len(t, under, 1, "one place, and the deliveries from before the limit hold none")
	for _, d := range before {
		require.NoError(t, d.Ack(ctxT(t)))
	}
	require.Empty(t, pullN(t, a, tp, 2), "the delivery taken under the limit still holds the place")
	require.NoError(t, under[0].Ack(ctxT(t)))
	require.Len(t, pullN(t, a, tp, 2), 1)
}
