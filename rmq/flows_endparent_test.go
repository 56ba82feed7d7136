package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A parent waiting for its children can be cancelled (Inspector.Cancel)
// or removed (Producer.Remove): it never runs, its children run on and
// their outcomes are recorded but release nothing, and its own parent
// hears of it as of a child cancelled or removed.
func TestFlowWaitingParentCancelledOrRemoved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fendp", topic.FixedTime, 8)
		c := e.client()
		p := c.Producer()
		insp := c.Inspector()
		// R <- P (ContinueParent) <- k1, k2; Q <- q1.
		_, err := p.SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("R"), Options: key("R"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("P"), Options: key("P"), OnFailure: producer.ContinueParent, Children: []producer.FlowNode{
				{Topic: tp, Body: []byte("k1"), Options: key("k1")},
				{Topic: tp, Body: []byte("k2"), Options: key("k2")},
			}},
		}})
		require.NoError(t, err)
		_, err = p.SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("Q"), Options: key("Q"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("q1"), Options: key("q1")},
		}})
		require.NoError(t, err)

		ok, err := insp.Cancel(ctx, tp, "P")
		require.NoError(t, err)
		require.True(t, ok, "the waiting parent is cancelled")
		ok, err = insp.Cancel(ctx, tp, "P")
		require.NoError(t, err)
		assert.False(t, ok, "once")
		r, err := p.Remove(ctx, tp, "Q")
		require.NoError(t, err)
		require.Equal(t, producer.RemovedWaiting, r, "the waiting parent is removed")
		r, err = p.Remove(ctx, tp, "Q")
		require.NoError(t, err)
		assert.Equal(t, producer.NotFound, r, "once")
		fi, err := insp.Flow(ctx, tp, "R")
		require.NoError(t, err)
		require.Len(t, fi.Children, 1)
		assert.Equal(t, rmq.MessageState("cancelled"), fi.Children[0].Node.State)

		log := newTreeLog(nil)
		require.NoError(t, c.Register(tp, log.listener(nil)))
		e.start(c)
		log.waitFor(t, "k1", "k2", "q1", "R")
		// Every child's outcome reaches its ended parent's record (the
		// report comes after the handler returned) and releases nothing.
		for _, id := range []string{"P", "Q"} {
			require.Eventually(t, func() bool {
				rec, err := flowtree.Read(ctx, e.rdb, e.prefix, tp.Name(), slotOfKey(tp, id), id)
				return err == nil && len(rec.Finished()) == len(rec.Children)
			}, waitLong, 5*time.Millisecond, id)
			rec, err := flowtree.Read(ctx, e.rdb, e.prefix, tp.Name(), slotOfKey(tp, id), id)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"P": flowtree.Cancelled, "Q": flowtree.Removed}[id], rec.State)
			assert.False(t, e.rdb.HExists(ctx, e.keys(tp, slotOfKey(tp, id)).Msg, id).Val(), "%s is not deliverable", id)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Zero(t, log.runs["P"])
		assert.Zero(t, log.runs["Q"])
		assert.Equal(t, 1, log.runs["R"])
		require.Len(t, log.children["R"], 1)
		assert.Equal(t, "cancelled", log.children["R"][0].State)
	})
}
