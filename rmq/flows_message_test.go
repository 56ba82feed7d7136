package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Inspector.Message finds a flow's parent while it waits for its
// children (only its record holds it): StateWaitingChildren, with its
// body and options; an id of nothing is still not found.
func TestFlowWaitingParentMessage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fwait", topic.FixedTime, 8)
		c := e.client()
		later := time.Now().Add(time.Hour)
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("album"),
			Options:  []producer.SendOption{producer.WithKey("album"), producer.WithMaxRetries(4)},
			Children: []producer.FlowNode{{Topic: tp, Body: []byte("img"), Options: key("img"), DueAt: later}}})
		require.NoError(t, err)
		m, err := c.Inspector().Message(ctx, tp, "album")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateWaitingChildren, m.State)
		assert.Equal(t, "album", string(m.Body))
		assert.Equal(t, slotOfKey(tp, "album"), m.Slot)
		_, err = c.Inspector().Message(ctx, tp, "nothing")
		assert.ErrorIs(t, err, rmq.ErrMessageNotFound)
	})
}
