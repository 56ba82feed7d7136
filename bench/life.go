package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The life case (-cases life): what a job's life after hand-off costs,
// RMQ only. Consume+ack of a backlog of -n FixedTime messages (-slots
// slots, -workers handlers, each setting a 16-byte result) with the event
// log, retention and both, against neither in the same run, the variants
// alternating within each run and medians over -runs; then the latency of
// Wait (from the handler's return to Wait's) and of Cancel (from
// Inspector.Cancel's return to the running handler's context ending), over
// lifeSamples messages each, in this process and with the consumer in
// another (life_procs.go).

// lifeSamples is how many messages the latency parts time.
const lifeSamples = 500

type lifeVariant struct {
	id, label string
	opts      []consumer.Option
}

func lifeVariants() []lifeVariant {
	return []lifeVariant{
		{id: "off", label: "no events, no retention"},
		{id: "events", label: "WithEvents(100000)", opts: []consumer.Option{consumer.WithEvents(100_000)}},
		{id: "retention", label: "WithRetention(1h)", opts: []consumer.Option{consumer.WithRetention(time.Hour)}},
		{id: "both", label: "both", opts: []consumer.Option{consumer.WithEvents(100_000), consumer.WithRetention(time.Hour)}},
	}
}

// lifeResults are the life case's figures.
type lifeResults struct {
	consume          map[string][]costs // variant id -> one per run
	wait, cancel     []time.Duration    // sorted latencies
	waitErr, cancErr string
	// The same with the consumer in another process (life_procs.go).
	waitProcs, cancelProcs       []time.Duration
	waitProcsErr, cancelProcsErr string
}

func (b *runner) life(ctx context.Context, log *slog.Logger) error {
	res := &lifeResults{consume: map[string][]costs{}}
	b.res.life = res
	err := alternate(ctx, b, "life", lifeVariants(), func(v lifeVariant) (string, string) { return v.id, v.label },
		func(m *meter, v lifeVariant) error { return b.lifeConsume(ctx, m, v, log) }, res.consume)
	if err != nil {
		return err
	}
	if err := b.reset(ctx); err != nil {
		return err
	}
	if res.wait, err = b.lifeWait(ctx, log); err != nil {
		res.waitErr = err.Error()
	}
	progress("life: Wait latency p50 %v p99 %v %s", pct(res.wait, 0.5), pct(res.wait, 0.99), res.waitErr)
	if err := b.reset(ctx); err != nil {
		return err
	}
	if res.cancel, err = b.lifeCancel(ctx, log); err != nil {
		res.cancErr = err.Error()
	}
	progress("life: cancel latency p50 %v p99 %v %s", pct(res.cancel, 0.5), pct(res.cancel, 0.99), res.cancErr)
	if err := b.reset(ctx); err != nil {
		return err
	}
	if res.waitProcs, err = b.lifeWaitProcs(ctx, log); err != nil {
		res.waitProcsErr = err.Error()
	}
	progress("life: Wait latency across processes p50 %v p99 %v %s", pct(res.waitProcs, 0.5), pct(res.waitProcs, 0.99), res.waitProcsErr)
	if err := b.reset(ctx); err != nil {
		return err
	}
	if res.cancelProcs, err = b.lifeCancelProcs(ctx, log); err != nil {
		res.cancelProcsErr = err.Error()
	}
	progress("life: cancel latency across processes p50 %v p99 %v %s", pct(res.cancelProcs, 0.5), pct(res.cancelProcs, 0.99), res.cancelProcsErr)
	return b.reset(ctx)
}

// pct is the q quantile of sorted ds (0 when empty).
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func (b *runner) lifeConsume(ctx context.Context, m *meter, v lifeVariant, log *slog.Logger) error {
	t := topic.MustNew("life-"+v.id, topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return err
	}
	if err := b.flowSend(ctx, c.Producer(), t, "l", b.o.n, time.Now(), func(int) string { return "" }); err != nil {
		return err
	}
	result := []byte("result-0123456789")[:16]
	return b.drainTimed(ctx, m, c, t, v.opts, func(msg *consumer.Message) error { return msg.SetResult(result) })
}

// lifeWait sends lifeSamples messages one after another, each waited for
// by a Wait started before it is sent, and times from the handler's return
// to Wait's.
func (b *runner) lifeWait(ctx context.Context, log *slog.Logger) ([]time.Duration, error) {
	t := topic.MustNew("life-wait", topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer closeRMQ(c)
	var mu sync.Mutex
	returned := map[string]time.Time{}
	err = c.Register(t, consumer.ListenerFunc(func(_ context.Context, msg *consumer.Message) error {
		mu.Lock()
		returned[msg.ID] = time.Now()
		mu.Unlock()
		return nil
	}))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range lifeSamples {
		id := fmt.Sprintf("w%d", i)
		d, err := b.waitOne(ctx, c, t, id, func() (time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			return returned[id], nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// waitOne times one Wait: from the moment id's handler returned (read by
// returned once Wait has returned) to Wait's return. The message waits
// first: Wait finds it, then it is made due.
func (b *runner) waitOne(ctx context.Context, c *rmq.Client, t topic.Topic, id string, returned func() (time.Time, error)) (time.Duration, error) {
	if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now().Add(time.Hour), producer.WithKey(id)); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	var at time.Time
	go func() {
		_, err := c.Wait(ctx, t, id)
		at = time.Now()
		done <- err
	}()
	// Wait registers in its slot's waiters hash before it reads the
	// state: the message is made due once it has.
	if err := b.lifeRegistered(ctx, t, id); err != nil {
		return 0, err // Wait ends with ctx
	}
	if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now(), producer.WithKey(id)); err != nil {
		return 0, err
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("wait %s: %w", id, err)
	}
	r, err := returned()
	if err != nil {
		return 0, err
	}
	return at.Sub(r), nil
}

// lifeCancel starts lifeSamples handlers that block until their context
// ends and times from the Inspector.Cancel call to the handler's end (the
// push often arrives before Cancel's own reply).
func (b *runner) lifeCancel(ctx context.Context, log *slog.Logger) ([]time.Duration, error) {
	t := topic.MustNew("life-cancel", topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer closeRMQ(c)
	running := make(chan string, 1)
	ended := make(chan time.Time, 1)
	err = c.Register(t, consumer.ListenerFunc(func(hctx context.Context, msg *consumer.Message) error {
		running <- msg.ID
		<-hctx.Done()
		ended <- time.Now()
		if !errors.Is(context.Cause(hctx), rmq.ErrCancelled) {
			return fmt.Errorf("cause %v", context.Cause(hctx))
		}
		return hctx.Err()
	}), consumer.WithConcurrency(1))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range lifeSamples {
		id := fmt.Sprintf("c%d", i)
		if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now(), producer.WithKey(id)); err != nil {
			return nil, err
		}
		if got := <-running; got != id {
			return nil, fmt.Errorf("running %s, want %s", got, id)
		}
		at := time.Now()
		ok, err := c.Inspector().Cancel(ctx, t, id)
		if err != nil || !ok {
			return nil, fmt.Errorf("cancel %s: %v %v", id, ok, err)
		}
		out = append(out, (<-ended).Sub(at))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// lifeRegistered returns once a Wait for id registered in its slot.
func (b *runner) lifeRegistered(ctx context.Context, t topic.Topic, id string) error {
	key := keyspace.LifeKeysFor(rmqPrefix, t.Name(), keyspace.IndexString(id, t.SlotAmount())).Waiters
	for {
		n, err := b.admin.HExists(ctx, key, id).Result()
		if err != nil || n {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}
