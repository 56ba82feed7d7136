package producer_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Redis restarts without persistence under a running client: the client
// goes on sending and consuming, and the first send once the re-check
// interval is over stores the topic definition again, so the Inspector
// (and rmqctl) list the topic. Within the interval sends cost no command
// on the topics hash; once it is over, one send among many concurrent ones
// pays for the check.
func TestTopicDefinitionRestoredAfterDataLoss(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{}) // no AOF, no RDB
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	topicsKey := keyspace.TopicsKey(prefix)
	var defCmds atomic.Int64 // commands on the topics hash
	rdb.AddHook(redistest.Observer{Before: func(c redis.Cmder) {
		if args := c.Args(); len(args) > 1 && args[1] == topicsKey {
			defCmds.Add(1)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tp := topic.MustNew("orders", topic.FixedTime, 4)
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	got := make(chan string, 16)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- string(m.Body)
		return nil
	})))
	require.NoError(t, c.Start(ctx))
	defer c.Close(ctx)
	p, insp := c.Producer(), c.Inspector()
	producer.SetRedefineInterval(p, time.Hour)
	receive := func(want string) {
		t.Helper()
		select {
		case b := <-got:
			require.Equal(t, want, b)
		case <-ctx.Done():
			t.Fatalf("%q not delivered", want)
		}
	}
	listed := func() []string {
		t.Helper()
		ts, err := insp.Topics(ctx)
		require.NoError(t, err)
		var names []string
		for _, x := range ts {
			names = append(names, x.Name())
		}
		return names
	}
	send := func(body string) {
		t.Helper()
		_, err := p.SendFixedTime(ctx, tp, []byte(body), time.Now())
		require.NoError(t, err)
	}

	send("before")
	receive("before")
	require.Equal(t, []string{"orders"}, listed())
	before := defCmds.Load()
	for range 100 {
		_, err := p.SendFixedTime(ctx, tp, []byte("far"), time.Now().Add(time.Hour))
		require.NoError(t, err)
	}
	assert.Equal(t, before, defCmds.Load(), "a send within the interval touched the topics hash")

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart(ctx))
	require.Empty(t, listed(), "the restart kept data")

	// Within the interval the definition stays lost, but the client works.
	send("after restart")
	receive("after restart")
	require.Empty(t, listed())

	// The interval is over: the next send checks (HGET) and stores (HSETNX).
	producer.SetRedefineInterval(p, 0)
	before = defCmds.Load()
	send("restored")
	receive("restored")
	assert.Equal(t, before+2, defCmds.Load(), "HGET, then HSETNX")
	require.Equal(t, []string{"orders"}, listed())
	def, err := rdb.HGet(ctx, topicsKey, "orders").Result()
	require.NoError(t, err)
	assert.Equal(t, tp.Definition(), def)

	// With the definition in place a check is one HGET, made by one of
	// many concurrent sends, once the interval is over.
	producer.SetRedefineInterval(p, time.Hour)
	producer.ExpireDefinitionChecks(p)
	before = defCmds.Load()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := p.SendFixedTime(ctx, tp, []byte("far"), time.Now().Add(time.Hour))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, before+1, defCmds.Load())
}

// A definition changed behind the producer's back (after a data loss,
// another process defined the topic differently) is refused at the next
// check, as it is at the first send.
func TestRecheckFindsConflict(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	p := newProducer(rdb, prefix)
	tp := topic.MustNew("jobs", topic.Priority, 2)
	_, err := p.SendPriority(ctx, tp, []byte("a"), 100)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, keyspace.TopicsKey(prefix), "jobs", topic.MustNew("jobs", topic.Priority, 8).Definition()).Err())
	producer.SetRedefineInterval(p, 0)
	_, err = p.SendPriority(ctx, tp, []byte("b"), 100)
	require.ErrorIs(t, err, topic.ErrConflict)
	require.NoError(t, rdb.Del(ctx, keyspace.TopicsKey(prefix)).Err())
	_, err = p.SendPriority(ctx, tp, []byte("b"), 100)
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Del(context.Background(), redistest.KeysWithPrefix(t, rdb, prefix)...) })
}
