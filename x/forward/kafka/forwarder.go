package rmqkafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/forwarding"
)

// The headers every forwarded record carries besides the message's own:
// the RMQ message id, topic, due time (RFC 3339 UTC with milliseconds;
// absent for priority messages) and attempt. They win over a message or
// extra header of the same name.
const (
	HeaderID      = forwarding.HeaderID
	HeaderTopic   = forwarding.HeaderTopic
	HeaderDueAt   = forwarding.HeaderDueAt
	HeaderAttempt = forwarding.HeaderAttempt
)

// DueAtLayout is the time layout of HeaderDueAt.
const DueAtLayout = forwarding.DueAtLayout

// ErrClosed is returned by the listener's OnMessage after Close.
var ErrClosed = forwarding.ErrClosed

// Closer is implemented by the listener Forwarder returns.
type Closer interface {
	// Close refuses further messages (OnMessage returns ErrClosed) and
	// waits until every record it produced was acknowledged or failed by
	// the client, also those whose OnMessage gave up after the publish
	// timeout, or until ctx ends. Call it after the rmq.Client's Close and
	// before the kgo.Client's.
	Close(ctx context.Context) error
}

// Option configures a forwarder.
type Option func(*config)

type config struct {
	forwarding.Config
	key func(*consumer.Message) []byte
}

// WithHeaders adds headers to each forwarded record: f's map wins over the
// message's own headers, the rmq-* headers win over both. f must be safe
// for concurrent use.
func WithHeaders(f func(*consumer.Message) map[string]string) Option {
	return func(c *config) { c.Headers = f }
}

// WithPublishTimeout bounds one forward, from waiting for a window slot to
// the produce acknowledgement (default 5 s); past it OnMessage returns an
// error and RMQ retries the message after its backoff. The handler's
// context can end it sooner.
func WithPublishTimeout(d time.Duration) Option {
	return func(c *config) { c.PublishTimeout = d }
}

// WithWindow bounds the records awaiting their produce acknowledgement
// (default 256), counting those a timed-out OnMessage left behind; further
// messages wait for a slot. Concurrent handlers (consumer.WithConcurrency)
// fill it, and the client batches their records per partition.
func WithWindow(n int) Option {
	return func(c *config) { c.Window = n }
}

// WithPartitionKey picks the record key, which chooses the partition under
// the client's default partitioner (the same key, the same partition, in
// order); the default is the RMQ message id. The id stays in the rmq-id
// header for deduplication.
func WithPartitionKey(f func(*consumer.Message) []byte) Option {
	return func(c *config) { c.key = f }
}

// forwarder is the listener Forwarder returns.
type forwarder struct {
	cl    *kgo.Client
	topic func(*consumer.Message) string
	cfg   config
	win   *forwarding.Window
}

// Forwarder returns a listener that produces each message as a record to
// the Kafka topic topic(m) with cl and returns nil (RMQ acks) only once
// the record is acknowledged (with cl's acks setting, all replicas by
// default); see the package documentation. It panics when cl or topic is
// nil or an option is out of range: a program error, caught before any
// message is taken.
func Forwarder(cl *kgo.Client, topic func(*consumer.Message) string, opts ...Option) consumer.MessageListener {
	cfg := config{Config: forwarding.DefaultConfig(), key: func(m *consumer.Message) []byte { return []byte(m.ID) }}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cl == nil:
		panic("rmqkafka: Forwarder with a nil kgo.Client")
	case topic == nil:
		panic("rmqkafka: Forwarder with a nil topic function")
	case cfg.key == nil:
		panic("rmqkafka: WithPartitionKey(nil)")
	}
	if err := cfg.Validate("rmqkafka"); err != nil {
		panic(err)
	}
	return &forwarder{cl: cl, topic: topic, cfg: cfg, win: forwarding.NewWindow(cfg.Window)}
}

// OnMessage forwards m; see Forwarder.
func (f *forwarder) OnMessage(ctx context.Context, m *consumer.Message) error {
	topic := f.topic(m)
	fail := func(err error) error { return fmt.Errorf("rmqkafka: produce %s to %s: %w", m.ID, topic, err) }
	if topic == "" {
		return consumer.SkipRetry(fail(errors.New("empty topic")))
	}
	h := f.cfg.HeadersOf(m)
	rec := &kgo.Record{Topic: topic, Key: f.cfg.key(m), Value: m.Body, Headers: make([]kgo.RecordHeader, 0, len(h))}
	for k, v := range h {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}

	// The record carries ctx: the client fails it when ctx ends as long as
	// it is safe (nothing sent yet). Once a request is out, the client
	// keeps retrying whatever the context says, while the broker is down
	// too; OnMessage stops waiting at the timeout, and the promise gives
	// the window slot back whenever the client is done with the record.
	ctx, cancel := context.WithTimeoutCause(ctx, f.cfg.PublishTimeout,
		fmt.Errorf("no produce acknowledgement within %v", f.cfg.PublishTimeout))
	defer cancel()
	if err := f.win.Acquire(ctx); err != nil {
		return fail(err)
	}
	done := make(chan error, 1)
	f.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		done <- err
		f.win.Release()
	})
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
			return consumer.SkipRetry(fail(err))
		}
		return fail(err)
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	}
}

// Close implements Closer.
func (f *forwarder) Close(ctx context.Context) error {
	if err := f.win.Close(ctx); err != nil {
		return fmt.Errorf("rmqkafka: close: %w", err)
	}
	return nil
}

// ForwardsToBroker marks the listener as a forwarder: the client counts
// its acked deliveries as forwarded in the topic's history.
func (*forwarder) ForwardsToBroker() {}
