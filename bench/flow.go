package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The flow case (-cases flow): what flow control costs, RMQ
// only. Consume+ack of a backlog of -n FixedTime messages (-slots slots,
// -workers handlers, no-op handler) with each limit set far above the load,
// against the unlimited figure in the same run, the variants alternating
// within each run and medians over -runs; the same with the messages in
// 100 groups (which serves them group by group in turn) against ungrouped;
// and fairness: one group with -n messages queued ahead of 100 groups of 5,
// with the small groups' completion times, grouped against ungrouped (then
// the 500 wait behind the whole backlog).

// flowGroups is how many groups the grouped variants spread messages over.
const flowGroups = 100

// flowVariant is one consume+ack variant.
type flowVariant struct {
	id, label string
	grouped   bool
	base      string // the variant it is compared with ("" for none)
	opts      []consumer.Option
}

func flowVariants() []flowVariant {
	far := 1_000_000_000
	return []flowVariant{
		{id: "plain", label: "no limits"},
		{id: "rate", label: "WithRateLimit(1e9, 1s)", base: "plain", opts: []consumer.Option{consumer.WithRateLimit(far, time.Second)}},
		{id: "conc", label: "WithGlobalConcurrency(1e6)", base: "plain", opts: []consumer.Option{consumer.WithGlobalConcurrency(1_000_000)}},
		{id: "adaptive", label: "WithAdaptiveConcurrency(32, 32)", base: "plain", opts: []consumer.Option{consumer.WithAdaptiveConcurrency(32, 32)}},
		{id: "groups", label: "100 groups, no limits", grouped: true, base: "plain"},
		{id: "gconc", label: "100 groups, WithGroupConcurrency(1e6)", grouped: true, base: "groups", opts: []consumer.Option{consumer.WithGroupConcurrency(1_000_000)}},
		{id: "grate", label: "100 groups, WithGroupRateLimit(1e9, 1s)", grouped: true, base: "groups", opts: []consumer.Option{consumer.WithGroupRateLimit(far, time.Second)}},
	}
}

// flowFairResult is the fairness case, grouped or not.
type flowFairResult struct {
	grouped            bool
	p50, p99, max, all time.Duration // small groups' completion; all: the whole drain
	err                string
}

// flowResults are the flow case's figures.
type flowResults struct {
	consume map[string][]costs // variant id -> one per run
	fair    []flowFairResult
}

func (b *runner) flow(ctx context.Context, log *slog.Logger) error {
	res := &flowResults{consume: map[string][]costs{}}
	b.res.flow = res
	err := alternate(ctx, b, "flow", flowVariants(), func(v flowVariant) (string, string) { return v.id, v.label },
		func(m *meter, v flowVariant) error { return b.flowConsume(ctx, m, v, log) }, res.consume)
	if err != nil {
		return err
	}
	for _, grouped := range []bool{true, false} {
		if err := b.reset(ctx); err != nil {
			return err
		}
		r := b.flowFair(ctx, grouped, log)
		res.fair = append(res.fair, r)
		progress("flow: fairness grouped=%v: small groups p50 %v p99 %v max %v; all drained in %v %s", grouped, r.p50, r.p99, r.max, r.all, r.err)
	}
	return b.reset(ctx)
}

// alternate runs each variant's timed consume -runs times, the order
// reversed every other run so that neither variant always goes first, a
// fresh Redis each time, and appends each run's costs to out by variant id.
func alternate[V any](ctx context.Context, b *runner, name string, vs []V, label func(V) (id, label string),
	consume func(*meter, V) error, out map[string][]costs) error {
	for run := range b.o.runs {
		order := slices.Clone(vs)
		if run%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if err := b.reset(ctx); err != nil {
				return err
			}
			id, l := label(v)
			m := b.meter(ctx)
			if err := consume(m, v); err != nil {
				return fmt.Errorf("%s %s: %w", name, id, err)
			}
			c := m.costs(b.o.n)
			out[id] = append(out[id], c)
			progress("%s: run %d: %-42s %8.0f msgs/s, Redis %.1f µs/msg", name, run+1, l, c.rate, c.redisCPUus)
		}
	}
	return nil
}

// flowTopic is the case's topic.
func (b *runner) flowTopic(name string) topic.Topic {
	return topic.MustNew(name, topic.FixedTime, b.o.slots)
}

// flowSend sends n messages due now, of group(i) ("" for none), tagged.
func (b *runner) flowSend(ctx context.Context, p *producer.Producer, t topic.Topic, tag string, n int, at time.Time, group func(i int) string) error {
	const batch = 1000
	return parallel(ctx, (n+batch-1)/batch, 4, func(_, c int) error {
		lo, hi := c*batch, min((c+1)*batch, n)
		msgs := make([]producer.BatchMessage, 0, hi-lo)
		for i := lo; i < hi; i++ {
			m := producer.BatchMessage{Body: makeBody(nil, b.o.body, tag, i, 0), At: at.Add(time.Duration(i) * time.Microsecond)}
			if g := group(i); g != "" {
				m.Options = []producer.SendOption{producer.WithGroup(g)}
			}
			msgs = append(msgs, m)
		}
		_, err := p.SendBatch(ctx, t, msgs)
		return err
	})
}

// flowWaitEmpty waits until every slot's store, prepare and group queue of
// t is empty: the drain, acks included, is over.
func (b *runner) flowWaitEmpty(ctx context.Context, t topic.Topic) error {
	return waitEmpty(ctx, b.admin, func() []string {
		var keys []string
		for i := range t.SlotAmount() {
			k := keyspace.KeysFor(rmqPrefix, t, i)
			keys = append(keys, k.Store, k.Prepare, keyspace.GroupKeysFor(rmqPrefix, t, i).Queue)
		}
		return keys
	})
}

func (b *runner) flowConsume(ctx context.Context, m *meter, v flowVariant, log *slog.Logger) error {
	t := b.flowTopic("flow-" + v.id)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return err
	}
	group := func(int) string { return "" }
	if v.grouped {
		group = func(i int) string { return fmt.Sprintf("g%03d", i%flowGroups) }
	}
	if err := b.flowSend(ctx, c.Producer(), t, "f", b.o.n, time.Now(), group); err != nil {
		return err
	}
	return b.drainTimed(ctx, m, c, t, v.opts, nil)
}

// drainTimed registers a handler for t on c with -workers handlers and
// opts (each, when not nil, runs on every message first), starts c and
// times, with m, the drain of the -n messages waiting in t, acks included;
// it closes c.
func (b *runner) drainTimed(ctx context.Context, m *meter, c *rmq.Client, t topic.Topic, opts []consumer.Option, each func(*consumer.Message) error) error {
	var handled atomic.Int64
	all := make(chan struct{})
	n := b.o.n
	opts = append([]consumer.Option{consumer.WithConcurrency(b.o.workers)}, opts...)
	err := c.Register(t, consumer.ListenerFunc(func(_ context.Context, msg *consumer.Message) error {
		if each != nil {
			if err := each(msg); err != nil {
				return err
			}
		}
		if handled.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}), opts...)
	if err != nil {
		return err
	}
	m.start()
	if err := c.Start(ctx); err != nil {
		return err
	}
	err = waitAll(ctx, all, &handled, n)
	if err == nil {
		err = b.flowWaitEmpty(ctx, t)
	}
	m.stop()
	if cerr := closeRMQ(c); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return err
}

// flowFair queues -n messages of one group ahead of 100 groups of 5 (or
// the same messages without groups) and drains them with -workers
// handlers: when did each small group's message complete?
func (b *runner) flowFair(ctx context.Context, grouped bool, log *slog.Logger) (r flowFairResult) {
	r.grouped = grouped
	name := "fair-plain"
	if grouped {
		name = "fair-grouped"
	}
	t := b.flowTopic(name)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		r.err = err.Error()
		return r
	}
	groupOf := func(g string) func(int) string {
		if !grouped {
			return func(int) string { return "" }
		}
		return func(i int) string {
			if g == "" {
				return fmt.Sprintf("small%03d", i%100)
			}
			return g
		}
	}
	at := time.Now().Add(-time.Minute)
	if err := b.flowSend(ctx, c.Producer(), t, "big", b.o.n, at, groupOf("big")); err != nil {
		r.err = err.Error()
		return r
	}
	// The small groups' messages come due after the whole backlog.
	if err := b.flowSend(ctx, c.Producer(), t, "small", 500, at.Add(time.Second), groupOf("")); err != nil {
		r.err = err.Error()
		return r
	}
	total := b.o.n + 500
	var mu sync.Mutex
	var small []time.Duration
	var handled atomic.Int64
	all := make(chan struct{})
	var began time.Time
	err = c.Register(t, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		if len(m.Body) > 5 && string(m.Body[:5]) == "small" {
			mu.Lock()
			small = append(small, time.Since(began))
			mu.Unlock()
		}
		if handled.Add(1) == int64(total) {
			close(all)
		}
		return nil
	}), consumer.WithConcurrency(b.o.workers))
	if err != nil {
		r.err = err.Error()
		return r
	}
	began = time.Now()
	if err := c.Start(ctx); err != nil {
		r.err = err.Error()
		return r
	}
	if err := waitAll(ctx, all, &handled, total); err != nil {
		r.err = err.Error()
	}
	r.all = time.Since(began)
	_ = closeRMQ(c)
	sort.Slice(small, func(i, j int) bool { return small[i] < small[j] })
	q := func(p float64) time.Duration {
		if len(small) == 0 {
			return 0
		}
		return small[min(len(small)-1, int(math.Ceil(p*float64(len(small))))-1)]
	}
	r.p50, r.p99, r.max = q(0.5), q(0.99), q(1)
	return r
}
