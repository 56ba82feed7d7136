package rmq_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Flow children ended by id (AckByID, NackByID: what a stateless caller
// such as rmqd uses) report their outcomes to their parent as a held
// delivery's Ack and Nack do: the child acked by id counts as completed,
// the one nacked dead by id as dead, and the parent is released (with
// ContinueParent) and pulled.
func TestFlowChildrenEndedByID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		parents := mustTopic(t, "byid-p", topic.FixedTime, 4)
		kids := mustTopic(t, "byid-k", topic.FixedTime, 4)
		c := e.client()
		e.Start(c)
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: parents, Body: []byte("p"), Options: key("p"), Children: []producer.FlowNode{
			{Topic: kids, Body: []byte("ok"), Options: append(key("ok"), producer.WithMaxRetries(0))},
			{Topic: kids, Body: []byte("bad"), Options: append(key("bad"), producer.WithMaxRetries(0)), OnFailure: producer.ContinueParent},
		}})
		require.NoError(t, err)
		ds, err := c.Pull(ctx, []topic.Topic{kids}, 2, rmq.WithWait(waitLong))
		require.NoError(t, err)
		for len(ds) < 2 {
			more, err := c.Pull(ctx, []topic.Topic{kids}, 2-len(ds), rmq.WithWait(waitLong))
			require.NoError(t, err)
			ds = append(ds, more...)
		}
		acked, err := c.AckByID(ctx, kids, "ok")
		require.NoError(t, err)
		require.True(t, acked)
		nacked, err := c.NackByID(ctx, kids, "bad", 0, errors.New("no"))
		require.NoError(t, err)
		require.True(t, nacked)

		got, err := c.Pull(ctx, []topic.Topic{parents}, 1, rmq.WithWait(waitLong))
		require.NoError(t, err)
		require.Len(t, got, 1, "the parent is released by the children's ends by id")
		assert.Equal(t, "p", got[0].ID)
		f, err := c.Inspector().Flow(ctx, parents, "p")
		require.NoError(t, err)
		require.Len(t, f.Children, 2)
		assert.Equal(t, rmq.StateCompleted, f.Children[0].Node.State)
		assert.Equal(t, rmq.StateDead, f.Children[1].Node.State)
		require.NoError(t, got[0].Ack(ctx))
	})
}
