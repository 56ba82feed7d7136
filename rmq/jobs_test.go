package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Never early, at full time.Time precision: thousands of fixed-time and
// delayed priority messages with random sub-millisecond parts are handled
// no sooner than their instant, and DueAt is never before it. The handler's
// time.Now is compared: Redis runs on this machine, so its TIME (which the
// fetch script compares with) and Go's clock read the same clock, and the
// handler runs after the fetch.
func TestNeverEarly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		ft := mustTopic(t, "early", topic.FixedTime, 16)
		pr := mustTopic(t, "earlyp", topic.Priority, 4)
		const n, np = 3000, 300
		type seen struct{ at, now, due time.Time }
		var mu sync.Mutex
		var got []seen
		done := make(chan struct{}, n+np)
		handler := func(_ context.Context, m *consumer.Message) error {
			now := time.Now()
			ns, err := strconv.ParseInt(strings.SplitN(string(m.Body), "/", 2)[0], 10, 64)
			if err != nil {
				return err
			}
			mu.Lock()
			got = append(got, seen{at: time.Unix(0, ns), now: now, due: m.DueAt})
			mu.Unlock()
			done <- struct{}{}
			return nil
		}
		c := e.client()
		require.NoError(t, c.Register(ft, consumer.ListenerFunc(handler), consumer.WithConcurrency(64)))
		require.NoError(t, c.Register(pr, consumer.ListenerFunc(handler), consumer.WithConcurrency(16)))
		e.start(c)
		rng := rand.New(rand.NewPCG(1, 2))
		start := time.Now().Add(300 * time.Millisecond)
		var batch []producer.BatchMessage
		for i := range n {
			at := start.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
			batch = append(batch, producer.BatchMessage{Body: []byte(fmt.Sprintf("%d/%d", at.UnixNano(), i)), At: at})
		}
		_, err := c.Producer().SendBatch(ctx, ft, batch)
		require.NoError(t, err)
		for i := range np {
			at := start.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
			_, err := c.Producer().SendPriority(ctx, pr, []byte(fmt.Sprintf("%d/p%d", at.UnixNano(), i)), 100, producer.WithNotBefore(at))
			require.NoError(t, err)
		}
		for range n + np {
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatal("not every message was delivered")
			}
		}
		mu.Lock()
		defer mu.Unlock()
		early, dueEarly := 0, 0
		for _, s := range got {
			if s.now.Before(s.at) {
				early++
			}
			if !s.due.IsZero() && s.due.Before(s.at) {
				dueEarly++
			}
		}
		assert.Zero(t, early, "handled before the instant")
		assert.Zero(t, dueEarly, "DueAt before the instant")
	})
}

// Per-message options: headers reach the handler; a message's own max
// retries win over the consumer's; its timeout cancels its handler.
func TestPerMessageOptions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "opts", topic.Priority, 4)
		var attempts atomic.Int64
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			switch m.ID {
			case "fails":
				attempts.Add(1)
				return errors.New("always")
			case "slow":
				<-ctx.Done()
				return context.Cause(ctx)
			}
			return nil
		})
		headers := make(chan map[string]string, 1)
		c := e.client()
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			if m.ID == "h" {
				headers <- m.Headers
			}
			return rec.OnMessage(ctx, m)
		}), consumer.WithRetryBackoff(noBackoff), consumer.WithHandlerTimeout(time.Minute)))
		e.start(c)
		p := c.Producer()
		_, err := p.SendPriority(ctx, tp, []byte("h"), 100, producer.WithKey("h"), producer.WithHeaders(map[string]string{"a": "1"}))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "1"}, <-headers)

		_, err = p.SendPriority(ctx, tp, []byte("f"), 100, producer.WithKey("fails"), producer.WithMaxRetries(1))
		require.NoError(t, err)
		e.waitDead(tp, 1)
		assert.EqualValues(t, 2, attempts.Load(), "its own max retries: two attempts, not 17")

		start := time.Now()
		_, err = p.SendPriority(ctx, tp, []byte("s"), 100, producer.WithKey("slow"), producer.WithTimeout(300*time.Millisecond), producer.WithMaxRetries(0))
		require.NoError(t, err)
		e.waitDead(tp, 2)
		assert.Less(t, time.Since(start), 5*time.Second, "its own timeout, not the consumer's minute")
		m, err := c.Inspector().Message(ctx, tp, "slow")
		require.NoError(t, err)
		assert.Contains(t, m.LastError, consumer.ErrHandlerTimeout.Error())
	})
}

// expiryCounter counts expired messages (rmq.ExpiryObserver).
type expiryCounter struct {
	rmq.BaseObserver
	n atomic.Int64
}

func (o *expiryCounter) Expired(_ string, n int) { o.n.Add(int64(n)) }

// A message that expires while it waits for a retry is never delivered
// again: dropped with its body, counted.
func TestExpiryNeverDeliversLate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "exp", topic.FixedTime, 4)
		obs := &expiryCounter{}
		// The first delivery must come within the TTL (a second: generous
		// on a loaded machine); the retry is asked for after it.
		rec := newRecorder(func(context.Context, *consumer.Message) error {
			return consumer.RetryAfter(2*time.Second, errors.New("later"))
		})
		c := e.client(rmq.WithObserver(obs))
		require.NoError(t, c.Register(tp, rec))
		e.start(c)
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now(), producer.WithKey("x"), producer.WithTTL(time.Second))
		require.NoError(t, err)
		d := rec.next(t, 5*time.Second)
		assert.Equal(t, 1, d.Attempt)
		require.Eventually(t, func() bool { return obs.n.Load() == 1 }, waitLong, 10*time.Millisecond)
		assert.Equal(t, counts{}, e.counts(tp), "dropped with its body")
		rec.nothingYet(t) // and never delivered again: nothing is left
	})
}

// What a handler returns decides: SkipRetry dead now, RetryAfter a retry
// after the delay (any type), Snooze again without counting an attempt.
func TestHandlerOutcomes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "outcomes", topic.Priority, 4)
		var snoozed atomic.Bool
		rec := newRecorder(func(_ context.Context, m *consumer.Message) error {
			switch m.ID {
			case "skip":
				return consumer.SkipRetry(errors.New("poison"))
			case "after":
				if m.Attempt == 1 {
					return consumer.RetryAfter(400*time.Millisecond, errors.New("busy"))
				}
			case "snooze":
				if !snoozed.Swap(true) {
					return consumer.Snooze(300 * time.Millisecond)
				}
			}
			return nil
		})
		c := e.client()
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))
		e.start(c)
		p := c.Producer()

		_, err := p.SendPriority(ctx, tp, []byte("s"), 100, producer.WithKey("skip"))
		require.NoError(t, err)
		assert.Equal(t, 1, rec.next(t, 5*time.Second).Attempt)
		e.waitDead(tp, 1)
		m, err := c.Inspector().Message(ctx, tp, "skip")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateDead, m.State)
		assert.Equal(t, "poison", m.LastError, "the cause is kept")

		_, err = p.SendPriority(ctx, tp, []byte("a"), 100, producer.WithKey("after"))
		require.NoError(t, err)
		first := rec.next(t, 5*time.Second)
		second := rec.next(t, 5*time.Second)
		assert.Equal(t, 2, second.Attempt)
		assert.Equal(t, "busy", second.LastError)
		assert.GreaterOrEqual(t, second.At.Sub(first.At), 400*time.Millisecond, "not before the delay")

		_, err = p.SendPriority(ctx, tp, []byte("z"), 100, producer.WithKey("snooze"))
		require.NoError(t, err)
		first = rec.next(t, 5*time.Second)
		second = rec.next(t, 5*time.Second)
		assert.Equal(t, 1, second.Attempt, "a snooze counts no attempt")
		assert.GreaterOrEqual(t, second.At.Sub(first.At), 300*time.Millisecond)
	})
}

// Priority retries honour the backoff, and once due still rank below
// fresh messages; a delayed priority message wakes an idle consumer at its
// time, without polling.
func TestPriorityBackoffAndDelay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pbackoff", topic.Priority, 4)
		rec := newRecorder(func(_ context.Context, m *consumer.Message) error {
			if m.ID == "job" && m.Attempt == 1 {
				return errors.New("down")
			}
			return nil
		})
		obs := &retriedObserver{retried: make(chan time.Time, 4)}
		c := e.client(rmq.WithObserver(obs))
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1),
			consumer.WithRetryBackoff(func(int) time.Duration { return 400 * time.Millisecond })))
		e.start(c)
		p := c.Producer()
		_, err := p.SendPriority(ctx, tp, []byte("j"), 1000, producer.WithKey("job"))
		require.NoError(t, err)
		first := rec.next(t, 5*time.Second)
		// The handler failed; the observer hears of it once its rollback
		// committed, well inside the 400 ms backoff.
		var rolledBack time.Time
		select {
		case rolledBack = <-obs.retried:
		case <-time.After(5 * time.Second):
			t.Fatal("the failed delivery did not end")
		}
		st, err := c.Inspector().Stats(ctx, tp)
		require.NoError(t, err)
		assert.Equal(t, int64(1), st.Delayed, "the retry waits out its backoff in the delayed set (rolled back %v, read %v after the delivery)",
			rolledBack.Sub(first.At), time.Since(first.At))
		second := rec.next(t, 5*time.Second)
		assert.Equal(t, 2, second.Attempt)
		assert.GreaterOrEqual(t, second.At.Sub(first.At), 400*time.Millisecond, "the backoff is honoured")
		assert.Less(t, second.At.Sub(first.At), 2*time.Second)

		start := time.Now()
		_, err = p.SendPriority(ctx, tp, []byte("d"), 100, producer.WithKey("delayed"), producer.WithDelay(500*time.Millisecond))
		require.NoError(t, err)
		d := rec.next(t, 5*time.Second)
		assert.Equal(t, "delayed", d.ID)
		took := d.At.Sub(start)
		assert.GreaterOrEqual(t, took, 500*time.Millisecond)
		assert.Less(t, took, 1500*time.Millisecond, "woken at its time")
	})
}

// Pause stops every consumer of a topic within a second, Stats shows it,
// Resume starts them again.
func TestPauseResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pause", topic.FixedTime, 4)
		rec := newRecorder(nil)
		obs1, obs2 := newPullObserver(), newPullObserver()
		c1, c2 := e.client(rmq.WithObserver(obs1)), e.client(rmq.WithObserver(obs2))
		require.NoError(t, c1.Register(tp, rec))
		require.NoError(t, c2.Register(tp, rec))
		e.start(c1)
		e.start(c2)
		in := c1.Inspector()
		require.NoError(t, in.Pause(ctx, tp))
		st, err := in.Stats(ctx, tp)
		require.NoError(t, err)
		assert.True(t, st.Paused)
		// The published pause reached both consumers.
		obs1.waitPaused(t, true)
		obs2.waitPaused(t, true)
		for i := range 10 {
			send(t, c1.Producer(), tp, "k"+strconv.Itoa(i), "b")
		}
		rec.none(t, time.Second)
		// A consumer that starts while paused stays paused.
		c3 := e.client()
		require.NoError(t, c3.Register(tp, rec))
		e.start(c3)
		rec.none(t, 500*time.Millisecond)
		resumed := time.Now()
		require.NoError(t, in.Resume(ctx, tp))
		rec.nextN(t, 10, 5*time.Second)
		assert.Less(t, time.Since(resumed), 2*time.Second)
		st, err = in.Stats(ctx, tp)
		require.NoError(t, err)
		assert.False(t, st.Paused)
	})
}

// Remove of a message being handled: its ack is refused, it is never
// redelivered, and Remove says it was in flight.
func TestRemoveInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "rmflight", topic.FixedTime, 4)
		release := make(chan struct{})
		outcomes := make(chan consumer.Outcome, 4)
		rec := newRecorder(func(context.Context, *consumer.Message) error {
			<-release
			return nil
		})
		c := e.client(rmq.WithObserver(outcomeObserver(outcomes)))
		require.NoError(t, c.Register(tp, rec))
		e.start(c)
		send(t, c.Producer(), tp, "x", "b")
		rec.next(t, 5*time.Second)
		r, err := c.Producer().Remove(ctx, tp, "x")
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedInFlight, r)
		close(release)
		assert.Equal(t, consumer.Refused, <-outcomes)
		rec.drained(t, e, tp, counts{Prepare: 1}) // the tombstone, until the lease ends
	})
}

// Middleware: the client's wrap every listener, the first outermost, and a
// listener wrapped before Register runs inside them; MessageFromContext
// finds the message.
func TestMiddleware(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "mw", topic.FixedTime, 1)
	var mu sync.Mutex
	var trace []string
	mw := func(name string) consumer.Middleware {
		return func(next consumer.MessageListener) consumer.MessageListener {
			return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				trace = append(trace, name)
				mu.Unlock()
				return next.OnMessage(ctx, m)
			})
		}
	}
	found := make(chan string, 1)
	c := e.client(rmq.WithMiddleware(mw("client"), mw("client2")))
	require.NoError(t, c.Register(tp, mw("topic")(consumer.ListenerFunc(func(ctx context.Context, _ *consumer.Message) error {
		m, ok := consumer.MessageFromContext(ctx)
		if ok {
			found <- m.ID
		}
		return nil
	}))))
	e.start(c)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("b"), time.Now(), producer.WithKey("m1"))
	require.NoError(t, err)
	assert.Equal(t, "m1", <-found)
	mu.Lock()
	assert.Equal(t, []string{"client", "client2", "topic"}, trace)
	mu.Unlock()
}

// Envelopes in the format of earlier releases are delivered and acked by
// this consumer.
func TestVersion1EnvelopeThroughConsumer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "v1", topic.FixedTime, 4)
		slot := slotOfKey(tp, "old")
		k := e.keys(tp, slot)
		now := float64(time.Now().UnixMilli())
		v1 := scripts.EncodeEnvelopeV1(scripts.Envelope{Type: 3, FirstSentMs: now, Score: now, OrigScore: now, Nonce: 1, Body: []byte("from v1")})
		require.NoError(t, e.rdb.HSet(ctx, k.Msg, "old", v1).Err())
		require.NoError(t, e.rdb.ZAdd(ctx, k.Store, redis.Z{Score: now, Member: "old"}).Err())
		rec := newRecorder(nil)
		c := e.client()
		require.NoError(t, c.Register(tp, rec))
		e.start(c)
		d := rec.next(t, 5*time.Second)
		assert.Equal(t, "from v1", d.Body)
		assert.Equal(t, 1, d.Attempt)
		e.eventuallyCounts(tp, counts{})
	})
}

// An ack whose reply is lost, which go-redis sends again, reports Acked:
// the second run finds the delivery gone, not refused.
func TestResentAckReportsAcked(t *testing.T) {
	e := newEnv(t)
	proxy, err := faultproxy.Start(e.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3})
	t.Cleanup(func() { _ = rdb.Close() })
	tp := mustTopic(t, "lostack", topic.FixedTime, 1)
	outcomes := make(chan consumer.Outcome, 4)
	armed := make(chan struct{})
	c := e.clientOn(rdb, rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.ID == "x" {
			proxy.DropReplyTo([]byte(scripts.Ack.Hash()))
			close(armed)
		}
		return nil
	})))
	e.start(c)
	send(t, c.Producer(), tp, "warm", "w")
	assert.Equal(t, consumer.Acked, <-outcomes)
	send(t, c.Producer(), tp, "x", "b")
	<-armed
	assert.Equal(t, consumer.Acked, <-outcomes, "the resent ack counts as acked")
	assert.EqualValues(t, 1, proxy.Dropped(), "the fault happened")
	e.eventuallyCounts(tp, counts{})
}

// retriedObserver tells, on retried, when a delivery ended in a retry:
// the observer hears of it once the rollback committed, so the retry is
// in Redis by then.
type retriedObserver struct {
	rmq.BaseObserver
	retried chan time.Time
}

func (o *retriedObserver) Finished(_ *consumer.Message, _ time.Duration, out consumer.Outcome, _ error) {
	if out == consumer.Retried {
		select {
		case o.retried <- time.Now():
		default:
		}
	}
}
