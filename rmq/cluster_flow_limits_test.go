package rmq_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A cluster's topic-wide limits (docs/flow-control.md, "Redis Cluster:
// topic-wide state on one node"): the places of a topic concurrency are
// per delivery on the topic's own node, and a rate's starts are used by
// the fetch that follows their grant whatever the nodes' clocks say.

// pullN pulls up to n of tp from c, without waiting, each leased for 2
// minutes.
func pullN(t *testing.T, c *rmq.Client, tp topic.Topic, n int) []*rmq.Delivery {
	t.Helper()
	got, err := c.Pull(ctxT(t), []topic.Topic{tp}, n, rmq.WithLease(2*time.Minute))
	require.NoError(t, err)
	return got
}

// requireNoPlaceFor pulls tp through c every 50 ms for d, on the test's
// goroutine (a pull left running could take a place freed later), and
// fails as soon as one gets a delivery: a place came free. Nothing signals
// a place that does not come free: d is the duration under test.
func requireNoPlaceFor(t *testing.T, c *rmq.Client, tp topic.Topic, d time.Duration, msg string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		require.Empty(t, pullN(t, c, tp, 1), msg)
	}
	require.Empty(t, pullN(t, c, tp, 1), msg)
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
	// place: B's pulls find none free all that while.
	requireNoPlaceFor(t, b, tp, 1500*time.Millisecond, "A's delivery still holds the one place")

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

// latencyCluster returns a cluster client of e's cluster whose every
// connection goes through a proxy adding up and down latency.
func latencyCluster(t *testing.T, e *env, up, down time.Duration) *redis.ClusterClient {
	t.Helper()
	rdb, proxies := proxiedCluster(t, e)
	for _, p := range proxies {
		p.SetDelay(up, down)
	}
	return rdb
}

// proxiedCluster returns a cluster client of e's cluster whose every
// connection goes through a proxy of its node, and the proxies.
func proxiedCluster(t *testing.T, e *env) (*redis.ClusterClient, map[string]*faultproxy.Proxy) {
	t.Helper()
	proxies := map[string]*faultproxy.Proxy{}
	for _, addr := range e.cl.Addrs() {
		p, err := faultproxy.Start(addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		proxies[addr] = p
	}
	return redistest.ClusterClient(t, e.cl, func(o *redis.ClusterOptions) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p := proxies[addr]; p != nil {
				addr = p.Addr()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}), proxies
}

// A rate of 100/s (one start every 10 ms) is served when a round trip to
// the nodes takes longer than that interval: the fetch uses the starts its
// permit call granted, however late it reaches its slot's node.
func TestClusterRateLimitWithLatencyAboveItsInterval(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "ratelag", topic.FixedTime, 4)
	const n = 50
	sendBacklog(t, e, tp, "r", n, noGroup)
	rdb := latencyCluster(t, e, 6*time.Millisecond, 6*time.Millisecond)
	var got atomic.Int64
	var first, last atomic.Int64 // UnixNano of the first and the last start
	all := make(chan struct{})
	c := e.clientOn(rdb)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		if got.Add(1) == n {
			close(all)
		}
		return nil
	}), consumer.WithRateLimit(100, time.Second), consumer.WithConcurrency(10)))
	e.start(c)
	select {
	case <-all:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d of %d delivered in 5 s at 100/s", got.Load(), n)
	}
	// And the rate still holds: after the burst (10), one start per 10 ms.
	took := time.Duration(last.Load() - first.Load())
	require.GreaterOrEqual(t, took, 300*time.Millisecond, "50 starts at 100/s")
}

// A place whose give-back never comes (the delivery was removed while in
// flight and its puller never ends it) is found by a client that has
// waited at the limit for a while: it checks the places against the
// slots' prepare sets.
func TestClusterLostGiveBackHeals(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "heal", topic.FixedTime, 4)
	require.NoError(t, e.client().Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Concurrency: 1}))
	sendBacklog(t, e, tp, "h", 3, noGroup)
	a, b := e.client(), e.client()
	e.start(a)
	e.start(b)
	held := pullN(t, a, tp, 1)
	require.Len(t, held, 1)
	r, err := producerOn(t, e.rdb, e.prefix).Remove(ctxT(t), tp, held[0].ID)
	require.NoError(t, err)
	require.NotEqual(t, producer.NotFound, r)
	require.Empty(t, pullN(t, b, tp, 1), "the place is still held")
	// B checks the places once it has waited at the limit for 5 s: its
	// pulls find nothing until then, and then the message.
	redistest.Poll(t, func() error {
		if len(pullN(t, b, tp, 1)) == 1 {
			return nil
		}
		return errors.New("the removed delivery's place was not given back")
	})
}

// A permit call whose reply is lost is sent again by go-redis; the places
// it reserved are granted once: a limit of 2 with one delivery in flight
// leaves one place for another client.
func TestClusterResentPermitCallGrantsOnce(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "resend", topic.FixedTime, 4)
	require.NoError(t, e.client().Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Concurrency: 2}))
	sendBacklog(t, e, tp, "s", 4, noGroup)
	rdb, proxies := proxiedCluster(t, e)
	// The first call naming the topic's places is a permit call's take.
	for _, p := range proxies {
		p.DropReplyTo([]byte(keyspace.FlowKeysFor(e.prefix, tp).Places))
	}
	a, b := e.clientOn(rdb), e.client()
	e.start(a)
	e.start(b)
	require.Len(t, pullN(t, a, tp, 1), 1)
	var dropped int64
	for _, p := range proxies {
		dropped += p.Dropped()
	}
	require.EqualValues(t, 1, dropped, "one permit reply was lost, and the call sent again")
	require.Len(t, pullN(t, b, tp, 2), 1, "one place left")
}

// Extending a pulled delivery's lease extends its place with it.
func TestClusterExtendedPullKeepsItsPlace(t *testing.T) {
	e := newEnvFor(t, cluster)
	tp := mustTopic(t, "extend", topic.FixedTime, 4)
	require.NoError(t, e.client().Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Concurrency: 1}))
	sendBacklog(t, e, tp, "x", 3, noGroup)
	a, b := e.client(), e.client()
	e.start(a)
	e.start(b)
	held, err := a.Pull(ctxT(t), []topic.Topic{tp}, 1, rmq.WithLease(time.Second))
	require.NoError(t, err)
	require.Len(t, held, 1)
	require.NoError(t, held[0].Extend(ctxT(t), 2*time.Minute))
	// The behaviour under test is a duration: the first lease (1 s) runs
	// out, and B's pulls find no place free all that while.
	requireNoPlaceFor(t, b, tp, 1500*time.Millisecond, "the extended delivery still holds the one place")
	require.NoError(t, held[0].Ack(ctxT(t)))
	require.Len(t, pullN(t, b, tp, 1), 1)
}
