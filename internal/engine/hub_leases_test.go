package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/lease"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// leaseFixture is a redis-server of the test's own (its command counts are
// the test's), a key prefix and a producer.
type leaseFixture struct {
	t      *testing.T
	rdb    redis.UniversalClient
	node   *redis.Client // rdb on a single node, nil on a cluster
	prefix string
	p      *producer.Producer
}

func newLeaseFixture(t *testing.T) *leaseFixture {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	return &leaseFixture{t: t, rdb: rdb, node: rdb, prefix: prefix, p: newProducer(rdb, prefix)}
}

func newClusterLeaseFixture(t *testing.T) *leaseFixture {
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{})
	rdb := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	return &leaseFixture{t: t, rdb: rdb, prefix: prefix, p: newProducer(rdb, prefix)}
}

// start starts c (on the hub it was made on) and closes it when the test
// ends.
func (f *leaseFixture) start(c *Engine) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(f.t, c.Start(ctx))
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}

// sharedHub returns a hub closed when the test ends, after the engines
// started later (cleanups run last first).
func (f *leaseFixture) sharedHub() *Hub {
	return newHub(f.t, f.rdb, f.prefix)
}

func (f *leaseFixture) send(tp topic.Topic, key string) {
	f.t.Helper()
	_, err := f.p.SendFixedTime(context.Background(), tp, []byte(key), time.Now(), producer.WithKey(key))
	require.NoError(f.t, err)
}

// leaveLease pulls one message of tp with lease and closes the puller
// without ending the delivery: what a consumer that died leaves in
// prepare. It returns the delivery and the instant the lease runs out by
// Redis's clock (its deadline second passed).
func (f *leaseFixture) leaveLease(tp topic.Topic, lease time.Duration) (*Pulled, time.Time) {
	f.t.Helper()
	dead, err := newPullEngine(f.t, f.rdb, f.prefix, tp, nil)
	require.NoError(f.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(f.t, dead.Start(ctx))
	got, _, err := dead.Pull(ctx, 1, lease)
	require.NoError(f.t, err)
	require.Len(f.t, got, 1)
	require.NoError(f.t, dead.Close(ctx))
	d := got[0]
	score, err := f.rdb.ZScore(ctx, dead.keys[d.Slot].Prepare, d.ID).Result()
	require.NoError(f.t, err, "the lease stays in prepare")
	sec, _ := scripts.SplitPrepareScore(score)
	return d, time.Unix(sec+1, 0)
}

// inPrepare reports whether id is in slot's prepare set.
// waitRolledBack waits until d is no longer in c's prepare, at most 2 s
// past its lease's expiry, and returns how long after expiry that was
// (polled finely: the sweeper's timing is what is measured, and a rollback
// inside a script tells no one).
func (f *leaseFixture) waitRolledBack(c *Engine, d *Pulled, expiry time.Time) time.Duration {
	f.t.Helper()
	for f.inPrepare(c, d.Slot, d.ID) {
		require.True(f.t, time.Now().Before(expiry.Add(2*time.Second)), "not rolled back within 2s of its lease")
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(expiry)
}

func (f *leaseFixture) inPrepare(c *Engine, slot int, id string) bool {
	err := f.rdb.ZScore(context.Background(), c.keys[slot].Prepare, id).Err()
	if err == redis.Nil {
		return false
	}
	require.NoError(f.t, err)
	return true
}

// A consumer that starts finds what a dead one left in prepare and rolls it
// back when its lease runs out: at the lease's deadline, not a sweep
// interval (30s here) later.
func TestSweepKilledConsumerAtLeaseDeadline(t *testing.T) {
	testSweepKilledConsumer(t, newLeaseFixture(t))
}

// The same on a cluster: the heads are read one hash slot at a time.
func TestSweepKilledConsumerAtLeaseDeadlineOnCluster(t *testing.T) {
	testSweepKilledConsumer(t, newClusterLeaseFixture(t))
}

func testSweepKilledConsumer(t *testing.T, f *leaseFixture) {
	tp := topic.MustNew("killed", topic.FixedTime, 4)
	f.send(tp, "a")
	first, expiry := f.leaveLease(tp, 2*time.Second)

	type arrival struct {
		at      time.Time
		id      string
		attempt int
	}
	got := make(chan arrival, 4)
	c, err := newEngine(t, f.rdb, f.prefix, tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		got <- arrival{time.Now(), m.ID, m.Attempt}
		return nil
	}), consumer.WithSweepInterval(30*time.Second), consumer.WithRetryBackoff(func(int) time.Duration { return 0 }))
	require.NoError(t, err)
	f.start(c)

	select {
	case a := <-got:
		require.Equal(t, "a", a.id)
		require.Equal(t, first.Attempt+1, a.attempt, "redelivered as the next attempt")
		late := a.at.Sub(expiry)
		t.Logf("redelivered %v after the lease ran out", late)
		require.Greater(t, late, -50*time.Millisecond, "not before the lease ran out")
		require.Less(t, late, 800*time.Millisecond, "at the lease's deadline, not a sweep interval later")
	case <-time.After(10 * time.Second):
		t.Fatal("the dead consumer's message was not redelivered")
	}
}

// A lease taken after the sweeping client started (it hears the wake-up,
// another consumer leases and dies) is rolled back at its deadline too.
func TestSweepLeaseTakenAfterStart(t *testing.T) {
	f := newLeaseFixture(t)
	tp := topic.MustNew("later", topic.FixedTime, 4)
	// A pull engine sweeps and never fetches by itself.
	b, err := newPullEngine(t, f.rdb, f.prefix, tp, nil, consumer.WithSweepInterval(time.Second))
	require.NoError(t, err)
	f.start(b)

	f.send(tp, "a")
	d, expiry := f.leaveLease(tp, 3*time.Second)
	late := f.waitRolledBack(b, d, expiry)
	t.Logf("rolled back %v after the lease ran out", late)
	require.Greater(t, late, -50*time.Millisecond, "not before the lease ran out")
	require.Less(t, late, 800*time.Millisecond)
}

// A lease this client never heard of (the message was sent before it
// started, and taken by a consumer that died without a wake-up) is found
// by the safety net's probe and rolled back at its deadline.
func TestSweepSafetyNetFindsUnheardLease(t *testing.T) {
	f := newLeaseFixture(t)
	tp := topic.MustNew("unheard", topic.FixedTime, 4)
	f.send(tp, "a")
	b, err := newPullEngine(t, f.rdb, f.prefix, tp, nil, consumer.WithSweepInterval(time.Second))
	require.NoError(t, err)
	f.start(b)
	// The start-up probe found prepare empty: b is idle for sweeping.
	require.Eventually(t, func() bool {
		return !b.hub.leases.SweepQueued(b.lease())
	}, 5*time.Second, 5*time.Millisecond)

	d, expiry := f.leaveLease(tp, 3*time.Second)
	late := f.waitRolledBack(b, d, expiry)
	t.Logf("rolled back %v after the lease ran out", late)
	require.Greater(t, late, -50*time.Millisecond, "not before the lease ran out")
	require.Less(t, late, 800*time.Millisecond)
}

// A pulled delivery that is neither acked nor extended comes back about
// when its lease runs out (the puller's own lease is known to the sweeper),
// not a sweep interval (10s by default) later.
func TestPullUnackedComesBackAfterLease(t *testing.T) {
	f := newLeaseFixture(t)
	tp := topic.MustNew("pulled", topic.FixedTime, 4)
	wake := make(chan struct{}, 1)
	c, err := newPullEngine(t, f.rdb, f.prefix, tp, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, consumer.WithRetryBackoff(func(int) time.Duration { return 0 }))
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, c.cfg.sweepInterval)
	f.start(c)
	f.send(tp, "a")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first *Pulled
	for first == nil {
		got, _, err := c.Pull(ctx, 1, time.Second)
		require.NoError(t, err)
		if ds := got; len(ds) > 0 {
			first = ds[0]
			break
		}
		select {
		case <-wake:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("nothing to pull")
		}
	}
	pulled := time.Now()
	for {
		got, _, err := c.Pull(ctx, 1, 30*time.Second)
		require.NoError(t, err)
		if ds := got; len(ds) > 0 {
			again := time.Since(pulled)
			t.Logf("pulled again %v after the first pull (lease 1s)", again)
			require.Equal(t, first.ID, ds[0].ID)
			require.Equal(t, first.Attempt+1, ds[0].Attempt)
			// The deadline is a whole second: the lease runs out 1 to 2s
			// after the pull.
			require.Less(t, again, 2800*time.Millisecond)
			require.NoError(t, ds[0].Ack(ctx))
			return
		}
		select {
		case <-wake:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the unacked pull did not come back")
		}
	}
}

// 200 idle topics on one client cost the sweeper and the lease keeper
// (almost) no Redis commands: a probe round every sweep interval, one
// command for all of them.
func TestSweepIdleTopicsCostNoCommands(t *testing.T) {
	f := newLeaseFixture(t)
	h := f.sharedHub()
	const topics = 200
	for i := range topics {
		tp := topic.MustNew(fmt.Sprintf("idle%d", i), topic.FixedTime, 16)
		c, err := h.newEngine(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil }), consumer.WithSweepInterval(time.Second))
		require.NoError(t, err)
		f.start(c)
	}
	// The start-up probes are done (every engine idle for the sweeper) and
	// the fetchers' first looks too (every fetcher asleep).
	redistest.Poll(t, func() error {
		busy := h.leases.QueuedSweeps()
		if busy > 0 {
			return fmt.Errorf("%d of %d engines not probed yet", busy, topics)
		}
		return nil
	})
	waitFetchersAsleep(t, topics)
	ctx := context.Background()
	require.NoError(t, f.node.ConfigResetStat(ctx).Err())
	const window = 3 * time.Second
	time.Sleep(window) // the idle time whose cost is measured
	stats := commandStats(t, f.node)
	t.Logf("Redis commands in %v of idling with %d topics: %v", window, topics, stats)
	sweeper := stats["exists"] + stats["zrange"] + stats["time"] + stats["evalsha"] + stats["eval"]
	// A probe round a second (one EXISTS of 3,200 keys); a generous bound.
	require.LessOrEqual(t, sweeper, int64(10), "sweeper and lease keeper commands")
}

// commandStats returns INFO commandstats as calls per command (the INFO
// itself included).
func commandStats(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// The lease keeper extends a long handler's lease (three prepare timeouts)
// while another client sweeps the topic every 200ms: the message is
// handled once and acked, and a Close that cuts a handler short leaves
// nothing in prepare.
func TestLeaseKeptThenCloseLeavesNothingInPrepare(t *testing.T) {
	f := newLeaseFixture(t)
	tp := topic.MustNew("long", topic.FixedTime, 4)
	sweeper, err := newPullEngine(t, f.rdb, f.prefix, tp, nil, consumer.WithSweepInterval(200*time.Millisecond))
	require.NoError(t, err)
	f.start(sweeper)

	var calls atomic.Int32
	done := make(chan struct{})
	block := make(chan struct{})
	c, err := newEngine(t, f.rdb, f.prefix, tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		if m.ID == "long" {
			time.Sleep(3 * time.Second) // outlives three prepare timeouts: the lease must be kept
			close(done)
			return nil
		}
		close(block)
		<-ctx.Done() // until Close gives up on it
		return ctx.Err()
	}), consumer.WithPrepareTimeout(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	f.send(tp, "long")
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the long handler did not end")
	}
	require.Eventually(t, func() bool { return !f.inPrepare(c, slotOf(c, "long"), "long") }, 5*time.Second, 10*time.Millisecond, "acked")
	require.EqualValues(t, 1, calls.Load(), "handled once: its lease was kept")
	has, err := f.rdb.HExists(ctx, c.keys[slotOf(c, "long")].Msg, "long").Result()
	require.NoError(t, err)
	require.False(t, has, "acked")

	f.send(tp, "stuck")
	select {
	case <-block:
	case <-ctx.Done():
		t.Fatal("the second handler did not start")
	}
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	require.ErrorIs(t, c.Close(cctx), context.DeadlineExceeded)
	for i := range c.keys {
		n, err := f.rdb.ZCard(ctx, c.keys[i].Prepare).Result()
		require.NoError(t, err)
		require.Zero(t, n, "slot %d: nothing left in prepare", i)
	}
}

func slotOf(c *Engine, id string) int { return keyspace.IndexString(id, c.topic.SlotAmount()) }

// The hooks run on hot paths (every fetch, every wake-up): a map lookup
// and a heap update, no Redis call.
func BenchmarkLeaseHooks(b *testing.B) {
	l := lease.New()
	engines := make([]*Engine, 1000)
	for i := range engines {
		settings, err := TopicSettings(nil)
		require.NoError(b, err)
		engines[i] = &Engine{cfg: newConfig(settings, HubConfig{}), topic: topic.MustNew(fmt.Sprintf("t%d", i), topic.FixedTime, 16)}
		l.Add(engines[i].lease(), engines[i].leaseParams())
	}
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := engines[i%len(engines)]
		l.Leased(c.lease(), now.Add(time.Duration(i%4000)*time.Millisecond))
		l.Heard(c.lease())
	}
}
