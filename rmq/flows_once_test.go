package rmq_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A child's completion reported twice (its consumer died after the report
// and before the ack, so it runs and reports again; or go-redis resent the
// report) counts once: the parent is not released until its other child
// finished, and then exactly once.
func TestFlowReportedTwiceCountsOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "ftwice", topic.FixedTime, 8)
		c := e.client()
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("P"), Options: key("P"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("a"), Options: key("a")},
			{Topic: tp, Body: []byte("b"), Options: key("b")},
		}})
		require.NoError(t, err)
		rep := flowtree.NewReporter(e.rdb, e.prefix)
		ref := flowtree.Ref{Fail: true, Slot: slotOfKey(tp, "P"), Index: 1, Topic: tp.Name(), ID: "P"}
		for range 3 {
			require.NoError(t, rep.Report(ctx, ref, 'c', "", []byte("first")))
		}
		assert.EqualValues(t, 2, e.counts(tp).Store, "a and b wait; P is not released")
		fi, err := c.Inspector().Flow(ctx, tp, "P")
		require.NoError(t, err)
		assert.Equal(t, "waiting_children", string(fi.Node.State))

		log := newTreeLog(map[string][]string{"P": {"b"}})
		require.NoError(t, c.Register(tp, log.listener(nil), consumer.WithConcurrency(1)))
		e.start(c)
		log.waitFor(t, "a", "b", "P")
		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Empty(t, log.early)
		assert.Equal(t, 1, log.runs["P"])
		require.Len(t, log.children["P"], 2)
		assert.Equal(t, "first", string(log.children["P"][0].Result), "the first report of a wins")
	})
}
