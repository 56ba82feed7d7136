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
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// An ack by id from a client that runs no engine of the topic (another
// rmqd of a fleet, or one whose pull engine was released as idle) follows
// the topic's stored lifecycle all the same: the completed record with its
// result, and the completed event. AckByIDWithResult stores the result
// like a pulled delivery's SetResult; one over MaxResultSize is refused and
// the delivery stays in flight.
func TestAckByIDElsewhereKeepsLife(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifebyid", topic.Priority, 1)
	require.NoError(t, life.Store(ctx, e.rdb, e.prefix, tp.Name(), life.Settings{Retention: time.Minute, Events: 10}))
	puller := e.client()
	e.start(puller)
	acker := e.client()
	e.start(acker)
	for _, id := range []string{"b1", "b2"} {
		_, err := puller.Producer().SendPriority(ctx, tp, []byte(id), 100, producer.WithKey(id))
		require.NoError(t, err)
	}
	ds, err := puller.Pull(ctx, []topic.Topic{tp}, 2)
	require.NoError(t, err)
	require.Len(t, ds, 2)

	ok, err := acker.AckByIDWithResult(ctx, tp, "b1", bytes.Repeat([]byte("x"), consumer.MaxResultSize+1))
	require.ErrorIs(t, err, consumer.ErrResultTooLarge)
	assert.False(t, ok)
	m, err := acker.Inspector().Message(ctx, tp, "b1")
	require.NoError(t, err)
	assert.Equal(t, rmq.StateInFlight, m.State, "nothing written")

	ok, err = acker.AckByIDWithResult(ctx, tp, "b1", []byte("done b1"))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = acker.AckByID(ctx, tp, "b2")
	require.NoError(t, err)
	require.True(t, ok)

	r, kept := e.record(tp, "b1")
	require.True(t, kept, "the stored retention applies to an ack by id")
	assert.Equal(t, "done b1", string(r.Result))
	r, kept = e.record(tp, "b2")
	require.True(t, kept)
	assert.Empty(t, r.Result)
	// Both delivered by one pull (in either order), then completed in the
	// order of the acks.
	evs := e.lifeEvents(tp, "b1")
	require.Len(t, evs, 4)
	assert.ElementsMatch(t, []string{"delivered b1", "delivered b2"}, evs[:2])
	assert.Equal(t, []string{"completed b1", "completed b2"}, evs[2:])
	m, err = acker.Inspector().Message(ctx, tp, "b1")
	require.NoError(t, err)
	assert.Equal(t, rmq.StateCompleted, m.State)
	assert.Equal(t, "done b1", string(m.Result))
}
