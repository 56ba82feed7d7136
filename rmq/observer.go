package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// This file is everything a client tells the code watching it: the one
// Observer interface, its optional extensions, and the send hooks.

// Observer is told what a client does, for metrics and tracing: its
// producer's sends and removals, and the deliveries of every topic it
// consumes (pushed and pulled). Attach one with WithObserver; the modules
// github.com/rmq-go/rmq/x/prometheus and x/otel implement it, so a program
// that never uses them never links them. Embed BaseObserver to implement
// only some methods.
//
// Methods are called synchronously from the client's goroutines (Finished
// of an acked pushed delivery from the goroutine that ran its ack round,
// which serves every topic of the client) and must not block: a slow
// observer delays other deliveries, and one that closes a topic or the
// client may deadlock.
//
// An Observer may also implement any of nine optional extensions, which
// the client finds by type assertion:
//
//   - TopicObserver: each topic the client consumes, once, before its
//     first delivery.
//   - ExpiryObserver: messages dropped because their TTL or expiry passed.
//   - PauseObserver: a consumed topic was paused or resumed.
//   - FenceObserver: Redis refused a call of a stale slot owner
//     (ZooKeeper mode).
//   - ScheduleObserver: ticks the client's scheduler fired or skipped.
//   - FlowObserver: a topic's adaptive concurrency limit changed.
//   - FlowStartObserver: a flow (producer.SendFlow) this client sent.
//   - FlowParentObserver: a flow's parent released, or failed by a child.
//   - ByIDObserver: a delivery that AckByID or NackByID ended.
type Observer interface {
	// Sent is told what a send did to its topic's slot, once per message.
	Sent(t topic.Topic, result producer.SendResult)
	// Removed is told whether a remove found its message.
	Removed(t topic.Topic, removed bool)
	// Delivered is called when a fetched message is handed to a handler
	// (pushed) or to a caller of Pull.
	Delivered(m *consumer.Message)
	// Finished is called once per delivery, with how long its handler ran
	// (since the fetch, for a pulled one), how it ended, and the error the
	// listener returned or the Nack gave (nil when acked).
	Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome, err error)
	// LeasesExpired is called when the sweeper rolled back expired leases
	// of topic: rolledBack in all, of which dead moved to the dead queue.
	LeasesExpired(topic string, rolledBack, dead int)
}

// TopicObserver is an optional extension of Observer: it is told of every
// topic the client consumes, once, before its first delivery (at Register,
// and at the first Pull or NackByID of a topic), so it can resolve its
// per-topic state (metric series, say) once and show the topic from the
// start.
type TopicObserver interface {
	Consumes(t topic.Topic)
}

// ExpiryObserver is an optional extension of Observer: it is told when
// messages of topic expired (a per-message TTL or expiry passed before they
// were acked) and were dropped, n at a time.
type ExpiryObserver interface {
	Expired(topic string, n int)
}

// PauseObserver is an optional extension of Observer: it is told when a
// consumer of this client learns that its topic was paused or resumed
// (Inspector.Pause), for a gauge.
type PauseObserver interface {
	Paused(topic string, paused bool)
}

// FenceObserver is an optional extension of Observer: it is told about
// every call Redis refused because this client's owner epoch of the slot
// was no longer current (ZooKeeper mode). op is "fetch", "ack",
// "rollback", "extend" or "sweep".
type FenceObserver interface {
	Fenced(topic string, slot int, op string)
}

// BaseObserver implements every method of Observer and does nothing: embed
// it in an observer that needs only some of them.
type BaseObserver struct{}

// Sent implements Observer.
func (BaseObserver) Sent(topic.Topic, producer.SendResult) {}

// Removed implements Observer.
func (BaseObserver) Removed(topic.Topic, bool) {}

// Delivered implements Observer.
func (BaseObserver) Delivered(*consumer.Message) {}

// Finished implements Observer.
func (BaseObserver) Finished(*consumer.Message, time.Duration, consumer.Outcome, error) {}

// LeasesExpired implements Observer.
func (BaseObserver) LeasesExpired(string, int, int) {}

// WithObserver attaches o to the client: its producer and the consumer of
// every topic (default: none). Several observers may be attached; each is
// told, in the order given. A nil o makes New fail with ErrInvalidOption.
func WithObserver(o Observer) Option {
	return clientOption(func(c *config) { c.observers = append(c.observers, o) })
}

// Outgoing is a message on its way to Redis, as a SendHook sees it.
type Outgoing struct {
	Topic topic.Topic
	Key   string // the message id: producer.WithKey's key, else derived from the body
	Body  []byte
	// Headers are the message's headers (producer.WithHeaders); a hook may
	// add or change entries. The limits of WithHeaders apply after every
	// hook ran.
	Headers map[string]string
}

// SendHook is called once per message the client's producer sends
// (SendBatch and SendMany too), after the message was validated and before
// it is written; it may add headers (a tracing integration puts its
// context there). The returned after, if not nil, is called once the write
// ended, with the id or the error. Hooks run on the sending goroutine, in
// the order they were given, and must not block.
type SendHook func(ctx context.Context, m *Outgoing) (after func(id string, err error))

// WithSendHook adds a hook the client's producer runs for every message it
// sends. A nil h is ignored.
func WithSendHook(h SendHook) Option {
	return clientOption(func(c *config) {
		if h != nil {
			c.sendHooks = append(c.sendHooks, h)
		}
	})
}

// observers fans the client's observers out: it is the engine's Observer
// and, with the send hooks, the producer's notifier.
type observers struct {
	list  []Observer
	hooks []SendHook
	hist  *history.Observer // in list too; nil: WithHistory(0)
}

var (
	_ engine.Observer      = (*observers)(nil)
	_ options.SendNotifier = (*observers)(nil)
	_ options.FlowNotifier = (*observers)(nil)
)

func (o *observers) Before(ctx context.Context, t topic.Topic, key string, body []byte, headers map[string]string) (map[string]string, func(string, error)) {
	if len(o.hooks) == 0 {
		return headers, nil
	}
	m := &Outgoing{Topic: t, Key: key, Body: body, Headers: headers}
	if m.Headers == nil {
		m.Headers = map[string]string{}
	}
	var afters []func(string, error)
	for _, h := range o.hooks {
		if a := h(ctx, m); a != nil {
			afters = append(afters, a)
		}
	}
	if len(afters) == 0 {
		return m.Headers, nil
	}
	return m.Headers, func(id string, err error) {
		for _, a := range afters {
			a(id, err)
		}
	}
}

func (o *observers) Sent(t topic.Topic, result int) {
	each(o.list, func(x Observer) { x.Sent(t, producer.SendResult(result)) })
}

func (o *observers) Removed(t topic.Topic, removed bool) {
	each(o.list, func(x Observer) { x.Removed(t, removed) })
}

func (o *observers) Delivered(m *consumer.Message) { each(o.list, func(x Observer) { x.Delivered(m) }) }

func (o *observers) Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome, err error) {
	each(o.list, func(x Observer) { x.Finished(m, took, outcome, err) })
}

func (o *observers) LeasesExpired(topic string, rolledBack, dead int) {
	each(o.list, func(x Observer) { x.LeasesExpired(topic, rolledBack, dead) })
}

// Consumes, Expired, Paused and Fenced tell the observers that implement
// the extension (ConcurrencyLimit is in flow.go, the schedule calls in
// schedule_client.go).

func (o *observers) Consumes(t topic.Topic) { each(o.list, func(x TopicObserver) { x.Consumes(t) }) }

func (o *observers) Expired(topic string, n int) {
	each(o.list, func(x ExpiryObserver) { x.Expired(topic, n) })
}

// ByIDObserver is an optional extension of Observer: it is told how a
// delivery ended that AckByID or NackByID ended (Finished has no Message
// for it: the caller kept only the id), as rmqd's acks end them.
type ByIDObserver interface {
	EndedByID(topic string, outcome consumer.Outcome)
}

func (o *observers) EndedByID(topic string, outcome consumer.Outcome) {
	each(o.list, func(x ByIDObserver) { x.EndedByID(topic, outcome) }) // the history too: it is in list
}

func (o *observers) Paused(topic string, paused bool) {
	each(o.list, func(x PauseObserver) { x.Paused(topic, paused) })
}

func (o *observers) Fenced(topic string, slot int, op string) {
	each(o.list, func(x FenceObserver) { x.Fenced(topic, slot, op) })
}

// each calls f with every observer of list that implements T, in order.
func each[T any](list []Observer, f func(T)) {
	for _, x := range list {
		if t, ok := x.(T); ok {
			f(t)
		}
	}
}
