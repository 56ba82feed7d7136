package rmq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// groupOf returns the group keys of group g's slot of tp.
func (e *env) groupOf(tp topic.Topic, g string) keyspace.GroupKeys {
	return keyspace.GroupKeysFor(e.prefix, tp, slots.IndexString(g, tp.SlotAmount()))
}

// A batch whose children share a group of a topic limited to one
// delivery per group: the children wait in their group's queue (not in
// store) from the flow's write, run one at a time in their due order, and
// the parent runs once after all of them with their results.
func TestFlowGroupedChildrenRunOneAtATime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		kids := mustTopic(t, "fgkids", topic.FixedTime, 8)
		parents := mustTopic(t, "fgparent", topic.FixedTime, 4)
		c := e.client()
		const n = 6
		base := time.Now().Add(-time.Minute)
		root := producer.FlowNode{Topic: parents, Body: []byte("P"), Options: key("P")}
		var want []string
		for i := range n {
			id := fmt.Sprintf("k%d", i)
			want = append(want, id)
			// Distinct past due times: the group's order is theirs.
			root.Children = append(root.Children, producer.FlowNode{Topic: kids, Body: []byte(id), DueAt: base.Add(time.Duration(i) * time.Second),
				Options: []producer.SendOption{producer.WithKey(id), producer.WithGroup("g")}})
		}
		id, err := c.Producer().SendFlow(ctx, root)
		require.NoError(t, err)
		require.Equal(t, "P", id)
		gk := e.groupOf(kids, "g")
		assert.EqualValues(t, n, e.rdb.ZCard(ctx, gk.Queue).Val(), "the children wait in their group's queue")
		assert.Zero(t, e.counts(kids).Store, "nothing of them in store")

		starts := make(chan string, n)
		release := make(chan struct{})
		var mu sync.Mutex
		active, most := 0, 0
		kidH := consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			mu.Lock()
			active++
			most = max(most, active)
			mu.Unlock()
			starts <- m.ID
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			mu.Lock()
			active--
			mu.Unlock()
			return m.SetResult([]byte("r-" + m.ID))
		})
		log := newTreeLog(nil)
		require.NoError(t, c.Register(kids, kidH, consumer.WithGroupConcurrency(1), consumer.WithConcurrency(4)))
		require.NoError(t, c.Register(parents, log.listener(nil)))
		e.start(c)
		var got []string
		for range n {
			select {
			case id := <-starts:
				got = append(got, id)
			case <-time.After(waitLong):
				t.Fatalf("children started: %v", got)
			}
			release <- struct{}{}
		}
		assert.Equal(t, want, got, "one at a time, in the group's order")
		log.waitFor(t, "P")
		mu.Lock()
		assert.Equal(t, 1, most, "never two children of the group at once")
		mu.Unlock()
		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Equal(t, 1, log.runs["P"])
		require.Len(t, log.children["P"], n)
		for i, ch := range log.children["P"] {
			assert.Equal(t, want[i], ch.ID)
			assert.Equal(t, "completed", ch.State)
			assert.Equal(t, "r-"+want[i], string(ch.Result))
		}
	})
}

// A parent with a group, once its children finished, waits in its
// group's queue (its slot is the group's), not in store, and runs from
// there as a message of its group.
func TestFlowGroupedParentReleasedIntoItsGroup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		kids := mustTopic(t, "fgpkids", topic.Priority, 8)
		parents := mustTopic(t, "fgpparent", topic.FixedTime, 8)
		c := e.client()
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: parents, Body: []byte("P"),
			Options: []producer.SendOption{producer.WithKey("P"), producer.WithGroup("pg")},
			Children: []producer.FlowNode{
				{Topic: kids, Body: []byte("a"), Options: key("a"), Priority: 100},
				{Topic: kids, Body: []byte("b"), Options: key("b"), Priority: 200},
			}})
		require.NoError(t, err)
		gk := e.groupOf(parents, "pg")
		slot := slots.IndexString("pg", parents.SlotAmount())
		fi, err := c.Inspector().Flow(ctx, parents, "P")
		require.NoError(t, err, "the parent's record is in its group's slot")
		assert.Len(t, fi.Children, 2)

		log := newTreeLog(map[string][]string{"P": {"a", "b"}})
		require.NoError(t, c.Register(kids, log.listener(nil)))
		e.start(c)
		log.waitFor(t, "a", "b")
		// The last child's report releases the parent after its handler
		// returned: wait for it to arrive in its group's queue.
		require.Eventually(t, func() bool { return e.rdb.ZCard(ctx, gk.Queue).Val() == 1 }, waitLong, 5*time.Millisecond)
		assert.Zero(t, e.rdb.ZCard(ctx, e.keys(parents, slot).Store).Val(), "not in store")
		assert.True(t, e.rdb.HExists(ctx, e.keys(parents, slot).Msg, "P").Val())

		c2 := e.client()
		groups := make(chan string, 1)
		plog := newTreeLog(map[string][]string{"P": {"a", "b"}})
		inner := plog.listener(nil)
		require.NoError(t, c2.Register(parents, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			groups <- m.Group
			return inner(ctx, m)
		}), consumer.WithGroupConcurrency(1)))
		e.start(c2)
		plog.waitFor(t, "P")
		assert.Equal(t, "pg", <-groups)
		plog.mu.Lock()
		defer plog.mu.Unlock()
		assert.Equal(t, 1, plog.runs["P"])
		assert.Len(t, plog.children["P"], 2)
		assert.Zero(t, e.rdb.ZCard(ctx, gk.Queue).Val())
	})
}
