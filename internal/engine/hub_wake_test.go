package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// wakeFixture is many engines of FixedTime topics sharing one hub, as the
// topics of one rmq.Client do, on a server of its own (so CLIENT LIST shows
// only its connections).
type wakeFixture struct {
	t       *testing.T
	admin   *redis.Client
	prefix  string
	p       *producer.Producer
	engines []*Engine
	got     chan string // "topic/id" of every handled message
	// cmds counts the commands the engines' client sent, by name and
	// first key ("hget rmq:paused").
	cmdMu sync.Mutex
	cmds  map[string]int
}

func newWakeFixture(t *testing.T, n int) *wakeFixture {
	t.Helper()
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	f := &wakeFixture{t: t, admin: redistest.Client(t, srv), prefix: redistest.Prefix(t), got: make(chan string, 4*n), cmds: map[string]int{}}
	rdb.AddHook(redistest.Observer{Before: func(c redis.Cmder) {
		f.cmdMu.Lock()
		name := strings.ToLower(c.Name())
		if args := c.Args(); len(args) > 1 {
			name += fmt.Sprint(" ", args[1])
		}
		f.cmds[name]++
		f.cmdMu.Unlock()
	}})
	h := newHub(t, rdb, f.prefix) // closed after the engines' Close (cleanups run last first)
	for i := range n {
		tp := topic.MustNew(fmt.Sprintf("wake%03d", i), topic.FixedTime, 4)
		c, err := h.newEngine(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
			f.got <- tp.Name() + "/" + m.ID
			return nil
		}))
		require.NoError(t, err)
		f.engines = append(f.engines, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for _, c := range f.engines {
		go func() { errs <- c.Start(ctx) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range f.engines {
			require.NoError(t, c.Close(ctx))
		}
	})
	f.p = newProducer(redistest.Client(t, srv), f.prefix)
	return f
}

// pauseReads counts the commands that read the paused hash, by name.
func (f *wakeFixture) pauseReads(cmd string) int {
	f.cmdMu.Lock()
	defer f.cmdMu.Unlock()
	return f.cmds[cmd+" "+keyspace.PausedKey(f.prefix)]
}

// pubsubConns returns the number of subscription connections on the server.
func (f *wakeFixture) pubsubConns() int {
	f.t.Helper()
	list, err := f.admin.ClientList(context.Background()).Result()
	require.NoError(f.t, err)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// subscribers returns PUBSUB NUMSUB of every wake channel of c.
func (f *wakeFixture) subscribers(c *Engine) []int64 {
	f.t.Helper()
	res, err := f.admin.PubSubNumSub(context.Background(), c.waker.Channels()...).Result()
	require.NoError(f.t, err)
	out := make([]int64, len(c.keys))
	for i, k := range c.keys {
		out[i] = res[k.Wake]
	}
	return out
}

// sendAll sends one message due now to each engine's topic (skipping
// those not in want) and requires every one handled within a few seconds:
// an idle fetcher sleeps up to a minute (maxIdle), so only a wake-up (or a
// resubscription that makes the heads unknown) brings it that fast.
func (f *wakeFixture) sendAll(what string, want func(i int) bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pending := map[string]bool{}
	for i, c := range f.engines {
		if !want(i) {
			continue
		}
		id := fmt.Sprintf("%s-%d-%d", what, i, time.Now().UnixNano())
		_, err := f.p.SendFixedTime(ctx, c.topic, []byte(id), time.Now(), producer.WithKey(id))
		require.NoError(f.t, err)
		pending[c.topic.Name()+"/"+id] = true
	}
	for len(pending) > 0 {
		select {
		case got := <-f.got:
			require.True(f.t, pending[got], "%s: unexpected delivery %s", what, got)
			delete(pending, got)
		case <-ctx.Done():
			f.t.Fatalf("%s: %d messages not handled: no wake-up", what, len(pending))
		}
	}
}

func everyTopic(int) bool { return true }

// The engines of 200 topics on one hub share one subscription connection;
// every topic is woken through it; a closed engine's channels are
// unsubscribed while the others keep receiving; and after the server kills
// the subscription, it is made again: every slot is looked at again (so
// messages sent while it was down are handled at once) and the pause state
// of every topic is read again with one HGETALL.
func TestWakeHubManyTopics(t *testing.T) {
	const n = 200
	f := newWakeFixture(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	require.Equal(t, 1, f.pubsubConns(), "one subscription connection for %d topics", n)
	for _, c := range f.engines {
		require.Equal(t, []int64{1, 1, 1, 1}, f.subscribers(c), "wake channels of %s", c.topic.Name())
	}
	// Each topic read its pause state once, in the round trip that stored
	// its definition.
	require.Equal(t, n, f.pauseReads("hget"))
	waitFetchersAsleep(t, n)
	f.sendAll("start", everyTopic)

	// One topic closes: its channels are unsubscribed when Close returned,
	// the others keep theirs and keep being woken.
	closed := f.engines[7]
	require.NoError(t, closed.Close(ctx))
	require.Eventually(t, func() bool {
		return fmt.Sprint(f.subscribers(closed)) == "[0 0 0 0]"
	}, 5*time.Second, 10*time.Millisecond, "channels of the closed topic still subscribed")
	for i, c := range f.engines {
		if i != 7 {
			require.Equal(t, []int64{1, 1, 1, 1}, f.subscribers(c), "wake channels of %s", c.topic.Name())
		}
	}
	open := func(i int) bool { return i != 7 }
	f.sendAll("after close", open)

	// A topic paused behind the consumer's back (no payload published):
	// only the read after the resubscription can tell.
	paused := f.engines[3]
	require.NoError(t, f.admin.HSet(ctx, keyspace.PausedKey(f.prefix), paused.topic.Name(), time.Now().UnixMilli()).Err())
	hgetall := f.pauseReads("hgetall")

	killed, err := f.admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), killed)
	// Sent while the subscription may be down: handled once it is made
	// again, as every slot becomes unknown.
	f.sendAll("after kill", func(i int) bool { return i != 7 && i != 3 })
	require.Eventually(t, paused.paused.Load, 5*time.Second, 10*time.Millisecond, "pause state not read again")
	require.Equal(t, hgetall+1, f.pauseReads("hgetall"), "one read of the pause state for every topic")
	require.Equal(t, n, f.pauseReads("hget"), "no pause read per topic")
	require.Equal(t, 1, f.pubsubConns())
	for i, c := range f.engines {
		if i != 7 {
			require.Equal(t, []int64{1, 1, 1, 1}, f.subscribers(c), "wake channels of %s after the kill", c.topic.Name())
		}
	}
	f.sendAll("after resubscription", func(i int) bool { return i != 7 && i != 3 })
}

// Engines of one topic, one pushed and one pulled, share its channels: the
// close of one keeps them subscribed for the other.
func TestWakeHubSharedChannels(t *testing.T) {
	f := newWakeFixture(t, 1)
	c := f.engines[0]
	var woken atomic.Int64
	pull, err := c.hub.newPuller(c.topic, func() { woken.Add(1) })
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, pull.Start(ctx))
	require.Equal(t, 1, f.pubsubConns())
	require.NoError(t, pull.Close(ctx))
	require.Equal(t, []int64{1, 1, 1, 1}, f.subscribers(c))
	f.sendAll("after the pull engine closed", everyTopic)
}
