package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/redisops"
	"github.com/rmq-go/rmq/internal/keyspace"
)

// NackByID implements the puller API of rmq.Client: it ends whatever delivery of id
// is current as failed, as Delivery.Nack does, for a caller that kept only
// the id (rmq.Client.NackByID). It names no token (rollback.lua's -1) and
// no owner epoch: a pull engine owns every slot and is never fenced. It
// reports whether a delivery was ended.
func (c *Engine) NackByID(ctx context.Context, id string, retryAfter time.Duration, cause error) (bool, error) {
	if cause == nil {
		cause = errors.New("rmq: nacked")
	}
	if retryAfter > 0 {
		cause = consumer.RetryAfter(retryAfter, cause)
	}
	slot, found, err := c.inflightSlot(ctx, id)
	if err != nil || !found {
		return false, err
	}
	res, err := c.ops.Rollback(ctx, slot, []redisops.RollbackItem{{ID: id, Token: -1, Err: cause.Error(), How: redisops.RollbackDirective(cause)}})
	if err != nil {
		return false, err
	}
	if res[0] == redisops.RollbackExpired {
		expired(c.cfg.observer, c.topic.Name(), 1)
	}
	if res[0] != redisops.RollbackStale {
		c.flow.EndedByID(ctx, slot, id)
	}
	if res[0] == redisops.RollbackExpired || res[0] == redisops.RollbackDead {
		// A flow child's end reaches its parent (flows.go).
		c.checkFlowChildren(slot, id)
	}
	return res[0] != redisops.RollbackStale, nil
}

// inflightSlot finds the slot whose prepare set holds id, asking every slot
// in one pipelined round: a keyed message lives in its id's slot (preferred
// when both hold it), a body-derived id in its body's.
func (c *Engine) inflightSlot(ctx context.Context, id string) (int, bool, error) {
	first := keyspace.IndexString(id, len(c.keys))
	if len(c.keys) == 1 {
		return first, true, nil
	}
	cmds := make([]*redis.FloatCmd, len(c.keys))
	pipe := c.rdb.Pipeline()
	for s := range cmds {
		cmds[s] = pipe.ZScore(ctx, c.keys[s].Prepare, id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, fmt.Errorf("rmq: nack %s on %s: %w", id, c.topic.Name(), err)
	}
	if cmds[first].Err() == nil {
		return first, true, nil
	}
	for s, cmd := range cmds {
		if cmd.Err() == nil {
			return s, true, nil
		}
	}
	return 0, false, nil
}
