package producer_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// backends are the Redis deployments the producer tests run against: the
// shared single server and the shared 3-master cluster.
var backends = []string{"single", "cluster"}

func setup(t *testing.T, backend string, opts ...producer.Option) (*producer.Producer, redis.UniversalClient, string) {
	t.Helper()
	p, rdb, _, prefix := setupHooked(t, backend, opts...)
	return p, rdb, prefix
}

// setupHooked is setup, also returning the hook that checks key slots and
// counts NOSCRIPT replies.
func setupHooked(t *testing.T, backend string, opts ...producer.Option) (*producer.Producer, redis.UniversalClient, *clusterHook, string) {
	t.Helper()
	var rdb redis.UniversalClient
	if backend == "cluster" {
		rdb = redistest.ClusterClient(t, redistest.SharedCluster(t))
	} else {
		rdb = redistest.Client(t, redistest.Shared(t))
	}
	// Every script call names keys of one cluster hash slot (clusterHook).
	h := &clusterHook{grouped: backend != "cluster"}
	rdb.AddHook(redistest.Observer{Before: h.before, After: h.after})
	t.Cleanup(func() { h.verify(t) })
	prefix := redistest.Prefix(t)
	return newProducer(rdb, prefix, opts...), rdb, h, prefix
}

// withMaxBodySize and withNotify change what a test's producer is made
// with (what rmq.Option sets for a client's producer).
func withMaxBodySize(n int) producer.Option             { return producer.WithMaxBodySize(n) }
func withNotify(n options.SendNotifier) producer.Option { return options.WithNotify(n) }

// newProducer makes a producer under prefix, as rmq.New makes a client's.
func newProducer(rdb redis.UniversalClient, prefix string, opts ...producer.Option) *producer.Producer {
	p, err := producer.New(rdb, append([]producer.Option{producer.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		panic(err)
	}
	return p
}

// forEachBackend runs f as a subtest on each backend.
func forEachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { f(t, b) })
	}
}

func keysOf(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	return redistest.KeysWithPrefix(t, rdb, prefix)
}

// Bad input gets a sentinel error and writes nothing, not even the topic
// definition.
func TestBadInputWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend, withMaxBodySize(10))
		ctx := context.Background()
		ft := topic.MustNew("ft", topic.FixedTime, 4)
		pr := topic.MustNew("pr", topic.Priority, 4)
		rm := topic.MustNew("rm", topic.RangeMerge, 4)
		soon := time.Now().Add(time.Minute)
		cases := []struct {
			name string
			call func() error
			want error
		}{
			{"nil body", func() error { _, err := p.SendFixedTime(ctx, ft, nil, soon); return err }, producer.ErrEmptyBody},
			{"empty body", func() error { _, err := p.SendPriority(ctx, pr, []byte{}, 20); return err }, producer.ErrEmptyBody},
			{"oversize body", func() error { _, err := p.SendFixedTime(ctx, ft, make([]byte, 11), soon); return err }, producer.ErrBodyTooLarge},
			{"zero time", func() error { _, err := p.SendFixedTime(ctx, ft, []byte("x"), time.Time{}); return err }, producer.ErrInvalidTime},
			{"time before 1970", func() error {
				_, err := p.SendFixedTime(ctx, ft, []byte("x"), time.Unix(-5, 0))
				return err
			}, producer.ErrInvalidTime},
			{"negative range", func() error { _, err := p.SendRangeMerge(ctx, rm, []byte("x"), -time.Second); return err }, producer.ErrInvalidRange},
			{"priority 16", func() error { _, err := p.SendPriority(ctx, pr, []byte("x"), 16); return err }, producer.ErrInvalidPriority},
			{"priority -1", func() error { _, err := p.SendPriority(ctx, pr, []byte("x"), -1); return err }, producer.ErrInvalidPriority},
			{"priority 2^60", func() error { _, err := p.SendPriority(ctx, pr, []byte("x"), 1<<60); return err }, producer.ErrInvalidPriority},
			{"type mismatch", func() error { _, err := p.SendPriority(ctx, ft, []byte("x"), 20); return err }, producer.ErrTypeMismatch},
			{"type mismatch 2", func() error { _, err := p.SendFixedTime(ctx, rm, []byte("x"), soon); return err }, producer.ErrTypeMismatch},
			{"empty key", func() error {
				_, err := p.SendFixedTime(ctx, ft, []byte("x"), soon, producer.WithKey(""))
				return err
			}, producer.ErrInvalidKey},
			{"long key", func() error {
				_, err := p.SendFixedTime(ctx, ft, []byte("x"), soon, producer.WithKey(strings.Repeat("k", 1025)))
				return err
			}, producer.ErrInvalidKey},
			{"empty slot basis", func() error {
				_, err := p.SendFixedTime(ctx, ft, []byte("x"), soon, producer.WithSlotBasis(nil))
				return err
			}, producer.ErrInvalidSlotBasis},
			{"zero topic", func() error { _, err := p.SendFixedTime(ctx, topic.Topic{}, []byte("x"), soon); return err }, topic.ErrInvalidName},
		}
		for _, c := range cases {
			err := c.call()
			assert.ErrorIs(t, err, c.want, c.name)
		}
		assert.Empty(t, keysOf(t, rdb, prefix))

		_, err := producer.New(rdb, producer.WithPrefix("a{b}"))
		assert.ErrorIs(t, err, slots.ErrInvalidPrefix)
	})
}

func TestTopicConflictIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend)
		ctx := context.Background()
		_, err := p.SendFixedTime(ctx, topic.MustNew("orders", topic.FixedTime, 16), []byte("x"), time.Now())
		require.NoError(t, err)

		other := newProducer(rdb, prefix)
		_, err = other.SendPriority(ctx, topic.MustNew("orders", topic.Priority, 16), []byte("x"), 20)
		assert.ErrorIs(t, err, topic.ErrConflict)
		_, err = other.SendFixedTime(ctx, topic.MustNew("orders", topic.FixedTime, 32), []byte("x"), time.Now())
		assert.ErrorIs(t, err, topic.ErrConflict)
		_, err = p.SendFixedTime(ctx, topic.MustNew("orders", topic.FixedTime, 32), []byte("x"), time.Now())
		assert.ErrorIs(t, err, topic.ErrConflict, "the producer's own cache refuses too")
	})
}

func TestIDsAndSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend)
		ctx := context.Background()
		tp := topic.MustNew("ids", topic.FixedTime, 16)
		at := time.Now().Add(time.Hour)

		id, err := p.SendFixedTime(ctx, tp, []byte("hello"), at)
		require.NoError(t, err)
		assert.Equal(t, producer.BodyID([]byte("hello")), id)
		assert.Len(t, id, 12)
		k := keyspace.KeysFor(prefix, tp, slots.Index([]byte("hello"), 16))
		assert.NoError(t, rdb.ZScore(ctx, k.Store, id).Err(), "body-derived id lives in the slot of the body")

		id, err = p.SendFixedTime(ctx, tp, []byte("x"), at, producer.WithKey("order-42"))
		require.NoError(t, err)
		assert.Equal(t, "order-42", id)
		k = keyspace.KeysFor(prefix, tp, slots.IndexString("order-42", 16))
		assert.NoError(t, rdb.ZScore(ctx, k.Store, id).Err(), "a key is its own slot basis")

		_, err = p.SendFixedTime(ctx, tp, []byte("y"), at, producer.WithKey("line-1"), producer.WithSlotBasis([]byte("order-42")))
		require.NoError(t, err)
		assert.NoError(t, rdb.ZScore(ctx, k.Store, "line-1").Err(), "the slot basis picks the slot")
	})
}

func TestRemove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend)
		ctx := context.Background()
		tp := topic.MustNew("rm", topic.FixedTime, 16)
		at := time.Now().Add(time.Hour)

		ok, err := p.Remove(ctx, tp, "unknown")
		require.NoError(t, err)
		assert.Equal(t, producer.NotFound, ok)

		_, err = p.SendFixedTime(ctx, tp, []byte("x"), at, producer.WithKey("k1"))
		require.NoError(t, err)
		ok, err = p.Remove(ctx, tp, "k1")
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, ok)
		ok, err = p.Remove(ctx, tp, "k1")
		require.NoError(t, err)
		assert.Equal(t, producer.NotFound, ok, "second remove finds nothing")

		id, err := p.SendFixedTime(ctx, tp, []byte("body-derived"), at)
		require.NoError(t, err)
		ok, err = p.Remove(ctx, tp, id)
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, ok, "a body-derived id is found in its body's slot")

		_, err = p.SendFixedTime(ctx, tp, []byte("z"), at, producer.WithKey("k2"), producer.WithSlotBasis([]byte("group")))
		require.NoError(t, err)
		ok, err = p.Remove(ctx, tp, "k2", producer.WithSlotBasis([]byte("group")))
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, ok)

		// Only the topic definition is left: bodies went with the messages.
		assert.Equal(t, []string{keyspace.TopicsKey(prefix)}, keysOf(t, rdb, prefix))
	})
}

// A reply lost after Redis ran the send script makes go-redis run it again
// on a new connection; the rerun must recognise itself: one message, and
// the caller sees success.
func TestSendSurvivesLostReply(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	p := newProducer(rdb, prefix)
	ctx := context.Background()
	tp := topic.MustNew("lost", topic.Priority, 1)

	// Define the topic and load the script first so the armed request is the send.
	_, err = p.SendPriority(ctx, tp, []byte("warm-up"), 20)
	require.NoError(t, err)

	proxy.DropReplyTo([]byte(scripts.Send1.Hash()))
	id, err := p.SendPriority(ctx, tp, []byte("once"), 50, producer.WithKey("k"))
	require.NoError(t, err)
	assert.Equal(t, "k", id)
	assert.EqualValues(t, 1, proxy.Dropped(), "the fault happened")

	k := keyspace.KeysFor(prefix, tp, 0)
	members, err := direct.ZRangeWithScores(ctx, k.Store, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 2)
	raw, err := direct.HGet(ctx, k.Msg, "k").Bytes()
	require.NoError(t, err)
	env, err := scripts.DecodeEnvelope(raw)
	require.NoError(t, err)
	assert.Equal(t, "once", string(env.Body))
	assert.EqualValues(t, 50, env.Score)
}

// A Redis that goes away mid-run gives the caller an error it can inspect,
// and nothing is half-written when it comes back.
func TestRedisGoneReturnsError(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 1, DialTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	p := newProducer(rdb, "rmq")
	ctx := context.Background()
	tp := topic.MustNew("gone", topic.FixedTime, 1)
	_, err := p.SendFixedTime(ctx, tp, []byte("before"), time.Now())
	require.NoError(t, err)

	require.NoError(t, srv.Kill())
	_, err = p.SendFixedTime(ctx, tp, []byte("during"), time.Now())
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Contains(t, err.Error(), "rmq: send to gone")

	require.NoError(t, srv.Restart(ctx))
	_, err = p.SendFixedTime(ctx, tp, []byte("after"), time.Now())
	require.NoError(t, err)
	k := keyspace.KeysFor(slots.DefaultPrefix, tp, 0)
	n, err := rdb.ZCard(ctx, k.Store).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "the acknowledged sends survived, the failed one left nothing")
	h, err := rdb.HLen(ctx, k.Msg).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, h)
}

// A sender that gives up while a flush is in flight leaves its message in
// the queue; the queue must still be flushed, and later sends must not wait
// for the sender that left.
func TestCancelledSenderDoesNotStallTheQueue(t *testing.T) {
	p, rdb, _ := setup(t, "single")
	ctx := context.Background()
	tp := topic.MustNew("stall", topic.FixedTime, 4)
	_, err := p.SendFixedTime(ctx, tp, []byte("warm"), time.Now())
	require.NoError(t, err)

	flushes := sendBatchCounter(t, rdb)
	// Redis holds every client's commands for a while: the next flush hangs.
	admin := redistest.Client(t, redistest.Shared(t))
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "700", "ALL").Err())
	// Senders that fill every flush slot; each sends at once and hangs,
	// and those after them queue. Each one's message has left for Redis in
	// a flush, or queues behind them, before the next starts.
	busy := make(chan error, 4)
	for i := range cap(busy) {
		go func() {
			_, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("busy %d", i)), time.Now())
			busy <- err
		}()
		require.Eventually(t, func() bool { return flushes.N()+int64(producer.Queued(p)) == int64(i+1) },
			redistest.WaitLong, time.Millisecond, "sender %d's message neither left nor queued", i)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = p.SendFixedTime(short, tp, []byte("gave up"), time.Now())
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for range cap(busy) {
		require.NoError(t, <-busy)
	}

	later, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = p.SendFixedTime(later, tp, []byte("later"), time.Now())
	require.NoError(t, err, "a send after a cancelled one went through")
	// The message of the sender that gave up was sent too (as after any timeout).
	ids := map[string]bool{}
	for i := range tp.SlotAmount() {
		k := keyspace.KeysFor(p.Prefix(), tp, i)
		got, err := rdb.ZRange(ctx, k.Store, 0, -1).Result()
		require.NoError(t, err)
		for _, id := range got {
			ids[id] = true
		}
	}
	require.True(t, ids[producer.BodyID([]byte("gave up"))], "the abandoned message was flushed")
	require.Len(t, ids, 7)
}
