package rmqprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A topic's retained finished messages and event-log entries show in
// rmq_retained_depth and rmq_event_log_length, read from Redis at scrape
// time; a topic that keeps neither shows 0.
func TestMetricsRetainedAndEventLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	jobs := mustTopic(t, "jobs", topic.FixedTime, 2)
	plain := mustTopic(t, "plain", topic.FixedTime, 2)
	for _, tp := range []topic.Topic{jobs, plain} {
		for _, id := range []string{"a", "b", "c"} {
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(id), time.Now().Add(time.Hour), producer.WithKey(id))
			require.NoError(t, err)
		}
	}
	insp := c.Inspector()
	require.NoError(t, insp.SetLifecycle(ctx, jobs, rmq.Lifecycle{Retention: time.Minute, Events: 100}))
	assert.Equal(t, 0.0, value(t, reg, "rmq_retained_depth", "jobs"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_event_log_length", "jobs"))
	for _, tp := range []topic.Topic{jobs, plain} {
		for _, id := range []string{"a", "b"} {
			ok, err := insp.Cancel(ctx, tp, id)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	assert.Equal(t, 2.0, value(t, reg, "rmq_retained_depth", "jobs"))
	assert.Equal(t, 2.0, value(t, reg, "rmq_event_log_length", "jobs"), "one cancelled event each")
	assert.Equal(t, 0.0, value(t, reg, "rmq_retained_depth", "plain"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_event_log_length", "plain"))
	assert.Equal(t, 1.0, value(t, reg, "rmq_store_depth", "jobs"))
}
