package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/topic"
)

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
	p, err := c.puller(ctx, t)
	if err != nil {
		return false, err
	}
	return p.NackByID(ctx, id, retryAfter, cause)
}
