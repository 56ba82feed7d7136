package rmq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A child cancelled or removed reaches its parent once: with the default
// the parent goes dead naming it, with ContinueParent the parent runs and
// sees it cancelled or removed. A removal whose report was lost (the
// remover died right after remove.lua) is found by the sweeper's scan.
func TestFlowChildCancelledOrRemoved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fend", topic.FixedTime, 8)
		c := e.client()
		p := c.Producer()
		later := time.Now().Add(time.Hour)
		send := func(parent string, on producer.FlowFailure, kids ...string) {
			n := producer.FlowNode{Topic: tp, Body: []byte(parent), Options: key(parent)}
			for _, k := range kids {
				n.Children = append(n.Children, producer.FlowNode{Topic: tp, Body: []byte(k), Options: key(k), DueAt: later, OnFailure: on})
			}
			_, err := p.SendFlow(ctx, n)
			require.NoError(t, err)
		}
		send("P1", producer.FailParent, "x1")
		send("P2", producer.ContinueParent, "x2", "r2")
		send("P3", producer.ContinueParent, "lost")
		insp := c.Inspector()
		ok, err := insp.Cancel(ctx, tp, "x1")
		require.NoError(t, err)
		require.True(t, ok)
		m, err := insp.Message(ctx, tp, "P1")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateDead, m.State)
		assert.Contains(t, m.LastError, "flow child fend/x1 cancelled")

		ok, err = insp.Cancel(ctx, tp, "x2")
		require.NoError(t, err)
		require.True(t, ok)
		r, err := p.Remove(ctx, tp, "r2")
		require.NoError(t, err)
		require.Equal(t, producer.RemovedWaiting, r)

		// "lost": removed by a script call whose report never came.
		k := e.keys(tp, slotOfKey(tp, "lost"))
		_, err = e.rdb.ZRem(ctx, k.Store, "lost").Result()
		require.NoError(t, err)
		require.NoError(t, e.rdb.HDel(ctx, k.Msg, "lost").Err())
		up := keyspace.TreeKeysFor(e.prefix, tp.Name(), slotOfKey(tp, "lost")).Up
		require.True(t, e.rdb.HExists(ctx, up, "lost").Val(), "the watch entry stays until reported")

		log := newTreeLog(nil)
		require.NoError(t, c.Register(tp, log.listener(nil), consumer.WithSweepInterval(100*time.Millisecond)))
		e.start(c)
		log.waitFor(t, "P2", "P3")
		log.mu.Lock()
		defer log.mu.Unlock()
		states := map[string]string{}
		for _, id := range []string{"P2", "P3"} {
			for _, ch := range log.children[id] {
				states[ch.ID] = ch.State
			}
		}
		assert.Equal(t, map[string]string{"x2": "cancelled", "r2": "removed", "lost": "removed"}, states)
		assert.Zero(t, log.runs["P1"])
		assert.False(t, e.rdb.HExists(ctx, up, "lost").Val(), "reported, the watch entry goes")
	})
}

// A SendFlow that dies after staging leaves nothing visible; one that dies
// after its commit is finished by a consumer's scan. (The writer's steps
// are run here by hand, as a dying writer would leave them.)
func TestFlowStagedLeftovers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fstage", topic.FixedTime, 8)
		c := e.client()
		rep := flowtree.NewReporter(e.rdb, e.prefix)
		// Staged, never committed: a scan once the grace passed discards it.
		nodes := func(root string, kids ...string) []flowtree.Node {
			s := slotOfKey(tp, root)
			ns := []flowtree.Node{{Topic: tp.Name(), Slot: s, ID: root, Type: 3, Score: "0", Body: []byte(root)}}
			for i, k := range kids {
				ref := flowtree.Ref{Fail: true, Slot: s, Index: i + 1, Topic: tp.Name(), ID: root}
				ns[0].Kids = append(ns[0].Kids, flowtree.Kid(true, tp.Name(), slotOfKey(tp, k), k))
				opts := scripts.EncodeOptions(scripts.Options{Headers: map[string]string{flowtree.Header: ref.String()}})
				ns = append(ns, flowtree.Node{Topic: tp.Name(), Slot: slotOfKey(tp, k), ID: k, Type: 3, Score: "0", Body: []byte(k), Up: ref.String(), Opts: opts})
			}
			return ns
		}
		_, err := flowtree.StageOnly(ctx, e.rdb, e.prefix, nodes("dropped", "d1", "d2"))
		require.NoError(t, err)
		assert.Zero(t, e.counts(tp).Store, "staged nodes are not visible")
		fid, err := flowtree.StageOnly(ctx, e.rdb, e.prefix, nodes("kept", "k1", "k2"))
		require.NoError(t, err)
		require.NoError(t, flowtree.Act(ctx, e.rdb, e.prefix, "", tp.Name(), slotOfKey(tp, "kept"), "a", fid, []string{"r:kept"}))
		// The grace is a duration: age the staged entries past it.
		for s := range tp.SlotAmount() {
			q := keyspace.TreeKeysFor(e.prefix, tp.Name(), s).StageQ
			for _, m := range e.rdb.ZRange(ctx, q, 0, -1).Val() {
				e.rdb.ZAdd(ctx, q, redis.Z{Score: 1, Member: m})
			}
		}
		for s := range tp.SlotAmount() {
			_, err := rep.Scan(ctx, tp.Name(), s, "0")
			require.NoError(t, err)
		}
		assert.EqualValues(t, 2, e.counts(tp).Store, "k1 and k2 activated, d1 and d2 discarded")
		_, err = c.Inspector().Flow(ctx, tp, "dropped")
		assert.ErrorIs(t, err, rmq.ErrMessageNotFound)
		fi, err := c.Inspector().Flow(ctx, tp, "kept")
		require.NoError(t, err)
		assert.Len(t, fi.Children, 2)
		log := newTreeLog(map[string][]string{"kept": {"k1", "k2"}})
		require.NoError(t, c.Register(tp, log.listener(nil)))
		e.start(c)
		log.waitFor(t, "k1", "k2", "kept")
	})
}

// Pulled children ended by id (rmqd's way: AckByID, NackByID) report to
// their parent as pushed ones do.
func TestFlowChildrenEndedByID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		kids := mustTopic(t, "fbyid", topic.FixedTime, 4)
		parents := mustTopic(t, "fbyidp", topic.FixedTime, 4)
		c := e.client()
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: parents, Body: []byte("P"), Options: key("P"), Children: []producer.FlowNode{
			{Topic: kids, Body: []byte("a"), Options: key("a")},
			{Topic: kids, Body: []byte("b"), Options: key("b"), OnFailure: producer.ContinueParent},
		}})
		require.NoError(t, err)
		e.start(c)
		var got []string
		for len(got) < 2 {
			ds, err := c.Pull(ctx, []topic.Topic{kids}, 2)
			require.NoError(t, err)
			for _, d := range ds {
				got = append(got, d.ID)
			}
		}
		ok, err := c.AckByID(ctx, kids, "a")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = c.NackByID(ctx, kids, "b", 0, consumer.SkipRetry(errors.New("bad b")))
		require.NoError(t, err)
		require.True(t, ok)
		ds, err := c.Pull(ctx, []topic.Topic{parents}, 1)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		rec, err := flowtree.Read(ctx, e.rdb, e.prefix, parents.Name(), slotOfKey(parents, "P"), "P")
		require.NoError(t, err)
		states := map[string]string{}
		for _, ch := range rec.Finished() {
			states[ch.ID] = ch.State
		}
		assert.Equal(t, map[string]string{"a": "completed", "b": "dead"}, states)
	})
}
