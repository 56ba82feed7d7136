package rmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Cancel removes a waiting message and an in-flight one (whose ack is
// refused afterwards), keeps them as cancelled on a retaining topic, and
// answers false for an unknown, finished or dead id, writing nothing.
func TestInspectorCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "cancel", 4, rmq.Lifecycle{Retention: time.Minute, Events: 100})

		send(t, r.c.Producer(), r.tp, "w", "body-w")
		ok, err := r.insp.Cancel(ctx, r.tp, "w")
		require.NoError(t, err)
		assert.True(t, ok)
		m, err := r.insp.Message(ctx, r.tp, "w")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateCancelled, m.State)
		assert.Equal(t, "body-w", string(m.Body))
		assert.False(t, m.FinishedAt.IsZero())

		tok := r.sendAndFetch("f")
		ok, err = r.insp.Cancel(ctx, r.tp, "f")
		require.NoError(t, err)
		assert.True(t, ok)
		k := e.keys(r.tp, r.slot("f"))
		res, err := scripts.Ack.Run(ctx, e.rdb, []string{k.Store, k.Prepare, k.Msg, k.Wake, k.Store, k.Dead}, "", 1, "f", tok).Int64Slice()
		require.NoError(t, err)
		assert.Equal(t, []int64{0}, res, "the cancelled delivery's ack is refused")
		m, err = r.insp.Message(ctx, r.tp, "f")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateCancelled, m.State)

		// Twice, unknown, completed, dead: false, and nothing written.
		tok = r.sendAndFetch("c")
		r.complete("c", tok, "done")
		tok = r.sendAndFetch("d")
		r.kill("d", tok, "boom")
		before := e.dump()
		for _, id := range []string{"w", "f", "nope", "c", "d"} {
			ok, err = r.insp.Cancel(ctx, r.tp, id)
			require.NoError(t, err)
			assert.False(t, ok, id)
		}
		assert.Equal(t, before, e.dump(), "a cancel of nothing writes nothing")
	})
}

// Events yields the recorded transitions from "0", resumes right after a
// cursor, follows new ones from "", and refuses a bad cursor with one
// error.
func TestClientEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "events", 4, rmq.Lifecycle{Events: 100})
		tok := r.sendAndFetch("c")
		r.complete("c", tok, "res")
		tok = r.sendAndFetch("d")
		r.kill("d", tok, "boom")
		send(t, r.c.Producer(), r.tp, "x", "body-x")
		_, err := r.insp.Cancel(ctx, r.tp, "x")
		require.NoError(t, err)

		all := takeEvents(t, r.c.Events(ctx, r.tp, "0"), 3)
		byID := map[string]rmq.Event{}
		for _, ev := range all {
			byID[ev.MessageID] = ev
			assert.NotEmpty(t, ev.Cursor)
			assert.WithinDuration(t, time.Now(), ev.Time, time.Minute)
		}
		assert.Equal(t, rmq.EventCompleted, byID["c"].Type)
		assert.Equal(t, "res", string(byID["c"].Data))
		assert.Equal(t, 1, byID["c"].Attempt)
		assert.Equal(t, rmq.EventDead, byID["d"].Type)
		assert.Equal(t, "boom", string(byID["d"].Data))
		assert.Equal(t, rmq.EventCancelled, byID["x"].Type)

		// Resuming after the first yields the other two, then a new one.
		next, stop := follow(t, r, all[0].Cursor)
		defer stop()
		// (Slots are read side by side: their events may interleave in
		// another order than before, none is yielded twice.)
		want, got := map[string]rmq.EventType{}, map[string]rmq.EventType{}
		for _, ev := range all[1:] {
			want[ev.MessageID] = ev.Type
			ev, err := next()
			require.NoError(t, err)
			got[ev.MessageID] = ev.Type
		}
		assert.Equal(t, want, got)
		send(t, r.c.Producer(), r.tp, "y", "body-y")
		_, err = r.insp.Cancel(ctx, r.tp, "y")
		require.NoError(t, err)
		ev, err := next()
		require.NoError(t, err)
		assert.Equal(t, "y", ev.MessageID)
		assert.Equal(t, rmq.EventCancelled, ev.Type)

		// "": only what is recorded from now on. The follower reads the
		// logs' ends as it starts, so an event recorded meanwhile may fall
		// either side: new ones are recorded until one arrives.
		next2, stop2 := follow(t, r, "")
		defer stop2()
		quit, fed := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(fed)
			for j := 0; ; j++ {
				id := fmt.Sprintf("z%d", j)
				_, _ = r.c.Producer().SendFixedTime(ctx, r.tp, []byte("z"), time.Now(), producer.WithKey(id))
				_, _ = r.insp.Cancel(ctx, r.tp, id)
				select {
				case <-quit:
					return
				case <-time.After(10 * time.Millisecond): // a pace, not a wait for something
				}
			}
		}()
		ev, err = next2()
		close(quit)
		<-fed
		require.NoError(t, err)
		assert.Equal(t, rmq.EventCancelled, ev.Type)
		assert.Equal(t, "z", ev.MessageID[:1], "an event recorded before the call: %+v", ev)

		for _, bad := range []string{"x", "e1 99=1-0", "e1 0=abc"} {
			n := 0
			for _, err := range r.c.Events(ctx, r.tp, bad) {
				n++
				assert.ErrorIs(t, err, rmq.ErrInvalidEventCursor, bad)
			}
			assert.Equal(t, 1, n, bad)
		}
	})
}

// takeEvents takes n events from seq, passing over "sent" and
// "delivered" (the tests of sends and fetches check those), and stops it.
func takeEvents(t *testing.T, seq func(func(rmq.Event, error) bool), n int) []rmq.Event {
	t.Helper()
	return takeEventsOf(t, seq, n, func(ev rmq.Event) bool { return !handOff(ev) })
}

// handOff reports whether ev is of the hand-off ("sent", "delivered").
func handOff(ev rmq.Event) bool { return ev.Type == rmq.EventSent || ev.Type == rmq.EventDelivered }

// takeEventsOf takes n events that keep from seq and stops it.
func takeEventsOf(t *testing.T, seq func(func(rmq.Event, error) bool), n int, keep func(rmq.Event) bool) []rmq.Event {
	t.Helper()
	var out []rmq.Event
	for ev, err := range seq {
		require.NoError(t, err)
		if err == nil && !keep(ev) {
			continue
		}
		out = append(out, ev)
		if len(out) == n {
			break
		}
	}
	return out
}

// follow follows r's topic's events after after on a goroutine: next
// returns the next one (failing after waitLong), stop ends the follow.
func follow(t *testing.T, r *lifeRig, after string) (next func() (rmq.Event, error), stop func()) {
	type item struct {
		ev  rmq.Event
		err error
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range r.c.Events(ctx, r.tp, after) {
			if err == nil && handOff(ev) {
				continue
			}
			select {
			case ch <- item{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	next = func() (rmq.Event, error) {
		select {
		case x := <-ch:
			return x.ev, x.err
		case <-time.After(waitLong):
			return rmq.Event{}, context.DeadlineExceeded
		}
	}
	return next, func() { cancel(); <-done }
}

// SetLifecycle stores valid settings and tells the topic's consumers on
// every slot's wake channel; out-of-bounds ones are refused with
// ErrInvalidLifecycle and nothing is written or told.
func TestInspectorSetLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeset", topic.FixedTime, 2)
	insp := e.client().Inspector()
	got, err := insp.Lifecycle(ctx, tp)
	require.NoError(t, err)
	assert.Zero(t, got)

	var chans []string
	for s := range tp.SlotAmount() {
		chans = append(chans, e.keys(tp, s).Wake)
	}
	sub := e.rdb.(*redis.Client).Subscribe(ctx, chans...)
	defer sub.Close()
	for range chans {
		_, err := sub.Receive(ctx)
		require.NoError(t, err)
	}

	before := e.dump()
	for _, bad := range []rmq.Lifecycle{{Retention: -time.Second}, {Retention: 31 * 24 * time.Hour},
		{Retention: time.Microsecond}, {Events: -1}, {Events: 10_000_001}} {
		assert.ErrorIs(t, insp.SetLifecycle(ctx, tp, bad), rmq.ErrInvalidLifecycle, "%+v", bad)
	}
	assert.Equal(t, before, e.dump(), "a refused change writes nothing")
	_, err = e.rdb.HGet(ctx, keyspace.LifeSettingsKey(e.prefix), tp.Name()).Result()
	assert.ErrorIs(t, err, redis.Nil)

	want := rmq.Lifecycle{Retention: 90 * time.Second, Events: 500}
	require.NoError(t, insp.SetLifecycle(ctx, tp, want))
	got, err = insp.Lifecycle(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	told := map[string]bool{}
	for range chans {
		msg, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		assert.Equal(t, "L", msg.Payload, "the payload new limits use: read again")
		told[msg.Channel] = true
	}
	assert.Len(t, told, len(chans), "every slot told")
}
