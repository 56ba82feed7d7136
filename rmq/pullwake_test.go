package rmq_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A wake-up of one topic wakes only the Pulls waiting on it: sends to
// topic B, which has a pull engine of its own, leave a long-poll on topic
// A asleep; the first send to A ends it at once.
func TestPullWakesOnlyItsTopic(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	a := mustTopic(t, "wake-a", topic.FixedTime, 2)
	b := mustTopic(t, "wake-b", topic.FixedTime, 2)
	c := e.client()
	// marker's listener shows when a wake-up sent after B's was dispatched.
	marker := mustTopic(t, "wake-marker", topic.FixedTime, 1)
	markers := newRecorder(nil)
	require.NoError(t, c.Register(marker, markers))
	e.start(c)
	p := c.Producer()

	// B's engine exists and hears B's wake-ups (so they reached every
	// waiting Pull when all topics shared one wake-up channel).
	ds, err := c.Pull(ctx, []topic.Topic{b}, 1)
	require.NoError(t, err)
	require.Empty(t, ds)

	got := make(chan []*rmq.Delivery, 1)
	go e.Labelled(func() {
		ds, err := c.Pull(ctx, []topic.Topic{a}, 1, rmq.WithWait(20*time.Second))
		assert.NoError(t, err)
		got <- ds
	})
	// The long-poll is waiting once A's engine exists and a B wake-up
	// would have reached it.
	e.waitPullsWaiting(1)
	for i := range 20 {
		send(t, p, b, "b"+string(rune('a'+i)), "b")
	}
	// B's wake-ups have been dispatched once a later wake-up on the same
	// subscription connection was (Redis delivers a subscriber's messages
	// in publishing order): marker's, which alone brings its sleeping
	// fetcher a message. Had a B wake-up reached A's waiter, the waiter
	// would not be back in its wait before it counted the wake-up.
	e.waitFetchersAsleep(1) // so "m" comes by its wake-up, not a fetch under way
	send(t, p, marker, "m", "m")
	require.Equal(t, "m", markers.next(t, waitLong).ID)
	e.waitPullsWaiting(1)
	select {
	case ds := <-got:
		t.Fatalf("the long-poll on A returned %d deliveries after sends to B", len(ds))
	default:
	}
	assert.Zero(t, rmq.PullWakeups(c), "no wait on A may be ended by B's wake-ups")

	sent := time.Now()
	send(t, p, a, "a1", "a1")
	select {
	case ds := <-got:
		require.Len(t, ds, 1)
		assert.Equal(t, "a1", ds[0].ID)
		assert.Less(t, time.Since(sent), 2*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll on A was not woken by a send to A")
	}
	assert.GreaterOrEqual(t, rmq.PullWakeups(c), int64(1))
}

// Many Pulls long-polling one topic while messages come due one by one:
// each message is delivered on time, and costs a few fetches, not one per
// waiting Pull (only one of them sleeps until the next due time).
func TestPullWaitersDoNotStampedeOnDueTimes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "herd", topic.FixedTime, 1)
	c := e.client()
	e.start(c)
	p := c.Producer()

	const waiters, msgs = 16, 20
	first := time.Now().Add(500 * time.Millisecond)
	due := map[string]time.Time{}
	for i := range msgs {
		id := fmt.Sprintf("m%02d", i)
		due[id] = first.Add(time.Duration(i) * 40 * time.Millisecond)
		sendAt(t, p, tp, id, id, due[id], 0)
	}
	type got struct {
		id string
		at time.Time
	}
	gotc := make(chan got, msgs)
	var left atomic.Int64
	left.Store(msgs)
	var wg sync.WaitGroup
	before := rmq.PullFetches(c)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Load() > 0 {
				ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(time.Second))
				if !assert.NoError(t, err) {
					return
				}
				for _, d := range ds {
					gotc <- got{d.ID, time.Now()}
					left.Add(-1)
					assert.NoError(t, d.Ack(ctx))
				}
			}
		}()
	}
	wg.Wait()
	close(gotc)
	n := 0
	for g := range gotc {
		n++
		late := g.at.Sub(due[g.id])
		assert.GreaterOrEqual(t, late, time.Duration(0), "%s delivered early", g.id)
		assert.Less(t, late, 300*time.Millisecond, "%s delivered %v late", g.id, late)
	}
	require.Equal(t, msgs, n)
	fetches := rmq.PullFetches(c) - before
	// A stampede is at least one fetch per waiter and message (320 here).
	assert.Less(t, fetches, int64(2*waiters+6*msgs), "%d fetches for %d messages and %d waiters", fetches, msgs, waiters)
	t.Logf("%d fetches for %d messages, %d waiters", fetches, msgs, waiters)
}

// A Pull that owned the topic's next due time and leaves (its wait ran
// out) hands it over: another waiting Pull gets the message when it comes
// due, not at the end of its own wait.
func TestPullDueTimeHandedOverWhenItsOwnerLeaves(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "handover", topic.FixedTime, 1)
	c := e.client()
	e.start(c)
	p := c.Producer()
	dueAt := time.Now().Add(700 * time.Millisecond)
	sendAt(t, p, tp, "m", "m", dueAt, 0)

	short := make(chan error, 1)
	go e.Labelled(func() {
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(200*time.Millisecond))
		if err == nil && len(ds) > 0 {
			err = fmt.Errorf("the short wait got %s", ds[0].ID)
		}
		short <- err
	})
	e.waitPullsWaiting(1) // the short one owns the due time
	ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithWait(10*time.Second))
	arrived := time.Now()
	require.NoError(t, err)
	require.NoError(t, <-short)
	require.Len(t, ds, 1)
	assert.Less(t, arrived.Sub(dueAt), time.Second, "delivered %v after due", arrived.Sub(dueAt))
	assert.GreaterOrEqual(t, arrived.Sub(dueAt), time.Duration(0))
}

// A burst of messages due at once reaches every waiting Pull, not one
// after another, for timed and priority topics alike.
func TestPullBurstWakesAllWaiters(t *testing.T) {
	for _, typ := range []topic.Type{topic.FixedTime, topic.Priority} {
		t.Run(typ.String(), func(t *testing.T) { testPullBurst(t, typ) })
	}
}

func testPullBurst(t *testing.T, typ topic.Type) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "burst", typ, 1)
	c := e.client()
	e.start(c)
	p := c.Producer()

	// pullCtx ends the Pulls still waiting once the burst is taken: they
	// would otherwise wait out their 5 s with nothing left to take.
	pullCtx, stopPulls := context.WithCancel(ctx)
	defer stopPulls()
	const waiters = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	by := map[int]int{} // waiter -> deliveries
	var left atomic.Int64
	left.Store(40)
	allTaken := make(chan time.Time, 1)
	// Closed once every waiter holds a delivery: a burst that reached the
	// waiters one after another would keep the others waiting out their
	// 5 s first.
	spread := make(chan struct{})
	for w := range waiters {
		wg.Add(1)
		go e.Labelled(func() {
			defer wg.Done()
			for left.Load() > 0 {
				ds, err := c.Pull(pullCtx, []topic.Topic{tp}, 1, rmq.WithWait(5*time.Second))
				if pullCtx.Err() != nil {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				for _, d := range ds {
					mu.Lock()
					by[w]++
					if len(by) == waiters && by[w] == 1 {
						close(spread)
					}
					mu.Unlock()
					if left.Add(-1) == 0 {
						allTaken <- time.Now()
					}
					// Held until every waiter holds one, so the burst
					// needs every waiter.
					select {
					case <-spread:
					case <-pullCtx.Done():
					}
					assert.NoError(t, d.Ack(ctx))
				}
			}
		})
	}
	e.waitPullsWaiting(waiters)
	msgs := make([]producer.BatchMessage, 40)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprint(i)), Key: fmt.Sprint(i), At: time.Now(), Priority: 100}
	}
	start := time.Now()
	_, err := p.SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	var took time.Duration
	select {
	case at := <-allTaken:
		took = at.Sub(start)
	case <-time.After(30 * time.Second):
		t.Fatal("the burst was not taken")
	}
	stopPulls()
	wg.Wait()
	// Waiters woken one after another would wait out 5 s first.
	assert.Less(t, took, 600*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Greater(t, len(by), waiters/2, "deliveries per waiter: %v", by)
}
