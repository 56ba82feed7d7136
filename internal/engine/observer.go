package engine

import (
	"time"

	"github.com/rmq-go/rmq/consumer"
)

// Observer is what the engines tell of their deliveries: the client's
// observer (rmq.Observer, which has these methods and more, fanned out to
// every observer given with rmq.WithObserver). The optional extensions
// below are found by type assertion, as rmq documents them.
type Observer interface {
	Delivered(m *consumer.Message)
	Finished(m *consumer.Message, took time.Duration, outcome consumer.Outcome, err error)
	LeasesExpired(topic string, rolledBack, dead int)
}

// The optional extensions of rmq.Observer that the engine calls.
type (
	expiryObserver interface{ Expired(topic string, n int) }
	pauseObserver  interface {
		Paused(topic string, paused bool)
	}
	fenceObserver interface {
		Fenced(topic string, slot int, op string)
	}
	flowObserver interface {
		ConcurrencyLimit(topic string, limit int)
	}
	byIDObserver interface {
		EndedByID(topic string, outcome consumer.Outcome)
	}
)

// endedByID reports to o, if it listens, a delivery that an AckByID or a
// NackByID ended: no *consumer.Message is at hand there, so Finished is
// not called (the client's history counts it).
func endedByID(o Observer, topic string, outcome consumer.Outcome) {
	if e, ok := o.(byIDObserver); ok {
		e.EndedByID(topic, outcome)
	}
}

// nopObserver is the observer of a hub made without one.
type nopObserver struct{}

func (nopObserver) Delivered(*consumer.Message)                                        {}
func (nopObserver) Finished(*consumer.Message, time.Duration, consumer.Outcome, error) {}
func (nopObserver) LeasesExpired(string, int, int)                                     {}

// finished reports the end of a delivery to o.
func finished(o Observer, m *consumer.Message, took time.Duration, outcome consumer.Outcome, err error) {
	o.Finished(m, took, outcome, err)
}

// expired reports n expired messages of topic to o, if it listens.
func expired(o Observer, topic string, n int) {
	if n <= 0 {
		return
	}
	if e, ok := o.(expiryObserver); ok {
		e.Expired(topic, n)
	}
}
