package rmqprom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Two flows of two children each: one whose children complete (its
// parent is released and runs), one with a child that goes dead (its
// parent fails). The counters say two flows started and one parent each
// released and failed, by topic.
func TestFlowMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	c := e.withMetrics(reg)
	albums := mustTopic(t, "albums", topic.FixedTime, 2)
	resizes := mustTopic(t, "resizes", topic.Priority, 2)
	ran := make(chan string, 10)
	require.NoError(t, c.Register(albums, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		ran <- m.ID
		return nil
	})))
	require.NoError(t, c.Register(resizes, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if m.ID == "bad" {
			return consumer.SkipRetry(errors.New("boom"))
		}
		return nil
	})))
	node := func(tp topic.Topic, id string, kids ...producer.FlowNode) producer.FlowNode {
		n := producer.FlowNode{Topic: tp, Body: []byte(id), Options: []producer.SendOption{producer.WithKey(id)}, Children: kids}
		if tp.Type() == topic.Priority {
			n.Priority = 100
		}
		return n
	}
	for _, f := range []producer.FlowNode{
		node(albums, "good", node(resizes, "g1"), node(resizes, "g2")),
		node(albums, "failing", node(resizes, "ok"), node(resizes, "bad")),
	} {
		_, err := c.Producer().SendFlow(ctx, f)
		require.NoError(t, err)
	}
	assert.Equal(t, 2.0, value(t, reg, "rmq_flows_started_total", "albums"))
	assert.Equal(t, 0.0, value(t, reg, "rmq_flows_started_total", "resizes"), "a flow counts by its root's topic")
	e.Start(c)
	select {
	case id := <-ran:
		assert.Equal(t, "good", id)
	case <-ctx.Done():
		t.Fatal("the released parent did not run")
	}
	eventuallyMetric(t, reg, "rmq_flow_parents_released_total", "albums", 1)
	eventuallyMetric(t, reg, "rmq_flow_parents_failed_total", "albums", 1)
	assert.Equal(t, 0.0, value(t, reg, "rmq_flow_parents_released_total", "resizes"))
}
