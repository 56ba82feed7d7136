package rmqprom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A job's end per topic: an ack counts in rmq_acked_total (completed), a
// delivery cancelled while its handler runs in rmq_cancelled_total, and
// neither in rmq_retried_total or rmq_dead_total; the retaining topic
// keeps both (rmq_retained_depth) and logs them (rmq_event_log_length).
func TestMetricsCompletedAndCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	tp := mustTopic(t, "jobs", topic.FixedTime, 1)
	running := make(chan string, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(hctx context.Context, m *consumer.Message) error {
		if m.ID != "slow" {
			return m.SetResult([]byte("ok"))
		}
		running <- m.ID
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

	eventuallyMetric(t, reg, "rmq_acked_total", "jobs", 2)
	eventuallyMetric(t, reg, "rmq_cancelled_total", "jobs", 1)
	assert.Equal(t, 0.0, value(t, reg, "rmq_retried_total", "jobs"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_dead_total", "jobs"))
	assert.Equal(t, 3.0, value(t, reg, "rmq_retained_depth", "jobs"))
	assert.Equal(t, 9.0, value(t, reg, "rmq_event_log_length", "jobs"), "sent and delivered a, b and slow, completed a and b, cancelled slow")
}
