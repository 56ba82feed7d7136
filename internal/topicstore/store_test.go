package topicstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

func TestDefineLookupList(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redistest.Shared(t))
	key := redistest.Prefix(t) + ":topics"

	_, found, err := Lookup(ctx, rdb, key, "orders")
	require.NoError(t, err)
	assert.False(t, found, "never defined")

	orders := topic.MustNew("orders", topic.FixedTime, 16)
	jobs := topic.MustNew("jobs", topic.Priority, 4)
	require.NoError(t, Define(ctx, rdb, key, orders))
	require.NoError(t, Define(ctx, rdb, key, orders), "defining the same topic again")
	require.NoError(t, Define(ctx, rdb, key, jobs))

	// Another type or slot amount is refused and changes nothing.
	for _, other := range []topic.Topic{topic.MustNew("orders", topic.Priority, 16), topic.MustNew("orders", topic.FixedTime, 32)} {
		err := Define(ctx, rdb, key, other)
		assert.ErrorIs(t, err, topic.ErrConflict, "%v", other)
	}
	got, found, err := Lookup(ctx, rdb, key, "orders")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, orders, got)

	all, err := List(ctx, rdb, key)
	require.NoError(t, err)
	assert.Equal(t, []topic.Topic{jobs, orders}, all, "sorted by name")

	assert.ErrorIs(t, Define(ctx, rdb, key, topic.Topic{}), topic.ErrInvalidName)
}
