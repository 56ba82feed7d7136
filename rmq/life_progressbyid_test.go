package rmq_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Progress by id, from a client that runs no engine of the topic: stored
// on the delivery in flight (Inspector.Message shows it) and logged under
// the topic's stored settings; false, nothing written, for an id with no
// delivery in flight (waiting, unknown, acked); too large refused.
func TestSetProgressByID(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeprogid", topic.Priority, 2)
	require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Retention: time.Minute, Events: 10}))
	puller := e.client()
	e.start(puller)
	other := e.client()
	for _, id := range []string{"p1", "p2"} {
		_, err := puller.Producer().SendPriority(ctx, tp, []byte(id), 100, producer.WithKey(id))
		require.NoError(t, err)
	}
	ds, err := puller.Pull(ctx, []topic.Topic{tp}, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	id, waiting := ds[0].ID, map[string]string{"p1": "p2", "p2": "p1"}[ds[0].ID]

	ok, err := other.SetProgressByID(ctx, tp, id, []byte("50%"))
	require.NoError(t, err)
	require.True(t, ok)
	m, err := other.Inspector().Message(ctx, tp, id)
	require.NoError(t, err)
	assert.Equal(t, "50%", string(m.Progress))
	assert.Equal(t, []string{"delivered " + id, "progress " + id}, e.lifeEvents(tp, id))

	_, err = other.SetProgressByID(ctx, tp, id, bytes.Repeat([]byte("x"), consumer.MaxProgressSize+1))
	require.ErrorIs(t, err, consumer.ErrProgressTooLarge)
	for _, nobody := range []string{waiting, "unknown"} {
		ok, err = other.SetProgressByID(ctx, tp, nobody, []byte("1%"))
		require.NoError(t, err)
		assert.False(t, ok, nobody)
	}
	require.NoError(t, ds[0].Ack(ctx))
	ok, err = other.SetProgressByID(ctx, tp, id, []byte("99%"))
	require.NoError(t, err)
	assert.False(t, ok, "acked")
	m, err = other.Inspector().Message(ctx, tp, id)
	require.NoError(t, err)
	assert.Empty(t, m.Progress, "the finished message's record has no progress")
}
