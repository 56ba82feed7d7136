package rmq

import (
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Observer watches a whole client: its producer's sends and removals, and
// the consumer of every registered topic. It is the seam the optional
// integrations are built on (the modules github.com/rmq-go/rmq/x/prometheus
// and github.com/rmq-go/rmq/x/otel implement it), so a program that never
// uses them never links them. Attach one with WithObserver.
type Observer interface {
	producer.Observer
	// ConsumerObserver returns the observer of the consumer of t, or nil to
	// leave that consumer unobserved. Register calls it once per topic, so
	// an observer can resolve its per-topic state (metric series, say) once
	// rather than per message.
	ConsumerObserver(t topic.Topic) consumer.Observer
}

// WithObserver attaches o to the client's producer and to the consumer of
// every topic registered later (default: none). Several observers may be
// attached; each is told, in the order given. A consumer.WithObserver given
// to Register is told after them. A nil o makes New fail with
// ErrInvalidOption.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observers = append(c.observers, o) }
}

// producerObserver is what the producer is given: nil without observers,
// the observer itself with one, a fan-out with more.
func producerObserver(obs []Observer) producer.Observer {
	switch len(obs) {
	case 0:
		return nil
	case 1:
		return obs[0]
	}
	return producerObservers(obs)
}

type producerObservers []Observer

func (p producerObservers) Sent(t topic.Topic, r producer.SendResult) {
	for _, o := range p {
		o.Sent(t, r)
	}
}

func (p producerObservers) Removed(t topic.Topic, removed bool) {
	for _, o := range p {
		o.Removed(t, removed)
	}
}

// producerObserverOptions wires the client's observers to its producer.
func producerObserverOptions(obs []Observer) []producer.Option {
	if o := producerObserver(obs); o != nil {
		return []producer.Option{producer.WithObserver(o)}
	}
	return nil
}

// consumerObserverOptions wires the client's observers to the consumer of t;
// consumer.WithObserver adds to the observers already set, in order.
func consumerObserverOptions(obs []Observer, t topic.Topic) []consumer.Option {
	var opts []consumer.Option
	for _, o := range obs {
		if co := o.ConsumerObserver(t); co != nil {
			opts = append(opts, consumer.WithObserver(co))
		}
	}
	return opts
}

// Compile-time check that the fan-out keeps up with producer.Observer.
var _ producer.Observer = producerObservers(nil)
