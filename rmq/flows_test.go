package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// treeLog records a flow's deliveries: how often each node ran, in which
// order nodes finished, and what each parent's Children said when it ran.
type treeLog struct {
	mu       sync.Mutex
	runs     map[string]int
	finished map[string]bool
	order    []string
	children map[string][]consumer.ChildResult
	early    []string // parents delivered before one of their children finished
	kids     map[string][]string
	done     chan string
}

func newTreeLog(kids map[string][]string) *treeLog {
	return &treeLog{runs: map[string]int{}, finished: map[string]bool{}, children: map[string][]consumer.ChildResult{},
		kids: kids, done: make(chan string, 100000)}
}

// listener is a handler that records m, sets its id as its result and,
// for a parent, reads its children; fail says which ids fail for good.
func (l *treeLog) listener(fail map[string]bool) consumer.ListenerFunc {
	return func(ctx context.Context, m *consumer.Message) error {
		l.mu.Lock()
		l.runs[m.ID]++
		for _, k := range l.kids[m.ID] {
			if !l.finished[k] {
				l.early = append(l.early, m.ID)
			}
		}
		l.mu.Unlock()
		if fail[m.ID] {
			return consumer.SkipRetry(errors.New("boom " + m.ID))
		}
		cs, err := m.Children(ctx)
		if err != nil {
			return err
		}
		if err := m.SetResult([]byte("r-" + m.ID)); err != nil {
			return err
		}
		l.mu.Lock()
		if cs != nil {
			l.children[m.ID] = cs
		}
		// Finished before the handler returns: the report and the ack
		// come after, so a parent that runs sees its children finished.
		l.finished[m.ID] = true
		l.order = append(l.order, m.ID)
		l.mu.Unlock()
		l.done <- m.ID
		return nil
	}
}

func (l *treeLog) waitFor(t *testing.T, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(waitLong)
	for len(want) > 0 {
		select {
		case id := <-l.done:
			delete(want, id)
		case <-deadline:
			t.Fatalf("not finished: %v", want)
		}
	}
}

func key(id string) []producer.SendOption { return []producer.SendOption{producer.WithKey(id)} }

// A tree of three levels over three topics of two types (16 slots each;
// on the cluster its nodes lie on many slots of three masters) runs
// bottom up: each node once, each parent after all its children, with
// their results, and the Inspector draws it.
func TestFlowTreeAcrossTopics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		ta := mustTopic(t, "fa", topic.FixedTime, 16)
		tb := mustTopic(t, "fb", topic.Priority, 16)
		tc := mustTopic(t, "fc", topic.FixedTime, 16)
		tree := producer.FlowNode{Topic: ta, Body: []byte("root"), Options: key("root"), Children: []producer.FlowNode{
			{Topic: tb, Body: []byte("b1"), Options: key("b1"), Priority: 100, Children: []producer.FlowNode{
				{Topic: tc, Body: []byte("c1"), Options: key("c1")},
				{Topic: tc, Body: []byte("c2"), Options: key("c2")},
				{Topic: tb, Body: []byte("b3"), Options: key("b3"), Priority: 50},
			}},
			{Topic: tc, Body: []byte("c3"), Options: key("c3")},
			{Topic: tb, Body: []byte("b2"), Options: key("b2"), Priority: 20, Children: []producer.FlowNode{
				{Topic: ta, Body: []byte("a1"), Options: key("a1")},
			}},
		}}
		c := e.client()
		id, err := c.Producer().SendFlow(ctx, tree)
		require.NoError(t, err)
		assert.Equal(t, "root", id)

		// Before any consumer: the leaves wait, the parents do not.
		insp := c.Inspector()
		fi, err := insp.Flow(ctx, ta, "root")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateWaitingChildren, fi.Node.State)
		assert.Equal(t, "root", string(fi.Node.Body))
		require.Len(t, fi.Children, 3)
		assert.Equal(t, rmq.StateWaitingChildren, fi.Children[0].Node.State)
		assert.Equal(t, rmq.StateWaiting, fi.Children[0].Children[0].Node.State)
		assert.EqualValues(t, 1, e.counts(ta).Store, "only the leaf a1 waits in fa")

		log := newTreeLog(map[string][]string{"root": {"b1", "c3", "b2"}, "b1": {"c1", "c2", "b3"}, "b2": {"a1"}})
		for _, tp := range []topic.Topic{ta, tb, tc} {
			require.NoError(t, c.Register(tp, log.listener(nil), consumer.WithConcurrency(4)))
		}
		e.start(c)
		log.waitFor(t, "root", "b1", "b2", "b3", "c1", "c2", "c3", "a1")

		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Empty(t, log.early, "no parent before its children")
		for id, n := range log.runs {
			assert.Equal(t, 1, n, id)
		}
		var got []string
		for _, r := range log.children["root"] {
			assert.Equal(t, "completed", r.State)
			assert.Equal(t, "r-"+r.ID, string(r.Result))
			got = append(got, r.Topic+"/"+r.ID)
		}
		sort.Strings(got)
		assert.Equal(t, []string{"fb/b1", "fb/b2", "fc/c3"}, got)
		assert.Len(t, log.children["b1"], 3)
		assert.Len(t, log.children["b2"], 1)
		assert.Nil(t, log.children["c1"], "a leaf has no children")

		fi, err = insp.Flow(ctx, ta, "root")
		require.NoError(t, err)
		require.Len(t, fi.Children, 3)
		assert.Equal(t, rmq.StateCompleted, fi.Children[1].Node.State)
		assert.Equal(t, "r-c3", string(fi.Children[1].Node.Result))
	})
}

// A batch of 1,000 children: the parent runs exactly once, after the last
// of them, with 1,000 results.
func TestFlowBatchOfThousand(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fbatch", topic.Priority, 16)
		tr := mustTopic(t, "fbroot", topic.FixedTime, 4)
		root := producer.FlowNode{Topic: tr, Body: []byte("album"), Options: key("album")}
		var ids []string
		for i := range 1000 {
			id := fmt.Sprintf("img-%04d", i)
			ids = append(ids, id)
			root.Children = append(root.Children, producer.FlowNode{Topic: tp, Body: []byte(id), Options: key(id), Priority: 100})
		}
		c := e.client()
		_, err := c.Producer().SendFlow(ctx, root)
		require.NoError(t, err)
		log := newTreeLog(map[string][]string{"album": ids})
		require.NoError(t, c.Register(tp, log.listener(nil), consumer.WithConcurrency(32)))
		require.NoError(t, c.Register(tr, log.listener(nil)))
		e.start(c)
		log.waitFor(t, append(ids, "album")...)
		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Empty(t, log.early)
		assert.Equal(t, 1, log.runs["album"])
		require.Len(t, log.children["album"], 1000)
		seen := map[string]bool{}
		for _, r := range log.children["album"] {
			assert.Equal(t, "r-"+r.ID, string(r.Result))
			seen[r.ID] = true
		}
		assert.Len(t, seen, 1000)
		assert.Equal(t, "album", log.order[len(log.order)-1])
	})
}

// A child that goes dead sends its parent to the dead queue (and its
// grandparent after it), with a last error naming the child; with
// ContinueParent the parent runs and sees the child dead.
func TestFlowChildDead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fdead", topic.FixedTime, 8)
		c := e.client()
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("g"), Options: key("g"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("p"), Options: key("p"), Children: []producer.FlowNode{
				{Topic: tp, Body: []byte("bad"), Options: key("bad")},
				{Topic: tp, Body: []byte("ok"), Options: key("ok")},
			}},
		}})
		require.NoError(t, err)
		_, err = c.Producer().SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("q"), Options: key("q"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("bad2"), Options: key("bad2"), OnFailure: producer.ContinueParent},
			{Topic: tp, Body: []byte("ok2"), Options: key("ok2")},
		}})
		require.NoError(t, err)
		log := newTreeLog(map[string][]string{"q": {"ok2"}})
		require.NoError(t, c.Register(tp, log.listener(map[string]bool{"bad": true, "bad2": true}), consumer.WithConcurrency(4)))
		e.start(c)
		log.waitFor(t, "ok", "ok2", "q")

		insp := c.Inspector()
		require.Eventually(t, func() bool {
			m, err := insp.Message(ctx, tp, "g")
			return err == nil && m.State == rmq.StateDead
		}, waitLong, 10*time.Millisecond)
		p, err := insp.Message(ctx, tp, "p")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateDead, p.State)
		assert.Contains(t, p.LastError, "flow child fdead/bad dead")
		assert.Contains(t, p.LastError, "boom bad")
		g, err := insp.Message(ctx, tp, "g")
		require.NoError(t, err)
		assert.Contains(t, g.LastError, "flow child fdead/p dead")

		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Zero(t, log.runs["p"])
		assert.Zero(t, log.runs["g"])
		assert.Equal(t, 1, log.runs["q"])
		byID := map[string]consumer.ChildResult{}
		for _, r := range log.children["q"] {
			byID[r.ID] = r
		}
		assert.Equal(t, "dead", byID["bad2"].State)
		assert.Contains(t, byID["bad2"].Error, "boom bad2")
		assert.Equal(t, "completed", byID["ok2"].State)
	})
}

// A chain A -> B -> C (each node one child) runs C, B, A in order.
func TestFlowChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "fchain", topic.FixedTime, 8)
		obs := &parentObserver{}
		c := e.client(rmq.WithObserver(obs))
		_, err := c.Producer().SendFlow(ctx, producer.FlowNode{Topic: tp, Body: []byte("A"), Options: key("A"), Children: []producer.FlowNode{
			{Topic: tp, Body: []byte("B"), Options: key("B"), Children: []producer.FlowNode{
				{Topic: tp, Body: []byte("C"), Options: key("C")},
			}},
		}})
		require.NoError(t, err)
		log := newTreeLog(map[string][]string{"A": {"B"}, "B": {"C"}})
		require.NoError(t, c.Register(tp, log.listener(nil), consumer.WithConcurrency(4)))
		e.start(c)
		log.waitFor(t, "A", "B", "C")
		// The observer hears of a release once the releasing call returned;
		// the released parent may run before that (its slot is woken inside
		// the call).
		require.Eventually(t, func() bool { return obs.released.Load() == 2 }, waitLong, 5*time.Millisecond,
			"the observer heard of B and A released")
		log.mu.Lock()
		defer log.mu.Unlock()
		assert.Equal(t, []string{"C", "B", "A"}, log.order)
		assert.Equal(t, "r-B", string(log.children["A"][0].Result))
	})
}

// Bad trees are refused with ErrInvalidFlow and nothing written.
func TestFlowInvalid(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tf := mustTopic(t, "finv", topic.FixedTime, 8)
		tr := mustTopic(t, "finvrm", topic.RangeMerge, 8)
		c := e.client()
		p := c.Producer()
		leaf := func(id string) producer.FlowNode {
			return producer.FlowNode{Topic: tf, Body: []byte(id), Options: key(id)}
		}
		// A waiting message takes its id.
		_, err := p.SendFixedTime(ctx, tf, []byte("x"), time.Now().Add(time.Hour), producer.WithKey("taken"))
		require.NoError(t, err)
		before := e.dump()

		many := leaf("many")
		for i := range producer.MaxFlowChildren + 1 {
			many.Children = append(many.Children, leaf(fmt.Sprintf("k%d", i)))
		}
		deep := leaf("d0")
		for i := producer.MaxFlowDepth + 1; i >= 1; i-- {
			n := leaf(fmt.Sprintf("d%d", i))
			if i <= producer.MaxFlowDepth {
				n.Children = []producer.FlowNode{deep}
			}
			deep = n
		}
		deepOK := leaf("e0")
		for i := 1; i <= producer.MaxFlowDepth; i++ {
			n := leaf(fmt.Sprintf("e%d", i))
			n.Children = []producer.FlowNode{deepOK}
			deepOK = n
		}
		bad := map[string]producer.FlowNode{
			"range-merge": {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{{Topic: tr, Body: []byte("x")}}},
			"duplicate":   {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{leaf("a"), leaf("b"), leaf("a")}},
			"dup-root":    {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{leaf("r")}},
			"taken":       {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{leaf("a"), leaf("taken")}},
			"too-many":    many,
			"too-deep":    {Topic: tf, Body: []byte("top"), Options: key("top"), Children: []producer.FlowNode{deep}},
			"empty-body":  {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{{Topic: tf}}},
			"zero-topic":  {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{{Body: []byte("z")}}},
			"unique":      {Topic: tf, Body: []byte("r"), Options: key("r"), Children: []producer.FlowNode{{Topic: tf, Body: []byte("u"), Options: []producer.SendOption{producer.WithUniqueFor(time.Minute)}}}},
		}
		for name, tree := range bad {
			_, err := p.SendFlow(ctx, tree)
			require.ErrorIs(t, err, producer.ErrInvalidFlow, name)
			assert.Equal(t, before, e.dump(), "%s: nothing written", name)
		}
		// The deepest tree allowed is written.
		_, err = p.SendFlow(ctx, deepOK)
		require.NoError(t, err)
		assert.EqualValues(t, 2, e.counts(tf).Store, "only its leaf waits")
	})
}

// parentObserver counts the flow parents released (rmq.FlowParentObserver).
type parentObserver struct {
	rmq.BaseObserver
	released, failed atomic.Int64
}

func (o *parentObserver) FlowParent(_ string, failed bool) {
	if failed {
		o.failed.Add(1)
	} else {
		o.released.Add(1)
	}
}
