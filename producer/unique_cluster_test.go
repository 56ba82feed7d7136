package producer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// On a Redis Cluster unique sends work in every slot of a topic: the
// unique keys lie in the slot's hash tag (the hook checks every script
// call's KEYS share one hash slot), each id is claimed in its slot, and
// concurrent unique sends of one id let exactly one through.
func TestClusterUniqueSends(t *testing.T) {
	p, rdb, _, prefix := clusterSetup(t)
	ctx := context.Background()
	tp := topic.MustNew("uniq-cluster", topic.Priority, 16)
	for i := range tp.SlotAmount() {
		k, u := keyspace.KeysFor(prefix, tp, i), keyspace.UniqueKeysFor(prefix, tp, i)
		require.Equal(t, keyspace.HashSlot(k.Store), keyspace.HashSlot(u.Until))
		require.Equal(t, keyspace.HashSlot(k.Store), keyspace.HashSlot(u.Nonce))
	}

	const n = 40
	for i := range n {
		opts := []producer.SendOption{producer.WithKey(fmt.Sprint("id", i)), producer.WithUniqueFor(time.Hour)}
		if i%4 == 0 {
			opts = append(opts, producer.WithGroup(fmt.Sprint("g", i)))
		}
		_, err := p.SendPriority(ctx, tp, []byte("first"), 20, opts...)
		require.NoError(t, err)
		_, err = p.SendPriority(ctx, tp, []byte("second"), 30, opts...)
		require.ErrorIs(t, err, producer.ErrDuplicate)
	}
	var claimed int64
	for i := range tp.SlotAmount() {
		c, err := rdb.ZCard(ctx, keyspace.UniqueKeysFor(prefix, tp, i).Until).Result()
		require.NoError(t, err)
		claimed += c
	}
	assert.EqualValues(t, n, claimed)
	assert.EqualValues(t, n, storeSizes(t, rdb, prefix, tp)+groupedSizes(t, rdb, prefix, tp))

	// Concurrent unique sends of one id: one goes, the others are refused.
	const racers = 8
	errs := make(chan error, racers)
	for range racers {
		go func() {
			_, err := p.SendPriority(ctx, tp, []byte("race"), 20, producer.WithKey("race"), producer.WithUniqueFor(time.Hour))
			errs <- err
		}()
	}
	ok := 0
	for range racers {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, producer.ErrDuplicate)
	}
	assert.Equal(t, 1, ok)
}

// groupedSizes sums the messages waiting in the groups of every slot of tp.
func groupedSizes(t *testing.T, rdb redis.UniversalClient, prefix string, tp topic.Topic) (total int64) {
	t.Helper()
	for i := range tp.SlotAmount() {
		n, err := rdb.ZCard(context.Background(), keyspace.GroupKeysFor(prefix, tp, i).Queue).Result()
		require.NoError(t, err)
		total += n
	}
	return total
}
