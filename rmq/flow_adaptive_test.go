package rmq_test

import (
	"context"
	"errors"
	"fmt"
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

// limitObserver records the adaptive limits a client reports.
type limitObserver struct {
	rmq.BaseObserver
	mu     sync.Mutex
	limit  int
	signal chan struct{}
}

func (o *limitObserver) ConcurrencyLimit(_ string, limit int) {
	o.mu.Lock()
	o.limit = limit
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *limitObserver) current() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.limit
}

// await waits until ok(limit) within d, and returns the limit.
func (o *limitObserver) await(t *testing.T, what string, d time.Duration, ok func(int) bool) int {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !ok(o.current()) {
		select {
		case <-o.signal:
		case <-deadline.C:
			t.Fatalf("%s: the limit is %d after %v", what, o.current(), d)
		}
	}
	return o.current()
}

// A topic whose handler latency rises tenfold lowers its adaptive limit
// within seconds, and raises it again when latency falls; Stats shows it.
func TestFlowAdaptiveConcurrencyFollowsLatency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "adaptive", topic.FixedTime, 2)
		obs := &limitObserver{signal: make(chan struct{}, 1)}
		c := e.client(rmq.WithObserver(obs))
		var latency atomic.Int64
		latency.Store(int64(10 * time.Millisecond))
		var done atomic.Int64
		handled := make(chan struct{}, 1) // signalled, without blocking, after each message
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
			// The handler latency the limit follows: the wait times the
			// behaviour under test.
			time.Sleep(time.Duration(latency.Load()))
			done.Add(1)
			select {
			case handled <- struct{}{}:
			default:
			}
			return nil
		}), consumer.WithAdaptiveConcurrency(1, 32)))
		e.start(c)

		// Keep a backlog of about 1,000 messages.
		ctx, cancel := context.WithCancel(context.Background())
		var feeding sync.WaitGroup
		feeding.Add(1)
		go func() {
			defer feeding.Done()
			p := c.Producer()
			sent := 0
			for ctx.Err() == nil {
				if int64(sent)-done.Load() < 1000 {
					msgs := make([]producer.BatchMessage, 500)
					for i := range msgs {
						msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d", sent+i)), At: time.Now()}
					}
					if _, err := p.SendBatch(ctx, tp, msgs); err != nil && !errors.Is(err, context.Canceled) {
						t.Errorf("feed: %v", err)
						return
					}
					sent += len(msgs)
					continue
				}
				// The backlog is full: look again once a message was handled.
				select {
				case <-handled:
				case <-ctx.Done():
				}
			}
		}()
		defer func() { cancel(); feeding.Wait() }()

		peak := obs.await(t, "grows under a steady latency", 30*time.Second, func(l int) bool { return l >= 8 })
		latency.Store(int64(100 * time.Millisecond))
		low := obs.await(t, "shrinks when latency rises tenfold", 8*time.Second, func(l int) bool { return l <= peak/2 })
		latency.Store(int64(10 * time.Millisecond))
		obs.await(t, "grows again when latency falls", 20*time.Second, func(l int) bool { return l >= 2*low && l >= 4 })

		// Stats shows the client's limit (reported at most once a second).
		require.Eventually(t, func() bool {
			st, err := c.Inspector().Stats(ctxT(t), tp)
			require.NoError(t, err)
			return len(st.Adaptive) == 1 && st.Adaptive[0].Min == 1 && st.Adaptive[0].Max == 32 && st.Adaptive[0].Limit >= 4
		}, 15*time.Second, 100*time.Millisecond)
	})
}

// Invalid flow options are refused at Register; an invalid group at the
// send, and nothing is written.
func TestFlowInvalidOptionsAreRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tp := mustTopic(t, "bad", topic.FixedTime, 2)
	l := consumer.ListenerFunc(ack)
	for name, o := range map[string]consumer.Option{
		"rate 0":            consumer.WithRateLimit(0, time.Second),
		"rate per 0":        consumer.WithRateLimit(5, 0),
		"rate per 48h":      consumer.WithRateLimit(5, 48*time.Hour),
		"global 0":          consumer.WithGlobalConcurrency(0),
		"group 0":           consumer.WithGroupConcurrency(0),
		"group rate -1":     consumer.WithGroupRateLimit(-1, time.Second),
		"adaptive 0..4":     consumer.WithAdaptiveConcurrency(0, 4),
		"adaptive 5..4":     consumer.WithAdaptiveConcurrency(5, 4),
		"global -3":         consumer.WithGlobalConcurrency(-3),
		"group rate 1/10us": consumer.WithGroupRateLimit(1, 10*time.Microsecond),
	} {
		err := c.Register(tp, l, o)
		assert.ErrorIs(t, err, consumer.ErrInvalidOption, name)
	}
	p := c.Producer()
	for _, g := range []string{"", "a b", "x{y}", string(make([]byte, 129)), "tenant/1"} {
		_, err := p.SendFixedTime(ctxT(t), tp, []byte("x"), time.Now(), producer.WithGroup(g))
		assert.ErrorIs(t, err, producer.ErrInvalidGroup, "%q", g)
	}
	_, err := p.SendFixedTime(ctxT(t), tp, []byte("x"), time.Now(), producer.WithGroup("ok"), producer.WithSlotBasis([]byte("b")))
	assert.ErrorIs(t, err, producer.ErrInvalidGroup)
	assert.Empty(t, e.keysNow(), "nothing written")
	err = c.Inspector().SetLimits(ctxT(t), tp, rmq.Limits{Rate: 5})
	assert.ErrorIs(t, err, rmq.ErrInvalidLimits)
}

// A grouped message is found, shown and removed where it waits (its
// group's queue); Message.Group carries the group to the handler.
func TestFlowGroupedMessageInspectAndRemove(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tp := mustTopic(t, "grp", topic.FixedTime, 4)
		c := e.client()
		p := c.Producer()
		later := time.Now().Add(time.Hour)
		id, err := p.SendFixedTime(ctxT(t), tp, []byte("one"), later, producer.WithGroup("t-1"), producer.WithKey("k1"))
		require.NoError(t, err)
		id2, err := p.SendFixedTime(ctxT(t), tp, []byte("two"), later, producer.WithGroup("t-1"))
		require.NoError(t, err)
		info, err := c.Inspector().Message(ctxT(t), tp, id)
		require.NoError(t, err)
		assert.Equal(t, rmq.StateWaiting, info.State)
		assert.Equal(t, "t-1", info.Group)
		st, err := c.Inspector().Stats(ctxT(t), tp)
		require.NoError(t, err)
		assert.EqualValues(t, 2, st.Store)
		assert.EqualValues(t, 2, st.Grouped)
		assert.EqualValues(t, 1, st.Groups)

		r, err := p.Remove(ctxT(t), tp, id, producer.WithGroup("t-1"))
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, r)
		// A body-derived id without its group: found by its envelope.
		r, err = p.Remove(ctxT(t), tp, id2)
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, r)
		_, err = c.Inspector().Message(ctxT(t), tp, id)
		assert.ErrorIs(t, err, rmq.ErrMessageNotFound)

		got := make(chan *consumer.Message, 1)
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			got <- m
			return nil
		})))
		e.start(c)
		_, err = p.SendFixedTime(ctxT(t), tp, []byte("three"), time.Now(), producer.WithGroup("t-2"))
		require.NoError(t, err)
		select {
		case m := <-got:
			assert.Equal(t, "t-2", m.Group)
			assert.Equal(t, "three", string(m.Body))
		case <-time.After(15 * time.Second):
			t.Fatal("the grouped message was not delivered")
		}
	})
}

// The ZooKeeper mode with flow control: its fenced calls carry the flow,
// so serial groups and a rate hold there too (each slot consumed by its
// owner, one at a time).
func TestFlowInZooKeeperMode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		zk := startZK(t)
		tp := mustTopic(t, "zkflow", topic.FixedTime, 4)
		log := newFlowLog()
		sendBacklog(t, e, tp, "z", 24, func(i int) string { return fmt.Sprintf("t%d", i%3) })
		for i := range 2 {
			c := e.zkClient(zk)
			require.NoError(t, c.Register(tp, log.listener(fmt.Sprintf("zk%d", i), 10*time.Millisecond, nil),
				consumer.WithGroupConcurrency(1), consumer.WithRateLimit(100, time.Second), consumer.WithConcurrency(4)))
			e.start(c)
		}
		log.waitDistinct(t, 24, 30*time.Second)
		ev := log.snapshot()
		_, byGroup := maxOverlap(ev, func(x flowEvent) string { return x.group })
		for g, n := range byGroup {
			assert.Equal(t, 1, n, "group %s", g)
		}
		order := map[string][]string{}
		for _, x := range ev {
			if x.start {
				order[x.group] = append(order[x.group], x.id)
			}
		}
		for g, ids := range order {
			for i := 1; i < len(ids); i++ {
				assert.Less(t, ids[i-1], ids[i], "group %s in order", g)
			}
		}
	})
}
