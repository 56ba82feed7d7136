package inspect

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// PreparedSlot finds the slot whose prepare set holds the id, leaving out
// the slot it is told to skip.
func TestPreparedSlot(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	tp := topic.MustNew("orders", topic.FixedTime, 4)

	slot, err := PreparedSlot(ctx, rdb, prefix, tp, "m1", 0)
	require.NoError(t, err)
	assert.Equal(t, -1, slot, "in flight nowhere")

	require.NoError(t, rdb.ZAdd(ctx, keyspace.KeysFor(prefix, tp, 2).Prepare, redis.Z{Score: 1, Member: "m1"}).Err())
	slot, err = PreparedSlot(ctx, rdb, prefix, tp, "m1", 0)
	require.NoError(t, err)
	assert.Equal(t, 2, slot)
	slot, err = PreparedSlot(ctx, rdb, prefix, tp, "m1", 2)
	require.NoError(t, err)
	assert.Equal(t, -1, slot, "its one slot is skipped")
}
