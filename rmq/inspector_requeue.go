package rmq

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Requeue moves the dead messages with these ids back to their topic as
// fresh messages: no failed attempts, no last error; FixedTime and
// RangeMerge messages due now (Redis's clock), Priority messages at the
// priority they were sent with. It runs one script per slot (per 500 ids)
// and returns how many were requeued; ids not in the dead queue are
// skipped.
//
// A requeue never duplicates or drops a message:
//   - When a message with the same id waits in store, they merge into that
//     one, which keeps its body and history (it was sent after the dead one
//     died, so its body is the newer): a RangeMerge message keeps its due
//     time (as for any duplicate); a FixedTime message becomes due at the
//     earlier of its time and now; a Priority message takes the higher of
//     the two priorities. A requeue never delays a waiting message.
//   - When a delivery of the same id is in flight, the requeued message is
//     stored again and delivered after that delivery ends, as a send would
//     be.
//   - A script that go-redis runs twice (after a lost reply) recognises its
//     own work and changes nothing the second time.
func (i *Inspector) Requeue(ctx context.Context, t topic.Topic, ids ...string) (int, error) {
	return i.in.Requeue(ctx, t, ids...)
}

// RequeueRenewed is Requeue that also sets the requeued messages' retries
// and expiry anew, as a send with producer.WithMaxRetries(maxRetries) and
// producer.WithTTL(ttl) would (ttl 0: it never expires), instead of keeping
// the ones they died with: an expiry that passed while a message was dead
// no longer drops it. A message merged into a waiting one with its id keeps
// that one's options.
func (i *Inspector) RequeueRenewed(ctx context.Context, t topic.Topic, maxRetries int, ttl time.Duration, ids ...string) (int, error) {
	if maxRetries < 0 || maxRetries > consumer.MaxMaxRetries {
		return 0, fmt.Errorf("%w: %d (want 0..%d)", producer.ErrInvalidMaxRetries, maxRetries, consumer.MaxMaxRetries)
	}
	if ttl < 0 || ttl > maxRenewTTL {
		return 0, fmt.Errorf("%w: TTL %v", producer.ErrInvalidExpiry, ttl)
	}
	return i.in.RequeueRenewed(ctx, t, maxRetries, ttl, ids...)
}

// maxRenewTTL bounds RequeueRenewed's ttl as producer.WithTTL's (about
// 100 years): the envelope keeps expiries in 48 bits of ms.
const maxRenewTTL = 100 * 365 * 24 * time.Hour

// RequeueAll requeues every message of t's dead queue that died before the
// call, as Requeue does, in batches of 500 per script call and slot (slots
// in parallel through pipelines). Messages that die while it runs stay
// dead, so a handler that keeps failing cannot make it loop. It returns how
// many were requeued.
func (i *Inspector) RequeueAll(ctx context.Context, t topic.Topic) (int, error) {
	return i.in.RequeueAll(ctx, t)
}

// DeleteDead deletes the dead messages with these ids, bodies with them,
// and returns how many it deleted; ids not in the dead queue are skipped.
func (i *Inspector) DeleteDead(ctx context.Context, t topic.Topic, ids ...string) (int, error) {
	return i.in.DeleteDead(ctx, t, ids...)
}

// PurgeDead deletes t's whole dead queue, bodies with it, one script per
// slot, and returns how many messages it deleted.
func (i *Inspector) PurgeDead(ctx context.Context, t topic.Topic) (int, error) {
	return i.in.PurgeDead(ctx, t)
}
