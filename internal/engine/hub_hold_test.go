package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// holdEnv starts an engine of tp on a hub of the shared Redis with the
// given options; every delivery goes to the returned channel.
func holdEnv(t *testing.T, tp topic.Topic, opts ...consumer.Option) (context.Context, *Hub, *Engine, *producer.Producer, <-chan *consumer.Message, string) {
	t.Helper()
	ctx, rdb, prefix, h := lookEnv(t)
	got := make(chan *consumer.Message, 100)
	l := consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- m
		return nil
	})
	e, err := h.newEngine(tp, l, opts...)
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	p := newProducer(rdb, prefix)
	return ctx, h, e, p, got, prefix
}

// A message due soon is taken ahead of its instant (it waits in prepare,
// held by the client) and handed to the listener at its instant, never
// before it.
func TestLookaheadHoldsUntilTheInstant(t *testing.T) {
	tp := topic.MustNew("hold", topic.FixedTime, 4)
	ctx, _, e, p, got, prefix := holdEnv(t, tp, consumer.WithLookahead(300*time.Millisecond))
	due := time.Now().Add(time.Second)
	_, err := p.SendFixedTime(ctx, tp, []byte("a"), due, producer.WithKey("a"))
	require.NoError(t, err)
	k := keyspace.KeysFor(prefix, tp, keyspace.IndexString("a", tp.SlotAmount()))
	// Taken from store within the lookahead before its instant, and held
	// here (the client counts it once the fetch's reply is read).
	require.Eventually(t, func() bool {
		n, _ := e.rdb.ZCard(ctx, k.Prepare).Result()
		e.mu.Lock()
		held := e.held
		e.mu.Unlock()
		return n == 1 && held == 1
	}, 2*time.Second, time.Millisecond)
	taken := time.Now()
	assert.True(t, taken.Before(due), "taken %v before the instant", due.Sub(taken))
	select {
	case m := <-got:
		now := time.Now()
		assert.False(t, now.Before(m.DueAt), "handed over %v early", m.DueAt.Sub(now))
		assert.Equal(t, "a", m.ID)
		assert.Equal(t, 1, m.Attempt)
	case <-ctx.Done():
		t.Fatal("not delivered")
	}
}
