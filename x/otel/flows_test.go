package rmqotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// The OpenTelemetry counterpart of the Prometheus module's flow test. Two
// flows of two children each: one whose children complete (its
// parent is released and runs), one with a child that goes dead (its
// parent fails). The counters say two flows started and one parent each
// released and failed, by topic.
func TestFlowMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	m := newMeter(t)
	c, _ := e.withTelemetry(m)
	albums := mustTopic(t, "albums", topic.FixedTime, 2)
	resizes := mustTopic(t, "resizes", topic.Priority, 2)
	ran := make(chan string, 10)
	require.NoError(t, c.Register(albums, consumer.ListenerFunc(func(_ context.Context, msg *consumer.Message) error {
		ran <- msg.ID
		return nil
	})))
	require.NoError(t, c.Register(resizes, consumer.ListenerFunc(func(_ context.Context, msg *consumer.Message) error {
		if msg.ID == "bad" {
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
	assert.Equal(t, 2.0, m.value("rmq.flows.started", "albums"))
	assert.Equal(t, 0.0, m.value("rmq.flows.started", "resizes"), "a flow counts by its root's topic")
	e.Start(c)
	select {
	case id := <-ran:
		assert.Equal(t, "good", id)
	case <-ctx.Done():
		t.Fatal("the released parent did not run")
	}
	m.eventually("rmq.flow.parents.released", "albums", 1)
	m.eventually("rmq.flow.parents.failed", "albums", 1)
	assert.Equal(t, 0.0, m.value("rmq.flow.parents.released", "resizes"))
}
