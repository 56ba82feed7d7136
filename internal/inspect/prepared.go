package inspect

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// PreparedSlot returns the slot of t, other than skip, in which a delivery
// of id is in flight (-1: none), reading every slot's prepare set in one
// pipeline: rmq.Client.AckByID looks there when id's own slot (skip) has
// none, since a body-derived id lives in its body's slot.
func PreparedSlot(ctx context.Context, rdb redis.UniversalClient, prefix string, t topic.Topic, id string, skip int) (int, error) {
	cmds := make([]*redis.FloatCmd, t.SlotAmount())
	pipe := rdb.Pipeline()
	for s := range cmds {
		if s != skip {
			cmds[s] = pipe.ZScore(ctx, keyspace.KeysFor(prefix, t, s).Prepare, id)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return -1, err
	}
	for s, cmd := range cmds {
		if cmd != nil && cmd.Err() == nil {
			return s, nil
		}
	}
	return -1, nil
}
