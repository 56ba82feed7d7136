package rmq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// Serial groups (WithGroupConcurrency(1)) go on after every way a message
// stops holding its group's place: removed while in flight, removed while
// it waits for a retry, acked while the topic had no group places. Each
// case re-sends the message's body (the same id) and then sends the
// group's next message: both must be delivered, in order.

// placeRun is a consumer of a serial-groups topic whose handler records
// each start and holds the message whose body is hold until release is
// closed, or fails it once when fail is set.
type placeRun struct {
	starts  chan string // ids, as handlers start
	release chan struct{}
}

// errHandlerFailed is the handler's failure: an ordinary error, retried
// after the backoff.
var errHandlerFailed = errors.New("handler failed")

func newPlaceRun() *placeRun {
	return &placeRun{starts: make(chan string, 64), release: make(chan struct{})}
}

func (r *placeRun) listener(holdID string, fail bool) consumer.MessageListener {
	var held atomic.Bool
	return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		r.starts <- m.ID
		// Only the id's first delivery.
		if m.ID == holdID && held.CompareAndSwap(false, true) {
			if fail {
				return errHandlerFailed
			}
			select {
			case <-r.release:
			case <-ctx.Done():
			}
		}
		return nil
	})
}

// next waits for the next handler start.
func (r *placeRun) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case id := <-r.starts:
		return id
	case <-time.After(within):
		t.Fatalf("no delivery within %v", within)
		return ""
	}
}

// sendInGroup sends body in group g, due a minute ago for "A" (so a
// re-sent A comes before what is sent after it, not tied with it in the
// same ms), else now.
func sendInGroup(t *testing.T, p *producer.Producer, tp topic.Topic, body string) string {
	t.Helper()
	at := time.Now()
	if body == "A" {
		at = at.Add(-time.Minute)
	}
	id, err := p.SendFixedTime(ctxT(t), tp, []byte(body), at, producer.WithGroup("g"))
	require.NoError(t, err)
	return id
}

// The reviewer's case: A is removed while its handler runs, sent again
// (the same body: the same id), then B. A's removal frees its place; the
// re-sent A waits for the removed delivery's lease (its tombstone) and
// goes, then B.
func TestSerialGroupGoesOnAfterRemoveInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "gplaces-inflight", topic.FixedTime, 4)
		p := producerOn(t, e.rdb, e.prefix)
		run := newPlaceRun()
		defer close(run.release)
		c := e.client()
		require.NoError(t, c.Register(tp, run.listener(producer.BodyID([]byte("A")), false),
			consumer.WithGroupConcurrency(1), consumer.WithPrepareTimeout(time.Second)))
		e.start(c)

		a := sendInGroup(t, p, tp, "A")
		require.Equal(t, a, run.next(t, 10*time.Second))
		r, err := p.Remove(ctxT(t), tp, a, producer.WithGroup("g"))
		require.NoError(t, err)
		require.Equal(t, producer.RemovedInFlight, r)
		require.Equal(t, a, sendInGroup(t, p, tp, "A"))
		b := sendInGroup(t, p, tp, "B")

		require.Equal(t, a, run.next(t, 20*time.Second), "the re-sent A, once the removed delivery's lease ran out")
		require.Equal(t, b, run.next(t, 10*time.Second))
	})
}

// A fails and waits a minute for its retry, holding its group's place; it
// is removed while it waits, sent again, then B: both go at once.
func TestSerialGroupGoesOnAfterRemoveOfAWaitingRetry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "gplaces-retry", topic.FixedTime, 4)
		p := producerOn(t, e.rdb, e.prefix)
		run := newPlaceRun()
		c := e.client()
		require.NoError(t, c.Register(tp, run.listener(producer.BodyID([]byte("A")), true),
			consumer.WithGroupConcurrency(1), consumer.WithRetryBackoff(func(int) time.Duration { return time.Minute })))
		e.start(c)

		a := sendInGroup(t, p, tp, "A")
		require.Equal(t, a, run.next(t, 10*time.Second))
		// The rollback is asynchronous: wait until A waits for its retry.
		k := e.keys(tp, slots.IndexString("g", tp.SlotAmount()))
		require.Eventually(t, func() bool { _, ok := e.zscore(k.Store, a); return ok }, 10*time.Second, 10*time.Millisecond)
		r, err := p.Remove(ctxT(t), tp, a, producer.WithGroup("g"))
		require.NoError(t, err)
		require.Equal(t, producer.RemovedWaiting, r)
		require.Equal(t, a, sendInGroup(t, p, tp, "A"))
		b := sendInGroup(t, p, tp, "B")

		require.Equal(t, a, run.next(t, 10*time.Second))
		require.Equal(t, b, run.next(t, 10*time.Second))
	})
}

// A is delivered under a group limit of 1 (Inspector.SetLimits, obeyed by
// a consumer without limit options); the limits are removed while A runs,
// so A's ack names no group keys; the limit is set to 1 again, and a new
// consumer (which reads it at Start) gets the re-sent A and then B.
func TestSerialGroupGoesOnAfterItsLimitWentOffAndOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "gplaces-limits", topic.FixedTime, 4)
		p := producerOn(t, e.rdb, e.prefix)
		run := newPlaceRun()
		c := e.client()
		require.NoError(t, c.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{GroupConcurrency: 1}))
		require.NoError(t, c.Register(tp, run.listener(producer.BodyID([]byte("A")), false)))
		e.start(c)

		a := sendInGroup(t, p, tp, "A")
		require.Equal(t, a, run.next(t, 10*time.Second))
		require.NoError(t, c.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{}))
		// C starts while A runs: the consumer took the new limits.
		cID := sendInGroup(t, p, tp, "C")
		require.Equal(t, cID, run.next(t, 10*time.Second))
		close(run.release)
		k := e.keys(tp, slots.IndexString("g", tp.SlotAmount()))
		require.Eventually(t, func() bool {
			_, inA := e.zscore(k.Prepare, a)
			_, inC := e.zscore(k.Prepare, cID)
			return !inA && !inC
		}, 10*time.Second, 10*time.Millisecond, "A and C acked")
		require.NoError(t, c.Close(ctxT(t)))

		c2 := e.client()
		require.NoError(t, c2.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{GroupConcurrency: 1}))
		run2 := newPlaceRun()
		require.NoError(t, c2.Register(tp, run2.listener("", false)))
		e.start(c2)
		require.Equal(t, a, sendInGroup(t, p, tp, "A"))
		b := sendInGroup(t, p, tp, "B")
		require.Equal(t, a, run2.next(t, 10*time.Second))
		require.Equal(t, b, run2.next(t, 10*time.Second))
	})
}
