package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// closeTimeout bounds Client.Close at the end of a phase.
const closeTimeout = 10 * time.Second

type bench struct {
	o      options
	rdb    *redis.Client
	prefix string
	log    *slog.Logger
}

func (b *bench) newClient() (*rmq.Client, error) {
	return rmq.New(b.rdb, rmq.WithPrefix(b.prefix), rmq.WithLogger(b.log))
}

func closeClient(c *rmq.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return c.Close(ctx)
}

func (b *bench) runType(ctx context.Context, t topic.Type) (result, error) {
	r := result{Type: t.String()}
	tp, err := topic.New("bench-"+t.String(), t, b.o.slots)
	if err != nil {
		return r, err
	}
	progress("%s: producing %d messages from %d goroutines", t, b.o.n, b.o.producers)
	prod, err := b.produce(ctx, tp)
	if err != nil {
		return r, fmt.Errorf("%s: produce: %w", t, err)
	}
	r.Produce = &prod
	if waiting, err := b.count(ctx, tp, func(k slots.Keys) string { return k.Store }); err != nil {
		return r, err
	} else if waiting != int64(b.o.n) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d messages sent but %d waiting", t, b.o.n, waiting))
	}

	if b.o.batchSize > 0 {
		bt, err := topic.New("bench-"+t.String()+"-batch", t, b.o.slots)
		if err != nil {
			return r, err
		}
		progress("%s: producing %d messages with SendBatch, %d per call from %d goroutines", t, b.o.n, b.o.batchSize, b.o.batchProd)
		batch, err := b.batch(ctx, bt)
		if err != nil {
			return r, fmt.Errorf("%s: batch: %w", t, err)
		}
		r.Batch = &batch
	}

	progress("%s: draining the backlog with one Client, %d handlers, prefetch %d", t, b.o.concurrency, b.o.prefetch)
	cons, err := b.consume(ctx, tp)
	if err != nil {
		return r, fmt.Errorf("%s: consume: %w", t, err)
	}
	r.Consume = &cons
	if cons.Handled != int64(b.o.n) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d messages in the backlog, %d handler calls", t, b.o.n, cons.Handled))
	}

	if b.o.memN > 0 {
		mt, err := topic.New("bench-"+t.String()+"-memory", t, b.o.slots)
		if err != nil {
			return r, err
		}
		progress("%s: memory: %d far-future messages", t, b.o.memN)
		mem, err := b.memory(ctx, mt)
		if err != nil {
			return r, fmt.Errorf("%s: memory: %w", t, err)
		}
		r.Memory = &mem
	}

	if t.TimeBased() && b.o.duration > 0 {
		lt, err := topic.New("bench-"+t.String()+"-lateness", t, b.o.slots)
		if err != nil {
			return r, err
		}
		waits := []int{0}
		if b.o.waiting > 0 {
			waits = append(waits, b.o.waiting)
		}
		for _, w := range waits {
			if w > 0 {
				progress("%s: loading %d far-future messages into the lateness topic", t, w)
				p := producer.New(b.rdb, producer.WithPrefix(b.prefix))
				took, err := b.sendBatches(ctx, p, lt, "f", w, true)
				if err != nil {
					return r, fmt.Errorf("%s: loading far-future messages: %w", t, err)
				}
				progress("%s: loaded at %s msg/s", t, thousands(float64(w)/took.Seconds()))
			}
			for _, rate := range b.o.rates {
				progress("%s: lateness: %d msgs/s coming due for %v, each sent %v ahead, %d waiting", t, rate, b.o.duration, b.o.lead, w)
				late, err := b.lateness(ctx, lt, rate, int64(w))
				if err != nil {
					return r, fmt.Errorf("%s: lateness: %w", t, err)
				}
				r.Lateness = append(r.Lateness, late)
				if late.Early > 0 {
					r.Problems = append(r.Problems, fmt.Sprintf("%s: %d messages fired before their due time (%d msg/s)", t, late.Early, rate))
				}
				if late.Fired != late.Sent {
					r.Problems = append(r.Problems, fmt.Sprintf("%s: lateness phase at %d msg/s sent %d, fired %d", t, rate, late.Sent, late.Fired))
				}
			}
		}
	}
	return r, nil
}

// batchMessage is message i of a SendBatch phase: due at once, or (far) in
// about a year.
func batchMessage(t topic.Topic, body []byte, i int, far bool) producer.BatchMessage {
	m := producer.BatchMessage{Body: body}
	switch t.Type() {
	case topic.RangeMerge:
		if far {
			m.TimeRange = 365 * 24 * time.Hour
		}
	case topic.Priority:
		m.Priority = int64(topic.MinPriority + 1 + i%1000)
	case topic.FixedTime:
		m.At = time.Now()
		if far {
			m.At = m.At.Add(365*24*time.Hour + time.Duration(i)*time.Millisecond)
		}
	}
	return m
}

// sendBatches sends n messages tagged tag to t with SendBatch calls of
// -batch-size from -batch-producers goroutines, and returns how long it took.
func (b *bench) sendBatches(ctx context.Context, p *producer.Producer, t topic.Topic, tag string, n int, far bool) (time.Duration, error) {
	size := max(b.o.batchSize, 1)
	calls := (n + size - 1) / size
	return parallel(ctx, b.o.batchProd, calls, func(_, c int) error {
		lo, hi := c*size, min((c+1)*size, n)
		msgs := make([]producer.BatchMessage, 0, hi-lo)
		for i := lo; i < hi; i++ {
			msgs = append(msgs, batchMessage(t, b.body(nil, tag, i), i, far))
		}
		_, err := p.SendBatch(ctx, t, msgs)
		return err
	})
}

// parallel runs f(worker, i) for every i in [0, n) from workers goroutines,
// each taking the next i, and returns how long that took and the first
// error.
func parallel(ctx context.Context, workers, n int, f func(worker, i int) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(w, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return elapsed, ctx.Err()
}

// batch measures SendBatch throughput on t, then deletes t's keys.
func (b *bench) batch(ctx context.Context, t topic.Topic) (throughput, error) {
	p := producer.New(b.rdb, producer.WithPrefix(b.prefix))
	if err := b.define(ctx, p, t); err != nil {
		return throughput{}, err
	}
	elapsed, err := b.sendBatches(ctx, p, t, "b", b.o.n, false)
	if err != nil {
		return throughput{}, err
	}
	if err := b.deleteTopic(ctx, t); err != nil {
		return throughput{}, err
	}
	return newThroughput(int64(b.o.n), elapsed), nil
}

// memory measures Redis memory per waiting message over -mem-n far-future
// messages in t, then deletes t's keys.
func (b *bench) memory(ctx context.Context, t topic.Topic) (memoryResult, error) {
	p := producer.New(b.rdb, producer.WithPrefix(b.prefix))
	if err := b.define(ctx, p, t); err != nil {
		return memoryResult{}, err
	}
	before, err := b.usedMemory(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	if _, err := b.sendBatches(ctx, p, t, "w", b.o.memN, true); err != nil {
		return memoryResult{}, err
	}
	after, err := b.usedMemory(ctx)
	if err != nil {
		return memoryResult{}, err
	}
	if err := b.deleteTopic(ctx, t); err != nil {
		return memoryResult{}, err
	}
	n := int64(b.o.memN)
	return memoryResult{Messages: n, Bytes: after - before, BytesPerMsg: float64(after-before) / float64(n)}, nil
}

// define stores t's definition (a message sent and removed), so a timed
// phase measures sends only.
func (b *bench) define(ctx context.Context, p *producer.Producer, t topic.Topic) error {
	if err := send(ctx, p, t, []byte("warm-up"), 0); err != nil {
		return err
	}
	if ok, err := p.Remove(ctx, t, producer.BodyID([]byte("warm-up"))); err != nil || ok != producer.RemovedWaiting {
		return fmt.Errorf("removing the warm-up message: removed=%v err=%v", ok, err)
	}
	return nil
}

// usedMemory is INFO memory's used_memory without the client buffers.
func (b *bench) usedMemory(ctx context.Context) (int64, error) {
	info, err := b.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	var used, clients int64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			used, _ = strconv.ParseInt(v, 10, 64)
		case "mem_clients_normal":
			clients, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if used == 0 {
		return 0, errors.New("INFO memory has no used_memory")
	}
	return used - clients, nil
}

// deleteTopic removes the keys of every slot of t.
func (b *bench) deleteTopic(ctx context.Context, t topic.Topic) error {
	var keys []string
	for i := range t.SlotAmount() {
		k := slots.KeysFor(b.prefix, t, i)
		keys = append(keys, k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg)
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := b.rdb.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// warmUp runs a short produce and consume round on a topic of its own, so
// that the first measured phase does not pay for dialing the connection
// pool, loading the scripts and growing the Go heap.
func (b *bench) warmUp(ctx context.Context) error {
	t, err := topic.New("bench-warmup", topic.Priority, b.o.slots)
	if err != nil {
		return err
	}
	w := *b
	w.o.n = min(b.o.n, 5000)
	if _, err := w.produce(ctx, t); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := w.consume(ctx, t); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// body returns a unique body of at least the configured size: message ids
// are derived from the body, so identical bodies would merge.
func (b *bench) body(buf []byte, tag string, i int) []byte {
	buf = append(buf[:0], tag...)
	buf = append(buf, '-')
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, '-')
	for len(buf) < b.o.body {
		buf = append(buf, 'x')
	}
	return buf
}

// send sends message i of topic t with the single-message API.
func send(ctx context.Context, p *producer.Producer, t topic.Topic, body []byte, i int) error {
	var err error
	switch t.Type() {
	case topic.RangeMerge:
		_, err = p.SendRangeMerge(ctx, t, body, 0) // due at once
	case topic.Priority:
		_, err = p.SendPriority(ctx, t, body, int64(topic.MinPriority+1+i%1000))
	case topic.FixedTime:
		_, err = p.SendFixedTime(ctx, t, body, time.Now()) // due at once
	}
	return err
}

// produce sends n messages from the producer goroutines, each taking the
// next index until all are sent.
func (b *bench) produce(ctx context.Context, t topic.Topic) (throughput, error) {
	p := producer.New(b.rdb, producer.WithPrefix(b.prefix))
	if err := b.define(ctx, p, t); err != nil {
		return throughput{}, err
	}
	bufs := make([][]byte, b.o.producers)
	elapsed, err := parallel(ctx, b.o.producers, b.o.n, func(w, i int) error {
		bufs[w] = b.body(bufs[w], "m", i)
		return send(ctx, p, t, bufs[w], i)
	})
	if err != nil {
		return throughput{}, err
	}
	return newThroughput(int64(b.o.n), elapsed), nil
}

// count sums one key kind (store or prepare) over the slots of t.
func (b *bench) count(ctx context.Context, t topic.Topic, key func(slots.Keys) string) (int64, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, t.SlotAmount())
	for i := range cmds {
		cmds[i] = pipe.ZCard(ctx, key(slots.KeysFor(b.prefix, t, i)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// consume drains the backlog of t with one Client and a no-op listener. The
// clock runs from Start until store and prepare are empty, so the time of
// the last acks is included.
func (b *bench) consume(ctx context.Context, t topic.Topic) (consumeResult, error) {
	c, err := b.newClient()
	if err != nil {
		return consumeResult{}, err
	}
	var handled atomic.Int64
	all := make(chan struct{})
	n := int64(b.o.n)
	err = c.Register(t, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	}), consumer.WithConcurrency(b.o.concurrency), consumer.WithPrefetch(b.o.prefetch))
	if err != nil {
		return consumeResult{}, err
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return consumeResult{}, err
	}
	limit := time.NewTimer(time.Duration(n)*time.Millisecond + 30*time.Second)
	defer limit.Stop()
	var waitErr error
	select {
	case <-all:
	case <-ctx.Done():
		waitErr = ctx.Err()
	case <-limit.C:
		waitErr = fmt.Errorf("only %d of %d messages handled", handled.Load(), n)
	}
	var elapsed time.Duration
	if waitErr == nil {
		// Every handler has been called; the run ends when the last ack
		// has emptied prepare.
		for {
			inStore, err := b.count(ctx, t, func(k slots.Keys) string { return k.Store })
			if err != nil {
				waitErr = err
				break
			}
			inPrepare, err := b.count(ctx, t, func(k slots.Keys) string { return k.Prepare })
			if err != nil {
				waitErr = err
				break
			}
			if inStore == 0 && inPrepare == 0 {
				elapsed = time.Since(start)
				break
			}
			if ctx.Err() != nil {
				waitErr = ctx.Err()
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := closeClient(c); err != nil && waitErr == nil {
		waitErr = fmt.Errorf("close: %w", err)
	}
	if waitErr != nil {
		return consumeResult{}, waitErr
	}
	return consumeResult{throughput: newThroughput(n, elapsed), Handled: handled.Load()}, nil
}

// lateness schedules rate*duration messages to come due at a steady rate,
// message i at T0 + i/rate, each sent lead before its due time, and records
// for every delivery how long after Message.DueAt its handler was called.
func (b *bench) lateness(ctx context.Context, t topic.Topic, rate int, waiting int64) (latenessResult, error) {
	total := int(math.Round(b.o.duration.Seconds() * float64(rate)))
	if total < 1 {
		total = 1
	}
	c, err := b.newClient()
	if err != nil {
		return latenessResult{}, err
	}
	lat := make([]time.Duration, total)
	var fired atomic.Int64
	all := make(chan struct{})
	err = c.Register(t, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		d := time.Since(m.DueAt)
		i := fired.Add(1) - 1
		// Deliveries beyond total (duplicates) show as Fired > Sent.
		if i < int64(total) {
			lat[i] = d
			if i == int64(total)-1 {
				close(all)
			}
		}
		return nil
	}), consumer.WithConcurrency(b.o.concurrency))
	if err != nil {
		return latenessResult{}, err
	}
	if err := c.Start(ctx); err != nil {
		return latenessResult{}, err
	}
	p := c.Producer()

	// Message i is due at t0 + i*interval and sent at its due time - lead.
	interval := time.Duration(float64(time.Second) / float64(rate))
	t0 := time.Now().Add(b.o.lead + 100*time.Millisecond)
	var maxLag atomic.Int64 // ns a send started after its planned time
	var wg sync.WaitGroup
	errs := make(chan error, b.o.producers)
	for g := range b.o.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, b.o.body+32)
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for i := g; i < total; i += b.o.producers {
				due := t0.Add(time.Duration(i) * interval)
				sendAt := due.Add(-b.o.lead)
				if wait := time.Until(sendAt); wait > 0 {
					timer.Reset(wait)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				if lag := int64(time.Since(sendAt)); lag > maxLag.Load() {
					maxLag.Store(lag) // racy max: good enough for a warning
				}
				buf = b.body(buf, "l", i)
				var err error
				if t.Type() == topic.FixedTime {
					_, err = p.SendFixedTime(ctx, t, buf, due)
				} else {
					_, err = p.SendRangeMerge(ctx, t, buf, b.o.lead)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	sendErr := <-errs
	var waitErr error
	if sendErr == nil {
		limit := time.NewTimer(b.o.lead + 10*time.Second)
		select {
		case <-all:
		case <-ctx.Done():
			waitErr = ctx.Err()
		case <-limit.C:
		}
		limit.Stop()
		// A short grace period to catch duplicate deliveries.
		time.Sleep(50 * time.Millisecond)
	}
	if err := closeClient(c); err != nil && sendErr == nil && waitErr == nil {
		waitErr = fmt.Errorf("close: %w", err)
	}
	if sendErr != nil {
		return latenessResult{}, sendErr
	}
	if waitErr != nil {
		return latenessResult{}, waitErr
	}

	n := min(int(fired.Load()), total)
	got := slices.Clone(lat[:n])
	slices.Sort(got)
	res := latenessResult{
		Waiting:    waiting,
		Rate:       rate,
		DurationS:  b.o.duration.Seconds(),
		LeadS:      b.o.lead.Seconds(),
		Sent:       int64(total),
		Fired:      fired.Load(),
		MaxSendLag: msOf(time.Duration(maxLag.Load())),
	}
	if n > 0 {
		res.P50 = msOf(percentile(got, 0.50))
		res.P99 = msOf(percentile(got, 0.99))
		res.Max = msOf(got[n-1])
		for _, d := range got {
			if d < 0 {
				res.Early++
			}
		}
	}
	if time.Duration(maxLag.Load()) > b.o.lead/2 {
		progress("%s: warning: sends fell up to %v behind schedule; add -producers or lower -rate", t.Type(), time.Duration(maxLag.Load()).Round(time.Millisecond))
	}
	return res, nil
}

// percentile returns the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
