package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// muxTopic is one topic of TestFetchesOfTopicsMerge and what its listener
// saw.
type muxTopic struct {
	tp   topic.Topic
	conc int
	sent []string // in consume order

	running, most atomic.Int64
	mu            sync.Mutex
	got           []string
	foreign       []string
	all           chan struct{}
}

func (mt *muxTopic) OnMessage(ctx context.Context, m *consumer.Message) error {
	n := mt.running.Add(1)
	defer mt.running.Add(-1)
	for {
		old := mt.most.Load()
		if n <= old || mt.most.CompareAndSwap(old, n) {
			break
		}
	}
	if mt.conc > 1 {
		// Long enough for the others to start: the limit is tested.
		time.Sleep(20 * time.Millisecond)
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if m.Topic != mt.tp.Name() {
		mt.foreign = append(mt.foreign, m.Topic+"/"+m.ID)
	}
	mt.got = append(mt.got, m.ID)
	if len(mt.got) == len(mt.sent) {
		close(mt.all)
	}
	return nil
}

// Topics of every type, slot count and concurrency on one client, with
// messages coming due at one instant across them: their fetches go to Redis
// merged (fewer rounds than fetches, rounds of several), and each topic
// still receives exactly its messages, in order where its concurrency is
// one, never more at once than its concurrency.
func TestFetchesOfTopicsMerge(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHub(t, rdb, prefix)
	var biggest atomic.Int64
	h.calls.RoundHook = func(n int) {
		for {
			old := biggest.Load()
			if int64(n) <= old || biggest.CompareAndSwap(old, int64(n)) {
				return
			}
		}
	}

	types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
	slotCounts := []int{1, 2, 4, 16}
	const topics, perTopic = 24, 6
	p := newProducer(rdb, prefix)
	var mts []*muxTopic
	var engines []*Engine
	for i := range topics {
		mt := &muxTopic{tp: topic.MustNew(fmt.Sprintf("mux%02d", i), types[i%3], slotCounts[i%4]), conc: 1 + 2*(i%2), all: make(chan struct{})}
		opts := []consumer.Option{consumer.WithConcurrency(mt.conc)}
		if i%4 == 3 {
			opts = append(opts, consumer.WithPrefetch(2))
		}
		e, err := h.newEngine(mt.tp, mt, opts...)
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		engines = append(engines, e)
		mts = append(mts, mt)
	}
	defer func() {
		for _, e := range engines {
			require.NoError(t, e.Close(ctx))
		}
	}()
	// Every message of a topic comes due at the wave's instant or just
	// after, in the order of sent; priority ones are due at once, highest
	// first. One batch per topic: the sends end well before the wave even
	// on a loaded machine (a wave spread over the sends merges less).
	due := time.Now().Add(2 * time.Second)
	for _, mt := range mts {
		var msgs []producer.BatchMessage
		for j := range perTopic {
			id := fmt.Sprintf("%s-%d", mt.tp.Name(), j)
			mt.sent = append(mt.sent, id)
			m := producer.BatchMessage{Body: []byte(id), Key: id}
			switch mt.tp.Type() {
			case topic.FixedTime:
				m.At = due.Add(time.Duration(j) * time.Millisecond)
			case topic.Priority:
				m.Priority, m.Options = int64(100-j), []producer.SendOption{producer.WithNotBefore(due)}
			case topic.RangeMerge:
				m.TimeRange = time.Until(due) + time.Duration(10*j)*time.Millisecond
			}
			msgs = append(msgs, m)
		}
		_, err := p.SendBatch(ctx, mt.tp, msgs)
		require.NoError(t, err)
	}
	roundsBefore, fetchesBefore := h.calls.Rounds.Load(), h.calls.Fetches.Load()
	for _, mt := range mts {
		select {
		case <-mt.all:
		case <-ctx.Done():
			t.Fatalf("%s: got %d of %d", mt.tp.Name(), len(mt.got), len(mt.sent))
		}
	}
	rounds, fetches := h.calls.Rounds.Load()-roundsBefore, h.calls.Fetches.Load()-fetchesBefore
	t.Logf("wave: %d fetches in %d rounds, the largest round %d", fetches, rounds, biggest.Load())
	assert.Less(t, rounds, fetches, "fetches merged into fewer rounds")
	assert.GreaterOrEqual(t, biggest.Load(), int64(4), "a round carried several topics' fetches")
	for _, mt := range mts {
		mt.mu.Lock()
		name := fmt.Sprintf("%s (%s, %d slots, concurrency %d)", mt.tp.Name(), mt.tp.Type(), mt.tp.SlotAmount(), mt.conc)
		assert.Empty(t, mt.foreign, "%s: other topics' messages", name)
		if mt.conc == 1 {
			assert.Equal(t, mt.sent, mt.got, "%s: order", name)
		} else {
			assert.ElementsMatch(t, mt.sent, mt.got, "%s: each once", name)
		}
		assert.LessOrEqual(t, mt.most.Load(), int64(mt.conc), "%s: concurrency", name)
		mt.mu.Unlock()
	}
}

// A fetch whose caller gives up before a round took it never runs: nothing
// is moved to prepare for a fetcher that is gone. The others of its queue
// still run, and one whose caller gives up once its round runs gets what
// the round moved.
func TestMuxDropsAbandonedFetch(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	h := newHub(t, rdb, prefix)
	gate := make(chan struct{})
	h.calls.RoundHook = func(int) { <-gate }

	tp := topic.MustNew("drop", topic.FixedTime, 4)
	p := newProducer(rdb, prefix)
	var calls []scripts.FetchCall
	for s := range 4 {
		k := keyspace.KeysFor(prefix, tp, s)
		calls = append(calls, scripts.FetchCall{TimeBased: true, N: 5, LeaseSec: 30, Window: 8,
			Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 5}}})
	}
	for i := 0; i < 200; i++ {
		_, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprint("m", i)), time.Now().Add(-time.Second))
		require.NoError(t, err)
	}
	type result struct {
		reply scripts.FetchReply
		err   error
	}
	res := make([]chan result, 4)
	run := func(i int, ctx context.Context) {
		res[i] = make(chan result, 1)
		go func() {
			r, _, _, err := h.calls.Fetch(ctx, calls[i])
			res[i] <- result{r, err}
		}()
	}
	queued := func(n int) {
		require.Eventually(t, func() bool { return h.calls.Queued() == n }, 5*time.Second, time.Millisecond)
	}
	// Two rounds in flight, held at the gate; two fetches queue behind them.
	// The first one's caller gives up while its round runs: it still gets
	// what its round moved.
	late, lateGiveUp := context.WithCancel(ctx)
	run(0, late)
	run(1, ctx)
	require.Eventually(t, func() bool { return h.calls.Rounds.Load() == 2 }, 5*time.Second, time.Millisecond)
	lateGiveUp()
	gone, giveUp := context.WithCancel(ctx)
	run(2, gone)
	queued(1)
	run(3, ctx)
	queued(2)
	giveUp()
	r := <-res[2]
	require.ErrorIs(t, r.err, context.Canceled)
	queued(1)
	close(gate)
	for _, i := range []int{0, 1, 3} {
		r := <-res[i]
		require.NoError(t, r.err)
		require.Len(t, r.reply.Heads, 1)
	}
	assert.EqualValues(t, 3, h.calls.Rounds.Load(), "rounds")
	assert.EqualValues(t, 3, h.calls.Fetches.Load(), "the abandoned fetch never ran")
	k := keyspace.KeysFor(prefix, tp, 2)
	n, err := rdb.ZCard(ctx, k.Prepare).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing moved to prepare for the abandoned fetch")
}
