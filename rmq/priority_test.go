package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Priority messages spread over 8 slots are handled highest first.
func TestPriorityHighestFirstAcrossSlots(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.Priority, 8)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))

		prios := []int64{17, 18, 25, 40, 41, 100, 500, 999, 1000, 12345, 1 << 40, 1 << 53}
		sent := append([]int64(nil), prios...)
		rand.Shuffle(len(sent), func(i, j int) { sent[i], sent[j] = sent[j], sent[i] })
		usedSlots := map[int]bool{}
		for _, p := range sent {
			key := fmt.Sprintf("p%d", p)
			id, err := c.Producer().SendPriority(ctx, tp, []byte(key), p, producer.WithKey(key))
			require.NoError(t, err)
			require.Equal(t, key, id)
			usedSlots[slotOfKey(tp, key)] = true
		}
		require.GreaterOrEqual(t, len(usedSlots), 3)
		e.start(c)

		var got []int64
		for _, d := range rec.nextN(t, len(prios), waitLong) {
			got = append(got, d.Priority)
			assert.Equal(t, fmt.Sprintf("p%d", d.Priority), d.ID)
			assert.True(t, d.DueAt.IsZero(), "priority messages have no due time")
		}
		want := append([]int64(nil), prios...)
		sort.Slice(want, func(i, j int) bool { return want[i] > want[j] })
		require.Equal(t, want, got, "not highest first")
		e.eventuallyCounts(tp, counts{})
	})
}

// Priorities 16 and below are reserved for retries and refused, with nothing
// written; 17 is the lowest accepted.
func TestPriorityInvalid(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.Priority, 4)
		p := e.client().Producer()
		for _, prio := range []int64{16, 15, 1, 0, -1, -1 << 62, 1<<53 + 1} {
			_, err := p.SendPriority(ctx, tp, []byte("x"), prio)
			require.ErrorIs(t, err, producer.ErrInvalidPriority, "priority %d", prio)
		}
		require.Empty(t, e.keysNow(), "a refused send wrote something")
		_, err := p.SendPriority(ctx, tp, []byte("x"), topic.MinPriority)
		require.NoError(t, err)
	})
}

// A re-send of the same key replaces the priority (and body) of the waiting
// message; the delivery order follows the new priorities.
func TestPriorityResendReplaces(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.Priority, 8)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))

		send := func(key string, prio int64, body string) {
			_, err := c.Producer().SendPriority(ctx, tp, []byte(body), prio, producer.WithKey(key))
			require.NoError(t, err)
		}
		send("a", 100, "a1")
		send("b", 50, "b1")
		send("c", 30, "c1")
		send("a", 20, "a2")  // was first, now last
		send("c", 200, "c2") // was last, now first
		require.Equal(t, counts{Store: 3, Msg: 3}, e.counts(tp))
		e.start(c)

		got := rec.nextN(t, 3, waitLong)
		var order []string
		for _, d := range got {
			order = append(order, fmt.Sprintf("%s:%d:%s", d.ID, d.Priority, d.Body))
		}
		require.Equal(t, []string{"c:200:c2", "b:50:b1", "a:20:a2"}, order)
		rec.drained(t, e, tp, counts{})
	})
}

// A retried priority message ranks below every fresh one, even one sent after
// the failure with the lowest priority allowed (RMQ semantics).
func TestPriorityRetryRanksBelowFresh(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.Priority, 8)
		c := e.client()
		sendErr := make(chan error, 1)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.ID == "top" && m.Attempt == 1 {
				// A fresh message arriving while the failed one waits for retry.
				_, err := c.Producer().SendPriority(ctx, tp, []byte("late"), topic.MinPriority+1, producer.WithKey("late"))
				sendErr <- err
				return errors.New("first attempt fails")
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))

		_, err := c.Producer().SendPriority(ctx, tp, []byte("top"), 1_000_000, producer.WithKey("top"))
		require.NoError(t, err)
		for i := range 10 {
			key := fmt.Sprintf("f%02d", i)
			_, err := c.Producer().SendPriority(ctx, tp, []byte(key), int64(100-i), producer.WithKey(key))
			require.NoError(t, err)
		}
		e.start(c)

		got := rec.nextN(t, 13, waitLong)
		require.NoError(t, <-sendErr)
		var order []string
		for _, d := range got {
			order = append(order, fmt.Sprintf("%s#%d", d.ID, d.Attempt))
		}
		want := []string{"top#1"}
		for i := range 10 {
			want = append(want, fmt.Sprintf("f%02d#1", i))
		}
		want = append(want, "late#1", "top#2")
		require.Equal(t, want, order, "a retry must come after every fresh message")
		last := got[len(got)-1]
		assert.Equal(t, "first attempt fails", last.LastError)
		assert.Equal(t, int64(1_000_000), last.Priority, "a retry keeps the priority it was sent with")
		rec.drained(t, e, tp, counts{})
	})
}

// fetchGate is a go-redis hook that, once armed, holds the reply of the next
// fetch call (the script has already run in Redis) until the test lets it
// go, so the test can act while the fetcher is busy.
type fetchGate struct {
	sha     string
	armed   atomic.Bool
	ran     chan struct{} // closed when the held fetch script has run
	release chan struct{} // closed by the test
}

func (g *fetchGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *fetchGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		g.after([]redis.Cmder{cmd})
		return err
	}
}

func (g *fetchGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		g.after(cmds)
		return err
	}
}

func (g *fetchGate) after(cmds []redis.Cmder) {
	for _, c := range cmds {
		args := c.Args()
		if len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && fmt.Sprint(args[1]) == g.sha {
			if g.armed.CompareAndSwap(true, false) {
				close(g.ran)
				<-g.release
			}
			return
		}
	}
}

// Two wake-ups of one priority slot that reach the fetcher together (here:
// while it waits for a fetch reply) must leave it knowing the slot's real
// head, the higher priority; otherwise a lower message of another slot is
// handed out first.
func TestPriorityWakeUpsCoalesced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.Priority, 2)
		rdb := e.newRedis()
		gate := &fetchGate{sha: scripts.Fetch.Hash(), ran: make(chan struct{}), release: make(chan struct{})}
		rdb.AddHook(gate)
		releaseX := make(chan struct{})
		defer func() {
			for _, ch := range []chan struct{}{gate.release, releaseX} {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
		}()
		c := e.clientOn(rdb)
		rec := newRecorder(func(ctx context.Context, m *consumer.Message) error {
			if m.Priority == 1000 {
				<-releaseX
			}
			return nil
		})
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))

		keyIn := func(slot int, prefix string) string { return keyWithPrefixInSlot(tp, prefix, slot) }
		send := func(key string, prio int64) {
			_, err := e.client().Producer().SendPriority(ctx, tp, []byte(key), prio, producer.WithKey(key))
			require.NoError(t, err)
		}
		send(keyIn(1, "x"), 1000) // slot 1: handled first, holds the only handler
		send(keyIn(1, "z"), 500)  // slot 1: fetched by the held call
		send(keyIn(1, "y"), 150)  // slot 1
		e.start(c)
		require.Equal(t, int64(1000), rec.next(t, waitLong).Priority)
		e.waitFetchersAsleep(1) // start-up settled: the one handler is held

		// The next fetch (of z) runs; its reply is held while slot 0, empty so
		// far, gets 100 and then 200: two wake-ups for one slot.
		gate.armed.Store(true)
		close(releaseX)
		select {
		case <-gate.ran:
		case <-time.After(waitLong):
			t.Fatal("no fetch call")
		}
		send(keyIn(0, "a"), 100)
		send(keyIn(0, "b"), 200)
		// Both wake-ups must reach the waker while the fetch is held:
		// nothing outside the engine can tell when they did.
		quiet(300 * time.Millisecond)
		close(gate.release)

		var order []int64
		for _, d := range rec.nextN(t, 4, waitLong) {
			order = append(order, d.Priority)
		}
		require.Equal(t, []int64{500, 200, 150, 100}, order, "not highest first across slots")
	})
}

// Messages of one priority in several slots are served from every slot in
// turn, not one slot drained before the next is looked at.
func TestPriorityTiesServeEverySlot(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		const slotCount = 4
		tp := mustTopic(t, "ties", topic.Priority, slotCount)
		c := e.client()
		rec := newRecorder(nil)
		require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(1)))
		const n = 200
		perSlot := map[int]int{}
		for i := range n {
			key := fmt.Sprintf("t%03d", i)
			_, err := c.Producer().SendPriority(ctx, tp, []byte(key), 17, producer.WithKey(key))
			require.NoError(t, err)
			perSlot[slotOfKey(tp, key)]++
		}
		require.Len(t, perSlot, slotCount, "the keys cover every slot")
		e.start(c)

		got := rec.nextN(t, n, waitLong)
		first := map[int]bool{}
		for _, d := range got[:4*slotCount] {
			first[d.Slot] = true
		}
		assert.Len(t, first, slotCount, "slots served among the first %d deliveries", 4*slotCount)
		e.eventuallyCounts(tp, counts{})
	})
}
