package rmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Inspector.Message finds a message in any state, with its options.
func TestInspectorMessage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "insp", topic.Priority, 4)
		c := e.client()
		p := c.Producer()
		in := c.Inspector()
		exp := time.Now().Add(time.Hour)
		_, err := p.SendPriority(ctx, tp, []byte("w"), 100, producer.WithKey("w"), producer.WithHeaders(map[string]string{"h": "v"}),
			producer.WithMaxRetries(3), producer.WithExpiresAt(exp), producer.WithTimeout(2*time.Second))
		require.NoError(t, err)
		_, err = p.SendPriority(ctx, tp, []byte("d"), 200, producer.WithKey("d"), producer.WithDelay(time.Hour))
		require.NoError(t, err)
		body := []byte("body-derived")
		id, err := p.SendPriority(ctx, tp, body, 50)
		require.NoError(t, err)

		m, err := in.Message(ctx, tp, "w")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateWaiting, m.State)
		assert.Equal(t, "w", string(m.Body))
		assert.Equal(t, map[string]string{"h": "v"}, m.Headers)
		assert.Equal(t, 3, m.MaxRetries)
		assert.Equal(t, exp.UnixMilli(), m.ExpiresAt.UnixMilli())
		assert.Equal(t, 2*time.Second, m.Timeout)
		assert.EqualValues(t, 100, m.Priority)

		m, err = in.Message(ctx, tp, "d")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateDelayed, m.State)
		assert.InDelta(t, time.Now().Add(time.Hour).UnixMilli(), m.Due.UnixMilli(), 5000)
		assert.Equal(t, -1, m.MaxRetries)

		m, err = in.Message(ctx, tp, id)
		require.NoError(t, err)
		assert.Equal(t, string(body), string(m.Body), "found in its body's slot")

		_, err = in.Message(ctx, tp, "nobody")
		assert.ErrorIs(t, err, rmq.ErrMessageNotFound)

		st, err := in.Stats(ctx, tp)
		require.NoError(t, err)
		assert.EqualValues(t, 2, st.Store)
		assert.EqualValues(t, 1, st.Delayed)
		assert.False(t, st.Paused)
		require.NoError(t, in.Pause(ctx, tp))
		st, err = in.Stats(ctx, tp)
		require.NoError(t, err)
		assert.True(t, st.Paused)
		require.NoError(t, in.Resume(ctx, tp))

		// In flight, then dead.
		hold := make(chan struct{})
		inFlight := make(chan struct{}, 1)
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			if m.ID == "w" {
				inFlight <- struct{}{}
				<-hold
				return consumer.SkipRetry(errors.New("no"))
			}
			return nil
		})))
		e.start(c)
		<-inFlight
		m, err = in.Message(ctx, tp, "w")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateInFlight, m.State)
		assert.True(t, m.LeaseUntil.After(time.Now()))
		close(hold)
		e.waitDead(tp, 1)
		m, err = in.Message(ctx, tp, "w")
		require.NoError(t, err)
		assert.Equal(t, rmq.StateDead, m.State)
		assert.Equal(t, "no", m.LastError)
		assert.Equal(t, map[string]string{"h": "v"}, m.Headers, "options kept in the dead queue")
	})
}
