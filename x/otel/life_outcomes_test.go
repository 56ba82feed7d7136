package rmqotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The OpenTelemetry counterpart of the Prometheus module's test: acks in
// rmq.acked (completed), a delivery cancelled while its handler runs in
// rmq.cancelled, neither retried nor dead.
func TestMetricsCompletedAndCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	tp := mustTopic(t, "jobs", topic.FixedTime, 1)
	running := make(chan string, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(hctx context.Context, msg *consumer.Message) error {
		if msg.ID != "slow" {
			return msg.SetResult([]byte("ok"))
		}
		running <- msg.ID
		<-hctx.Done()
		if !errors.Is(context.Cause(hctx), rmq.ErrCancelled) {
			return context.Cause(hctx)
		}
		return nil // ignores its cancellation: the delivery ends Cancelled all the same
	}), consumer.WithRetention(time.Minute), consumer.WithEvents(100)))
	e.Start(c)
	for _, id := range []string{"a", "b", "slow"} {
		_, err := c.Producer().SendFixedTime(ctx, tp, []byte(id), time.Now(), producer.WithKey(id))
		require.NoError(t, err)
	}
	require.Equal(t, "slow", <-running)
	ok, err := c.Inspector().Cancel(ctx, tp, "slow")
	require.NoError(t, err)
	require.True(t, ok)

	require.Eventually(t, func() bool {
		return m.value("rmq.acked", "jobs") == 2 && m.value("rmq.cancelled", "jobs") == 1
	}, 10*time.Second, 5*time.Millisecond, "acked %v cancelled %v", m.value("rmq.acked", "jobs"), m.value("rmq.cancelled", "jobs"))
	assert.Equal(t, 0.0, m.value("rmq.retried", "jobs"))
	assert.Equal(t, 0.0, m.value("rmq.dead", "jobs"))
	assert.Equal(t, 3.0, m.value("rmq.retained.depth", "jobs"))
	// Three sent, three delivered, two completed, one cancelled.
	assert.Equal(t, 9.0, m.value("rmq.event_log.length", "jobs"))
}
