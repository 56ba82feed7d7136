package rmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// The lookahead (consumer.WithLookahead) takes a message from store
// shortly before its instant and holds it; what happens to the message
// until its instant counts as it would have in store. A long lookahead
// makes the holding window wide enough to act in.
const testLookahead = 2 * time.Second

// heldSoon sends id due in 1.8 s on a client consuming tp with a 2 s
// lookahead and waits until the client holds it (it is in prepare).
func heldSoon(t *testing.T, e *env, tp topic.Topic, rec *recorder, body string) (*producer.Producer, time.Time) {
	t.Helper()
	ctx := ctxT(t)
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead)))
	e.start(c)
	p := c.Producer()
	// Due well inside the lookahead, and far enough ahead that a loaded
	// machine still holds it, and the caller acts on it, before its instant.
	const ahead = 1800 * time.Millisecond
	due := time.Now().Add(ahead)
	var err error
	if tp.Type() == topic.RangeMerge {
		_, err = p.SendRangeMerge(ctx, tp, []byte(body), ahead, producer.WithKey("k"))
	} else {
		_, err = p.SendFixedTime(ctx, tp, []byte(body), due, producer.WithKey("k"))
	}
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Prepare, "k"); return ok }, 1200*time.Millisecond, time.Millisecond, "held before its instant")
	return p, due
}

// removeHeld removes id k of tp by id (a message the client holds).
func removeHeld(t *testing.T, e *env, tp topic.Topic) {
	t.Helper()
	removed, err := e.client().Inspector().Remove(ctxT(t), tp, "k")
	require.NoError(t, err)
	require.True(t, removed)
}

// A held message is handed over at its instant, never before it, as the
// first attempt.
func TestLookaheadDeliversAtTheInstant(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookat", topic.FixedTime, 4)
	rec := newRecorder(nil)
	_, due := heldSoon(t, e, tp, rec, "b")
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "k", d.ID)
	assert.Equal(t, 1, d.Attempt)
	assert.False(t, d.At.Before(d.DueAt), "delivered %v before its instant", d.DueAt.Sub(d.At))
	assert.Equal(t, due.Add(time.Millisecond-1).Truncate(time.Millisecond).UnixMilli(), d.DueAt.UnixMilli())
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A message removed by id while held is not delivered: the remove takes it
// as waiting, and at its instant the confirm drops it.
func TestLookaheadRemovedWhileHeldIsNotDelivered(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookrm", topic.FixedTime, 4)
	rec := newRecorder(nil)
	heldSoon(t, e, tp, rec, "b")
	removeHeld(t, e, tp)
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A fixed-time re-send while held replaces the due time, as in store: one
// delivery, at the new instant.
func TestLookaheadResendWhileHeldReplaces(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookre", topic.FixedTime, 4)
	rec := newRecorder(nil)
	p, due := heldSoon(t, e, tp, rec, "old")
	later := due.Add(1500 * time.Millisecond)
	_, err := p.SendFixedTime(ctxT(t), tp, []byte("new"), later, producer.WithKey("k"))
	require.NoError(t, err)
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "new", d.Body)
	assert.False(t, d.At.Before(later), "delivered %v before the new instant", later.Sub(d.At))
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A range-merge repeat while held merges into it, as into a waiting
// message: one delivery, at the first one's instant, with the repeat's body.
func TestLookaheadRepeatWhileHeldMerges(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookrg", topic.RangeMerge, 4)
	rec := newRecorder(nil)
	p, due := heldSoon(t, e, tp, rec, "first")
	_, err := p.SendRangeMerge(ctxT(t), tp, []byte("second"), time.Second, producer.WithKey("k"))
	require.NoError(t, err)
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "second", d.Body)
	assert.False(t, d.At.Before(d.DueAt))
	assert.Less(t, d.DueAt.Sub(due), 50*time.Millisecond, "kept the first one's instant")
	// An unmerged repeat would wait in store for its own instant.
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A client that closes while it holds a message gives it back to store at
// its instant, no attempt counted, and another client delivers it then.
func TestLookaheadCloseGivesHeldBack(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookcl", topic.FixedTime, 4)
	ctx := ctxT(t)
	rec := newRecorder(nil)
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead)))
	e.start(c)
	due := time.Now().Add(time.Second)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("b"), due, producer.WithKey("k"))
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Prepare, "k"); return ok }, 900*time.Millisecond, time.Millisecond)
	require.NoError(t, c.Close(ctx))
	score, ok := e.zscore(k.Store, "k")
	require.True(t, ok, "back in store")
	assert.Equal(t, float64(time.UnixMilli(due.Add(time.Millisecond-1).Truncate(time.Millisecond).UnixMilli()).UnixMilli()), score)
	assert.Equal(t, int64(0), e.counts(tp).Prepare)
	rec.nothingYet(t) // Close returned: what it held was not delivered

	rec2 := newRecorder(nil)
	c2 := e.client()
	require.NoError(t, c2.Register(tp, rec2, consumer.WithLookahead(0)))
	e.start(c2)
	d := rec2.next(t, 5*time.Second)
	assert.Equal(t, 1, d.Attempt, "no attempt counted")
	assert.False(t, d.At.Before(d.DueAt))
}

// A topic paused while a message is held gives it back at its instant and
// delivers it once resumed.
func TestLookaheadPauseGivesHeldBack(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookps", topic.FixedTime, 4)
	rec := newRecorder(nil)
	heldSoon(t, e, tp, rec, "b")
	in := e.client().Inspector()
	require.NoError(t, in.Pause(ctxT(t), tp))
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Store, "k"); return ok }, 5*time.Second, 5*time.Millisecond, "given back to store")
	rec.none(t, 100*time.Millisecond)
	require.NoError(t, in.Resume(ctxT(t), tp))
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, 1, d.Attempt)
}

// Without a lookahead nothing is taken before its instant.
func TestNoLookaheadTakesAtTheInstant(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "looknone", topic.FixedTime, 4)
	rec := newRecorder(nil)
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(0)))
	e.start(c)
	due := time.Now().Add(500 * time.Millisecond)
	_, err := c.Producer().SendFixedTime(ctxT(t), tp, []byte("b"), due, producer.WithKey("k"))
	require.NoError(t, err)
	e.requireNotTakenBefore(t, tp, "k", due, "taken before its instant")
	rec.next(t, 5*time.Second)
}

// A lookahead outside 0..MaxLookahead is refused.
func TestLookaheadRefusesBadValues(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookbad", topic.FixedTime, 4)
	c := e.client()
	for _, d := range []time.Duration{-time.Millisecond, consumer.MaxLookahead + time.Millisecond} {
		err := c.Register(tp, newRecorder(nil), consumer.WithLookahead(d))
		require.ErrorIs(t, err, consumer.ErrInvalidOption, "%v", d)
	}
}

// A held message whose lease is lost meanwhile (the sweeper rolled it back
// into store, as after a Redis outage longer than the lease) is not handed
// over: it is delivered once, from store.
func TestLookaheadLeaseLostWhileHeld(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "looklost", topic.FixedTime, 4)
	rec := newRecorder(nil)
	_, due := heldSoon(t, e, tp, rec, "b")
	ctx := ctxT(t)
	k := e.keys(tp, slotOfKey(tp, "k"))
	score := float64(due.Add(time.Millisecond - 1).Truncate(time.Millisecond).UnixMilli())
	// What a rollback does, by hand: out of prepare, back in store, the
	// slot woken.
	require.NoError(t, e.rdb.ZRem(ctx, k.Prepare, "k").Err())
	require.NoError(t, e.rdb.ZAdd(ctx, k.Store, redis.Z{Score: score, Member: "k"}).Err())
	require.NoError(t, e.rdb.Publish(ctx, k.Wake, fmt.Sprint(int64(score))).Err())
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "k", d.ID)
	assert.False(t, d.At.Before(d.DueAt))
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A message held for longer than its prepare timeout keeps its lease once
// handed over: the lease keeper goes on while messages are held, so a
// handler that runs past the lease is not redelivered.
func TestLookaheadHeldThenLongHandlerKeepsLease(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "looklong", topic.FixedTime, 4)
	ctx := ctxT(t)
	// The listener runs past the lease (1 s): a lease not kept would be
	// swept and the message redelivered while it runs.
	ended := make(chan struct{}, 2)
	rec := newRecorder(func(ctx context.Context, _ *consumer.Message) error {
		defer func() { ended <- struct{}{} }()
		select {
		case <-time.After(3500 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(2*time.Second), consumer.WithPrepareTimeout(time.Second)))
	e.start(c)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("b"), time.Now().Add(1500*time.Millisecond), producer.WithKey("k"))
	require.NoError(t, err)
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, 1, d.Attempt)
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the listener did not end")
	}
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// Held messages do not take the capacity of a message due before them
// that arrives later: with two handlers, a message held for its instant
// leaves one free, so an earlier one sent after it fires at its own time,
// first.
func TestLookaheadHeldDoNotDelayAnEarlierMessage(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookcap", topic.FixedTime, 4)
	// Handlers that work until the end of the test, keeping their capacity.
	release := make(chan struct{})
	defer close(release)
	rec := newRecorder(waitFor(release))
	ctx := ctxT(t)
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead), consumer.WithConcurrency(2)))
	e.start(c)
	p := c.Producer()
	later := time.Now().Add(1500 * time.Millisecond)
	_, err := p.SendFixedTime(ctx, tp, []byte("later"), later, producer.WithKey("later"))
	require.NoError(t, err)
	kl := e.keys(tp, slotOfKey(tp, "later"))
	require.Eventually(t, func() bool { _, ok := e.zscore(kl.Prepare, "later"); return ok }, time.Second, time.Millisecond, "held")
	sooner := time.Now().Add(300 * time.Millisecond)
	_, err = p.SendFixedTime(ctx, tp, []byte("sooner"), sooner, producer.WithKey("sooner"))
	require.NoError(t, err)
	first := rec.next(t, 5*time.Second)
	assert.Equal(t, "sooner", first.ID)
	assert.Less(t, first.At.Sub(sooner), 500*time.Millisecond, "not kept waiting behind the held one")
	second := rec.next(t, 5*time.Second)
	assert.Equal(t, "later", second.ID)
	assert.False(t, second.At.Before(later))
}

// A message removed by id while held and then sent again fires at the
// re-send's time, not a lease later (the held delivery never ran, so the
// remove leaves no tombstone to wait behind).
func TestLookaheadRemovedWhileHeldThenResent(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookrmre", topic.FixedTime, 4)
	rec := newRecorder(nil)
	p, due := heldSoon(t, e, tp, rec, "b")
	removeHeld(t, e, tp)
	again := due.Add(500 * time.Millisecond)
	_, err := p.SendFixedTime(ctxT(t), tp, []byte("again"), again, producer.WithKey("k"))
	require.NoError(t, err)
	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "again", d.Body)
	assert.False(t, d.At.Before(again))
	assert.Less(t, d.At.Sub(again), 2*time.Second, "not a lease late")
	rec.drained(t, e, tp, counts{}) // every delivery acked, every tombstone cleared
}

// A topic with one handler takes nothing ahead (a held message would
// keep its only handler from a message due before it that arrives later).
func TestLookaheadNotWithOneHandler(t *testing.T) {
	e := newEnv(t)
	tp := mustTopic(t, "lookone", topic.FixedTime, 4)
	rec := newRecorder(nil)
	c := e.client()
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead), consumer.WithConcurrency(1)))
	e.start(c)
	due := time.Now().Add(700 * time.Millisecond)
	_, err := c.Producer().SendFixedTime(ctxT(t), tp, []byte("b"), due, producer.WithKey("k"))
	require.NoError(t, err)
	e.requireNotTakenBefore(t, tp, "k", due, "taken before its instant")
	d := rec.next(t, 5*time.Second)
	assert.False(t, d.At.Before(d.DueAt))
}
