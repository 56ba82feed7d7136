package rmq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
)

// allEvents reads the events the rig's topic logged (from "0") until n
// were read.
func allEvents(t *testing.T, r *lifeRig, n int) []rmq.Event {
	t.Helper()
	return takeEventsOf(t, r.c.Events(ctxT(t), r.tp, "0"), n, func(rmq.Event) bool { return true })
}

// typesByID lists each message's event types in log order.
func typesByID(evs []rmq.Event) map[string][]rmq.EventType {
	out := map[string][]rmq.EventType{}
	for _, ev := range evs {
		out[ev.MessageID] = append(out[ev.MessageID], ev.Type)
	}
	return out
}

// A send to a topic with an event log records "sent" once per message
// stored, whatever the path (single, batch, grouped, unique); a refused
// unique send records nothing. A remove records "removed" wherever the
// message waited, and tells its waiters: Wait ends with
// ErrMessageNotFound.
func TestSentAndRemovedEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "sentrm", 4, rmq.Lifecycle{Events: 100})
		p := r.c.Producer()
		at := time.Now().Add(time.Hour)
		_, err := p.SendFixedTime(ctx, r.tp, []byte("a"), at, producer.WithKey("single"))
		require.NoError(t, err)
		_, err = p.SendBatch(ctx, r.tp, []producer.BatchMessage{
			{Body: []byte("b1"), At: at, Key: "batch1"},
			{Body: []byte("b2"), At: at, Key: "batch2"},
		})
		require.NoError(t, err)
		_, err = p.SendFixedTime(ctx, r.tp, []byte("g"), at, producer.WithKey("grouped"), producer.WithGroup("g1"))
		require.NoError(t, err)
		_, err = p.SendFixedTime(ctx, r.tp, []byte("u"), at, producer.WithKey("uniq"), producer.WithUniqueFor(time.Hour))
		require.NoError(t, err)
		_, err = p.SendFixedTime(ctx, r.tp, []byte("u"), at, producer.WithKey("uniq"), producer.WithUniqueFor(time.Hour))
		require.ErrorIs(t, err, producer.ErrDuplicate)

		// A Wait on the single message ends when it is removed.
		waited := make(chan error, 1)
		go func() {
			_, err := r.c.Wait(ctx, r.tp, "single")
			waited <- err
		}()
		// (Polled: registering is Wait's own business, no signal tells it.)
		require.Eventually(t, func() bool {
			n, err := e.rdb.HLen(ctx, keyspace.LifeKeysFor(e.prefix, r.tp.Name(), r.slot("single")).Waiters).Result()
			return err == nil && n == 1
		}, waitLong, 5*time.Millisecond)
		for _, id := range []string{"single", "batch1"} {
			got, err := p.Remove(ctx, r.tp, id)
			require.NoError(t, err)
			require.Equal(t, producer.RemovedWaiting, got, id)
		}
		got, err := p.Remove(ctx, r.tp, "grouped", producer.WithGroup("g1"))
		require.NoError(t, err)
		require.Equal(t, producer.RemovedWaiting, got)
		select {
		case err := <-waited:
			assert.ErrorIs(t, err, rmq.ErrMessageNotFound)
		case <-time.After(waitLong):
			t.Fatal("Wait did not end when its message was removed")
		}
		// Removing again removes and records nothing.
		got, err = p.Remove(ctx, r.tp, "single")
		require.NoError(t, err)
		require.Equal(t, producer.NotFound, got)

		byID := typesByID(allEvents(t, r, 8))
		sent, removed := []rmq.EventType{rmq.EventSent}, []rmq.EventType{rmq.EventSent, rmq.EventRemoved}
		assert.Equal(t, map[string][]rmq.EventType{
			"single": removed, "batch1": removed, "batch2": sent, "grouped": removed, "uniq": sent,
		}, byID)
		for _, s := range []int{0, 1, 2, 3} {
			n, err := e.rdb.XLen(ctx, keyspace.LifeKeysFor(e.prefix, r.tp.Name(), s).Events).Result()
			require.NoError(t, err)
			assert.LessOrEqual(t, n, int64(8))
		}
	})
}

// A topic without an event log gets no log from its sends and removes,
// and their scripts read nothing of one.
func TestSentAndRemovedWithoutEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "sentoff", 2, rmq.Lifecycle{Retention: time.Minute})
		p := r.c.Producer()
		for _, id := range []string{"a", "b"} {
			_, err := p.SendFixedTime(ctx, r.tp, []byte(id), time.Now().Add(time.Hour), producer.WithKey(id))
			require.NoError(t, err)
		}
		_, err := p.Remove(ctx, r.tp, "a")
		require.NoError(t, err)
		for s := range 2 {
			n, err := e.rdb.Exists(ctx, keyspace.LifeKeysFor(e.prefix, r.tp.Name(), s).Events).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "slot %d has an event log", s)
		}
	})
}

// A producer made before the topic's log was turned on records its sends
// from the first send after its next read of the settings; one made after
// records from its first send.
func TestSentEventsFollowTheSettings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "sentlate", 1, rmq.Lifecycle{})
		early := e.client().Producer()
		_, err := early.SendFixedTime(ctx, r.tp, []byte("x"), time.Now().Add(time.Hour), producer.WithKey("before"))
		require.NoError(t, err)
		require.NoError(t, r.insp.SetLifecycle(ctx, r.tp, rmq.Lifecycle{Events: 10}))
		late := e.client().Producer()
		_, err = late.SendFixedTime(ctx, r.tp, []byte("x"), time.Now().Add(time.Hour), producer.WithKey("late"))
		require.NoError(t, err)
		// The early producer reads the settings again within a second:
		// its sends are recorded from then on.
		var ids []string
		require.Eventually(t, func() bool {
			_, err := early.SendFixedTime(ctx, r.tp, []byte("x"), time.Now().Add(time.Hour), producer.WithKey("early"))
			if err != nil && !errors.Is(err, ctx.Err()) {
				t.Error(err)
			}
			n, _ := e.rdb.XLen(ctx, keyspace.LifeKeysFor(e.prefix, r.tp.Name(), 0).Events).Result()
			return n >= 2
		}, waitLong, 50*time.Millisecond)
		for _, ev := range allEvents(t, r, 2) {
			ids = append(ids, ev.MessageID)
		}
		assert.Equal(t, []string{"late", "early"}, ids)
	})
}
