package rmqprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A schedule whose ticks were missed while no client ran: the client that
// comes counts the tick that fired and the skipped ones, and its consumer
// the lateness of the ticks it receives.
func TestScheduleMetrics(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "ticks", topic.FixedTime, 1)
	setter := e.Client(rmq.WithoutScheduler())
	require.NoError(t, setter.Schedules().Set(ctx, rmq.Schedule{Name: "beat", Spec: "@every 1s", Topic: tp, Body: []byte("b")}))
	// The first tick fires on its own; nothing sends the next ones. The
	// ticks missed while no client runs are the behaviour under test: the
	// wait times it.
	time.Sleep(4500 * time.Millisecond)

	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	require.NoError(t, c.Start(ctx))
	// The tick that fired, the late one fired with it, and the next.
	require.Eventually(t, func() bool { return value(t, reg, "rmq_schedule_ticks_fired_total", "ticks") >= 3 }, rmqtest.WaitLong, 20*time.Millisecond)
	skipped := value(t, reg, "rmq_schedule_ticks_skipped_total", "ticks")
	info, err := c.Schedules().Get(ctx, "beat")
	require.NoError(t, err)
	assert.Equal(t, float64(info.Skipped), skipped)
	assert.GreaterOrEqual(t, skipped, 1.0)
	n, sum, ok := metricsOf(t, reg, "rmq_schedule_tick_lateness_seconds", "ticks")
	require.True(t, ok)
	assert.GreaterOrEqual(t, n, 2.0)
	assert.Greater(t, sum, 1.5, "the first tick waited for a consumer")
}
