package consumer

import "time"

// Outcome is how a delivery ended.
type Outcome int

const (
	// Acked: the listener returned nil and Redis took the ack.
	Acked Outcome = iota + 1
	// Retried: rolled back into store for another attempt.
	Retried
	// Dead: rolled back past MaxRetries into the dead queue.
	Dead
	// Superseded: rolled back while a re-send of the same id waited; the
	// re-send goes next.
	Superseded
	// Refused: Redis refused the ack or rollback because the delivery was
	// no longer current (its lease ran out and was swept).
	Refused
	// LeaseLost: the lease was found lost while the handler ran.
	LeaseLost
	// Abandoned: Close's deadline passed; the delivery was rolled back.
	Abandoned
	// Failed: the ack or rollback could not reach Redis; the lease will run
	// out and the sweeper will roll it back.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case Dead:
		return "dead"
	case Superseded:
		return "superseded"
	case Refused:
		return "refused"
	case LeaseLost:
		return "lease_lost"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Observer is told what a consumer does, for metrics. Methods are called
// synchronously from the consumer's goroutines and must not block.
type Observer interface {
	// Delivered is called when a fetched message is handed to a handler.
	Delivered(m *Message)
	// Finished is called once per delivery, with how long the handler ran.
	Finished(m *Message, took time.Duration, outcome Outcome)
	// LeasesExpired is called when the sweeper rolled back expired leases
	// of topic: rolledBack in all, of which dead moved to the dead queue.
	LeasesExpired(topic string, rolledBack, dead int)
}

// WithObserver sets an observer (default: none).
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

type nopObserver struct{}

func (nopObserver) Delivered(*Message)                        {}
func (nopObserver) Finished(*Message, time.Duration, Outcome) {}
func (nopObserver) LeasesExpired(string, int, int)            {}
