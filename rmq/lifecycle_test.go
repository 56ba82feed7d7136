package rmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The lifecycle tests are not parallel: goleak must see only the goroutines
// of the client under test (parallel tests run after all sequential ones).

// leakBaseline starts the Redis side first (shared server, connections), so
// that only what the rmq client starts is checked. A cluster client makes
// the client of each node, with its goroutines, on first use: every node is
// used here, or the first call of the rmq client to a node not yet used
// would count as a leak of the client under test.
func leakBaseline(t *testing.T, e *env) goleak.Option {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.rdb.Ping(ctx).Err())
	if cc, ok := e.rdb.(*redis.ClusterClient); ok {
		require.NoError(t, cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }))
	}
	return goleak.IgnoreCurrent()
}

// Close stops fetching and waits for in-flight handlers that finish before
// its deadline: they are acked, messages not yet fetched stay in store, and
// no goroutine of the client outlives Close.
func TestCloseWaitsForInflight(t *testing.T) {
	forEachBackendSerial(t, func(t *testing.T, e *env) {
		ignore := leakBaseline(t, e)
		ctx := ctxT(t)
		tp := mustTopic(t, "close", topic.FixedTime, 4)
		c := e.client()
		release := make(chan struct{})
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			<-release
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(2)))
		for i := range 5 {
			key := fmt.Sprintf("m%d", i)
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(key), time.Now().Add(-time.Second), producer.WithKey(key))
			require.NoError(t, err)
		}
		e.start(c)
		got := rec.nextN(t, 2, waitLong)

		closed := make(chan error, 1)
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			closed <- c.Close(cctx)
		}()
		select {
		case err := <-closed:
			close(release)
			t.Fatalf("Close returned %v while handlers were running", err)
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(waitLong):
			t.Fatal("Close did not return after the handlers finished")
		}
		rec.nothingYet(t) // Close returned: fetching stopped, nothing else was delivered

		assert.Equal(t, counts{Store: 3, Msg: 3}, e.counts(tp), "in-flight messages acked, the rest still waiting")
		for _, d := range got {
			_, ok := e.envelope(e.keys(tp, d.Slot).Msg, d.ID)
			assert.False(t, ok, "%s was handled but its body is still there", d.ID)
		}
		goleak.VerifyNone(t, ignore)

		require.NoError(t, c.Close(context.Background()), "a second Close is fine")
		assert.ErrorIs(t, c.Register(mustTopic(t, "other", topic.FixedTime, 1), rec), rmq.ErrClosed)
		assert.ErrorIs(t, c.Start(context.Background()), rmq.ErrClosed)
	})
}

// A handler that outlasts Close's deadline (it returns only when its context
// is cancelled) is rolled back: Close returns context.DeadlineExceeded, the
// message is back in store with its envelope, nothing is in prepare and no
// goroutine is left.
func TestCloseDeadlineRollsBack(t *testing.T) {
	forEachBackendSerial(t, func(t *testing.T, e *env) {
		ignore := leakBaseline(t, e)
		ctx := ctxT(t)
		tp := mustTopic(t, "close", topic.FixedTime, 4)
		c := e.client()
		causes := make(chan error, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
		require.NoError(t, c.Register(tp, rec))
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("stuck"), time.Now(), producer.WithKey("stuck"))
		require.NoError(t, err)
		e.start(c)
		d := rec.next(t, waitLong)

		cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = c.Close(cctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.GreaterOrEqual(t, time.Since(start), 450*time.Millisecond, "Close gave up before its deadline")
		select {
		case cause := <-causes:
			assert.ErrorIs(t, cause, consumer.ErrShutdown)
		default:
			t.Fatal("the handler had not returned when Close did")
		}

		k := e.keys(tp, d.Slot)
		_, inPrepare := e.zscore(k.Prepare, "stuck")
		assert.False(t, inPrepare, "left in prepare")
		_, inStore := e.zscore(k.Store, "stuck")
		assert.True(t, inStore, "not back in store")
		env, ok := e.envelope(k.Msg, "stuck")
		require.True(t, ok, "envelope lost")
		assert.Equal(t, "stuck", string(env.Body))
		assert.Equal(t, 1, env.Failures)
		assert.Equal(t, consumer.ErrShutdown.Error(), env.LastError)
		assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))
		goleak.VerifyNone(t, ignore)

		require.NoError(t, c.Close(context.Background()), "a second Close is fine")
	})
}

// Register after Start is refused with ErrStarted, and so is a second Start.
func TestRegisterAfterStart(t *testing.T) {
	forEachBackendSerial(t, func(t *testing.T, e *env) {
		ignore := leakBaseline(t, e)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(mustTopic(t, "a", topic.Priority, 2), rec))
		err := c.Register(mustTopic(t, "a", topic.Priority, 2), rec)
		assert.ErrorIs(t, err, rmq.ErrDuplicateTopic)
		e.start(c)
		assert.ErrorIs(t, c.Register(mustTopic(t, "b", topic.Priority, 2), rec), rmq.ErrStarted)
		assert.ErrorIs(t, c.Start(context.Background()), rmq.ErrStarted)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Close(ctx))
		require.NoError(t, c.Close(ctx))
		goleak.VerifyNone(t, ignore)
		assert.ErrorIs(t, c.Start(ctx), rmq.ErrClosed)
	})
}

// A Close that gives up while a delivery's ack is still on its way does
// not roll that delivery back: its listener reported success, so a
// rollback could only make the message run twice. Writes are paused in
// Redis as the listener returns, so the ack waits out the pause while
// Close's deadline passes. A server of its own, since the pause stalls
// every client.
func TestCloseDeadlineLetsPendingAckFinish(t *testing.T) {
	e := newEnvOn(t, startDedicated(t))
	ctx := ctxT(t)
	tp := mustTopic(t, "closeack", topic.FixedTime, 1)
	rollbacks := rmqtest.NewScriptCounter(scripts.Rollback)
	rdb := e.newRedis()
	rdb.AddHook(redistest.Observer{Before: rollbacks.Observe})
	outcomes := make(chan consumer.Outcome, 2)
	c := e.clientOn(rdb, rmq.WithObserver(outcomeObserver(outcomes)))
	returned := make(chan struct{})
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		require.NoError(t, e.rdb.Do(ctx, "CLIENT", "PAUSE", 1000, "WRITE").Err())
		close(returned)
		return nil
	})))
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now(), producer.WithKey("m"))
	require.NoError(t, err)
	e.start(c)
	<-returned

	cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Close(cctx), context.DeadlineExceeded)
	select {
	case out := <-outcomes:
		assert.Equal(t, consumer.Acked, out)
	default:
		t.Fatal("Close returned before the delivery ended")
	}
	assert.Zero(t, rollbacks.N(), "rollback.lua calls")
	assert.Equal(t, counts{}, e.counts(tp))
}
