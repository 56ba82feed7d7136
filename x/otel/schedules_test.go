package rmqotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The OpenTelemetry counterpart of the Prometheus module's schedule test:
// ticks missed while no client ran are counted as skipped by the client
// that comes, the fired ones as fired, and its consumer records their
// lateness.
func TestScheduleMetrics(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "ticks", topic.FixedTime, 1)
	setter := e.Client(rmq.WithoutScheduler())
	require.NoError(t, setter.Schedules().Set(ctx, rmq.Schedule{Name: "beat", Spec: "@every 1s", Topic: tp, Body: []byte("b")}))
	// The ticks missed while no client runs are the behaviour under test:
	// the wait times it.
	time.Sleep(4500 * time.Millisecond)

	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(ack)))
	require.NoError(t, c.Start(ctx))
	// The tick that fired, the late one fired with it, and the next.
	require.Eventually(t, func() bool { return m.value("rmq.schedule.fired", "ticks") >= 3 }, rmqtest.WaitLong, 20*time.Millisecond)
	info, err := c.Schedules().Get(ctx, "beat")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, info.Skipped, int64(1))
	assert.Equal(t, float64(info.Skipped), m.value("rmq.schedule.skipped", "ticks"))
	p, ok := m.find("rmq.schedule.lateness", "ticks")
	require.True(t, ok)
	assert.GreaterOrEqual(t, p.value, 2.0)
	assert.Greater(t, p.sum, 1.5, "the first tick waited for a consumer")
}
