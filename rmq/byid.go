package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// AckByID acks whatever delivery of id is current in t, without naming its
// token: for stateless callers (an HTTP service) that kept only the id. It
// is unfenced: if the lease ran out and the message was delivered again,
// this acks the new delivery. It reports whether a delivery was acked.
func (c *Client) AckByID(ctx context.Context, t topic.Topic, id string) (bool, error) {
	return c.AckByIDWithResult(ctx, t, id, nil)
}

// AckByIDWithResult is AckByID storing result with the ack, as a
// delivery's SetResult does: a topic that retains finished messages
// keeps it (Inspector.Message, Client.Wait), its event log records it
// with the completed event, and its waiters get it. A result over
// consumer.MaxResultSize is refused with consumer.ErrResultTooLarge and
// nothing is acked.
func (c *Client) AckByIDWithResult(ctx context.Context, t topic.Topic, id string, result []byte) (bool, error) {
	if len(result) > consumer.MaxResultSize {
		return false, fmt.Errorf("%w: %d bytes (at most %d)", consumer.ErrResultTooLarge, len(result), consumer.MaxResultSize)
	}
	if t.IsZero() {
		return false, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	if id == "" {
		return false, fmt.Errorf("%w: empty id", ErrInvalidPull)
	}
	// Through the client's shared ack rounds (token -1: whatever delivery
	// is current), with the acks of its engines and other AckByID calls.
	first := slots.IndexString(id, t.SlotAmount())
	ok, err := c.hub.AckByID(ctx, c.cfg.prefix, t, first, id, result)
	if !ok && err == nil {
		// A body-derived id lives in its body's slot: look for its delivery.
		var slot int
		if slot, err = inspect.PreparedSlot(ctx, c.rdb, c.cfg.prefix, t, id, first); err == nil && slot >= 0 {
			ok, err = c.hub.AckByID(ctx, c.cfg.prefix, t, slot, id, result)
		}
	}
	if err != nil {
		return false, fmt.Errorf("rmq: ack %s on %s: %w", id, t.Name(), err)
	}
	return ok, nil
}

// NackByID ends whatever delivery of id is current in t as failed, without
// naming its token, as Delivery.Nack does: an attempt is counted,
// and past its max retries the message moves to the dead queue. It is
// retried after retryAfter (0: the topic's backoff), never earlier. cause
// becomes its LastError (nil: "rmq: nacked"). Like AckByID it is for
// stateless callers and unfenced: if the lease ran out and the message was
// delivered again, this nacks the new delivery. It reports whether a
// delivery was ended (false: none of id is in flight). It uses Pull's
// engine for t (and its retry settings), so as for Pull the client must be
// started (ErrNotStarted) and not in ZooKeeper mode (ErrInvalidPull); an
// empty id or a negative retryAfter is ErrInvalidPull too.
func (c *Client) NackByID(ctx context.Context, t topic.Topic, id string, retryAfter time.Duration, cause error) (bool, error) {
	if id == "" {
		return false, fmt.Errorf("%w: empty id", ErrInvalidPull)
	}
	if retryAfter < 0 {
		return false, fmt.Errorf("%w: retry after %v", ErrInvalidPull, retryAfter)
	}
	if c.coord != nil {
		// As for Pull: its engine would roll back and sweep every slot,
		// unfenced, including slots other workers own.
		return false, fmt.Errorf("%w: NackByID is not available in ZooKeeper mode", ErrInvalidPull)
	}
	e, err := c.pullEntry(ctx, t)
	if err != nil {
		return false, err
	}
	defer c.letGo([]*pullEntry{e}, time.Time{})
	return e.p.NackByID(ctx, id, retryAfter, cause)
}

// SetProgressByID stores progress as the latest progress of whatever
// delivery of id is in flight in t, as that delivery's SetProgress does
// (readable through Inspector.Message, a progress event when the topic
// keeps an event log): for stateless callers that kept only the id, like
// AckByID, and like it unfenced. It reports false, writing nothing, when
// no delivery of id is in flight (waiting, delayed, finished, unknown);
// a delivery that ended while the progress was written is an error
// wrapping consumer.ErrNotCurrent, and progress over
// consumer.MaxProgressSize is consumer.ErrProgressTooLarge (nothing
// written either way).
func (c *Client) SetProgressByID(ctx context.Context, t topic.Topic, id string, progress []byte) (bool, error) {
	if len(progress) > consumer.MaxProgressSize {
		return false, fmt.Errorf("%w: %d bytes (at most %d)", consumer.ErrProgressTooLarge, len(progress), consumer.MaxProgressSize)
	}
	if id == "" {
		return false, fmt.Errorf("%w: empty id", ErrInvalidPull)
	}
	r, err := c.Inspector().in.ProgressByID(ctx, t, id, progress)
	switch {
	case err != nil:
		return false, err
	case r == inspect.ProgressStale:
		return false, fmt.Errorf("%w: %s on %s", consumer.ErrNotCurrent, id, t.Name())
	}
	return r == inspect.ProgressStored, nil
}
