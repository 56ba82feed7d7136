package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// RequeueRenewed sets a dead message's retries and expiry anew: one whose
// expiry passed while it was dead comes back (Requeue drops it), with the
// given retries and no expiry, or an expiry counted from the requeue.
func TestRequeueRenewed(t *testing.T) {
	t.Parallel()
	e := newCheckedEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "renewed", topic.FixedTime, 2)
	c := e.client()
	e.start(c)
	p := c.Producer()
	ttl := 400 * time.Millisecond
	for _, k := range []string{"old", "kept", "timed"} {
		_, err := p.SendFixedTime(ctx, tp, []byte("body-"+k), time.Now(),
			producer.WithKey(k), producer.WithMaxRetries(0), producer.WithTTL(ttl))
		require.NoError(t, err)
	}
	// Due times are rounded up to the next ms: a Pull may find only some
	// due, and the long-poll of the next brings the rest.
	var ds []*rmq.Delivery
	for len(ds) < 3 {
		more, err := c.Pull(ctx, []topic.Topic{tp}, 3-len(ds), rmq.WithWait(5*time.Second))
		require.NoError(t, err)
		require.NotEmpty(t, more, "a message did not come due")
		ds = append(ds, more...)
	}
	require.Len(t, ds, 3)
	for _, d := range ds {
		require.NoError(t, d.Nack(ctx, 0, nil), "no retry left: dead")
	}
	e.eventuallyCounts(tp, counts{Dead: 3, DeadMsg: 3})
	// The expiry passes while dead.
	insp := c.Inspector()
	for _, k := range []string{"old", "kept", "timed"} {
		m, err := insp.Message(ctx, tp, k)
		require.NoError(t, err)
		require.Equal(t, rmq.StateDead, m.State)
		require.False(t, m.ExpiresAt.IsZero(), "%s keeps its expiry while dead", k)
		e.waitRedisPast(m.ExpiresAt)
	}
	n, err := insp.Requeue(ctx, tp, "old")
	require.NoError(t, err)
	assert.Zero(t, n, "Requeue drops a message whose expiry passed")

	n, err = insp.RequeueRenewed(ctx, tp, 2, 0, "kept")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	m, err := insp.Message(ctx, tp, "kept")
	require.NoError(t, err)
	assert.Equal(t, rmq.StateWaiting, m.State)
	assert.Equal(t, 2, m.MaxRetries)
	assert.True(t, m.ExpiresAt.IsZero(), "ttl 0: never expires, got %v", m.ExpiresAt)
	assert.Zero(t, m.Attempts)
	assert.Equal(t, "body-kept", string(m.Body))

	before := time.Now()
	n, err = insp.RequeueRenewed(ctx, tp, 0, time.Minute, "timed", "nope")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	m, err = insp.Message(ctx, tp, "timed")
	require.NoError(t, err)
	assert.Equal(t, 0, m.MaxRetries)
	assert.WithinRange(t, m.ExpiresAt, before.Add(time.Minute-time.Second), time.Now().Add(time.Minute+time.Second))

	_, err = insp.RequeueRenewed(ctx, tp, -1, 0, "x")
	assert.ErrorIs(t, err, producer.ErrInvalidMaxRetries)
	_, err = insp.RequeueRenewed(ctx, tp, 999, 0, "x")
	assert.ErrorIs(t, err, producer.ErrInvalidMaxRetries)
	_, err = insp.RequeueRenewed(ctx, tp, 0, -time.Second, "x")
	assert.ErrorIs(t, err, producer.ErrInvalidExpiry)
	e.eventuallyCounts(tp, counts{Store: 2, Msg: 2})
}
