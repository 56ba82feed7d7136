package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// rmqPrefix is the key prefix of every RMQ case; queues are topics.
const rmqPrefix = "rmqb"

// rmqSys runs the cases with RMQ for Go: FixedTime topics of slots slots.
type rmqSys struct {
	rdb   *redis.Client
	admin *redis.Client // uncounted: polls for the end of a drain
	log   *slog.Logger
	slots int
	s     settings
}

func (r *rmqSys) name() string { return "RMQ for Go" }

func (r *rmqSys) topic(q string) (topic.Topic, error) {
	return topic.New(q, topic.FixedTime, r.slots)
}

// producer returns a producer whose topic definition is already stored, so
// timed sections measure sends only.
func (r *rmqSys) producer(ctx context.Context, t topic.Topic) (*producer.Producer, error) {
	p := producer.New(r.rdb, producer.WithPrefix(rmqPrefix))
	warm := []byte("warm-up")
	if _, err := p.SendFixedTime(ctx, t, warm, time.Now()); err != nil {
		return nil, err
	}
	if _, err := p.Remove(ctx, t, producer.BodyID(warm)); err != nil {
		return nil, err
	}
	return p, nil
}

func (r *rmqSys) produce(ctx context.Context, m *meter, q string, n, g int) error {
	t, err := r.topic(q)
	if err != nil {
		return err
	}
	p, err := r.producer(ctx, t)
	if err != nil {
		return err
	}
	bufs := make([][]byte, g)
	m.start()
	err = parallel(ctx, n, g, func(w, i int) error {
		bufs[w] = makeBody(bufs[w], r.s.body, "p", i, 0)
		_, err := p.SendFixedTime(ctx, t, bufs[w], time.Now())
		return err
	})
	m.stop()
	return err
}

func (r *rmqSys) produceBatch(ctx context.Context, m *meter, q string, n, g, batch int) error {
	t, err := r.topic(q)
	if err != nil {
		return err
	}
	p, err := r.producer(ctx, t)
	if err != nil {
		return err
	}
	m.start()
	err = r.sendBatches(ctx, p, t, "b", n, g, batch, func(int) time.Time { return time.Now() })
	m.stop()
	return err
}

// sendBatches sends n messages with SendBatch from g goroutines.
func (r *rmqSys) sendBatches(ctx context.Context, p *producer.Producer, t topic.Topic, tag string, n, g, batch int, at func(i int) time.Time) error {
	calls := (n + batch - 1) / batch
	return parallel(ctx, calls, g, func(_, c int) error {
		lo, hi := c*batch, min((c+1)*batch, n)
		msgs := make([]producer.BatchMessage, 0, hi-lo)
		for i := lo; i < hi; i++ {
			msgs = append(msgs, producer.BatchMessage{Body: makeBody(nil, r.s.body, tag, i, 0), At: at(i)})
		}
		_, err := p.SendBatch(ctx, t, msgs)
		return err
	})
}

func (r *rmqSys) newClient() (*rmq.Client, error) {
	return rmq.New(r.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(r.log))
}

func closeRMQ(c *rmq.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Close(ctx)
}

func (r *rmqSys) consume(ctx context.Context, m *meter, q string, n, prefetch int) error {
	t, err := r.topic(q)
	if err != nil {
		return err
	}
	p, err := r.producer(ctx, t)
	if err != nil {
		return err
	}
	if err := r.sendBatches(ctx, p, t, "c", n, 4, 1000, func(int) time.Time { return time.Now() }); err != nil {
		return err
	}
	c, err := r.newClient()
	if err != nil {
		return err
	}
	var handled atomic.Int64
	all := make(chan struct{})
	err = c.Register(t, consumer.ListenerFunc(func(ctx context.Context, msg *consumer.Message) error {
		if handled.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}), consumer.WithConcurrency(r.s.workers), consumer.WithPrefetch(prefetch))
	if err != nil {
		return err
	}
	m.start()
	if err := c.Start(ctx); err != nil {
		return err
	}
	err = waitAll(ctx, all, &handled, n)
	if err == nil {
		err = waitEmpty(ctx, r.admin, func() []string {
			var keys []string
			for i := range t.SlotAmount() {
				k := slots.KeysFor(rmqPrefix, t, i)
				keys = append(keys, k.Store, k.Prepare)
			}
			return keys
		})
	}
	m.stop()
	if cerr := closeRMQ(c); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return err
}

// waitAll waits until the handlers have seen all n messages.
func waitAll(ctx context.Context, all <-chan struct{}, handled *atomic.Int64, n int) error {
	limit := time.NewTimer(time.Duration(n)*time.Millisecond + 60*time.Second)
	defer limit.Stop()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-limit.C:
		return fmt.Errorf("only %d of %d messages handled", handled.Load(), n)
	}
}

func (r *rmqSys) lateness(ctx context.Context, q string, lc latCase) (latResult, error) {
	t, err := r.topic(q)
	if err != nil {
		return latResult{}, err
	}
	c, err := r.newClient()
	if err != nil {
		return latResult{}, err
	}
	rec := newLatRecorder(int(lc.duration.Seconds() * float64(lc.rate)))
	err = c.Register(t, consumer.ListenerFunc(func(ctx context.Context, msg *consumer.Message) error {
		rec.record(msg.Body)
		return nil
	}), consumer.WithConcurrency(r.s.workers))
	if err != nil {
		return latResult{}, err
	}
	if err := c.Start(ctx); err != nil {
		return latResult{}, err
	}
	p := c.Producer()
	res, err := runLateness(ctx, lc, r.s.producers, r.s.body, rec, func(ctx context.Context, body []byte, dueMs int64) error {
		_, err := p.SendFixedTime(ctx, t, body, time.UnixMilli(dueMs))
		return err
	})
	if cerr := closeRMQ(c); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return res, err
}

func (r *rmqSys) loadFarFuture(ctx context.Context, q, tag string, n int) error {
	t, err := r.topic(q)
	if err != nil {
		return err
	}
	p, err := r.producer(ctx, t)
	if err != nil {
		return err
	}
	base := time.Now().Add(365 * 24 * time.Hour)
	return r.sendBatches(ctx, p, t, tag, n, 4, 1000, func(i int) time.Time {
		return base.Add(time.Duration(i) * time.Millisecond)
	})
}
