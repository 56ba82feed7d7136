package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// lookEnv returns a test's context (30 s), a client of the shared Redis, a
// key prefix of its own and a hub on that client, closed after the test.
func lookEnv(t *testing.T) (context.Context, redis.UniversalClient, string, *Hub) {
	t.Helper()
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	prefix := redistest.Prefix(t)
	return ctx, rdb, prefix, newHub(t, rdb, prefix)
}

// lookTopics starts one engine per topic on hub h, each sending what it
// receives to got; the engines are closed at the end of the test.
func lookTopics(t *testing.T, ctx context.Context, h *Hub, prefix string, ts []topic.Topic, got chan<- string) {
	t.Helper()
	for _, tp := range ts {
		l := consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			got <- m.Topic + "/" + string(m.Body)
			return nil
		})
		e, err := h.newEngine(tp, l)
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { _ = e.Close(context.Background()) })
	}
}

func receive(t *testing.T, ctx context.Context, got <-chan string, want ...string) {
	t.Helper()
	var seen []string
	for range want {
		select {
		case s := <-got:
			seen = append(seen, s)
		case <-ctx.Done():
			t.Fatalf("got %v, want %v", seen, want)
		}
	}
	assert.ElementsMatch(t, want, seen)
}

// Empty topics start without a fetch: the first look (one EXISTS per
// topic, pipelined) finds nothing, and a message sent afterwards still
// arrives through its wake-up.
func TestEmptyTopicsStartWithoutFetching(t *testing.T) {
	ctx, rdb, prefix, h := lookEnv(t)
	types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
	var ts []topic.Topic
	for i := range 12 {
		ts = append(ts, topic.MustNew(fmt.Sprintf("look%02d", i), types[i%3], 1<<(i%5)))
	}
	got := make(chan string, 16)
	lookTopics(t, ctx, h, prefix, ts, got)
	// Once every fetcher sleeps, the start-up's fetches are all done.
	waitFetchersAsleep(t, len(ts))
	// The subscription's first confirmation reads as a resubscription
	// (wakeHub.receive): the engine registered by then looks again, once.
	assert.LessOrEqual(t, h.calls.Fetches.Load(), int64(1), "fetches of 12 empty topics")

	p := newProducer(rdb, prefix)
	_, err := p.SendFixedTime(ctx, ts[0], []byte("a"), time.Now())
	require.NoError(t, err)
	_, err = p.SendPriority(ctx, ts[1], []byte("b"), 50)
	require.NoError(t, err)
	receive(t, ctx, got, "look00/a", "look01/b")
}

// What waits before Start is found: a due message in store, and a priority
// message that is only in its delayed set (not before a time to come).
func TestFirstLookFindsWhatWaits(t *testing.T) {
	ctx, rdb, prefix, h := lookEnv(t)
	ts := []topic.Topic{
		topic.MustNew("waits-fixed", topic.FixedTime, 8),
		topic.MustNew("waits-prio", topic.Priority, 4),
		topic.MustNew("waits-empty", topic.FixedTime, 16),
	}
	p := newProducer(rdb, prefix)
	_, err := p.SendFixedTime(ctx, ts[0], []byte("due"), time.Now())
	require.NoError(t, err)
	_, err = p.SendPriority(ctx, ts[1], []byte("later"), 40, producer.WithNotBefore(time.Now().Add(300*time.Millisecond)))
	require.NoError(t, err)
	got := make(chan string, 4)
	lookTopics(t, ctx, h, prefix, ts, got)
	receive(t, ctx, got, "waits-fixed/due", "waits-prio/later")
}
