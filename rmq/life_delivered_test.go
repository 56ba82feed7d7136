package rmq_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The event log's "delivered" (a delivery handed to a handler: an attempt
// began) and "expired" (a message dropped at a fetch because its expiry
// passed), each logged by the call that makes the transition, exactly once.

// idEvents returns the events logged for id in its slot, in order, as
// "type attempt". ("sent" is the producer's event, logged by the send
// scripts: not what these tests are about.)
func (e *env) idEvents(tp topic.Topic, id string) []string {
	e.t.Helper()
	xs, err := e.rdb.XRange(context.Background(), e.lifeKeys(tp, id).Events, "-", "+").Result()
	require.NoError(e.t, err)
	var out []string
	for _, x := range xs {
		if x.Values["id"] == id && x.Values["t"] != "sent" {
			out = append(out, x.Values["t"].(string)+" "+x.Values["a"].(string))
		}
	}
	return out
}

// A delivery is logged when it is handed over, with its attempt: a message
// acked at once is delivered then completed; one whose first attempt
// fails is delivered, retried, delivered again (attempt 2) and completed,
// each once.
func TestLifeDeliveredOncePerAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifedelivered", topic.Priority, 4)
		outcomes := make(chan consumer.Outcome, 8)
		c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			if string(m.Body) == "fail once" && m.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}), consumer.WithEvents(100), consumer.WithMaxRetries(3), consumer.WithRetryBackoff(noBackoff)))
		e.start(c)
		_, err := c.Producer().SendPriority(ctx, tp, []byte("ok"), 100, producer.WithKey("d1"))
		require.NoError(t, err)
		_, err = c.Producer().SendPriority(ctx, tp, []byte("fail once"), 100, producer.WithKey("d2"))
		require.NoError(t, err)
		got := map[consumer.Outcome]int{}
		for range 3 {
			got[outcomeOf(t, outcomes)]++
		}
		require.Equal(t, map[consumer.Outcome]int{consumer.Acked: 2, consumer.Retried: 1}, got)
		assert.Equal(t, []string{"delivered 1", "completed 1"}, e.idEvents(tp, "d1"))
		assert.Equal(t, []string{"delivered 1", "retried 1", "delivered 2", "completed 2"}, e.idEvents(tp, "d2"))
	})
}

// A pulled delivery (rmqd's) goes through the same fetch: logged
// delivered when pulled, completed when acked.
func TestLifePulledDelivered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifepulldeliv", topic.Priority, 2)
		require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Events: 10}))
		c := e.client()
		e.start(c)
		_, err := c.Producer().SendPriority(ctx, tp, []byte("p"), 100, producer.WithKey("pd"))
		require.NoError(t, err)
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		assert.Equal(t, []string{"delivered 1"}, e.idEvents(tp, "pd"))
		require.NoError(t, ds[0].Ack(ctx))
		assert.Equal(t, []string{"delivered 1", "completed 1"}, e.idEvents(tp, "pd"))
	})
}

// A message taken ahead of its instant (lookahead) is held, not delivered:
// it is logged delivered when it is handed over at its instant, not
// before; one given back (its consumer closes while it is held) is never
// logged.
func TestLifeHeldLoggedAtHandOver(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeheld", topic.FixedTime, 2)
	outcomes := make(chan consumer.Outcome, 4)
	rec := newRecorder(nil)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead), consumer.WithEvents(100)))
	e.start(c)

	due := time.Now().Add(1500 * time.Millisecond)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("h"), due, producer.WithKey("h"))
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "h"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Prepare, "h"); return ok }, 1200*time.Millisecond, time.Millisecond, "held before its instant")
	assert.Empty(t, e.idEvents(tp, "h"), "held: not delivered yet")

	d := rec.next(t, 5*time.Second)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	assert.False(t, d.At.Before(d.DueAt))
	assert.Equal(t, []string{"delivered 1", "completed 1"}, e.idEvents(tp, "h"))
	xs, err := e.rdb.XRange(ctx, e.lifeKeys(tp, "h").Events, "-", "+").Result()
	require.NoError(t, err)
	var delivered string
	for _, x := range xs {
		if x.Values["t"] == "delivered" {
			delivered = x.ID
		}
	}
	require.NotEmpty(t, delivered)
	ms, _ := strconv.ParseInt(delivered[:len(delivered)-2], 10, 64)
	assert.GreaterOrEqual(t, ms, due.UnixMilli(), "logged at the hand-over, not at the fetch")

	// Given back: held, then the consumer closes.
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("b"), time.Now().Add(1500*time.Millisecond), producer.WithKey("back"))
	require.NoError(t, err)
	kb := e.keys(tp, slotOfKey(tp, "back"))
	require.Eventually(t, func() bool { _, ok := e.zscore(kb.Prepare, "back"); return ok }, 1200*time.Millisecond, time.Millisecond, "held before its instant")
	require.NoError(t, c.Close(ctx))
	_, inStore := e.zscore(kb.Store, "back")
	require.True(t, inStore, "given back to store")
	assert.Empty(t, e.idEvents(tp, "back"), "a held message given back was never delivered")
}

// A message whose expiry passes before its instant is dropped by the fetch
// that meets it, logged expired once (never delivered); its neighbour is
// delivered as usual.
func TestLifeExpiredLoggedOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lifeexpired", topic.FixedTime, 1)
		outcomes := make(chan consumer.Outcome, 4)
		c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack), consumer.WithEvents(100)))
		e.start(c)
		due := time.Now().Add(300 * time.Millisecond)
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), due, producer.WithKey("x"), producer.WithTTL(100*time.Millisecond))
		require.NoError(t, err)
		// The marker, due after x in the same slot: once it completed,
		// every fetch that could meet x ran.
		_, err = c.Producer().SendFixedTime(ctx, tp, []byte("m"), due.Add(10*time.Millisecond), producer.WithKey("m"))
		require.NoError(t, err)
		require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
		assert.Equal(t, []string{"delivered 1", "completed 1"}, e.idEvents(tp, "m"))
		assert.Equal(t, []string{"expired 0"}, e.idEvents(tp, "x"))
		select {
		case o := <-outcomes:
			t.Fatalf("an expired message had an outcome %v", o)
		default:
		}
	})
}

// A fetch whose reply is lost, which go-redis sends again, moved its
// message once: the second run finds it in flight and logs nothing. The
// lost delivery's lease runs out (retried), and the next one is attempt
// 2: each transition logged once.
func TestLifeResentFetchLogsOnce(t *testing.T) {
	e := newEnv(t)
	proxy, err := faultproxy.Start(e.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3})
	t.Cleanup(func() { _ = rdb.Close() })
	tp := mustTopic(t, "liferesent", topic.Priority, 1)
	outcomes := make(chan consumer.Outcome, 4)
	c := e.clientOn(rdb, rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack), consumer.WithEvents(100),
		consumer.WithPrepareTimeout(time.Second), consumer.WithSweepInterval(200*time.Millisecond), consumer.WithRetryBackoff(noBackoff)))
	e.start(c)
	e.waitFetchersAsleep(1)
	proxy.DropReplyTo([]byte(scripts.Fetch.Hash()))
	_, err = c.Producer().SendPriority(ctxT(t), tp, []byte("r"), 100, producer.WithKey("r"))
	require.NoError(t, err)
	require.Equal(t, consumer.Acked, outcomeOf(t, outcomes))
	assert.EqualValues(t, 1, proxy.Dropped(), "the fault happened")
	assert.Equal(t, []string{"delivered 1", "retried 1", "delivered 2", "completed 2"}, e.idEvents(tp, "r"))
}

// Without an event log nothing is written to it: deliveries, a retry, an
// expiry and a held hand-over leave every slot's log absent.
func TestLifeNoEventsWritesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifenoevents", topic.FixedTime, 2)
	outcomes := make(chan consumer.Outcome, 8)
	c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.Attempt == 1 && string(m.Body) == "fail" {
			return errors.New("once")
		}
		return nil
	}), consumer.WithLookahead(testLookahead), consumer.WithRetryBackoff(noBackoff)))
	e.start(c)
	now := time.Now()
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("fail"), now, producer.WithKey("n1"))
	require.NoError(t, err)
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("x"), now.Add(200*time.Millisecond), producer.WithKey("n2"), producer.WithTTL(50*time.Millisecond))
	require.NoError(t, err)
	_, err = c.Producer().SendFixedTime(ctx, tp, []byte("held"), now.Add(800*time.Millisecond), producer.WithKey("n3"))
	require.NoError(t, err)
	got := map[consumer.Outcome]int{}
	for range 3 {
		got[outcomeOf(t, outcomes)]++
	}
	require.Equal(t, map[consumer.Outcome]int{consumer.Acked: 2, consumer.Retried: 1}, got)
	for i := range tp.SlotAmount() {
		n, err := e.rdb.Exists(ctx, keyspace.LifeKeysFor(e.prefix, tp.Name(), i).Events).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "slot %d's log", i)
	}
}
