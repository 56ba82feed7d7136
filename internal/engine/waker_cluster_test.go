package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/wake"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// logBuffer collects the consumer's log for a failing test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// shardFixture is a consumer of a 16-slot topic on a cluster of its own,
// with a producer and the ids its listener handled.
type shardFixture struct {
	t    *testing.T
	cl   *redisserver.Cluster
	cc   *redis.ClusterClient
	c    *Engine
	p    *producer.Producer
	tp   topic.Topic
	got  chan string
	keys []string // keys[i] is a message key whose topic slot is i
}

// newShardFixture starts the fixture's engine after tune adjusted its
// shard waker's timing.
func newShardFixture(t *testing.T, tune func(*wake.Tuning)) *shardFixture {
	t.Helper()
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{})
	cc := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	f := &shardFixture{t: t, cl: cl, cc: cc, tp: topic.MustNew("wake", topic.FixedTime, 16), got: make(chan string, 256)}
	for i := 0; len(f.keys) < 16 || containsEmpty(f.keys); i++ {
		if f.keys == nil {
			f.keys = make([]string, 16)
		}
		k := fmt.Sprintf("k%d", i)
		if s := keyspace.IndexString(k, 16); f.keys[s] == "" {
			f.keys[s] = k
		}
	}
	var log logBuffer
	// The engine's own hub, its timing shortened before the engine starts.
	h := NewHub(cc, HubConfig{Prefix: prefix, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(h.Close)
	tune(&h.wake.Tune)
	c, err := h.newEngine(f.tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		f.got <- m.ID
		return nil
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, c.Close(ctx))
		if t.Failed() {
			t.Logf("consumer log:\n%s", log.String())
		}
	})
	f.c = c
	f.p = newProducer(cc, prefix)
	return f
}

func containsEmpty(s []string) bool {
	for _, x := range s {
		if x == "" {
			return true
		}
	}
	return false
}

// owner returns the master serving the hash slot of topic slot i.
func (f *shardFixture) owner(i int) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := f.cl.SlotOwner(ctx, keyspace.HashSlot(f.c.keys[i].Wake))
	require.NoError(f.t, err)
	return addr
}

// waitPlaced waits until Redis confirmed the wake channel of every topic
// slot on the master that serves it now.
func (f *shardFixture) waitPlaced() {
	f.t.Helper()
	redistest.PollWithin(f.t, 30*time.Second, func() error {
		var off []string
		for i, k := range f.c.keys {
			if at, want := f.c.hub.wake.Shards().SubscribedAt(k.Wake), f.owner(i); at != want {
				off = append(off, fmt.Sprintf("slot %d on %q, owner %s", i, at, want))
			}
		}
		if len(off) > 0 {
			return fmt.Errorf("wake channels not subscribed where they live: %v", off)
		}
		return nil
	})
}

// checkWakeUps sends, for each given topic slot, a message due now and
// requires it handled within a second. An idle fetcher sleeps up to a
// minute (maxIdle): only a wake-up brings it that fast.
func (f *shardFixture) checkWakeUps(what string, topicSlots ...int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFetchersAsleep(f.t, 1)
	for _, i := range topicSlots {
		id := fmt.Sprintf("%s-%d", f.keys[i], time.Now().UnixNano())
		sent := time.Now()
		_, err := f.p.SendFixedTime(ctx, f.tp, []byte(id), time.Now(), producer.WithKey(id), producer.WithSlotBasis([]byte(f.keys[i])))
		require.NoError(f.t, err)
		select {
		case got := <-f.got:
			require.Equal(f.t, id, got)
			require.Less(f.t, time.Since(sent), time.Second, "%s: slot %d woken late", what, i)
		case <-time.After(3 * time.Second):
			f.t.Fatalf("%s: message in slot %d (hash slot %d, on %s) not handled within 3 s: no wake-up",
				what, i, keyspace.HashSlot(f.c.keys[i].Wake), f.owner(i))
		}
	}
}

// drain sends a message due now to every topic slot and waits until all
// are handled, however late.
func (f *shardFixture) drain() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[string]bool{}
	for i := range 16 {
		id := fmt.Sprintf("drain-%s-%d", f.keys[i], time.Now().UnixNano())
		_, err := f.p.SendFixedTime(ctx, f.tp, []byte(id), time.Now(), producer.WithKey(id), producer.WithSlotBasis([]byte(f.keys[i])))
		require.NoError(f.t, err)
		want[id] = true
	}
	for len(want) > 0 {
		select {
		case id := <-f.got:
			delete(want, id)
		case <-ctx.Done():
			f.t.Fatalf("%d messages not handled: %v", len(want), want)
		}
	}
}

func all16() []int {
	out := make([]int, 16)
	for i := range out {
		out[i] = i
	}
	return out
}

// The sharded wake-up subscriptions follow the cluster: connections killed
// by the server, a hash slot moved to another master, a manual failover,
// and a master that stops answering (SIGSTOP) and is failed over by the
// cluster. After each, every wake channel is subscribed again on the master
// that serves it, and a message due now is handled at once.
func TestShardWakerFollowsTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and disturbs it")
	}
	f := newShardFixture(t, func(s *wake.Tuning) { s.HealthEvery, s.CheckEvery = 300*time.Millisecond, time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owners := map[string]bool{}
	for i := range 16 {
		owners[f.owner(i)] = true
	}
	require.Len(t, owners, 3, "16 placed topic slots span the 3 masters")
	f.waitPlaced()
	f.checkWakeUps("after start", all16()...)

	// The server closes every subscription connection.
	for _, m := range f.cl.MasterAddrs() {
		n, err := redis.NewClient(&redis.Options{Addr: m, DisableIdentity: true}).ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
		require.NoError(t, err)
		t.Logf("killed %d subscription connections on %s", n, m)
	}
	f.waitPlaced()
	f.checkWakeUps("after CLIENT KILL", all16()...)

	// Resharding: topic slot 3's hash slot moves to another master.
	from := f.owner(3)
	var to string
	for _, m := range f.cl.MasterAddrs() {
		if m != from {
			to = m
			break
		}
	}
	require.NoError(t, f.cl.MoveSlot(ctx, keyspace.HashSlot(f.c.keys[3].Wake), to))
	require.Equal(t, to, f.owner(3))
	f.waitPlaced()
	f.checkWakeUps("after MoveSlot", all16()...)

	// Manual failover of the master that serves topic slot 5.
	old := f.owner(5)
	promoted, err := f.cl.Failover(ctx, old)
	require.NoError(t, err)
	require.Equal(t, promoted, f.owner(5))
	f.waitPlaced()
	f.checkWakeUps("after failover", all16()...)

	// A master that stops answering: the cluster fails it over after the
	// node timeout, the waker notices by PING and subscribes at the new one.
	stuck := f.owner(9)
	node := f.cl.Node(stuck)
	require.NoError(t, node.Suspend())
	defer node.Resume()
	redistest.PollWithin(t, 30*time.Second, func() error {
		if f.owner(9) == stuck {
			return fmt.Errorf("the cluster did not fail over %s", stuck)
		}
		return nil
	})
	f.waitPlaced()
	// Fetches that ran into the stopped master failed and put the fetcher
	// into its error backoff (up to 5 s, deaf to wake-ups): wait until it
	// delivers again before timing wake-ups.
	f.drain()
	f.checkWakeUps("after automatic failover", all16()...)
	require.NoError(t, node.Resume())
	require.NoError(t, f.cl.WaitHealthy(ctx))
	f.waitPlaced()
	f.checkWakeUps("after the old master came back", all16()...)
}

// The topics of one client share one sharded subscription connection per
// master; a closed topic's channels are unsubscribed while the others keep
// theirs and keep being woken.
func TestShardWakerManyTopicsOneConnectionPerMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{})
	cc := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	const n = 24
	h := newHub(t, cc, prefix) // closed after the engines' Close
	got := make(chan string, 4*n)
	var engines []*Engine
	for i := range n {
		tp := topic.MustNew(fmt.Sprintf("shard%02d", i), topic.FixedTime, 4)
		c, err := h.newEngine(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			got <- tp.Name() + "/" + m.ID
			return nil
		}))
		require.NoError(t, err)
		engines = append(engines, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, n)
	for _, c := range engines {
		go func() { errs <- c.Start(ctx) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range engines {
			require.NoError(t, c.Close(ctx))
		}
	})
	masters := cl.MasterAddrs()
	admin := masterAdmins(t, cl)
	for _, m := range masters {
		list, err := admin[m].ClientList(ctx).Result()
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(list, " flags=P "), "subscription connections on %s", m)
	}
	subscribers := func(c *Engine) []int64 { return shardSubscribers(t, ctx, cl, admin, c) }
	p := newProducer(cc, prefix)
	sendAll := func(what string, skip int) {
		t.Helper()
		running := n
		if skip >= 0 {
			running--
		}
		waitFetchersAsleep(t, running)
		pending := map[string]bool{}
		for i, c := range engines {
			if i == skip {
				continue
			}
			id := fmt.Sprintf("%s-%d", what, i)
			_, err := p.SendFixedTime(ctx, c.topic, []byte(id), time.Now(), producer.WithKey(id))
			require.NoError(t, err)
			pending[c.topic.Name()+"/"+id] = true
		}
		deadline := time.After(10 * time.Second)
		for len(pending) > 0 {
			select {
			case g := <-got:
				require.True(t, pending[g], "%s: unexpected %s", what, g)
				delete(pending, g)
			case <-deadline:
				t.Fatalf("%s: %d messages not handled: no wake-up", what, len(pending))
			}
		}
	}
	sendAll("start", -1)

	closed := engines[5]
	require.NoError(t, closed.Close(ctx))
	require.Eventually(t, func() bool { return fmt.Sprint(subscribers(closed)) == "[0 0 0 0]" },
		5*time.Second, 20*time.Millisecond, "channels of the closed topic still subscribed")
	for i, c := range engines {
		if i != 5 {
			require.Equal(t, []int64{1, 1, 1, 1}, subscribers(c), "wake channels of %s", c.topic.Name())
		}
	}
	sendAll("after close", 5)
}

// masterAdmins returns a plain client of each master of cl, closed after
// the test.
func masterAdmins(t *testing.T, cl *redisserver.Cluster) map[string]*redis.Client {
	admin := map[string]*redis.Client{}
	for _, m := range cl.MasterAddrs() {
		admin[m] = redis.NewClient(&redis.Options{Addr: m, DisableIdentity: true})
		t.Cleanup(func() { _ = admin[m].Close() })
	}
	return admin
}

// shardSubscribers returns SHARDNUMSUB of each wake channel of c, asked of
// the master that owns it.
func shardSubscribers(t *testing.T, ctx context.Context, cl *redisserver.Cluster, admin map[string]*redis.Client, c *Engine) []int64 {
	t.Helper()
	var out []int64
	for _, k := range c.keys {
		owner, err := cl.SlotOwner(ctx, keyspace.HashSlot(k.Wake))
		require.NoError(t, err)
		res, err := admin[owner].PubSubShardNumSub(ctx, k.Wake).Result()
		require.NoError(t, err)
		out = append(out, res[k.Wake])
	}
	return out
}
