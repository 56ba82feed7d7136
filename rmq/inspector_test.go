package rmq_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// The whole life of a dead queue: messages die for real (a consumer with
// WithMaxRetries(0) fails them), show up in Stats, Dead and DeadMessage
// with what killed them, are requeued and delivered again as fresh
// messages, deleted, purged.
func TestInspectorDeadQueue(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "orders", topic.FixedTime, 4)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	before := time.Now().Add(-time.Second)
	e.makeDead(tp, keys...)
	after := time.Now().Add(time.Second)
	insp := e.client().Inspector()

	st, err := insp.Stats(ctx, tp)
	require.NoError(t, err)
	assert.EqualValues(t, 10, st.Dead)
	assert.Zero(t, st.Store)
	assert.Zero(t, st.Prepare)
	require.Len(t, st.Slots, 4)
	var sum int64
	for s, ss := range st.Slots {
		assert.Equal(t, s, ss.Slot)
		n, err := e.rdb.ZCard(ctx, e.keys(tp, s).Dead).Result()
		require.NoError(t, err)
		assert.Equal(t, n, ss.Dead, "slot %d", s)
		sum += ss.Dead
	}
	assert.EqualValues(t, 10, sum)
	assert.False(t, st.OldestDeath.After(st.NewestDeath))
	assert.True(t, st.OldestDeath.After(before) && st.NewestDeath.Before(after), "deaths %v..%v", st.OldestDeath, st.NewestDeath)

	page, err := insp.Dead(ctx, tp)
	require.NoError(t, err)
	require.Len(t, page, 10)
	assert.ElementsMatch(t, keys, ids(page))
	for j, m := range page {
		if j > 0 {
			assert.False(t, m.DiedAt.After(page[j-1].DiedAt), "newest first")
		}
		assert.Equal(t, "orders", m.Topic)
		assert.Equal(t, slotOfKey(tp, m.ID), m.Slot)
		assert.Equal(t, "body-"+m.ID, string(m.Body))
		assert.Equal(t, 1, m.Attempts)
		assert.Equal(t, "failed "+m.ID, m.LastError)
		assert.False(t, m.FirstSentAt.After(m.DiedAt), "sent %v after death %v", m.FirstSentAt, m.DiedAt)
		assert.True(t, m.FirstSentAt.After(before))
		assert.False(t, m.DueAt.IsZero())
		assert.Zero(t, m.Priority)
	}
	one, err := insp.DeadMessage(ctx, tp, "k3")
	require.NoError(t, err)
	i3 := slices.Index(ids(page), "k3")
	assert.Equal(t, page[i3], one)
	_, err = insp.DeadMessage(ctx, tp, "nope")
	assert.ErrorIs(t, err, rmq.ErrMessageNotFound)

	// Requeued messages come back fresh: attempt 1, no last error.
	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	n, err := insp.Requeue(ctx, tp, "k1", "k2", "nope", "k1", "")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	got := rec.nextN(t, 2, waitLong)
	sort.Slice(got, func(a, b int) bool { return got[a].ID < got[b].ID })
	for j, d := range got {
		assert.Equal(t, keys[j+1], d.ID)
		assert.Equal(t, 1, d.Attempt)
		assert.Empty(t, d.LastError)
		assert.Equal(t, "body-"+d.ID, d.Body)
	}
	rec.drained(t, e, tp, counts{Dead: 8, DeadMsg: 8})
	n, err = insp.Requeue(ctx, tp, "k1")
	require.NoError(t, err)
	assert.Zero(t, n, "requeued twice")

	n, err = insp.DeleteDead(ctx, tp, "k3", "k4", "k1")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = insp.DeadMessage(ctx, tp, "k3")
	assert.ErrorIs(t, err, rmq.ErrMessageNotFound)
	e.eventuallyCounts(tp, counts{Dead: 6, DeadMsg: 6})

	n, err = insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	rec.drained(t, e, tp, counts{})
	n, err = insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	assert.Zero(t, n)
	rec.nothingYet(t)
}

// Paging walks the whole dead queue in the global order (newest first, then
// slot, then id descending) with any page size, also through large groups
// of equal times of death spread over slots, and reads only a few entries
// per page.
func TestInspectorDeadPaging(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "paging", topic.FixedTime, 8)
	type entry struct {
		id    string
		slot  int
		score float64
	}
	var want []entry
	base := float64(time.Now().Add(-time.Hour).UnixMilli())
	for s := range 8 {
		var ids []string
		n := 150 - 15*s // uneven slots; slot 7 holds 45
		for j := range n {
			ids = append(ids, fmt.Sprintf("s%d-%03d", s, j))
		}
		score := func(j int) float64 { return base + float64((j%3)*1000) } // three times of death only
		e.fakeDead(tp, s, ids, score)
		for j, id := range ids {
			want = append(want, entry{id, s, score(j)})
		}
	}
	sort.Slice(want, func(a, b int) bool {
		x, y := want[a], want[b]
		if x.score != y.score {
			return x.score > y.score
		}
		if x.slot != y.slot {
			return x.slot < y.slot
		}
		return x.id > y.id
	})
	wantIDs := make([]string, len(want))
	for j, w := range want {
		wantIDs[j] = w.id
	}

	rdb := e.newRedis()
	reads := newZRangeCounter()
	rdb.AddHook(redistest.Observer{After: reads.count})
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(e.prefix))
	for _, limit := range []int{1, 7, 100, 333, 10000} {
		reads.reset()
		got := allDead(t, insp, tp, limit)
		require.Equal(t, wantIDs, ids(got), "limit %d", limit)
		pages := len(want)/limit + 1
		assert.LessOrEqual(t, reads.n(), int64(pages*(4*limit+2*8)), "limit %d: read %d entries in %d pages", limit, reads.n(), pages)
	}

	// A cursor whose message was requeued or deleted in between still
	// continues at the right place.
	page, err := insp.Dead(ctx, tp, rmq.WithLimit(50))
	require.NoError(t, err)
	require.Equal(t, wantIDs[:50], ids(page))
	last := page[49]
	n, err := insp.DeleteDead(ctx, tp, last.ID, wantIDs[48], wantIDs[60])
	require.NoError(t, err)
	require.Equal(t, 3, n)
	next, err := insp.Dead(ctx, tp, rmq.WithLimit(50), rmq.WithCursor(last.Cursor()))
	require.NoError(t, err)
	rest := slices.Delete(slices.Clone(wantIDs[50:101]), 10, 11) // without wantIDs[60]
	assert.Equal(t, rest, ids(next))

	// Messages that die while one pages are newer than the cursor: not shown.
	e.fakeDead(tp, 0, []string{"newcomer"}, func(int) float64 { return base + 5000 })
	next2, err := insp.Dead(ctx, tp, rmq.WithLimit(50), rmq.WithCursor(last.Cursor()))
	require.NoError(t, err)
	assert.Equal(t, ids(next), ids(next2))
	first, err := insp.Dead(ctx, tp, rmq.WithLimit(1))
	require.NoError(t, err)
	assert.Equal(t, []string{"newcomer"}, ids(first))
}

// A million dead messages: the first page, a page deep inside and Stats
// come back without loading the queue; PurgeDead deletes it at once.
func TestInspectorMillionDead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a million dead messages")
	}
	t.Parallel()
	e := newEnvOn(t, startDedicated(t))
	t.Cleanup(func() { checkNoOrphans(t, e.rdb, e.prefix) })
	ctx := ctxT(t)
	tp := mustTopic(t, "huge", topic.FixedTime, 16)
	require.NoError(t, topicstore.Define(ctx, e.rdb, keyspace.TopicsKey(e.prefix), tp))
	const perSlot, chunks = 62_500, 10
	base := time.Now().Add(-24 * time.Hour).UnixMilli()
	// Built inside Redis to keep the test fast, in scripts of 6,250
	// messages: a longer one can outlast the client's read timeout on a
	// loaded machine, and the client's retry then meets BUSY. The
	// envelopes are the ones rollback.lua writes.
	const build = `
for i = tonumber(ARGV[4]) + 1, tonumber(ARGV[4]) + tonumber(ARGV[1]) do
  local id = 'm' .. ARGV[3] .. '-' .. i
  local died = tonumber(ARGV[2]) + i
  local err = 'failed ' .. id
  redis.call('ZADD', KEYS[1], died, id)
  redis.call('HSET', KEYS[2], id, struct.pack('>BBHddddH', 1, 3, 1, died - 1000, died, died, 0, #err) .. err .. 'body-' .. id)
end
return 1`
	for s := range 16 {
		k := e.keys(tp, s)
		for c := range chunks {
			require.NoError(t, e.rdb.Eval(ctx, build, []string{k.Dead, k.DeadMsg}, perSlot/chunks, base+int64(s)*7, s, c*perSlot/chunks).Err())
		}
	}
	rdb := e.newRedis()
	reads := newZRangeCounter()
	rdb.AddHook(redistest.Observer{After: reads.count})
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(e.prefix))

	st, err := insp.Stats(ctx, tp)
	require.NoError(t, err)
	assert.EqualValues(t, 16*perSlot, st.Dead)

	reads.reset()
	page, err := insp.Dead(ctx, tp, rmq.WithLimit(100))
	require.NoError(t, err)
	require.Len(t, page, 100)
	assert.Equal(t, fmt.Sprintf("m15-%d", perSlot), page[0].ID, "the newest death")
	assert.Less(t, reads.n(), int64(1000), "a page read %d entries", reads.n())
	for j := 1; j < len(page); j++ {
		assert.False(t, page[j].DiedAt.After(page[j-1].DiedAt))
	}

	// Deep inside: continue after a message half-way down.
	mid, err := insp.DeadMessage(ctx, tp, "m3-31250")
	require.NoError(t, err)
	reads.reset()
	deep, err := insp.Dead(ctx, tp, rmq.WithLimit(100), rmq.WithCursor(mid.Cursor()))
	require.NoError(t, err)
	require.Len(t, deep, 100)
	assert.Less(t, reads.n(), int64(1000), "a deep page read %d entries", reads.n())
	assert.False(t, deep[0].DiedAt.After(mid.DiedAt))
	assert.Equal(t, "body-"+deep[0].ID, string(deep[0].Body))

	n, err := insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, 16*perSlot, n)
	assert.Equal(t, []string{keyspace.TopicsKey(e.prefix)}, e.keysNow())
}

// Requeue into a slot where the same id waits, is in flight, or is absent,
// for each type: never two copies of an id in store, never a body without
// its entry, and the merge rules of the type.
func TestInspectorRequeueMerges(t *testing.T) {
	t.Parallel()
	for _, typ := range []topic.Type{topic.RangeMerge, topic.FixedTime, topic.Priority} {
		t.Run(typ.String(), func(t *testing.T) {
			t.Parallel()
			e := newCheckedEnv(t)
			ctx := ctxT(t)
			tp := mustTopic(t, "merge", typ, 4)
			e.makeDead(tp, "fresh", "waiting", "high")
			insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
			p := e.client().Producer()
			deadEnv, ok := e.envelope(e.keys(tp, slotOfKey(tp, "fresh")).DeadMsg, "fresh")
			require.True(t, ok)

			// Nothing with that id waits: stored as a fresh message.
			t0 := time.Now().UnixMilli()
			n, err := insp.Requeue(ctx, tp, "fresh")
			require.NoError(t, err)
			require.Equal(t, 1, n)
			k := e.keys(tp, slotOfKey(tp, "fresh"))
			score, ok := e.zscore(k.Store, "fresh")
			require.True(t, ok)
			if typ.TimeBased() {
				assert.InDelta(t, float64(t0), score, 2000, "due now")
			} else {
				assert.EqualValues(t, 100, score, "its original priority")
			}
			env, ok := e.envelope(k.Msg, "fresh")
			require.True(t, ok)
			assert.Zero(t, env.Failures)
			assert.Empty(t, env.LastError)
			assert.Equal(t, "body-fresh", string(env.Body))
			assert.Equal(t, deadEnv.FirstSentMs, env.FirstSentMs, "first-sent time kept")
			_, ok = e.zscore(k.Dead, "fresh")
			assert.False(t, ok)
			_, ok = e.envelope(k.DeadMsg, "fresh")
			assert.False(t, ok)

			// A newer message with the same id waits: they merge into it.
			later := time.Now().Add(time.Hour)
			sendAt(t, p, tp, "waiting", "new-waiting", later, 30)
			k = e.keys(tp, slotOfKey(tp, "waiting"))
			waitingScore, _ := e.zscore(k.Store, "waiting")
			t0 = time.Now().UnixMilli()
			n, err = insp.Requeue(ctx, tp, "waiting")
			require.NoError(t, err)
			require.Equal(t, 1, n)
			score, ok = e.zscore(k.Store, "waiting")
			require.True(t, ok)
			switch typ {
			case topic.RangeMerge:
				assert.Equal(t, waitingScore, score, "range-merge keeps the waiting due time")
			case topic.FixedTime:
				assert.InDelta(t, float64(t0), score, 2000, "fixed-time: the earlier of the two, now")
			case topic.Priority:
				assert.EqualValues(t, 100, score, "priority: the higher of the two")
			}
			env, ok = e.envelope(k.Msg, "waiting")
			require.True(t, ok)
			assert.Equal(t, "new-waiting", string(env.Body), "the waiting (newer) body is kept")
			if typ == topic.Priority {
				assert.EqualValues(t, 100, env.OrigScore, "Message.Priority matches the score")
			}

			// A waiting message that would go sooner is not delayed.
			if typ != topic.RangeMerge {
				sendAt(t, p, tp, "high", "new-high", time.Now().Add(-time.Hour), 500)
				k = e.keys(tp, slotOfKey(tp, "high"))
				was, _ := e.zscore(k.Store, "high")
				n, err = insp.Requeue(ctx, tp, "high")
				require.NoError(t, err)
				require.Equal(t, 1, n)
				score, _ = e.zscore(k.Store, "high")
				assert.Equal(t, was, score, "a requeue never delays a waiting message")
			}

			// The id is being handled: stored again, delivered after. (A
			// topic of its own, so the fetch takes that message.)
			tp1 := mustTopic(t, "merge1", typ, 1)
			e.makeDead(tp1, "inflight")
			sendAt(t, p, tp1, "inflight", "new-inflight", time.Now().Add(-time.Second), 100)
			k = e.keys(tp1, 0)
			_, token := fetchOne(t, e, tp1, 0, "inflight")
			n, err = insp.Requeue(ctx, tp1, "inflight")
			require.NoError(t, err)
			require.Equal(t, 1, n)
			_, inStore := e.zscore(k.Store, "inflight")
			_, inPrepare := e.zscore(k.Prepare, "inflight")
			assert.True(t, inStore && inPrepare, "stored again next to the delivery in flight")
			env, _ = e.envelope(k.Msg, "inflight")
			assert.Equal(t, "body-inflight", string(env.Body))
			ackOne(t, e, tp1, 0, "inflight", token)
			_, inStore = e.zscore(k.Store, "inflight")
			env, hasBody := e.envelope(k.Msg, "inflight")
			assert.True(t, inStore && hasBody, "the ack of the in-flight delivery kept the requeued one")
			assert.Equal(t, "body-inflight", string(env.Body))
			assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp1))

			assert.Equal(t, int64(btoi(typ == topic.RangeMerge)), e.counts(tp).Dead, "range-merge left \"high\" dead")
			assert.Equal(t, int64(2+btoi(typ != topic.RangeMerge)), e.counts(tp).Store)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RequeueAll takes every message that died before the call, in batches
// (1,230 here, more than two batches in one slot), and nothing that died
// after it began; the requeued messages are then delivered.
func TestInspectorRequeueAll(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "all", topic.FixedTime, 2)
	past := float64(time.Now().Add(-time.Minute).UnixMilli())
	var big, small, future []string
	for j := range 1200 {
		big = append(big, fmt.Sprintf("a%04d", j))
	}
	for j := range 30 {
		small = append(small, fmt.Sprintf("b%02d", j))
	}
	for j := range 5 {
		future = append(future, fmt.Sprintf("f%d", j))
	}
	e.fakeDead(tp, 0, big, func(j int) float64 { return past + float64(j%7) })
	e.fakeDead(tp, 1, small, func(int) float64 { return past })
	e.fakeDead(tp, 1, future, func(int) float64 { return past + float64(time.Hour.Milliseconds()) })

	insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	n, err := insp.RequeueAll(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, 1230, n)
	assert.Equal(t, counts{Store: 1230, Msg: 1230, Dead: 5, DeadMsg: 5}, e.counts(tp))
	got, err := insp.Dead(ctx, tp)
	require.NoError(t, err)
	assert.ElementsMatch(t, future, ids(got), "deaths after the call began stay dead")

	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(64)))
	e.start(c)
	seen := map[string]bool{}
	for _, d := range rec.nextN(t, 1230, waitLong) {
		assert.False(t, seen[d.ID], "delivered twice: %s", d.ID)
		seen[d.ID] = true
		assert.Equal(t, 1, d.Attempt)
		assert.Empty(t, d.LastError)
	}
	e.eventuallyCounts(tp, counts{Dead: 5, DeadMsg: 5})
	n, err = insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
}

// Peek lists waiting messages in the order consumers take them, across
// slots, and flags ids whose earlier delivery is in flight.
func TestInspectorPeek(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	insp := e.client().Inspector()
	p := e.client().Producer()

	ft := mustTopic(t, "peek-ft", topic.FixedTime, 4)
	now := time.Now().Truncate(time.Millisecond)
	var order []string
	for _, j := range []int{7, 2, 9, 0, 4, 1, 8, 3, 6, 5} {
		key := fmt.Sprintf("ft%d", j)
		sendAt(t, p, ft, key, "body-"+key, now.Add(time.Duration(j-3)*time.Minute), 0)
	}
	for j := range 10 {
		order = append(order, fmt.Sprintf("ft%d", j))
	}
	got, err := insp.Peek(ctx, ft, 4)
	require.NoError(t, err)
	assert.Equal(t, order[:4], ids(got))
	got, err = insp.Peek(ctx, ft, 0)
	require.NoError(t, err)
	require.Equal(t, order, ids(got))
	for j, m := range got {
		assert.Equal(t, now.Add(time.Duration(j-3)*time.Minute), m.DueAt, m.ID)
		assert.Equal(t, "body-"+m.ID, string(m.Body))
		assert.Equal(t, slotOfKey(ft, m.ID), m.Slot)
		assert.False(t, m.InFlight)
		assert.Zero(t, m.Attempts)
	}

	pr := mustTopic(t, "peek-pr", topic.Priority, 4)
	prios := []int64{50, 900, 17, 300, 42, 77}
	for j, prio := range prios {
		sendAt(t, p, pr, fmt.Sprintf("p%d", j), "x", time.Time{}, prio)
	}
	got, err = insp.Peek(ctx, pr, 0)
	require.NoError(t, err)
	var gotPrio []int64
	for _, m := range got {
		gotPrio = append(gotPrio, m.Priority)
		assert.Equal(t, float64(m.Priority), m.Score)
		assert.True(t, m.DueAt.IsZero())
	}
	assert.Equal(t, []int64{900, 300, 77, 50, 42, 17}, gotPrio)

	// Re-sent while in flight: waits behind the delivery, flagged.
	_, token := fetchOne(t, e, ft, slotOfKey(ft, "ft0"), "ft0")
	sendAt(t, p, ft, "ft0", "again", now.Add(-time.Hour), 0)
	got, err = insp.Peek(ctx, ft, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "ft0", got[0].ID)
	assert.True(t, got[0].InFlight)
	assert.Equal(t, "again", string(got[0].Body))
	ackOne(t, e, ft, slotOfKey(ft, "ft0"), "ft0", token)

	_, err = insp.Peek(ctx, ft, rmq.MaxListLimit+1)
	assert.ErrorIs(t, err, rmq.ErrInvalidPageSize)
}

// Stats counts each queue per slot and in total, with what is due now.
func TestInspectorStats(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	insp := e.client().Inspector()
	p := e.client().Producer()

	ft := mustTopic(t, "stats-ft", topic.FixedTime, 4)
	now := time.Now().Truncate(time.Millisecond)
	for j, at := range []time.Time{now.Add(-10 * time.Minute), now.Add(-time.Minute), now.Add(-time.Second), now.Add(time.Hour), now.Add(2 * time.Hour)} {
		sendAt(t, p, ft, fmt.Sprintf("m%d", j), "x", at, 0)
	}
	// m0, the oldest, is in flight; m1 (a minute overdue) and m2 are due.
	_, token := fetchOne(t, e, ft, slotOfKey(ft, "m0"), "m0")
	st, err := insp.Stats(ctx, ft)
	require.NoError(t, err)
	assert.Equal(t, ft, st.Topic)
	assert.EqualValues(t, 4, st.Store)
	assert.EqualValues(t, 1, st.Prepare)
	assert.EqualValues(t, 2, st.Due)
	assert.Equal(t, now.Add(-time.Minute), st.NextDue)
	assert.InDelta(t, time.Minute.Seconds(), st.Lag().Seconds(), 5)
	assert.WithinDuration(t, time.Now(), st.Now, 5*time.Second)
	var store, prep, due int64
	for _, ss := range st.Slots {
		store += ss.Store
		prep += ss.Prepare
		due += ss.Due
		if !ss.NextDue.IsZero() {
			assert.False(t, ss.NextDue.Before(st.NextDue))
		}
	}
	assert.Equal(t, []int64{4, 1, 2}, []int64{store, prep, due})
	assert.True(t, st.OldestDeath.IsZero())
	ackOne(t, e, ft, slotOfKey(ft, "m0"), "m0", token)

	pr := mustTopic(t, "stats-pr", topic.Priority, 2)
	for j, prio := range []int64{20, 700, 300} {
		sendAt(t, p, pr, fmt.Sprintf("p%d", j), "x", time.Time{}, prio)
	}
	st, err = insp.Stats(ctx, pr)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Store)
	assert.EqualValues(t, 3, st.Due)
	assert.EqualValues(t, 700, st.TopPriority)
	assert.True(t, st.NextDue.IsZero())
	assert.Zero(t, st.Lag())

	empty, err := insp.Stats(ctx, mustTopic(t, "never-used", topic.RangeMerge, 2))
	require.NoError(t, err)
	assert.Zero(t, empty.Store+empty.Prepare+empty.Dead)
}

// Topics, lookups and bad input.
func TestInspectorTopicsAndErrors(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	insp := rmq.NewInspector(e.rdb, rmq.WithPrefix(e.prefix))
	got, err := insp.Topics(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)

	a := mustTopic(t, "b-topic", topic.Priority, 2)
	b := mustTopic(t, "a-topic", topic.FixedTime, 8)
	p := e.client().Producer()
	send(t, p, a, "x", "x")
	sendAt(t, p, b, "y", "y", time.Now().Add(time.Hour), 0)
	got, err = insp.Topics(ctx)
	require.NoError(t, err)
	assert.Equal(t, []topic.Topic{b, a}, got)
	one, err := insp.Topic(ctx, "b-topic")
	require.NoError(t, err)
	assert.Equal(t, a, one)
	_, err = insp.Topic(ctx, "nope")
	assert.ErrorIs(t, err, rmq.ErrUnknownTopic)
	_, err = insp.Topic(ctx, "bad:name")
	assert.ErrorIs(t, err, topic.ErrInvalidName)

	_, err = insp.Stats(ctx, mustTopic(t, "b-topic", topic.Priority, 4))
	assert.ErrorIs(t, err, topic.ErrConflict, "another slot amount reads other slots")
	_, err = insp.Dead(ctx, topic.Topic{})
	assert.ErrorIs(t, err, topic.ErrInvalidName)

	for _, c := range []string{"garbage", "d1.", "d1.!!!", "d2.MTox", "d1.MTox"} {
		_, err = insp.Dead(ctx, b, rmq.WithCursor(c))
		assert.ErrorIs(t, err, rmq.ErrInvalidCursor, "%q", c)
	}
	far := rmq.DeadMessage{ID: "x", Slot: 9, DiedAt: time.Now()}
	_, err = insp.Dead(ctx, b, rmq.WithCursor(far.Cursor()))
	assert.ErrorIs(t, err, rmq.ErrInvalidCursor, "slot 9 of 8")
	for _, l := range []int{0, -1, rmq.MaxListLimit + 1} {
		_, err = insp.Dead(ctx, b, rmq.WithLimit(l))
		assert.ErrorIs(t, err, rmq.ErrInvalidPageSize, "limit %d", l)
	}
	n, err := insp.Requeue(ctx, b)
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = insp.DeleteDead(ctx, b, "unknown")
	require.NoError(t, err)
	assert.Zero(t, n)

	removed, err := insp.Remove(ctx, b, "y")
	require.NoError(t, err)
	assert.True(t, removed)
	removed, err = insp.Remove(ctx, b, "y")
	require.NoError(t, err)
	assert.False(t, removed)

	_, err = rmq.NewInspector(e.rdb, rmq.WithPrefix("a{b}")).Topics(ctx)
	assert.ErrorIs(t, err, slots.ErrInvalidPrefix)
	_, err = rmq.NewInspector(nil).Topics(ctx)
	assert.ErrorIs(t, err, rmq.ErrInvalidOption)
	assert.Equal(t, e.prefix, e.client().Inspector().Prefix())
}

// The same work on a Redis Cluster: pipelines and scripts spread over the
// nodes that hold the slots; wake-ups use sharded pub/sub. Messages are
// killed with the consumer's own fetch and rollback scripts.
func TestInspectorOnCluster(t *testing.T) {
	t.Parallel()
	cc := redistestClusterClient(t)
	prefix := rmqtest.Prefix(t)
	t.Cleanup(func() { checkNoOrphans(t, cc, prefix) })
	ctx := ctxT(t)
	tp := mustTopic(t, "cl", topic.FixedTime, 8)
	c, err := rmq.New(cc, rmq.WithPrefix(prefix), rmq.WithLogger(discardLogger()))
	require.NoError(t, err)
	var keys []string
	for j := range 20 {
		keys = append(keys, fmt.Sprintf("c%02d", j))
		sendAt(t, c.Producer(), tp, keys[j], "body-"+keys[j], time.Now().Add(-time.Second), 0)
	}
	for s := range tp.SlotAmount() {
		k := keyspace.KeysFor(prefix, tp, s)
		r := fetchDirect(t, cc, k, true, 64, 30)
		args := []any{"SPUBLISH", 0, 0, 0, 0}
		for _, m := range r.Msgs {
			args = append(args, m.ID, m.Token, "no", "")
		}
		if len(args) > 5 {
			require.NoError(t, scripts.Rollback.Run(ctx, cc, []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}, args...).Err())
		}
	}
	insp := c.Inspector()
	st, err := insp.Stats(ctx, tp)
	require.NoError(t, err)
	require.EqualValues(t, 20, st.Dead)

	all := allDead(t, insp, tp, 6)
	assert.ElementsMatch(t, keys, ids(all))
	m, err := insp.DeadMessage(ctx, tp, "c07")
	require.NoError(t, err)
	assert.Equal(t, "no", m.LastError)
	assert.Equal(t, "body-c07", string(m.Body))

	n, err := insp.Requeue(ctx, tp, "c00", "c01")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = insp.DeleteDead(ctx, tp, "c02")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, err = insp.RequeueAll(ctx, tp)
	require.NoError(t, err)
	assert.Equal(t, 17, n)
	waiting, err := insp.Peek(ctx, tp, 100)
	require.NoError(t, err)
	assert.ElementsMatch(t, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == "c02" }), ids(waiting))
	for _, w := range waiting {
		assert.Zero(t, w.Attempts)
		assert.Empty(t, w.LastError)
	}
	st, err = insp.Stats(ctx, tp)
	require.NoError(t, err)
	assert.EqualValues(t, 19, st.Store)
	assert.EqualValues(t, 19, st.Due)
	assert.Zero(t, st.Dead)
	for _, id := range ids(waiting) {
		removed, err := insp.Remove(ctx, tp, id)
		require.NoError(t, err)
		assert.True(t, removed, id)
	}
	n, err = insp.PurgeDead(ctx, tp)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// Dead queues are bounded (WithDeadRetention, applied by the consumers as
// messages die): by count per slot, and by age; the oldest go first, bodies
// with them, and no orphan entry is left (the cleanup scans every key).
func TestInspectorDeadRetention(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	insp := e.client().Inspector()
	fail := consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error { return fmt.Errorf("failed %s", m.ID) })
	// killInTurn sends each key and waits for its death before the next.
	killInTurn := func(c *rmq.Client, tp topic.Topic, keys ...string) {
		t.Helper()
		for _, k := range keys {
			send(t, c.Producer(), tp, k, "body-"+k)
			require.Eventually(t, func() bool {
				_, err := insp.DeadMessage(ctx, tp, k)
				return err == nil
			}, waitLong, 10*time.Millisecond, "%s never died", k)
		}
	}

	// By count: 4 per topic of 2 slots is 2 per slot.
	byCount := mustTopic(t, "bycount", topic.FixedTime, 2)
	c := e.client()
	require.NoError(t, c.Register(byCount, fail, consumer.WithMaxRetries(0), consumer.WithDeadRetention(4, 0)))
	e.start(c)
	var keys []string
	for j := range 12 {
		keys = append(keys, fmt.Sprintf("n%02d", j))
	}
	killInTurn(c, byCount, keys...)
	kept, err := insp.Dead(ctx, byCount)
	require.NoError(t, err)
	want := map[int][]string{}
	for j := len(keys) - 1; j >= 0; j-- {
		s := slotOfKey(byCount, keys[j])
		if len(want[s]) < 2 {
			want[s] = append(want[s], keys[j])
		}
	}
	var wantIDs []string
	for _, ks := range want {
		wantIDs = append(wantIDs, ks...)
	}
	assert.ElementsMatch(t, wantIDs, ids(kept), "the newest two of each slot")
	assert.Equal(t, counts{Dead: int64(len(wantIDs)), DeadMsg: int64(len(wantIDs))}, e.counts(byCount))

	// By age: a death trims what died more than 300 ms before it.
	byAge := mustTopic(t, "byage", topic.FixedTime, 1)
	c2 := e.client()
	require.NoError(t, c2.Register(byAge, fail, consumer.WithMaxRetries(0), consumer.WithDeadRetention(0, 300*time.Millisecond)))
	e.start(c2)
	killInTurn(c2, byAge, "old1", "old2")
	// Until both died more than 300 ms ago by Redis's clock (a ms more:
	// the scripts count whole ms).
	old2, err := insp.DeadMessage(ctx, byAge, "old2")
	require.NoError(t, err)
	e.waitRedisPast(old2.DiedAt.Add(302 * time.Millisecond))
	killInTurn(c2, byAge, "new")
	kept, err = insp.Dead(ctx, byAge)
	require.NoError(t, err)
	assert.Equal(t, []string{"new"}, ids(kept))
	assert.Equal(t, counts{Dead: 1, DeadMsg: 1}, e.counts(byAge))
}
