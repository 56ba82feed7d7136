package rmq_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

func TestTopicNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, 3, 6, 100, 16385, 32768} {
		_, err := topic.New("t", topic.FixedTime, n)
		assert.ErrorIs(t, err, topic.ErrInvalidSlotAmount, "slot amount %d", n)
	}
	for _, n := range []int{1, 2, 16, 1024, 16384} {
		_, err := topic.New("t", topic.FixedTime, n)
		assert.NoError(t, err, "slot amount %d", n)
	}
	for _, name := range []string{"", "a:b", "a{b}", "a}", "{a", "a b", "a/b", "ä", strings.Repeat("x", 129)} {
		_, err := topic.New(name, topic.Priority, 8)
		assert.ErrorIs(t, err, topic.ErrInvalidName, "name %q", name)
	}
	for _, name := range []string{"a", "A.b_c-9", strings.Repeat("x", 128)} {
		_, err := topic.New(name, topic.Priority, 8)
		assert.NoError(t, err, "name %q", name)
	}
	_, err := topic.New("t", topic.Type(0), 8)
	assert.ErrorIs(t, err, topic.ErrInvalidType)
}

// Every refused send returns its sentinel error and writes nothing at all.
func TestBadSendsWriteNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		ft := mustTopic(t, "ft", topic.FixedTime, 4)
		pr := mustTopic(t, "pr", topic.Priority, 4)
		rm := mustTopic(t, "rm", topic.RangeMerge, 4)
		p := e.client().Producer()
		small := e.client(rmq.WithMaxBodySize(10)).Producer()
		now := time.Now()

		cases := []struct {
			name string
			err  error
			send func() (string, error)
		}{
			{"priority send on fixed-time topic", producer.ErrTypeMismatch, func() (string, error) { return p.SendPriority(ctx, ft, []byte("x"), 100) }},
			{"fixed-time send on priority topic", producer.ErrTypeMismatch, func() (string, error) { return p.SendFixedTime(ctx, pr, []byte("x"), now) }},
			{"range-merge send on fixed-time topic", producer.ErrTypeMismatch, func() (string, error) { return p.SendRangeMerge(ctx, ft, []byte("x"), time.Second) }},
			{"fixed-time send on range-merge topic", producer.ErrTypeMismatch, func() (string, error) { return p.SendFixedTime(ctx, rm, []byte("x"), now) }},
			{"nil body", producer.ErrEmptyBody, func() (string, error) { return p.SendFixedTime(ctx, ft, nil, now) }},
			{"empty body", producer.ErrEmptyBody, func() (string, error) { return p.SendPriority(ctx, pr, []byte{}, 100) }},
			{"empty body range", producer.ErrEmptyBody, func() (string, error) { return p.SendRangeMerge(ctx, rm, []byte(""), time.Second) }},
			{"zero time", producer.ErrInvalidTime, func() (string, error) { return p.SendFixedTime(ctx, ft, []byte("x"), time.Time{}) }},
			{"negative range", producer.ErrInvalidRange, func() (string, error) { return p.SendRangeMerge(ctx, rm, []byte("x"), -time.Millisecond) }},
			{"priority 16", producer.ErrInvalidPriority, func() (string, error) { return p.SendPriority(ctx, pr, []byte("x"), 16) }},
			{"body over 1 MiB", producer.ErrBodyTooLarge, func() (string, error) {
				return p.SendFixedTime(ctx, ft, bytes.Repeat([]byte("x"), producer.DefaultMaxBodySize+1), now)
			}},
			{"body over WithMaxBodySize(10)", producer.ErrBodyTooLarge, func() (string, error) { return small.SendPriority(ctx, pr, []byte("01234567890"), 100) }},
			{"empty key", producer.ErrInvalidKey, func() (string, error) { return p.SendFixedTime(ctx, ft, []byte("x"), now, producer.WithKey("")) }},
			{"zero topic", topic.ErrInvalidName, func() (string, error) { return p.SendFixedTime(ctx, topic.Topic{}, []byte("x"), now) }},
		}
		for _, tc := range cases {
			id, err := tc.send()
			assert.ErrorIs(t, err, tc.err, tc.name)
			assert.Empty(t, id, tc.name)
		}
		require.Empty(t, e.keysNow(), "a refused send wrote something")

		// The limits themselves are accepted.
		_, err := p.SendFixedTime(ctx, ft, bytes.Repeat([]byte("x"), producer.DefaultMaxBodySize), now)
		assert.NoError(t, err, "a body of exactly 1 MiB")
		_, err = small.SendPriority(ctx, pr, []byte("0123456789"), 100)
		assert.NoError(t, err, "a body of exactly WithMaxBodySize")
		_, err = p.SendRangeMerge(ctx, rm, []byte("x"), 0)
		assert.NoError(t, err, "a zero range")
	})
}

// A topic stored with one type and slot amount cannot be used with another,
// by Start or by a send, from another client; the refusal writes nothing.
func TestTopicConflict(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		orig := mustTopic(t, "shared", topic.FixedTime, 8)
		a := e.client()
		require.NoError(t, a.Register(orig, newRecorder(nil)))
		e.start(a)
		_, err := a.Producer().SendFixedTime(ctx, orig, []byte("x"), time.Now().Add(time.Hour))
		require.NoError(t, err)
		before := e.dump()
		def, err := e.rdb.HGet(ctx, keyspace.TopicsKey(e.prefix), "shared").Result()
		require.NoError(t, err)
		require.Equal(t, orig.Definition(), def)

		for _, other := range []topic.Topic{
			mustTopic(t, "shared", topic.Priority, 8),
			mustTopic(t, "shared", topic.FixedTime, 16),
			mustTopic(t, "shared", topic.RangeMerge, 1),
		} {
			b := e.client()
			require.NoError(t, b.Register(other, newRecorder(nil)))
			err := b.Start(ctx)
			assert.ErrorIs(t, err, topic.ErrConflict, "Start with %v", other)
			// The wrap names the topic without repeating the "rmq: " prefix.
			assert.Equal(t, 1, strings.Count(err.Error(), "rmq: "), err.Error())
			assert.True(t, strings.HasPrefix(err.Error(), "rmq: start shared: topic conflicts"), err.Error())

			p := e.client().Producer()
			switch other.Type() {
			case topic.Priority:
				_, err = p.SendPriority(ctx, other, []byte("y"), 100)
			case topic.FixedTime:
				_, err = p.SendFixedTime(ctx, other, []byte("y"), time.Now())
			case topic.RangeMerge:
				_, err = p.SendRangeMerge(ctx, other, []byte("y"), time.Second)
			}
			assert.ErrorIs(t, err, topic.ErrConflict, "send with %v", other)
			assert.ErrorIs(t, err, topic.ErrConflict)
		}
		assert.Equal(t, before, e.dump(), "a refused definition changed Redis")
	})
}

// Remove by id: unknown ids are not found; a waiting message goes with its
// body; a body-derived id is found in whatever slot its body put it.
func TestRemove(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "rm", topic.FixedTime, 16)
		p := e.client().Producer()
		later := time.Now().Add(time.Hour)

		removed, err := p.Remove(ctx, tp, "nobody")
		require.NoError(t, err)
		assert.Equal(t, producer.NotFound, removed)
		_, err = p.Remove(ctx, tp, "")
		assert.ErrorIs(t, err, producer.ErrInvalidKey)

		_, err = p.SendFixedTime(ctx, tp, []byte("keyed"), later, producer.WithKey("order-7"))
		require.NoError(t, err)
		_, err = p.SendFixedTime(ctx, tp, []byte("other"), later, producer.WithKey("order-8"))
		require.NoError(t, err)
		k := e.keys(tp, slotOfKey(tp, "order-7"))
		removed, err = p.Remove(ctx, tp, "order-7")
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, removed)
		_, ok := e.zscore(k.Store, "order-7")
		assert.False(t, ok, "still in store")
		_, ok = e.envelope(k.Msg, "order-7")
		assert.False(t, ok, "body still in msg")
		assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp), "only order-7 removed")
		removed, err = p.Remove(ctx, tp, "order-7")
		require.NoError(t, err)
		assert.Equal(t, producer.NotFound, removed, "removed twice")

		// A body whose slot differs from its id's slot, so Remove must search.
		var body []byte
		for i := 0; ; i++ {
			body = []byte(fmt.Sprintf("body-%d", i))
			if slots.Index(body, 16) != slots.IndexString(producer.BodyID(body), 16) {
				break
			}
		}
		id, err := p.SendFixedTime(ctx, tp, body, later)
		require.NoError(t, err)
		require.Equal(t, producer.BodyID(body), id)
		bk := e.keys(tp, slots.Index(body, 16))
		_, ok = e.zscore(bk.Store, id)
		require.True(t, ok, "body-derived message not in its body's slot")
		removed, err = p.Remove(ctx, tp, id)
		require.NoError(t, err)
		assert.Equal(t, producer.RemovedWaiting, removed, "body-derived id not found")
		_, ok = e.zscore(bk.Store, id)
		assert.False(t, ok)
		_, ok = e.envelope(bk.Msg, id)
		assert.False(t, ok)
		assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))
	})
}

// Start warns when Redis may evict keys, and only then.
func TestStartWarnsOnEvictionPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, true},
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redisserver.Config{ExtraArgs: tc.args})
			rdb := redistest.Client(t, srv)
			var buf rmqtest.SyncBuffer
			c, err := rmq.New(rdb, rmq.WithPrefix(rmqtest.Prefix(t)), rmq.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			require.NoError(t, err)
			require.NoError(t, c.Register(mustTopic(t, "t", topic.FixedTime, 2), consumer.ListenerFunc(ack)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, c.Start(ctx))
			require.NoError(t, c.Close(ctx))
			if tc.warn {
				assert.Contains(t, buf.String(), "maxmemory-policy")
				assert.Contains(t, buf.String(), "allkeys-lru")
				assert.Contains(t, buf.String(), "level=WARN")
			} else {
				assert.NotContains(t, buf.String(), "maxmemory-policy", buf.String())
			}
		})
	}
}
