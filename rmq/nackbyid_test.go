package rmq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// NackByID ends the current delivery of an id as failed without its token:
// the message comes back no earlier than the retry-after, attempt counted
// and cause kept; an id with no delivery in flight is false; past its max
// retries the message is dead.
func TestNackByID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "nackbyid", topic.FixedTime, 4)
		c := e.client()
		_, err := c.NackByID(ctx, tp, "a", 0, nil)
		require.ErrorIs(t, err, rmq.ErrNotStarted)
		e.start(c)
		p := c.Producer()

		ok, err := c.NackByID(ctx, tp, "nobody", 0, nil)
		require.NoError(t, err)
		assert.False(t, ok, "an unknown id")

		send(t, p, tp, "a", "a")
		ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(10*time.Second), rmq.WithWait(2*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		// The retry is due 300 ms after the nack took effect, which is
		// after the call began and before it returned.
		nacked := time.Now()
		ok, err = c.NackByID(ctx, tp, "a", 300*time.Millisecond, errors.New("later"))
		require.NoError(t, err)
		require.True(t, ok)
		// Its delivery ended: nacking again finds nothing in flight.
		ok, err = c.NackByID(ctx, tp, "a", 0, nil)
		require.NoError(t, err)
		assert.False(t, ok, "a second nack")
		ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(10*time.Second), rmq.WithWait(5*time.Second))
		require.NoError(t, err)
		require.Len(t, ds, 1)
		assert.GreaterOrEqual(t, time.Since(nacked), 300*time.Millisecond)
		assert.Equal(t, "a", ds[0].ID)
		assert.Equal(t, 2, ds[0].Attempt)
		assert.Equal(t, "later", ds[0].LastError)
		ok, err = c.AckByID(ctx, tp, "a")
		require.NoError(t, err)
		require.True(t, ok)

		// One retry allowed: the second failed attempt is the last.
		_, err = p.SendFixedTime(ctx, tp, []byte("b"), time.Now(), producer.WithKey("b"), producer.WithMaxRetries(1))
		require.NoError(t, err)
		for attempt := 1; attempt <= 2; attempt++ {
			ds, err = c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(10*time.Second), rmq.WithWait(5*time.Second))
			require.NoError(t, err)
			require.Len(t, ds, 1)
			require.Equal(t, attempt, ds[0].Attempt)
			ok, err = c.NackByID(ctx, tp, "b", time.Millisecond, errors.New("broken"))
			require.NoError(t, err)
			require.True(t, ok)
		}
		dead, err := c.Inspector().DeadMessage(ctx, tp, "b")
		require.NoError(t, err)
		assert.Equal(t, 2, dead.Attempts)
		assert.Equal(t, "broken", dead.LastError)
		e.eventuallyCounts(tp, counts{Dead: 1, DeadMsg: 1})

		_, err = c.NackByID(ctx, tp, "", 0, nil)
		assert.ErrorIs(t, err, rmq.ErrInvalidPull)
		_, err = c.NackByID(ctx, tp, "b", -time.Second, nil)
		assert.ErrorIs(t, err, rmq.ErrInvalidPull)
	})
}
