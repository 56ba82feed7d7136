package rmq_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// tickMs is the tick instant in a tick's id, "<name>@<ms>".
func tickMs(t *testing.T, id string) int64 {
	t.Helper()
	_, ms, ok := strings.Cut(id, "@")
	require.True(t, ok, "tick id %q", id)
	v, err := strconv.ParseInt(ms, 10, 64)
	require.NoError(t, err, "tick id %q", id)
	return v
}

// collect gathers deliveries until the deadline.
func collect(r *recorder, until time.Time) []delivery {
	var out []delivery
	for {
		select {
		case d := <-r.ch:
			out = append(out, d)
		case <-time.After(time.Until(until)):
			return out
		}
	}
}

// checkTicks asserts that ds are ticks of name with distinct ids, one per
// interval with none missing, each its key's instant as DueAt (fixed-time)
// and none delivered before it (every 0: no check of the interval). It
// returns the ticks sorted.
func checkTicks(t *testing.T, name string, ds []delivery, every time.Duration) []int64 {
	t.Helper()
	seen := map[string]int{}
	var ticks []int64
	for _, d := range ds {
		require.True(t, strings.HasPrefix(d.ID, name+"@"), "id %s", d.ID)
		seen[d.ID]++
		ms := tickMs(t, d.ID)
		ticks = append(ticks, ms)
		if !d.DueAt.IsZero() {
			assert.Equal(t, ms, d.DueAt.UnixMilli(), "DueAt of %s", d.ID)
		}
		assert.False(t, d.At.Before(time.UnixMilli(ms)), "%s delivered %v early", d.ID, time.UnixMilli(ms).Sub(d.At))
	}
	for id, n := range seen {
		assert.Equal(t, 1, n, "tick %s delivered %d times", id, n)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	for i := 1; i < len(ticks); i++ {
		if every > 0 && ticks[i] != ticks[i-1] {
			assert.Equal(t, every.Milliseconds(), ticks[i]-ticks[i-1], "ticks %d and %d are not consecutive", ticks[i-1], ticks[i])
		}
	}
	return ticks
}

// Three clients run one schedule of every second for 10 s: exactly 10 ticks
// in the 10 s from the first, distinct and consecutive, none early.
func TestScheduleFleetFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "ticks", topic.FixedTime, 4)
		rec := newRecorder(nil)
		var clients []*rmq.Client
		for range 3 {
			c := e.client()
			require.NoError(t, c.Register(tp, rec))
			e.start(c)
			clients = append(clients, c)
		}
		s := clients[0].Schedules()
		require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "every-second", Spec: "* * * * * *", Topic: tp, Body: []byte("tick")}))
		info, err := s.Get(ctx, "every-second")
		require.NoError(t, err)
		// Ten seconds of ticks from the first, and time to deliver the last.
		first := info.Next
		ds := collect(rec, first.Add(10*time.Second+time.Second))
		ticks := checkTicks(t, "every-second", ds, time.Second)
		var in, late []time.Duration
		for _, d := range ds {
			at := time.UnixMilli(tickMs(t, d.ID))
			if at.Before(first.Add(10 * time.Second)) {
				in = append(in, at.Sub(first))
			}
			late = append(late, d.At.Sub(at))
		}
		assert.Len(t, in, 10, "ticks in the 10 s from the first: %v", in)
		assert.Equal(t, first.UnixMilli(), ticks[0], "the first tick")
		t.Logf("%d ticks, lateness %v", len(ticks), late)
		for _, d := range ds {
			assert.Equal(t, "tick", d.Body)
		}
		info, err = clients[1].Schedules().Get(ctx, "every-second")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, info.Fired, int64(len(ticks)))
		assert.Zero(t, info.Skipped)
		assert.True(t, info.Next.After(info.LastFired), "next %v after last %v", info.Next, info.LastFired)
	})
}

// Trigger fires once more now; Get and List read back what Set stored.
func TestScheduleTriggerGetList(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "reports", topic.Priority, 2)
		berlin, err := time.LoadLocation("Europe/Berlin")
		require.NoError(t, err)
		rec := newRecorder(nil)
		c := e.client()
		require.NoError(t, c.Register(tp, rec))
		e.start(c)
		s := c.Schedules()
		sc := rmq.Schedule{
			Name: "nightly", Spec: "0 2 * * *", Location: berlin, Topic: tp, Priority: 40, Body: []byte("rebuild"),
			Options: []producer.SendOption{producer.WithHeaders(map[string]string{"team": "reports"}), producer.WithMaxRetries(3), producer.WithTTL(time.Hour)},
			CatchUp: 2 * time.Hour,
		}
		require.NoError(t, s.Set(ctx, sc))
		info, err := s.Get(ctx, "nightly")
		require.NoError(t, err)
		assert.Equal(t, "0 2 * * *", info.Spec)
		assert.Equal(t, "Europe/Berlin", info.Location.String())
		assert.Equal(t, int64(40), info.Priority)
		assert.Equal(t, "rebuild", string(info.Body))
		assert.Equal(t, 2*time.Hour, info.CatchUp)
		assert.Equal(t, producer.RecurringOptions{MaxRetries: 3, TTL: time.Hour, Headers: map[string]string{"team": "reports"}}, info.Message)
		want, err := rmq.NextTicks("0 2 * * *", berlin, time.Now(), 1)
		require.NoError(t, err)
		assert.True(t, want[0].Equal(info.Next), "next %v, want %v", info.Next, want[0])
		assert.Zero(t, info.Fired)
		assert.True(t, info.LastFired.IsZero())

		id, err := s.Trigger(ctx, "nightly")
		require.NoError(t, err)
		d := rec.next(t, waitLong)
		assert.Equal(t, id, d.ID)
		assert.Equal(t, int64(40), d.Priority)
		assert.Equal(t, "rebuild", d.Body)
		rec.none(t, 300*time.Millisecond) // the trigger sends one message, not two
		info, err = s.Get(ctx, "nightly")
		require.NoError(t, err)
		assert.Equal(t, int64(1), info.Fired)
		assert.Equal(t, tickMs(t, id), info.LastFired.UnixMilli())

		require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "a-first", Spec: "@every 1h", Topic: tp, Priority: 20, Body: []byte("x"), Paused: true}))
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "a-first", list[0].Name)
		assert.True(t, list[0].Paused)
		assert.True(t, list[0].Next.IsZero())
		assert.Equal(t, "nightly", list[1].Name)

		_, err = s.Trigger(ctx, "missing")
		assert.ErrorIs(t, err, rmq.ErrScheduleNotFound)
		_, err = s.Get(ctx, "missing")
		assert.ErrorIs(t, err, rmq.ErrScheduleNotFound)
		assert.ErrorIs(t, s.Pause(ctx, "missing"), rmq.ErrScheduleNotFound)
		assert.ErrorIs(t, s.Resume(ctx, "missing"), rmq.ErrScheduleNotFound)
		assert.ErrorIs(t, s.Remove(ctx, "missing"), rmq.ErrScheduleNotFound)
	})
}

// A tick's message carries the schedule's header, and ScheduleTick reads
// its instant, a priority tick's too.
func TestScheduleTickOfMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "prio-ticks", topic.Priority, 1)
	got := make(chan *consumer.Message, 4)
	c := e.client()
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- m
		return nil
	})))
	e.start(c)
	require.NoError(t, c.Schedules().Set(ctx, rmq.Schedule{Name: "p", Spec: "@every 1s", Topic: tp, Priority: 99, Body: []byte("b")}))
	select {
	case m := <-got:
		name, tick, ok := rmq.ScheduleTick(m)
		require.True(t, ok)
		assert.Equal(t, "p", name)
		assert.Equal(t, fmt.Sprintf("p@%d", tick.UnixMilli()), m.ID)
		assert.False(t, m.FetchedAt.Before(tick), "fetched %v before the tick", tick.Sub(m.FetchedAt))
		assert.True(t, m.DueAt.IsZero())
	case <-time.After(waitLong):
		t.Fatal("no tick")
	}
	_, _, ok := rmq.ScheduleTick(&consumer.Message{ID: "x@1"})
	assert.False(t, ok)
}
