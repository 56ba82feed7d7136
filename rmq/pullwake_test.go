package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
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
	e.start(c)
	p := c.Producer()

	// B's engine exists and hears B's wake-ups (so they reached every
	// waiting Pull when all topics shared one wake-up channel).
	ds, err := c.Pull(ctx, []topic.Topic{b}, 1)
	require.NoError(t, err)
	require.Empty(t, ds)

	got := make(chan []*consumer.Delivery, 1)
	go func() {
		ds, err := c.Pull(ctx, []topic.Topic{a}, 1, rmq.WithWait(20*time.Second))
		assert.NoError(t, err)
		got <- ds
	}()
	// The long-poll is waiting once A's engine exists and a B wake-up
	// would have reached it; give it time to get there.
	time.Sleep(300 * time.Millisecond)
	for i := range 20 {
		send(t, p, b, "b"+string(rune('a'+i)), "b")
	}
	// B's wake-ups arrive over pub/sub, within ms here.
	time.Sleep(500 * time.Millisecond)
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
