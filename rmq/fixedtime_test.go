package rmq_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A fixed-time message is never handled before its time (Redis runs on this
// machine, so the local clock is Redis's clock), and not much after it.
func TestFixedTimeNeverEarly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "orders", topic.FixedTime, 4)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec))
		e.start(c)

		base := time.Now()
		at := map[string]time.Time{}
		for i := range 6 {
			key := fmt.Sprintf("order-%d", i)
			at[key] = base.Add(time.Duration(200+i*250) * time.Millisecond)
			id, err := c.Producer().SendFixedTime(ctx, tp, []byte("body "+key), at[key], producer.WithKey(key))
			require.NoError(t, err)
			require.Equal(t, key, id)
		}

		for _, d := range rec.nextN(t, len(at), waitLong) {
			want := at[d.ID]
			// Due times are kept in ms rounded up: never before the instant.
			assert.False(t, d.DueAt.Before(want), "DueAt of %s before its time", d.ID)
			assert.Less(t, d.DueAt.Sub(want), time.Millisecond, "DueAt of %s", d.ID)
			assert.False(t, d.At.Before(want), "%s handled %v before its time", d.ID, want.Sub(d.At))
			assert.Less(t, d.At.Sub(want), 3*time.Second, "%s handled far too late", d.ID)
			assert.Equal(t, 1, d.Attempt)
			assert.Equal(t, "body "+d.ID, d.Body)
		}
		rec.drained(t, e, tp, counts{})
	})
}

// Several due messages spread over 8 slots leave in ascending time order,
// whatever order they were sent in and whatever slot they sit in.
func TestFixedTimeEarliestFirst(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "due", topic.FixedTime, 8)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))

		now := time.Now()
		type msg struct {
			key string
			at  time.Time
		}
		var msgs []msg
		for i := range 10 {
			// Half in the past, half due within the next second.
			msgs = append(msgs, msg{fmt.Sprintf("m%02d", i), now.Add(time.Duration(i-5) * 200 * time.Millisecond)})
		}
		shuffled := append([]msg(nil), msgs...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		usedSlots := map[int]bool{}
		for _, m := range shuffled {
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(m.key), m.at, producer.WithKey(m.key))
			require.NoError(t, err)
			usedSlots[slotOfKey(tp, m.key)] = true
		}
		require.GreaterOrEqual(t, len(usedSlots), 3, "the keys should spread over several slots")
		e.start(c)

		atOf := map[string]time.Time{}
		var want []string
		for _, m := range msgs {
			want = append(want, m.key)
			atOf[m.key] = m.at
		}
		got := rec.nextN(t, len(msgs), waitLong)
		var order []string
		for _, d := range got {
			order = append(order, d.ID)
			assert.Equal(t, slotOfKey(tp, d.ID), d.Slot)
			assert.Equal(t, ceilMs(atOf[d.ID]), d.DueAt.UnixMilli())
			assert.False(t, d.At.Before(atOf[d.ID]), "%s handled before its time", d.ID)
		}
		require.Equal(t, want, order, "handled out of time order")
		e.eventuallyCounts(tp, counts{})
	})
}

// A re-send of the same key replaces the due time: one delivery, at the new
// time, whether the new time is earlier or later.
func TestFixedTimeResendReplacesTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		first, then time.Duration
	}{
		{"earlier", 3 * time.Second, 600 * time.Millisecond},
		{"later", 300 * time.Millisecond, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, e *env) {
				ctx := ctxT(t)
				tp := mustTopic(t, "resend", topic.FixedTime, 4)
				c := e.client()
				rec := newRecorder(nil)
				require.NoError(t, c.Register(tp, rec))
				e.start(c)

				base := time.Now()
				first, then := base.Add(tc.first), base.Add(tc.then)
				_, err := c.Producer().SendFixedTime(ctx, tp, []byte("v1"), first, producer.WithKey("k"))
				require.NoError(t, err)
				_, err = c.Producer().SendFixedTime(ctx, tp, []byte("v2"), then, producer.WithKey("k"))
				require.NoError(t, err)
				require.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp), "one message, not two")
				score, ok := e.zscore(e.keys(tp, slotOfKey(tp, "k")).Store, "k")
				require.True(t, ok)
				require.Equal(t, float64(ceilMs(then)), score)

				d := rec.next(t, waitLong)
				assert.Equal(t, "k", d.ID)
				assert.Equal(t, "v2", d.Body)
				assert.Equal(t, ceilMs(then), d.DueAt.UnixMilli())
				assert.False(t, d.At.Before(then.Truncate(time.Millisecond)), "handled %v before the new time", then.Sub(d.At))
				if tc.then < tc.first {
					assert.True(t, d.At.Before(first), "the earlier time did not take effect")
				}
				// Nothing at the old time (or ever again): were it still
				// waiting there, the topic would drain only once it came.
				rec.drained(t, e, tp, counts{})
			})
		})
	}
}

// ceilMs is t in Unix ms rounded up, as due times are stored (never early).
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}
