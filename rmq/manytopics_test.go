package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Many topics with different types and options on one client:
// each topic keeps its own order, concurrency limit and retries whatever
// the others do (serial slots: ZooKeeper mode, below), and Close leaves nothing in prepare in any
// of them. These tests pin today's behaviour so that sharing the consumer
// machinery between topics cannot change it unnoticed.

// topicRole is what one topic of the many-topics test checks.
type topicRole int

const (
	roleOrder topicRole = iota // concurrency 1: handled in score order across slots
	roleLimit                  // concurrency L: never more than L handlers at once, and L reached
	roleRetry                  // failing messages: MaxRetries+1 attempts, then dead
	roleCount
)

func (r topicRole) String() string {
	return [...]string{"order", "limit", "retry"}[r]
}

// manyTopic is one topic of a many-topics test and its listener.
type manyTopic struct {
	tp      topic.Topic
	role    topicRole
	conc    int
	retries int
	opts    []consumer.Option
	sent    []string        // ids, in the order they must be handled (roleOrder)
	failing map[string]bool // roleRetry: ids whose handler fails
	want    int             // handler calls expected in all
	// hold, if set, runs in the handler after it was recorded (roleLimit
	// sets it to wait until the limit is reached).
	hold func(ctx context.Context, first bool) error

	running    atomic.Int64
	maxRunning atomic.Int64
	started    atomic.Int64
	notReached atomic.Bool
	reached    chan struct{}
	reachOnce  sync.Once
	all        chan struct{}
	allOnce    sync.Once

	mu      sync.Mutex
	handled []delivery
	foreign []string
}

func (mt *manyTopic) OnMessage(ctx context.Context, m *consumer.Message) error {
	n := mt.running.Add(1)
	defer mt.running.Add(-1)
	storeMax(&mt.maxRunning, n)
	d := snap(m)
	mt.mu.Lock()
	mt.handled = append(mt.handled, d)
	if m.Topic != mt.tp.Name() {
		mt.foreign = append(mt.foreign, m.Topic+"/"+m.ID)
	}
	done := len(mt.handled) >= mt.want
	mt.mu.Unlock()
	defer func() {
		if done {
			mt.allOnce.Do(func() { close(mt.all) })
		}
	}()

	if n >= int64(mt.conc) {
		mt.reachOnce.Do(func() { close(mt.reached) })
	}
	if mt.hold != nil {
		if err := mt.hold(ctx, mt.started.Add(1) <= int64(mt.conc)); err != nil {
			return err
		}
	}
	if mt.failing[m.ID] {
		return errors.New("fail " + m.ID)
	}
	return nil
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// newManyTopic returns topic i of a many-topics test: types, slot counts,
// roles and options vary with i.
func newManyTopic(t *testing.T, i int) *manyTopic {
	types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
	slotCounts := []int{1, 2, 4, 8, 16}
	mt := &manyTopic{
		tp:      mustTopic(t, fmt.Sprintf("many%02d", i), types[i%3], slotCounts[i%5]),
		role:    topicRole(i / 3 % int(roleCount)),
		conc:    1,
		failing: map[string]bool{},
		reached: make(chan struct{}),
		all:     make(chan struct{}),
	}
	switch mt.role {
	case roleOrder:
	case roleLimit:
		mt.conc = 2 + i%5
		if i%2 == 0 {
			mt.opts = append(mt.opts, consumer.WithPrefetch(4))
		}
		mt.hold = func(ctx context.Context, first bool) error {
			if !first {
				return nil
			}
			// The first L handlers wait until L run at once: the limit is
			// reached when the work allows it.
			select {
			case <-mt.reached:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(waitLong):
				mt.notReached.Store(true)
				return nil
			}
		}
	case roleRetry:
		mt.conc = 3
		mt.retries = i % 3
		mt.opts = append(mt.opts, consumer.WithMaxRetries(mt.retries), consumer.WithRetryBackoff(noBackoff))
	}
	mt.opts = append(mt.opts, consumer.WithConcurrency(mt.conc))
	return mt
}

// send stores the topic's messages (before Start, so the first fetch sees
// them all) and sets how many handler calls to expect.
func (mt *manyTopic) send(t *testing.T, ctx context.Context, p *producer.Producer, rng *rand.Rand) {
	t.Helper()
	name := mt.tp.Name()
	now := time.Now()
	sendOne := func(id string, score int) {
		var err error
		switch mt.tp.Type() {
		case topic.FixedTime:
			// score ms from now: negative is due already.
			_, err = p.SendFixedTime(ctx, mt.tp, []byte("body-"+id), now.Add(time.Duration(score)*time.Millisecond), producer.WithKey(id))
		case topic.Priority:
			// "Due now" (-1) is the lowest valid priority.
			_, err = p.SendPriority(ctx, mt.tp, []byte("body-"+id), max(int64(score), topic.MinPriority), producer.WithKey(id))
		case topic.RangeMerge:
			_, err = p.SendRangeMerge(ctx, mt.tp, []byte("body-"+id), time.Duration(max(score, 0))*time.Millisecond, producer.WithKey(id))
		}
		require.NoError(t, err)
	}
	switch mt.role {
	case roleOrder:
		const n = 8
		for j := range n {
			mt.sent = append(mt.sent, fmt.Sprintf("%s-o%d", name, j))
		}
		switch mt.tp.Type() {
		case topic.FixedTime:
			// Due 200 ms ago … 150 ms ahead, sent shuffled.
			for _, j := range rng.Perm(n) {
				sendOne(mt.sent[j], (j-4)*50)
			}
		case topic.Priority:
			// Highest first, sent shuffled.
			for _, j := range rng.Perm(n) {
				sendOne(mt.sent[j], 100-7*j)
			}
		case topic.RangeMerge:
			// Due at send time + range: sent in order with growing ranges,
			// so the due times grow strictly.
			for j := range n {
				sendOne(mt.sent[j], 60*j)
			}
		}
		mt.want = n
	case roleLimit:
		for j := range 3 * mt.conc {
			id := fmt.Sprintf("%s-l%d", name, j)
			mt.sent = append(mt.sent, id)
			sendOne(id, -1)
		}
		mt.want = len(mt.sent)
	case roleRetry:
		for j := range 4 {
			id := fmt.Sprintf("%s-r%d", name, j)
			mt.sent = append(mt.sent, id)
			if j%2 == 0 {
				mt.failing[id] = true
			}
			sendOne(id, -1)
		}
		mt.want = 2*(mt.retries+1) + 2
	}
}

// check asserts everything the topic's role promises, once its store and
// prepare are settled.
func (mt *manyTopic) check(t *testing.T) {
	t.Helper()
	name := fmt.Sprintf("%s (%s, %s, %d slots, concurrency %d)", mt.tp.Name(), mt.role, mt.tp.Type(), mt.tp.SlotAmount(), mt.conc)
	mt.mu.Lock()
	defer mt.mu.Unlock()
	assert.Empty(t, mt.foreign, "%s: got other topics' messages", name)
	assert.Len(t, mt.handled, mt.want, "%s: handler calls", name)
	assert.LessOrEqual(t, mt.maxRunning.Load(), int64(mt.conc), "%s: more handlers at once than its concurrency", name)
	attempts := map[string][]int{}
	for _, d := range mt.handled {
		attempts[d.ID] = append(attempts[d.ID], d.Attempt)
		if d.Attempt > 1 {
			assert.Equal(t, "fail "+d.ID, d.LastError, "%s: last error of %s", name, d.ID)
		}
	}
	var ids []string
	for _, d := range mt.handled {
		ids = append(ids, d.ID)
	}
	switch mt.role {
	case roleOrder:
		assert.Equal(t, mt.sent, ids, "%s: handled out of order", name)
		assert.Equal(t, int64(1), mt.maxRunning.Load(), name)
	case roleLimit:
		assert.False(t, mt.notReached.Load(), "%s: never ran %d handlers at once", name, mt.conc)
		assert.Equal(t, int64(mt.conc), mt.maxRunning.Load(), "%s: most handlers at once", name)
		assert.ElementsMatch(t, mt.sent, ids, "%s: each message handled once", name)
	case roleRetry:
		for _, id := range mt.sent {
			want := []int{1}
			if mt.failing[id] {
				want = nil
				for a := 1; a <= mt.retries+1; a++ {
					want = append(want, a)
				}
			}
			assert.Equal(t, want, attempts[id], "%s: attempts of %s (MaxRetries %d)", name, id, mt.retries)
		}
	}
}

// settled is what the topic's slots hold once everything ran: nothing but
// the dead messages of a retry topic.
func (mt *manyTopic) settled() counts {
	dead := int64(len(mt.failing))
	return counts{Dead: dead, DeadMsg: dead}
}

// waitAll waits until every topic saw its expected handler calls.
func waitAllTopics(t *testing.T, mts []*manyTopic) {
	t.Helper()
	deadline := time.After(3 * waitLong)
	for _, mt := range mts {
		select {
		case <-mt.all:
		case <-deadline:
			var behind []string
			for _, m := range mts {
				m.mu.Lock()
				if len(m.handled) < m.want {
					behind = append(behind, fmt.Sprintf("%s %d/%d", m.tp.Name(), len(m.handled), m.want))
				}
				m.mu.Unlock()
			}
			t.Fatalf("topics still waiting for deliveries: %s", strings.Join(behind, ", "))
		}
	}
}

// Fifty topics of all three types with different options on one client:
// each is handled exactly as it would be alone.
func TestManyTopicsOneClient(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		c := e.client()
		rng := rand.New(rand.NewPCG(15, 15))
		mts := make([]*manyTopic, 50)
		for i := range mts {
			mts[i] = newManyTopic(t, i)
			mts[i].send(t, ctx, c.Producer(), rng)
			require.NoError(t, c.Register(mts[i].tp, mts[i], mts[i].opts...))
		}
		e.start(c)
		waitAllTopics(t, mts)
		for _, mt := range mts {
			e.eventuallyCounts(mt.tp, mt.settled())
		}
		for _, mt := range mts {
			mt.check(t)
		}
	})
}

// Close with handlers running in many topics: quick handlers finish and are
// acked, stuck ones are rolled back when Close gives up, messages not yet
// fetched stay in store, and no topic keeps anything in prepare.
func TestManyTopicsCloseLeavesNothingInPrepare(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		c := e.client()
		types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
		const topics, perTopic, conc = 30, 6, 2
		type closeTopic struct {
			tp      topic.Topic
			stuck   bool
			running atomic.Int64
			acked   atomic.Int64
			causes  chan error
		}
		cts := make([]*closeTopic, topics)
		for i := range cts {
			ct := &closeTopic{tp: mustTopic(t, fmt.Sprintf("close%02d", i), types[i%3], []int{1, 4, 16}[i%3]), stuck: i%2 == 1,
				causes: make(chan error, perTopic)}
			cts[i] = ct
			for j := range perTopic {
				id := fmt.Sprintf("%s-%d", ct.tp.Name(), j)
				var err error
				switch ct.tp.Type() {
				case topic.FixedTime:
					_, err = c.Producer().SendFixedTime(ctx, ct.tp, []byte(id), time.Now(), producer.WithKey(id))
				case topic.Priority:
					_, err = c.Producer().SendPriority(ctx, ct.tp, []byte(id), topic.MinPriority+int64(j), producer.WithKey(id))
				case topic.RangeMerge:
					_, err = c.Producer().SendRangeMerge(ctx, ct.tp, []byte(id), 0, producer.WithKey(id))
				}
				require.NoError(t, err)
			}
			opts := []consumer.Option{consumer.WithConcurrency(conc)}
			if i%4 < 2 {
				opts = append(opts, consumer.WithPrefetch(2))
			}
			require.NoError(t, c.Register(ct.tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
				ct.running.Add(1)
				defer ct.running.Add(-1)
				if ct.stuck {
					<-ctx.Done()
					ct.causes <- context.Cause(ctx)
					return ctx.Err()
				}
				select {
				case <-time.After(150 * time.Millisecond):
					ct.acked.Add(1)
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}), opts...))
		}
		e.start(c)
		require.Eventually(t, func() bool {
			for _, ct := range cts {
				if ct.stuck && ct.running.Load() < conc {
					return false
				}
			}
			return true
		}, waitLong, 10*time.Millisecond, "every stuck topic runs %d handlers", conc)

		cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		err := c.Close(cctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "stuck handlers were cut short")
		for _, ct := range cts {
			assert.Zero(t, ct.running.Load(), "%s: a handler outlived Close", ct.tp.Name())
			got := e.counts(ct.tp)
			assert.Zero(t, got.Prepare, "%s: left in prepare: %+v", ct.tp.Name(), got)
			// Rolled back priority messages wait out their backoff in the
			// delayed set; the others wait in store.
			left := int64(perTopic) - ct.acked.Load()
			delayed := e.delayedCount(ct.tp)
			if ct.tp.Type() != topic.Priority {
				assert.Zero(t, delayed, ct.tp.Name())
			}
			assert.Equal(t, counts{Store: left - delayed, Msg: left}, got, "%s: acked %d, %d delayed", ct.tp.Name(), ct.acked.Load(), delayed)
			if ct.stuck {
				assert.Equal(t, int64(perTopic), left, "%s: a stuck handler was acked", ct.tp.Name())
				close(ct.causes)
				n := 0
				for cause := range ct.causes {
					assert.ErrorIs(t, cause, consumer.ErrShutdown, ct.tp.Name())
					n++
				}
				assert.Equal(t, conc, n, "%s: stuck handlers cancelled", ct.tp.Name())
			}
		}
	})
}

// delayedCount sums the delayed sets of tp's slots.
func (e *env) delayedCount(tp topic.Topic) int64 {
	e.t.Helper()
	var n int64
	for i := range tp.SlotAmount() {
		c, err := e.rdb.ZCard(context.Background(), e.keys(tp, i).Delayed).Result()
		require.NoError(e.t, err)
		n += c
	}
	return n
}

// ZooKeeper mode with several topics on two clients: each topic's slots are
// split between the clients, every slot is consumed serially (one delivery
// of a slot at a time across both clients), each key's messages are handled
// in order, and each client keeps each topic's concurrency.
func TestManyTopicsZooKeeperSerialSlots(t *testing.T) {
	t.Parallel()
	srv := startZK(t)
	forEachBackend(t, func(t *testing.T, e *env) { testManyTopicsZK(t, e, srv) })
}

func testManyTopicsZK(t *testing.T, e *env, srv *zkserver.Server) {
	ctx := ctxT(t)
	types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
	const topics, keys, perKey = 6, 6, 5
	type handling struct {
		client, id string
		slot       int
		start, end time.Time
	}
	type zkTopic struct {
		tp      topic.Topic
		conc    int
		mu      sync.Mutex
		slotRun map[int]int
		maxSlot int
		running map[string]int // client -> handlers running
		maxRun  map[string]int
		hs      []handling
	}
	zts := make([]*zkTopic, topics)
	listener := func(zt *zkTopic, client string) consumer.MessageListener {
		return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			h := handling{client: client, id: m.ID, slot: m.Slot, start: time.Now()}
			zt.mu.Lock()
			zt.slotRun[m.Slot]++
			zt.maxSlot = max(zt.maxSlot, zt.slotRun[m.Slot])
			zt.running[client]++
			zt.maxRun[client] = max(zt.maxRun[client], zt.running[client])
			zt.mu.Unlock()
			// Long enough for other deliveries of the slot to overlap if
			// the slot were not serial: the wait times the behaviour under
			// test.
			time.Sleep(2 * time.Millisecond)
			h.end = time.Now()
			zt.mu.Lock()
			zt.slotRun[m.Slot]--
			zt.running[client]--
			zt.hs = append(zt.hs, h)
			zt.mu.Unlock()
			return nil
		})
	}
	a, b := e.zkClient(srv), e.zkClient(srv)
	for i := range zts {
		zt := &zkTopic{
			tp:   mustTopic(t, fmt.Sprintf("zkmany%d", i), types[i%3], []int{2, 4, 8}[i%3]),
			conc: 2 + i%3, slotRun: map[int]int{}, running: map[string]int{}, maxRun: map[string]int{},
		}
		zts[i] = zt
		require.NoError(t, a.Register(zt.tp, listener(zt, "a"), consumer.WithConcurrency(zt.conc)))
		require.NoError(t, b.Register(zt.tp, listener(zt, "b"), consumer.WithConcurrency(zt.conc)))
	}
	e.start(a)
	e.start(b)
	for _, zt := range zts {
		shares := waitPartition(t, zt.tp, a, b)
		assert.Equal(t, zt.tp.SlotAmount(), shares[0]+shares[1], zt.tp.Name())
	}

	p := a.Producer()
	base := time.Now()
	for seq := range perKey {
		for _, zt := range zts {
			for k := range keys {
				key := fmt.Sprintf("%s-k%d", zt.tp.Name(), k)
				opts := []producer.SendOption{producer.WithKey(fmt.Sprintf("%s-%02d", key, seq)), producer.WithSlotBasis([]byte(key))}
				var err error
				switch zt.tp.Type() {
				case topic.FixedTime:
					_, err = p.SendFixedTime(ctx, zt.tp, []byte(key), base.Add(time.Duration(seq)*time.Millisecond), opts...)
				case topic.Priority:
					// Earlier sequence numbers rank higher within the slot.
					_, err = p.SendPriority(ctx, zt.tp, []byte(key), int64(100-seq), opts...)
				case topic.RangeMerge:
					_, err = p.SendRangeMerge(ctx, zt.tp, []byte(key), time.Duration(seq)*20*time.Millisecond, opts...)
				}
				require.NoError(t, err)
			}
		}
	}
	require.Eventually(t, func() bool {
		for _, zt := range zts {
			zt.mu.Lock()
			n := len(zt.hs)
			zt.mu.Unlock()
			if n < keys*perKey {
				return false
			}
		}
		return true
	}, 2*waitLong, 20*time.Millisecond)
	for _, zt := range zts {
		e.eventuallyCounts(zt.tp, counts{})
	}

	for _, zt := range zts {
		zt.mu.Lock()
		name := zt.tp.Name()
		assert.Equal(t, 1, zt.maxSlot, "%s: a slot ran two deliveries at once", name)
		for client, n := range zt.maxRun {
			assert.LessOrEqual(t, n, zt.conc, "%s: client %s ran more than its concurrency", name, client)
		}
		hs := slices.Clone(zt.hs)
		zt.mu.Unlock()
		require.Len(t, hs, keys*perKey, name)
		sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
		seen := map[string]int{}
		last := map[string]handling{}
		for _, h := range hs {
			seen[h.id]++
			key, _, _ := strings.Cut(h.id[len(name)+1:], "-")
			if prev, ok := last[key]; ok {
				assert.Less(t, prev.id, h.id, "%s: key %s out of order", name, key)
				assert.False(t, h.start.Before(prev.end), "%s: key %s handled twice at once", name, key)
			}
			last[key] = h
		}
		for id, n := range seen {
			assert.Equal(t, 1, n, "%s: %s handled %d times", name, id, n)
		}
	}
}
