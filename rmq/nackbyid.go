package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/topic"
)

// NackByID ends whatever delivery of id is current in t as failed, without
// naming its token, as consumer.Delivery.Nack does: an attempt is counted,
// and past its max retries the message moves to the dead queue. It is
// retried after retryAfter (0: the topic's backoff), never earlier. cause
// becomes its LastError (nil: "rmq: nacked"). Like AckByID it is for
// stateless callers and unfenced: if the lease ran out and the message was
// delivered again, this nacks the new delivery. It reports whether a
// delivery was ended (false: none of id is in flight). The client must be
// started, as for Pull, whose engine for t (and its retry settings) it uses.
func (c *Client) NackByID(ctx context.Context, t topic.Topic, id string, retryAfter time.Duration, cause error) (bool, error) {
	if id == "" {
		return false, fmt.Errorf("%w: empty id", ErrInvalidPull)
	}
	if retryAfter < 0 {
		return false, fmt.Errorf("%w: retry after %v", ErrInvalidPull, retryAfter)
	}
	p, err := c.puller(ctx, t)
	if err != nil {
		return false, err
	}
	return p.NackByID(ctx, id, retryAfter, cause)
}
