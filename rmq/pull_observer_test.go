package rmq_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// pullObserver is a client observer that records the consumer events of
// every topic: deliveries, outcomes with the handler time, and pauses
// (rmq.PauseObserver), each pause state sent on paused.
type pullObserver struct {
	mu        sync.Mutex
	delivered int
	outcomes  []consumer.Outcome
	took      []time.Duration
	paused    chan bool
}

func newPullObserver() *pullObserver { return &pullObserver{paused: make(chan bool, 16)} }

func (o *pullObserver) Sent(topic.Topic, producer.SendResult) {}
func (o *pullObserver) Removed(topic.Topic, bool)             {}
func (o *pullObserver) LeasesExpired(string, int, int)        {}
func (o *pullObserver) Paused(_ string, paused bool)          { o.paused <- paused }

func (o *pullObserver) Delivered(*consumer.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delivered++
}

func (o *pullObserver) Finished(_ *consumer.Message, took time.Duration, out consumer.Outcome, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, out)
	o.took = append(o.took, took)
}

func (o *pullObserver) state() (int, []consumer.Outcome, []time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.delivered, append([]consumer.Outcome(nil), o.outcomes...), append([]time.Duration(nil), o.took...)
}

// waitPaused waits until the pull engine learnt the pause state want.
func (o *pullObserver) waitPaused(t *testing.T, want bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p := <-o.paused:
			if p == want {
				return
			}
		case <-deadline:
			t.Fatalf("the consumer did not learn paused = %v", want)
		}
	}
}

// Pulled deliveries end through the observer as pushed ones do: once per
// delivery, with the outcome of its Ack or Nack and the time since its
// fetch.
func TestPullObserverOutcomes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "pullobs", topic.FixedTime, 4)
		obs := newPullObserver()
		c := e.client(rmq.WithObserver(obs))
		e.start(c)
		p := c.Producer()
		for _, id := range []string{"a", "b", "c"} {
			send(t, p, tp, id, id)
		}
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 3, rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		for len(ds) < 3 {
			more, err := c.Pull(ctx, []topic.Topic{tp}, 3-len(ds), rmq.WithWait(2*time.Second))
			require.NoError(t, err)
			require.NotEmpty(t, more)
			ds = append(ds, more...)
		}
		byID := map[string]*rmq.Delivery{}
		for _, d := range ds {
			byID[d.ID] = d
		}
		time.Sleep(50 * time.Millisecond) // the handler time below is at least this: the wait times the behaviour under test
		require.NoError(t, byID["a"].Ack(ctx))
		require.NoError(t, byID["a"].Ack(ctx), "a resent ack succeeds")
		require.NoError(t, byID["b"].Nack(ctx, time.Minute, errors.New("later")))
		require.NoError(t, byID["c"].Nack(ctx, 0, consumer.SkipRetry(errors.New("poison"))))

		delivered, outcomes, took := obs.state()
		assert.Equal(t, 3, delivered)
		assert.Equal(t, []consumer.Outcome{consumer.Acked, consumer.Retried, consumer.Dead}, outcomes, "once per delivery")
		for _, d := range took {
			assert.GreaterOrEqual(t, d, 50*time.Millisecond)
			assert.Less(t, d, 10*time.Second)
		}
	})
}
