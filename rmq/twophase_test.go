package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// While a handler runs its message sits in the slot's prepare set (with this
// delivery's token and a future deadline) and not in store; after the ack
// nothing of it is left.
func TestTwoPhasePrepareThenAck(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "twophase", topic.FixedTime, 4)
		c := e.client()
		type seen struct {
			prepareScore float64
			inPrepare    bool
			inStore      bool
			hasMsg       bool
			err          error
		}
		inside := make(chan seen, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			k := e.keys(tp, m.Slot)
			var s seen
			s.prepareScore, s.err = e.rdb.ZScore(ctx, k.Prepare, m.ID).Result()
			s.inPrepare = s.err == nil
			if errors.Is(s.err, redis.Nil) {
				s.err = nil
			}
			_, err := e.rdb.ZScore(ctx, k.Store, m.ID).Result()
			s.inStore = err == nil
			s.hasMsg, _ = e.rdb.HExists(ctx, k.Msg, m.ID).Result()
			inside <- s
			return nil
		})
		require.NoError(t, c.Register(tp, rec))
		e.start(c)

		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("pay"), time.Now(), producer.WithKey("order-1"))
		require.NoError(t, err)
		d := rec.next(t, waitLong)
		s := <-inside
		require.NoError(t, s.err)
		require.True(t, s.inPrepare, "not in prepare while handled")
		assert.False(t, s.inStore, "still in store while handled")
		assert.True(t, s.hasMsg, "body gone while handled")
		deadline, token := prepareToken(s.prepareScore)
		assert.Equal(t, d.Token, token, "prepare entry does not carry the delivery's token")
		assert.Equal(t, int64(1), token%1000, "token names attempt 1")
		assert.Greater(t, deadline, time.Now().Add(-time.Second).Unix(), "lease deadline already past")
		assert.Equal(t, slotOfKey(tp, "order-1"), d.Slot)

		rec.drained(t, e, tp, counts{})
	})
}

// A handler error rolls the delivery back; it comes again with Attempt+1,
// after the backoff, carrying the error as LastError.
func TestTwoPhaseErrorRedelivers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "retry", topic.FixedTime, 4)
		c := e.client()
		const backoff = 400 * time.Millisecond
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.Attempt == 1 {
				return errors.New("database unavailable")
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithRetryBackoff(func(int) time.Duration { return backoff })))
		e.start(c)

		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now(), producer.WithKey("m"))
		require.NoError(t, err)
		first, second := rec.next(t, waitLong), rec.next(t, waitLong)
		assert.Equal(t, 1, first.Attempt)
		assert.Empty(t, first.LastError)
		assert.Equal(t, 2, second.Attempt)
		assert.Equal(t, "database unavailable", second.LastError)
		assert.Equal(t, "x", second.Body)
		assert.GreaterOrEqual(t, second.At.Sub(first.At), backoff-10*time.Millisecond, "retried before the backoff")
		assert.NotEqual(t, first.Token, second.Token)
		rec.drained(t, e, tp, counts{})
	})
}

// With WithMaxRetries(2) a message failing every time is tried 3 times and
// then sits in the dead queue with its last error and 3 failures.
func TestTwoPhaseDeadAfterMaxRetries(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "dead", topic.FixedTime, 4)
		c := e.client()
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			return fmt.Errorf("failure %d", m.Attempt)
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithMaxRetries(2), consumer.WithRetryBackoff(noBackoff)))
		e.start(c)

		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("poison"), time.Now(), producer.WithKey("poison"))
		require.NoError(t, err)
		got := rec.nextN(t, 3, waitLong)
		for i, d := range got {
			assert.Equal(t, i+1, d.Attempt)
			if i > 0 {
				assert.Equal(t, fmt.Sprintf("failure %d", i), d.LastError)
			}
		}
		rec.drained(t, e, tp, counts{Dead: 1, DeadMsg: 1})

		k := e.keys(tp, slotOfKey(tp, "poison"))
		died, ok := e.zscore(k.Dead, "poison")
		require.True(t, ok, "not in the dead set")
		assert.InDelta(t, float64(time.Now().UnixMilli()), died, float64(waitLong.Milliseconds()), "dead score is the time of death (ms)")
		env, ok := e.envelope(k.DeadMsg, "poison")
		require.True(t, ok, "no envelope in deadmsg")
		assert.Equal(t, "failure 3", env.LastError)
		assert.Equal(t, 3, env.Failures)
		assert.Equal(t, "poison", string(env.Body))
		assert.Equal(t, int(topic.FixedTime), env.Type)
		_, ok = e.envelope(k.Msg, "poison")
		assert.False(t, ok, "a dead message must leave the msg hash")
	})
}

// A handler that runs four times as long as the lease keeps its delivery: the
// lease is extended, nothing is redelivered, and it is acked at the end.
func TestTwoPhaseLeaseExtended(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "slow", topic.FixedTime, 2)
		c := e.client()
		cancelled := make(chan error, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			select {
			case <-time.After(4 * time.Second):
				return nil
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
				return ctx.Err()
			}
		})
		require.NoError(t, c.Register(tp, rec,
			consumer.WithPrepareTimeout(time.Second),
			consumer.WithSweepInterval(200*time.Millisecond),
			consumer.WithRetryBackoff(noBackoff)))
		e.start(c)

		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("slow"), time.Now(), producer.WithKey("slow"))
		require.NoError(t, err)
		d := rec.next(t, waitLong)
		assert.Equal(t, 1, d.Attempt)
		// No second delivery while the first runs, nor after it: a lost
		// lease would have rolled it back and delivered it again before
		// the topic drained.
		rec.drained(t, e, tp, counts{})
		select {
		case cause := <-cancelled:
			t.Fatalf("handler cancelled: %v", cause)
		default:
		}
	})
}

// WithHandlerTimeout cancels the handler's context with cause
// ErrHandlerTimeout and rolls the delivery back; the retry says why.
func TestTwoPhaseHandlerTimeout(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "timeout", topic.FixedTime, 4)
		c := e.client()
		const timeout = 300 * time.Millisecond
		causes := make(chan error, 16)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.Attempt > 1 {
				return nil
			}
			<-ctx.Done() // a well-behaved handler that gives up when told
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithHandlerTimeout(timeout), consumer.WithRetryBackoff(noBackoff)))
		e.start(c)

		const n = 8
		for i := range n {
			key := fmt.Sprintf("t%d", i)
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(key), time.Now(), producer.WithKey(key))
			require.NoError(t, err)
		}
		firsts := map[string]delivery{}
		retries := map[string]delivery{}
		for _, d := range rec.nextN(t, 2*n, waitLong) {
			if d.Attempt == 1 {
				firsts[d.ID] = d
			} else {
				retries[d.ID] = d
			}
		}
		require.Len(t, firsts, n)
		require.Len(t, retries, n)
		for range n {
			cause := <-causes
			assert.ErrorIs(t, cause, consumer.ErrHandlerTimeout, "context cause")
		}
		for id, d := range retries {
			assert.Equal(t, 2, d.Attempt, id)
			assert.Contains(t, d.LastError, consumer.ErrHandlerTimeout.Error(), "LastError of %s should name the timeout", id)
			assert.GreaterOrEqual(t, d.At.Sub(firsts[id].At), timeout-10*time.Millisecond, "%s retried before its timeout", id)
		}
		rec.drained(t, e, tp, counts{})
	})
}

// A panicking handler rolls its delivery back; the process survives and the
// message comes again with Attempt 2.
func TestTwoPhasePanic(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "panic", topic.Priority, 4)
		c := e.client()
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.Attempt == 1 {
				panic("handler exploded")
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec))
		e.start(c)

		_, err := c.Producer().SendPriority(ctx, tp, []byte("boom"), 100, producer.WithKey("boom"))
		require.NoError(t, err)
		first, second := rec.next(t, waitLong), rec.next(t, waitLong)
		assert.Equal(t, 1, first.Attempt)
		assert.Equal(t, 2, second.Attempt)
		assert.Contains(t, second.LastError, "panic")
		assert.Contains(t, second.LastError, "handler exploded")
		rec.drained(t, e, tp, counts{})
	})
}

// A delivery whose lease runs out while its handler still runs (simulated by
// moving its prepare deadline into the past, token kept) is rolled back by the
// sweeper and redelivered with Attempt 2; the first handler's context is
// cancelled with ErrLeaseLost; its late ack, or any ack or rollback naming
// the old token, changes nothing. Exactly one delivery is finally acked.
func TestTwoPhaseLeaseLost(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "lease", topic.FixedTime, 1)
		c := e.client()
		firstCtx := make(chan context.Context, 1)
		releaseFirst := make(chan struct{})
		releaseSecond := make(chan struct{})
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.Attempt == 1 {
				firstCtx <- ctx
				<-releaseFirst
				return nil // a stale ack
			}
			<-releaseSecond
			return nil
		})
		require.NoError(t, c.Register(tp, rec,
			consumer.WithConcurrency(2),
			consumer.WithPrepareTimeout(3*time.Second),
			consumer.WithSweepInterval(200*time.Millisecond),
			consumer.WithRetryBackoff(noBackoff)))
		e.start(c)
		defer func() {
			// Unblock handlers if the test fails early, so Close can end.
			select {
			case <-releaseFirst:
			default:
				close(releaseFirst)
			}
			select {
			case <-releaseSecond:
			default:
				close(releaseSecond)
			}
		}()

		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("job"), time.Now(), producer.WithKey("job"))
		require.NoError(t, err)
		first := rec.next(t, waitLong)
		require.Equal(t, 1, first.Attempt)
		hctx := <-firstCtx
		k := e.keys(tp, 0)

		// Expire the lease, keeping the token. The lease keeper may extend it
		// again before the sweeper sees it; then expire it again.
		redistest.Poll(t, func() error {
			score, ok := e.zscore(k.Prepare, "job")
			if !ok {
				return nil
			}
			dl, tok := prepareToken(score)
			if tok != first.Token {
				return nil // rolled back and already redelivered
			}
			if dl >= time.Now().Unix()-5 {
				require.NoError(t, e.rdb.ZAddXX(ctx, k.Prepare, redis.Z{Score: pastScore(score), Member: "job"}).Err())
			}
			return errors.New("the sweeper never rolled the expired lease back")
		})

		select {
		case <-hctx.Done():
			assert.ErrorIs(t, context.Cause(hctx), consumer.ErrLeaseLost)
		case <-time.After(waitLong):
			t.Fatal("the first handler's context was not cancelled after its lease was lost")
		}

		second := rec.next(t, waitLong)
		require.Equal(t, "job", second.ID)
		assert.Equal(t, 2, second.Attempt)
		assert.Equal(t, "rmq: lease expired", second.LastError)
		require.NotEqual(t, first.Token, second.Token)

		// Stale ack and stale rollback naming the first token: refused, inert.
		res, err := scripts.Ack.Run(ctx, e.rdb, []string{k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed, k.Dead}, "", 1, "job", first.Token).Int64Slice()
		require.NoError(t, err)
		assert.Equal(t, []int64{0}, res, "stale ack accepted")
		res, err = scripts.Rollback.Run(ctx, e.rdb, []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed},
			"", 16, 0, 0, 0, "job", first.Token, "stale", "").Int64Slice()
		require.NoError(t, err)
		assert.Equal(t, []int64{0}, res, "stale rollback accepted")

		// The first handler returns nil late: the consumer knows its lease
		// was lost and sends no ack, and the live delivery is untouched.
		close(releaseFirst)
		require.Eventually(t, func() bool { return strings.Contains(e.log.String(), "lease lost while handling") },
			waitLong, 10*time.Millisecond, "the first handler never returned")
		score, ok := e.zscore(k.Prepare, "job")
		require.True(t, ok, "the live delivery was removed from prepare by a stale ack")
		_, tok := prepareToken(score)
		assert.Equal(t, second.Token, tok)
		env, ok := e.envelope(k.Msg, "job")
		require.True(t, ok, "the live delivery's body was deleted by a stale ack")
		assert.Equal(t, "job", string(env.Body))
		assert.Equal(t, counts{Prepare: 1, Msg: 1}, e.counts(tp))

		close(releaseSecond)
		rec.drained(t, e, tp, counts{})
		assert.False(t, strings.Contains(e.log.String(), "could not end delivery"), "an ack or rollback failed:\n%s", e.log.String())
	})
}

// An ack that Redis does not answer (every client paused) ends at the ack
// round's deadline, the prepare timeout, even on a client without read
// timeouts: the delivery ends as Failed rather than hanging, and nothing
// is lost. Once Redis answers again the lease runs out, the message is
// rolled back and delivered again, and that delivery is acked. A server of
// its own, since the pause stalls every client.
func TestTwoPhaseAckUnansweredRedelivers(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, startDedicated(t))
	ctx := ctxT(t)
	tp := mustTopic(t, "ackpause", topic.FixedTime, 1)
	// No read timeout: only a context deadline can end the call. No
	// retries: the timed-out ack must not be sent again after the pause.
	rdb := redis.NewClient(&redis.Options{Addr: e.srv.Addr(), ReadTimeout: -1, ContextTimeoutEnabled: true, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { _ = rdb.Close() })
	outcomes := make(chan consumer.Outcome, 4)
	c := e.clientOn(rdb, rmq.WithObserver(outcomeObserver(outcomes)))
	rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
		if m.Attempt == 1 {
			require.NoError(t, e.rdb.Do(ctx, "CLIENT", "PAUSE", 2500, "ALL").Err())
		}
		return nil
	})
	require.NoError(t, c.Register(tp, rec, consumer.WithPrepareTimeout(time.Second),
		consumer.WithRetryBackoff(func(int) time.Duration { return 0 })))
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now(), producer.WithKey("m"))
	require.NoError(t, err)
	e.start(c)

	first := rec.next(t, waitLong)
	assert.Equal(t, 1, first.Attempt)
	select {
	case out := <-outcomes:
		assert.Equal(t, consumer.Failed, out, "the unanswered ack")
	case <-time.After(waitLong):
		t.Fatal("the unanswered ack never ended")
	}
	second := rec.next(t, waitLong)
	assert.Equal(t, first.ID, second.ID)
	assert.Equal(t, 2, second.Attempt, "redelivered after the lease ran out")
	select {
	case out := <-outcomes:
		assert.Equal(t, consumer.Acked, out)
	case <-time.After(waitLong):
		t.Fatal("the second delivery was not acked")
	}
	e.eventuallyCounts(tp, counts{})
}
