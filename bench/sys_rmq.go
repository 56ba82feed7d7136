package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// rmqPrefix is the key prefix of every RMQ case; queues are topics.
const rmqPrefix = "rmqb"

// rmqSys runs the cases with RMQ for Go: topics of type typ with slots
// slots. Messages are due at once unless a case says otherwise; priority
// messages get priorities 17…1016 in turn.
type rmqSys struct {
	rdb   *redis.Client
	admin *redis.Client // uncounted: polls for the end of a drain
	log   *slog.Logger
	typ   topic.Type
	slots int
	s     settings
}

// name is "RMQ for Go" for FixedTime, the type compared with asynq, so the
// default report reads as before; the other types carry their name.
func (r *rmqSys) name() string {
	if r.typ == topic.FixedTime {
		return "RMQ for Go"
	}
	return "RMQ for Go " + r.typ.String()
}

func (r *rmqSys) id() string {
	if r.typ == topic.FixedTime {
		return "rmq"
	}
	return "rmq-" + r.typ.String()
}

func (r *rmqSys) timeBased() bool { return r.typ.TimeBased() }

func (r *rmqSys) topic(q string) (topic.Topic, error) {
	return topic.New(q, r.typ, r.slots)
}

// priority is the priority of message i of a priority topic.
func priority(i int) int64 { return int64(topic.MinPriority + 1 + i%1000) }

// send sends one message due now (or at, for FixedTime) with the
// single-message API of the topic's type.
func (r *rmqSys) send(ctx context.Context, p *producer.Producer, t topic.Topic, body []byte, i int, at time.Time) error {
	var err error
	switch r.typ {
	case topic.RangeMerge:
		_, err = p.SendRangeMerge(ctx, t, body, max(time.Until(at), 0))
	case topic.Priority:
		_, err = p.SendPriority(ctx, t, body, priority(i))
	default:
		_, err = p.SendFixedTime(ctx, t, body, at)
	}
	return err
}

// batchMessage is message i of a SendBatch call, due at at (priority
// messages: at is ignored).
func (r *rmqSys) batchMessage(body []byte, i int, at time.Time) producer.BatchMessage {
	m := producer.BatchMessage{Body: body}
	switch r.typ {
	case topic.RangeMerge:
		m.TimeRange = max(time.Until(at), 0)
	case topic.Priority:
		m.Priority = priority(i)
	default:
		m.At = at
	}
	return m
}

// producer returns a producer whose topic definition is already stored, so
// timed sections measure sends only.
func (r *rmqSys) producer(ctx context.Context, t topic.Topic) (*producer.Producer, error) {
	c, err := rmq.New(r.rdb, rmq.WithPrefix(rmqPrefix))
	if err != nil {
		return nil, err
	}
	p := c.Producer()
	warm := []byte("warm-up")
	if err := r.send(ctx, p, t, warm, 0, time.Now()); err != nil {
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
		return r.send(ctx, p, t, bufs[w], i, time.Now())
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
			msgs = append(msgs, r.batchMessage(makeBody(nil, r.s.body, tag, i, 0), i, at(i)))
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
				k := keyspace.KeysFor(rmqPrefix, t, i)
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
	if !r.typ.TimeBased() {
		return latResult{}, errUnsupported
	}
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
		// DueAt is the due time the message was stored with: the one
		// planned for FixedTime, send time + range for RangeMerge.
		rec.recordDue(msg.DueAt)
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
		if r.typ == topic.RangeMerge {
			// A range-merge message is due its range after the send.
			_, err := p.SendRangeMerge(ctx, t, body, lc.lead)
			return err
		}
		return r.send(ctx, p, t, body, 0, time.UnixMilli(dueMs))
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
