package rmq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/rmq"
)

// Wait hears of a completion after the call, and sees one before it while
// the topic retains the message: both answers carry the record (body,
// result, finish time). Without retention a completion after the call
// answers with the result the word carried, and one before it is gone.
// On a single node and on a cluster, on a client never started.
func TestWaitCompleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "waitc", 4, rmq.Lifecycle{Retention: time.Minute, Events: 100})
		tok := r.sendAndFetch("a")
		w := r.goWait(ctx, "a")
		r.complete("a", tok, "result of a")
		got := recv(t, w)
		require.NoError(t, got.err)
		assert.Equal(t, rmq.StateCompleted, got.m.State)
		assert.Equal(t, "result of a", string(got.m.Result))
		assert.Equal(t, "body-a", string(got.m.Body))
		assert.False(t, got.m.FinishedAt.IsZero())

		// Finished before the call: the record answers at once.
		m, err := r.c.Wait(ctx, r.tp, "a")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateCompleted, m.State)
		assert.Equal(t, "result of a", string(m.Result))

		// No retention: the word's result; after the end, nothing left.
		r0 := newLifeRig(t, e, "waitc0", 4, rmq.Lifecycle{})
		tok = r0.sendAndFetch("b")
		w = r0.goWait(ctx, "b")
		r0.complete("b", tok, "result of b")
		got = recv(t, w)
		require.NoError(t, got.err)
		assert.Equal(t, rmq.MessageInfo{ID: "b", Topic: r0.tp, Slot: r0.slot("b"), State: rmq.StateCompleted, Result: []byte("result of b")}, got.m)
		_, err = r0.c.Wait(ctx, r0.tp, "b")
		assert.ErrorIs(t, err, rmq.ErrMessageNotFound)
		require.NoError(t, r.c.Close(ctx))
		require.NoError(t, r0.c.Close(ctx))
	})
}

// A message that dies ends its Wait with ErrDead and the dead message
// (its last error); one dead before the call too. A cancelled one ends
// it with ErrCancelled, its record kept as cancelled.
func TestWaitDeadAndCancelled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "waitd", 2, rmq.Lifecycle{Retention: time.Minute})
		tok := r.sendAndFetch("d")
		w := r.goWait(ctx, "d")
		r.kill("d", tok, "boom")
		got := recv(t, w)
		require.ErrorIs(t, got.err, rmq.ErrDead)
		assert.Equal(t, rmq.StateDead, got.m.State)
		assert.Equal(t, "boom", got.m.LastError)
		assert.Equal(t, "body-d", string(got.m.Body))
		m, err := r.c.Wait(ctx, r.tp, "d")
		require.ErrorIs(t, err, rmq.ErrDead)
		assert.Equal(t, "boom", m.LastError)

		send(t, r.c.Producer(), r.tp, "x", "body-x")
		w = r.goWait(ctx, "x")
		cancelled, err := r.insp.Cancel(ctx, r.tp, "x")
		require.NoError(t, err)
		require.True(t, cancelled)
		got = recv(t, w)
		require.ErrorIs(t, got.err, rmq.ErrCancelled)
		assert.Equal(t, rmq.StateCancelled, got.m.State)
		assert.Equal(t, "body-x", string(got.m.Body))
		_, err = r.c.Wait(ctx, r.tp, "x")
		require.ErrorIs(t, err, rmq.ErrCancelled)
		require.NoError(t, r.c.Close(ctx))
	})
}

// An id never sent is ErrMessageNotFound at once; a Wait ends with its
// context, and with ErrClosed when its client closes; a closed client
// refuses new waits.
func TestWaitEnds(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	r := newLifeRig(t, e, "waite", 2, rmq.Lifecycle{})
	_, err := r.c.Wait(ctx, r.tp, "never")
	require.ErrorIs(t, err, rmq.ErrMessageNotFound)

	send(t, r.c.Producer(), r.tp, "p", "body-p")
	wctx, cancel := context.WithCancel(ctx)
	w := r.goWait(wctx, "p")
	cancel()
	assert.ErrorIs(t, recv(t, w).err, context.Canceled)

	w = r.goWait(ctx, "p")
	require.NoError(t, r.c.Close(ctx))
	assert.ErrorIs(t, recv(t, w).err, rmq.ErrClosed)
	_, err = r.c.Wait(ctx, r.tp, "p")
	assert.ErrorIs(t, err, rmq.ErrClosed)
}

// 1,000 Wait calls of one client on a topic of 2 slots share one
// subscription per slot's finish channel, and all hear of their ends.
func TestWaitSharesOneSubscriptionPerSlot(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	r := newLifeRig(t, e, "waitn", 2, rmq.Lifecycle{})
	const n = 1000
	ids := make([]string, n)
	for j := range ids {
		ids[j] = fmt.Sprintf("m%04d", j)
		send(t, r.c.Producer(), r.tp, ids[j], "b")
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.c.Wait(ctx, r.tp, id)
			errs <- err
		}()
	}
	for _, id := range ids {
		r.waitRegistered(id, 1)
	}
	for s := range r.tp.SlotAmount() {
		ch := keyspace.LifeKeysFor(e.prefix, r.tp.Name(), s).Finish
		subs, err := e.rdb.PubSubNumSub(ctx, ch).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), subs[ch], "subscriptions of slot %d", s)
	}
	for _, id := range ids {
		ok, err := r.insp.Cancel(ctx, r.tp, id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, rmq.ErrCancelled)
	}
	require.NoError(t, r.c.Close(ctx))
}

// A Wait whose subscription drops reads the message's state again once it
// is subscribed again: a cancel made while it was down, its word heard by
// nobody, still ends the Wait. The waiting client reaches Redis through a
// proxy that cuts its connections and then delays what it sends, which
// holds the new subscription back while the cancel runs.
func TestWaitRechecksAfterLostSubscription(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	proxy, err := faultproxy.Start(e.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newLifeRig(t, e, "waitr", 2, rmq.Lifecycle{Retention: time.Minute})
	r.c = e.clientOn(rdb)
	send(t, r.c.Producer(), r.tp, "k", "body-k")
	w := r.goWait(ctx, "k")
	ch := r.lk("k").Finish
	proxy.SetDelay(300*time.Millisecond, 0) // the window the word is lost in
	proxy.CutAll()
	require.Eventually(t, func() bool {
		subs, err := e.rdb.PubSubNumSub(ctx, ch).Result()
		return err == nil && subs[ch] == 0
	}, waitLong, time.Millisecond, "the subscription never dropped")
	ok, err := r.insp.Cancel(ctx, r.tp, "k")
	require.NoError(t, err)
	require.True(t, ok)
	subs, err := e.rdb.PubSubNumSub(ctx, ch).Result()
	require.NoError(t, err)
	require.Zero(t, subs[ch], "subscribed again before the cancel: the word was not lost")
	proxy.SetDelay(0, 0)
	got := recv(t, w)
	require.ErrorIs(t, got.err, rmq.ErrCancelled)
	assert.Equal(t, rmq.StateCancelled, got.m.State)
	require.NoError(t, r.c.Close(ctx))
}
