package rmq

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine"
)

// Delivery is a message taken by Pull. Its lease is not extended
// automatically: end it with Ack or Nack, or keep it with Extend, before
// the lease runs out; after that the sweeper rolls it back (an attempt
// counted) and it is delivered again.
//
// Observers are told of a pulled delivery as of a pushed one: Delivered
// when Pull hands it out, Finished when the first Ack or Nack ends it (the
// handler's time is the time since the fetch). A call that could not reach
// Redis ends it as Failed: the lease runs out and the sweeper rolls it
// back.
type Delivery struct {
	*consumer.Message
	d *engine.Pulled
}

// Ack ends the delivery as done. consumer.ErrLeaseLost: its lease ran out
// (or it was removed) and it is no longer this delivery's to end. The ack
// rides the client's ack rounds, with other topics' acks; ctx bounds the
// wait for it.
func (d *Delivery) Ack(ctx context.Context) error { return d.d.Ack(ctx) }

// Nack ends the delivery as failed: it is retried after retryAfter (zero:
// the topic's backoff), an attempt counted, or moves to the dead queue past
// its retries. cause becomes its LastError (nil: "rmq: nacked").
// consumer.ErrLeaseLost as for Ack.
func (d *Delivery) Nack(ctx context.Context, retryAfter time.Duration, cause error) error {
	return d.d.Nack(ctx, retryAfter, cause)
}

// Extend renews the lease to dur from now (whole seconds, rounded up).
// consumer.ErrLeaseLost as for Ack.
func (d *Delivery) Extend(ctx context.Context, dur time.Duration) error {
	return d.d.Extend(ctx, dur)
}

// SetProgress stores progress as the delivery's latest progress (readable
// through Inspector.Message while it is in flight, and recorded as a
// progress event with consumer.WithEvents), as consumer.Message.SetProgress
// does for a handler; consumer.ErrNotCurrent once the delivery ended or
// was cancelled. It shadows the embedded Message's method, which needs a
// handler's context.
func (d *Delivery) SetProgress(ctx context.Context, progress []byte) error {
	return d.d.SetProgress(ctx, progress)
}
