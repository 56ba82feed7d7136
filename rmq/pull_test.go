package rmq_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Pull without listeners: the first topic's due messages first; a
// long-poll returns as soon as something is sent (the wake-up, not a
// poll); an empty one returns after its wait.
func TestPullOrderAndLongPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		urgent := mustTopic(t, "urgent", topic.Priority, 4)
		normal := mustTopic(t, "normal", topic.FixedTime, 4)
		c := e.client()
		e.start(c)
		p := c.Producer()

		start := time.Now()
		ds, err := c.Pull(ctx, []topic.Topic{urgent, normal}, 5, rmq.WithWait(300*time.Millisecond))
		require.NoError(t, err)
		assert.Empty(t, ds)
		assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

		send(t, p, normal, "n1", "n1")
		send(t, p, urgent, "u1", "u1")
		send(t, p, normal, "n2", "n2")
		e.waitAllDue(normal)
		ds, err = c.Pull(ctx, []topic.Topic{urgent, normal}, 2, rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 2)
		assert.Equal(t, "u1", ds[0].ID, "the first topic first")
		assert.Equal(t, "normal", ds[1].Topic)
		for _, d := range ds {
			require.NoError(t, d.Ack(ctx))
		}
		// The third message (the other normal one) is taken too: the
		// long-poll below then has nothing to return until a send wakes it.
		rest, err := c.Pull(ctx, []topic.Topic{urgent, normal}, 10)
		require.NoError(t, err)
		require.Len(t, rest, 1)
		assert.Equal(t, "normal", rest[0].Topic)
		require.NoError(t, rest[0].Ack(ctx))

		got := make(chan []*rmq.Delivery, 1)
		go e.Labelled(func() {
			ds, err := c.Pull(ctx, []topic.Topic{urgent, normal}, 10, rmq.WithWait(10*time.Second))
			assert.NoError(t, err)
			got <- ds
		})
		e.waitPullsWaiting(1) // the send below is what must wake it
		sent := time.Now()
		send(t, p, urgent, "u2", "u2")
		select {
		case ds := <-got:
			require.NotEmpty(t, ds)
			assert.Less(t, time.Since(sent), 2*time.Second, "woken, not polled")
			for _, d := range ds {
				require.NoError(t, d.Ack(ctx))
			}
		case <-time.After(8 * time.Second):
			t.Fatal("long-poll did not return")
		}
	})
}

// Nack retries after the given delay (attempt counted), Extend keeps the
// lease, an expired lease is redelivered by the sweeper, and an ack after
// that is refused; AckByID acks without a token.
func TestPullDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pulled", topic.FixedTime, 4)
		obs := newPullObserver()
		c := e.client(rmq.WithObserver(obs))
		e.start(c)
		p := c.Producer()
		send(t, p, tp, "a", "a")
		// A wait: a due time is rounded up to the next ms (never early).
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(time.Second), rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		// Taken before the call: the backoff starts when Redis runs the
		// rollback, which is before Nack returns.
		nacked := time.Now()
		require.NoError(t, ds[0].Nack(ctx, 300*time.Millisecond, errors.New("later")))
		ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(5*time.Second), rmq.WithLease(time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		assert.GreaterOrEqual(t, time.Since(nacked), 300*time.Millisecond)
		assert.Equal(t, 2, ds[0].Attempt)
		assert.Equal(t, "later", ds[0].LastError)

		before, err := c.Inspector().Message(ctx, tp, ds[0].ID)
		require.NoError(t, err)
		extended := time.Now()
		require.NoError(t, ds[0].Extend(ctx, 3*time.Second))
		// The lease deadline (whole seconds) moved from about 1s to about
		// 3s from now.
		after, err := c.Inspector().Message(ctx, tp, ds[0].ID)
		require.NoError(t, err)
		assert.Less(t, before.LeaseUntil, extended.Add(2*time.Second), "a 1s lease")
		assert.GreaterOrEqual(t, after.LeaseUntil, extended.Add(2*time.Second), "extended to 3s")
		assert.True(t, after.LeaseUntil.After(before.LeaseUntil))
		require.NoError(t, ds[0].Ack(ctx))

		send(t, p, tp, "b", "b")
		ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(time.Second), rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		// Not acked: the sweeper (run for pulled topics, every 10s) rolls
		// it back, and after its backoff it is delivered again.
		again, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(25*time.Second))
		require.NoError(t, err)
		require.Len(t, again, 1)
		assert.Equal(t, "b", again[0].ID)
		assert.Equal(t, 2, again[0].Attempt)
		assert.ErrorIs(t, ds[0].Ack(ctx), consumer.ErrLeaseLost)

		ok, err := c.AckByID(ctx, tp, "b")
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = c.AckByID(ctx, tp, "b")
		require.NoError(t, err)
		assert.False(t, ok)
		e.eventuallyCounts(tp, counts{})

		// Pause: pulls return nothing.
		require.NoError(t, c.Inspector().Pause(ctx, tp))
		obs.waitPaused(t, true) // the published pause reached the pull engine
		_, err = p.SendFixedTime(ctx, tp, []byte("c"), time.Now(), producer.WithKey("c"))
		require.NoError(t, err)
		ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(300*time.Millisecond))
		require.NoError(t, err)
		assert.Empty(t, ds)
		require.NoError(t, c.Inspector().Resume(ctx, tp))
		ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(3*time.Second))
		require.NoError(t, err)
		assert.Len(t, ds, 1)
	})
}

// Close wakes a long-poll, which returns ErrClosed at once instead of
// sleeping until the next due time and then fetching on closed engines:
// nothing moves to prepare.
func TestPullClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pullclose", topic.FixedTime, 4)
		c := e.client()
		e.start(c)
		// Started by a first Pull, so the long-poll below goes straight to
		// its wait.
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1)
		require.NoError(t, err)
		require.Empty(t, ds)
		_, err = c.Producer().SendFixedTime(ctx, tp, []byte("x"), time.Now().Add(3*time.Second), producer.WithKey("x"))
		require.NoError(t, err)

		done := make(chan error, 1)
		go e.Labelled(func() {
			_, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(30*time.Second))
			done <- err
		})
		e.waitPullsWaiting(1) // Close is what must end its wait
		closed := time.Now()
		require.NoError(t, c.Close(ctx))
		select {
		case err := <-done:
			assert.ErrorIs(t, err, rmq.ErrClosed)
			assert.Less(t, time.Since(closed), time.Second, "woken by Close")
		case <-time.After(10 * time.Second):
			t.Fatal("the long-poll did not return after Close")
		}
		_, err = c.Pull(ctx, []topic.Topic{tp}, 1)
		assert.ErrorIs(t, err, rmq.ErrClosed)
		assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))
	})
}

// A later topic's failing fetch does not hide what earlier topics gave:
// those messages are leased already, so Pull returns them and no error.
func TestPullPartialResult(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		good := mustTopic(t, "pullgood", topic.FixedTime, 2)
		bad := mustTopic(t, "pullbad", topic.FixedTime, 2)
		c := e.client()
		e.start(c)
		// Every store key of bad holds a string: its fetch fails (WRONGTYPE).
		for s := range bad.SlotAmount() {
			require.NoError(t, e.rdb.Set(ctx, e.keys(bad, s).Store, "x", 0).Err())
		}
		send(t, c.Producer(), good, "g", "g")
		e.waitAllDue(good)

		_, err := c.Pull(ctx, []topic.Topic{bad}, 1)
		require.Error(t, err, "the bad topic's fetch fails on its own")
		ds, err := c.Pull(ctx, []topic.Topic{good, bad}, 5)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		assert.Equal(t, "g", ds[0].ID)
		require.NoError(t, ds[0].Ack(ctx))
	})
}

// First Pulls of a topic racing each other and Close share one engine
// start, made outside the client's lock: Close does not wait for a
// long-poll, every Pull ends with ErrClosed (the topic is empty), and an
// engine started after Close is closed again.
func TestPullStartRacesClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pullrace", topic.FixedTime, 4)
		c := e.client()
		e.start(c)
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() {
				_, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(30*time.Second))
				errs <- err
			}()
		}
		closed := time.Now()
		require.NoError(t, c.Close(ctx))
		for range cap(errs) {
			select {
			case err := <-errs:
				assert.ErrorIs(t, err, rmq.ErrClosed)
			case <-time.After(10 * time.Second):
				t.Fatal("a Pull did not return after Close")
			}
		}
		assert.Less(t, time.Since(closed), 5*time.Second)
	})
}

// Pull before Start is refused with ErrNotStarted, and leaves nothing
// behind: no engine, so a Pull after Start works.
func TestPullBeforeStart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pullearly", topic.FixedTime, 2)
		c := e.client()
		_, err := c.Pull(ctx, []topic.Topic{tp}, 1)
		require.ErrorIs(t, err, rmq.ErrNotStarted)
		assert.NotErrorIs(t, err, rmq.ErrInvalidPull)
		e.start(c)
		send(t, c.Producer(), tp, "a", "a")
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		require.NoError(t, ds[0].Ack(ctx))
	})
}

// A client in ZooKeeper mode refuses Pull (its engines would fetch
// unfenced from slots other workers own), and nothing is taken.
func TestPullRefusedInZooKeeperMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "pullzk", topic.FixedTime, 2)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // the refusal needs no ZooKeeper
	c := e.client(rmq.WithZooKeeper([]string{addr}))
	send(t, c.Producer(), tp, "a", "a")
	_, err = c.Pull(ctx, []topic.Topic{tp}, 1)
	require.ErrorIs(t, err, rmq.ErrInvalidPull)
	assert.Contains(t, err.Error(), "ZooKeeper mode")
	assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))
}
