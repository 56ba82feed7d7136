package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// sendOf sends body to tp by its type's method, due at once (a range-merge
// window of 0, a fixed time of now, priority 20).
func sendOf(ctx context.Context, p *producer.Producer, tp topic.Topic, body string, opts ...producer.SendOption) (string, error) {
	switch tp.Type() {
	case topic.RangeMerge:
		return p.SendRangeMerge(ctx, tp, []byte(body), 0, opts...)
	case topic.Priority:
		return p.SendPriority(ctx, tp, []byte(body), 20, opts...)
	default:
		return p.SendFixedTime(ctx, tp, []byte(body), time.Now(), opts...)
	}
}

// slotDump is the DUMP of every key of every slot of tp (its messages, its
// groups, its unique sends) that exists: what a refused send must leave as
// it was.
func slotDump(t *testing.T, rdb redis.UniversalClient, prefix string, tp topic.Topic) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for i := range tp.SlotAmount() {
		k := keyspace.KeysFor(prefix, tp, i)
		g := keyspace.GroupKeysFor(prefix, tp, i)
		u := keyspace.UniqueKeysFor(prefix, tp, i)
		for _, key := range []string{k.Store, k.Prepare, k.Dead, k.Msg, k.DeadMsg, k.Delayed, g.Queue, g.Places, g.Turn, g.Rate, u.Until, u.Nonce} {
			v, err := rdb.Dump(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			require.NoError(t, err)
			out[key] = v
		}
	}
	return out
}

// quietClient is a started client under prefix with no listener, for
// Pull, on a client of its own (the producer's client checks the producer's
// calls).
func quietClient(t *testing.T, prefix string) *rmq.Client {
	t.Helper()
	c, err := rmq.New(redistest.Client(t, redistest.Shared(t)), rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// A unique send is refused, writing nothing, while an earlier unique send
// of its id is within its window, whatever became of that message:
// waiting, in flight, acked, dead or removed; on every type (a range-merge
// repeat is refused, not merged), with and without a group.
func TestUniqueRefusedInEveryState(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	c := quietClient(t, prefix)
	ctx := context.Background()
	for _, typ := range []topic.Type{topic.RangeMerge, topic.Priority, topic.FixedTime} {
		for _, group := range []string{"", "g"} {
			t.Run(fmt.Sprintf("%s/group=%q", typ, group), func(t *testing.T) {
				tp := topic.MustNew(fmt.Sprintf("uniq-%d-%s", typ, group), typ, 2)
				opts := func(id string, more ...producer.SendOption) []producer.SendOption {
					o := append([]producer.SendOption{producer.WithKey(id), producer.WithUniqueFor(time.Hour)}, more...)
					if group != "" {
						o = append(o, producer.WithGroup(group))
					}
					return o
				}
				pull := func(id string) *rmq.Delivery {
					t.Helper()
					ds, err := c.Pull(ctx, []topic.Topic{tp}, 1, rmq.WithLease(time.Minute), rmq.WithWait(10*time.Second))
					require.NoError(t, err)
					require.Len(t, ds, 1)
					require.Equal(t, id, ds[0].ID)
					return ds[0]
				}
				first := func(id string, more ...producer.SendOption) {
					t.Helper()
					got, err := sendOf(ctx, p, tp, "first "+id, opts(id, more...)...)
					require.NoError(t, err)
					require.Equal(t, id, got)
				}

				t0, err := rdb.Time(ctx).Result()
				require.NoError(t, err)
				first("fly")
				fly := pull("fly")
				first("acked")
				require.NoError(t, pull("acked").Ack(ctx))
				first("dead", producer.WithMaxRetries(0))
				require.NoError(t, pull("dead").Nack(ctx, 0, errors.New("boom")))
				first("removed")
				var removed producer.Removed
				var rm []producer.SendOption
				if group != "" {
					rm = append(rm, producer.WithGroup(group))
				}
				removed, err = p.Remove(ctx, tp, "removed", rm...)
				require.NoError(t, err)
				require.Equal(t, producer.RemovedWaiting, removed)
				first("waiting")

				deadKey := keyspace.KeysFor(prefix, tp, slotOf(tp, "dead", group)).Dead
				_, err = rdb.ZScore(ctx, deadKey, "dead").Result()
				require.NoError(t, err, "dead")

				t1, err := rdb.Time(ctx).Result()
				require.NoError(t, err)
				ids := []string{"waiting", "fly", "acked", "dead", "removed"}
				for _, id := range ids {
					before := slotDump(t, rdb, prefix, tp)
					_, err := sendOf(ctx, p, tp, "again "+id, opts(id)...)
					require.ErrorIs(t, err, producer.ErrDuplicate, id)
					assert.Equal(t, before, slotDump(t, rdb, prefix, tp), "%s: a refused send writes nothing", id)
				}
				// Each claim lasts until its send's Redis ms plus d.
				for _, id := range ids {
					u := keyspace.UniqueKeysFor(prefix, tp, slotOf(tp, id, group))
					until, err := rdb.ZScore(ctx, u.Until, id).Result()
					require.NoError(t, err, id)
					assert.GreaterOrEqual(t, int64(until), t0.Add(time.Hour).UnixMilli(), id)
					assert.LessOrEqual(t, int64(until), t1.Add(time.Hour).UnixMilli(), id)
				}
				// The first send of the waiting one is what waits.
				raw, err := rdb.HGet(ctx, keyspace.KeysFor(prefix, tp, slotOf(tp, "waiting", group)).Msg, "waiting").Bytes()
				require.NoError(t, err)
				env, err := scripts.DecodeEnvelope(raw)
				require.NoError(t, err)
				assert.Equal(t, "first waiting", string(env.Body))

				// Once Redis's clock reaches a claim's end the id may be sent
				// again, in every state. The claims are ended by setting their
				// until-ms to now (TestUniqueWindowEnds waits for a real
				// window to pass), and the new send claims the id again.
				now, err := rdb.Time(ctx).Result()
				require.NoError(t, err)
				for _, id := range ids {
					u := keyspace.UniqueKeysFor(prefix, tp, slotOf(tp, id, group))
					require.NoError(t, rdb.ZAddXX(ctx, u.Until, redis.Z{Score: float64(now.UnixMilli()), Member: id}).Err())
					_, err := sendOf(ctx, p, tp, "later "+id, opts(id)...)
					require.NoError(t, err, "%s: accepted once its window passed", id)
					_, err = sendOf(ctx, p, tp, "again "+id, opts(id)...)
					require.ErrorIs(t, err, producer.ErrDuplicate, "%s: claimed again", id)
				}
				require.NoError(t, fly.Ack(ctx))
			})
		}
	}
}

// slotOf is the slot of a message sent with WithKey(id) (and WithGroup when
// group is not empty).
func slotOf(tp topic.Topic, id, group string) int {
	if group != "" {
		return slots.IndexString(group, tp.SlotAmount())
	}
	return slots.IndexString(id, tp.SlotAmount())
}

// A window starts at Redis's clock when the send is accepted and lasts d:
// the stored until-ms is Redis's ms then plus d, the id is refused before
// it and accepted from it on. A send without the option is neither checked
// nor recorded.
func TestUniqueWindowEnds(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	tp := topic.MustNew("uniq-window", topic.FixedTime, 1)
	u := keyspace.UniqueKeysFor(prefix, tp, 0)
	const d = 200 * time.Millisecond

	before, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	_, err = sendOf(ctx, p, tp, "a", producer.WithKey("k"), producer.WithUniqueFor(d))
	require.NoError(t, err)
	after, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	until, err := rdb.ZScore(ctx, u.Until, "k").Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, int64(until), before.Add(d).UnixMilli())
	assert.LessOrEqual(t, int64(until), after.Add(d).UnixMilli())

	// Refused while Redis's clock is before until, accepted once it is
	// not: each attempt is bracketed by Redis's clock.
	refused := 0
	require.Eventually(t, func() bool {
		t0, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		_, err = sendOf(ctx, p, tp, "b", producer.WithKey("k"), producer.WithUniqueFor(d))
		if errors.Is(err, producer.ErrDuplicate) {
			require.Less(t, t0.UnixMilli(), int64(until), "refused after the window")
			refused++
			return false
		}
		require.NoError(t, err)
		t1, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		require.GreaterOrEqual(t, t1.UnixMilli(), int64(until), "accepted within the window")
		return true
	}, 10*time.Second, time.Millisecond)
	assert.Positive(t, refused)
	assert.Equal(t, "b", string(envelopeOf(t, rdb, prefix, tp, "k").Body), "the accepted send replaced the waiting one")

	// Without the option: no check, no record.
	_, err = sendOf(ctx, p, tp, "c", producer.WithKey("plain"))
	require.NoError(t, err)
	_, err = sendOf(ctx, p, tp, "d", producer.WithKey("plain"))
	require.NoError(t, err)
	_, err = rdb.ZScore(ctx, u.Until, "plain").Result()
	require.ErrorIs(t, err, redis.Nil)
}

// Past entries are cleared by later unique sends, two per message: the
// unique set holds the live windows, not every id ever sent.
func TestUniqueTrimsPastEntries(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	tp := topic.MustNew("uniq-trim", topic.FixedTime, 1)
	u := keyspace.UniqueKeysFor(prefix, tp, 0)
	const short = 40
	for i := range short {
		_, err := sendOf(ctx, p, tp, "x", producer.WithKey(fmt.Sprint("short", i)), producer.WithUniqueFor(time.Millisecond))
		require.NoError(t, err)
	}
	last, err := rdb.ZRangeWithScores(ctx, u.Until, -1, -1).Result()
	require.NoError(t, err)
	require.Len(t, last, 1)
	// Until Redis's clock passed the last window.
	require.Eventually(t, func() bool {
		now, err := rdb.Time(ctx).Result()
		require.NoError(t, err)
		return now.UnixMilli() > int64(last[0].Score)
	}, 5*time.Second, time.Millisecond)
	n, err := rdb.ZCard(ctx, u.Until).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(short))

	const long = short / 2
	for i := range long {
		_, err := sendOf(ctx, p, tp, "y", producer.WithKey(fmt.Sprint("long", i)), producer.WithUniqueFor(time.Hour))
		require.NoError(t, err)
	}
	ids, err := rdb.ZRange(ctx, u.Until, 0, -1).Result()
	require.NoError(t, err)
	assert.Len(t, ids, long, "only the live windows are left")
	nonces, err := rdb.HLen(ctx, u.Nonce).Result()
	require.NoError(t, err)
	assert.EqualValues(t, long, nonces)
	for _, id := range ids {
		assert.Contains(t, id, "long")
	}
}

// Bad windows are refused before anything is written.
func TestUniqueBadWindow(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	tp := topic.MustNew("uniq-bad", topic.FixedTime, 1)
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond - 1, producer.MaxUniqueFor + 1} {
		_, err := sendOf(ctx, p, tp, "x", producer.WithUniqueFor(d))
		require.ErrorIs(t, err, producer.ErrInvalidUniqueFor, d)
		_, err = p.SendBatch(ctx, tp, []producer.BatchMessage{{Body: []byte("x"), At: time.Now(), Options: []producer.SendOption{producer.WithUniqueFor(d)}}})
		require.ErrorIs(t, err, producer.ErrInvalidUniqueFor, d)
	}
	assert.Empty(t, keysOf(t, rdb, prefix))
	for _, d := range []time.Duration{time.Millisecond, producer.MaxUniqueFor} {
		_, err := sendOf(ctx, p, tp, "x"+d.String(), producer.WithUniqueFor(d))
		require.NoError(t, err, d)
	}
}

// A recurring message refuses WithUniqueFor: its copies are stored by the
// schedule, not by a send, so the option would be dropped silently.
func TestUniqueNotOnRecurring(t *testing.T) {
	_, err := producer.ParseRecurring(topic.FixedTime, producer.WithUniqueFor(time.Hour))
	require.ErrorIs(t, err, producer.ErrInvalidRecurring)
	_, err = producer.ParseRecurring(topic.FixedTime, producer.WithUniqueFor(0))
	require.ErrorIs(t, err, producer.ErrInvalidUniqueFor)
}
