package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// envelopeOf reads the stored envelope of a keyed message.
func envelopeOf(t *testing.T, rdb redis.UniversalClient, prefix string, tp topic.Topic, id string) scripts.Envelope {
	t.Helper()
	k := keyspace.KeysFor(prefix, tp, slots.IndexString(id, tp.SlotAmount()))
	raw, err := rdb.HGet(context.Background(), k.Msg, id).Bytes()
	require.NoError(t, err)
	e, err := scripts.DecodeEnvelope(raw)
	require.NoError(t, err)
	return e
}

// Bad per-message options are refused with their sentinel before anything
// is written (SendBatch too).
func TestBadJobOptionsWriteNothing(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	pr := topic.MustNew("jobs", topic.Priority, 4)
	ft := topic.MustNew("at", topic.FixedTime, 4)
	tooMany := map[string]string{}
	for i := range producer.MaxHeaders + 1 {
		tooMany[strings.Repeat("k", i+1)] = "v"
	}
	cases := []struct {
		t    topic.Topic
		opts []producer.SendOption
		want error
	}{
		{pr, []producer.SendOption{producer.WithMaxRetries(-1)}, producer.ErrInvalidMaxRetries},
		{pr, []producer.SendOption{producer.WithMaxRetries(999)}, producer.ErrInvalidMaxRetries},
		{pr, []producer.SendOption{producer.WithTTL(0)}, producer.ErrInvalidExpiry},
		{pr, []producer.SendOption{producer.WithExpiresAt(time.Now().Add(-time.Second))}, producer.ErrInvalidExpiry},
		{pr, []producer.SendOption{producer.WithTimeout(time.Microsecond)}, producer.ErrInvalidTimeout},
		{pr, []producer.SendOption{producer.WithTimeout(25 * time.Hour)}, producer.ErrInvalidTimeout},
		{pr, []producer.SendOption{producer.WithHeaders(tooMany)}, producer.ErrInvalidHeaders},
		{pr, []producer.SendOption{producer.WithHeaders(map[string]string{"": "v"})}, producer.ErrInvalidHeaders},
		{pr, []producer.SendOption{producer.WithHeaders(map[string]string{strings.Repeat("k", producer.MaxHeaderKeyLength+1): "v"})}, producer.ErrInvalidHeaders},
		{pr, []producer.SendOption{producer.WithHeaders(map[string]string{"k": strings.Repeat("v", producer.MaxHeaderValueLength+1)})}, producer.ErrInvalidHeaders},
		{pr, []producer.SendOption{producer.WithDelay(-time.Second)}, producer.ErrInvalidTime},
		{ft, []producer.SendOption{producer.WithNotBefore(time.Now())}, producer.ErrTypeMismatch},
		// The envelope keeps option times in 48 bits of ms: later ones would wrap.
		{pr, []producer.SendOption{producer.WithExpiresAt(time.UnixMilli(1 << 48))}, producer.ErrInvalidExpiry},
		{pr, []producer.SendOption{producer.WithNotBefore(time.UnixMilli(1 << 48))}, producer.ErrInvalidTime},
		{pr, []producer.SendOption{producer.WithNotBefore(time.UnixMilli(1<<48 - 1).Add(time.Microsecond))}, producer.ErrInvalidTime},
	}
	for i, c := range cases {
		var err error
		if c.t.Type() == topic.Priority {
			_, err = p.SendPriority(ctx, c.t, []byte("x"), 100, c.opts...)
		} else {
			_, err = p.SendFixedTime(ctx, c.t, []byte("x"), time.Now(), c.opts...)
		}
		assert.ErrorIs(t, err, c.want, "case %d", i)
		_, err = p.SendBatch(ctx, c.t, []producer.BatchMessage{{Body: []byte("ok"), Priority: 50, At: time.Now()}, {Body: []byte("x"), Priority: 50, At: time.Now(), Options: c.opts}})
		assert.ErrorIs(t, err, c.want, "batch case %d", i)
	}
	assert.Empty(t, keysOf(t, rdb, prefix), "nothing written")
}

// Options travel in the envelope: single sends and batches, all types; a
// message without options stores none.
func TestJobOptionsAreStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend)
		ctx := context.Background()
		pr := topic.MustNew("jobs", topic.Priority, 4)
		exp := time.Now().Add(time.Hour)
		h := map[string]string{"traceparent": "00-1-2-01"}
		_, err := p.SendPriority(ctx, pr, []byte("x"), 100, producer.WithKey("a"), producer.WithMaxRetries(2),
			producer.WithExpiresAt(exp), producer.WithTimeout(1500*time.Millisecond), producer.WithHeaders(h))
		require.NoError(t, err)
		e := envelopeOf(t, rdb, prefix, pr, "a")
		assert.Equal(t, scripts.Options{MaxRetries: 2, HasMaxRetries: true, ExpiresAtMs: exp.UnixMilli(), TimeoutMs: 1500, Headers: h}, e.Options)

		_, err = p.SendBatch(ctx, pr, []producer.BatchMessage{
			{Body: []byte("p"), Key: "plain", Priority: 50},
			{Body: []byte("o"), Key: "opt", Priority: 50, Options: []producer.SendOption{producer.WithTTL(time.Minute), producer.WithHeaders(h)}},
		})
		require.NoError(t, err)
		assert.True(t, envelopeOf(t, rdb, prefix, pr, "plain").Options.IsZero())
		o := envelopeOf(t, rdb, prefix, pr, "opt").Options
		assert.Equal(t, h, o.Headers)
		assert.InDelta(t, time.Now().Add(time.Minute).UnixMilli(), o.ExpiresAtMs, 2000)

		// Delayed: not in store until its time.
		_, err = p.SendPriority(ctx, pr, []byte("d"), 100, producer.WithKey("later"), producer.WithDelay(time.Hour))
		require.NoError(t, err)
		k := keyspace.KeysFor(prefix, pr, slots.IndexString("later", 4))
		assert.ErrorIs(t, rdb.ZScore(ctx, k.Store, "later").Err(), redis.Nil)
		d, err := rdb.ZScore(ctx, k.Delayed, "later").Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(time.Now().Add(time.Hour).UnixMilli()), d, 2000)
	})
}

// The latest option times the envelope holds (2^48-1 ms) are stored exactly.
func TestFarOptionTimesAreStoredExactly(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	pr := topic.MustNew("far", topic.Priority, 4)
	last := time.UnixMilli(1<<48 - 1)
	_, err := p.SendPriority(ctx, pr, []byte("x"), 100, producer.WithKey("far"), producer.WithExpiresAt(last), producer.WithNotBefore(last))
	require.NoError(t, err)
	o := envelopeOf(t, rdb, prefix, pr, "far").Options
	assert.Equal(t, last.UnixMilli(), o.ExpiresAtMs)
	assert.Equal(t, last.UnixMilli(), o.NotBeforeMs)
}

// Never early: a fixed time with a sub-millisecond part is stored rounded
// up, one without stays as it is.
func TestFixedTimeRoundsUp(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	ctx := context.Background()
	ft := topic.MustNew("at", topic.FixedTime, 1)
	base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for i, at := range []time.Time{base, base.Add(time.Nanosecond), base.Add(999_999 * time.Nanosecond)} {
		id := []string{"exact", "ns", "almost"}[i]
		_, err := p.SendFixedTime(ctx, ft, []byte(id), at, producer.WithKey(id))
		require.NoError(t, err)
		score, err := rdb.ZScore(ctx, keyspace.KeysFor(prefix, ft, 0).Store, id).Result()
		require.NoError(t, err)
		due := time.UnixMilli(int64(score))
		assert.False(t, due.Before(at), "%s: due %v before %v", id, due, at)
		assert.Less(t, due.Sub(at), time.Millisecond)
	}
}

// A send hook sees every message (SendBatch too), may add headers, and
// hears how the write ended; headers over the limit after the hooks are
// refused.
func TestSendHook(t *testing.T) {
	var seen []string
	var ended []string
	hook := &hookNotifier{before: func(key string, h map[string]string) map[string]string {
		seen = append(seen, key)
		out := map[string]string{"traceparent": "tp-" + key}
		for k, v := range h {
			out[k] = v
		}
		return out
	}, after: func(id string, err error) { ended = append(ended, id) }}
	p, rdb, prefix := setup(t, "single", withNotify(hook))
	ctx := context.Background()
	pr := topic.MustNew("jobs", topic.Priority, 4)
	_, err := p.SendPriority(ctx, pr, []byte("x"), 100, producer.WithKey("a"))
	require.NoError(t, err)
	_, err = p.SendBatch(ctx, pr, []producer.BatchMessage{{Body: []byte("y"), Key: "b", Priority: 50}, {Body: []byte("z"), Key: "c", Priority: 50}})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, seen)
	assert.Equal(t, []string{"a", "b", "c"}, ended)
	for _, id := range seen {
		assert.Equal(t, map[string]string{"traceparent": "tp-" + id}, envelopeOf(t, rdb, prefix, pr, id).Options.Headers)
	}

	full := map[string]string{}
	for i := range producer.MaxHeaders {
		full[strings.Repeat("h", i+1)] = "v"
	}
	var gotErr error
	p2 := newProducer(rdb, prefix, withNotify(&hookNotifier{before: func(_ string, h map[string]string) map[string]string {
		h["one-more"] = "x"
		return h
	}, after: func(_ string, err error) { gotErr = err }}))
	_, err = p2.SendPriority(ctx, pr, []byte("x"), 100, producer.WithKey("over"), producer.WithHeaders(full))
	require.ErrorIs(t, err, producer.ErrInvalidHeaders)
	assert.True(t, errors.Is(gotErr, producer.ErrInvalidHeaders), "after hears the refusal")
	assert.ErrorIs(t, rdb.HGet(ctx, keyspace.KeysFor(prefix, pr, slots.IndexString("over", 4)).Msg, "over").Err(), redis.Nil)
}

// hookNotifier is what a client's send hooks look like to its producer
// (rmq.WithSendHook): before sees each message's key and headers and
// returns the headers to write; after hears how the write ended.
type hookNotifier struct {
	before func(key string, headers map[string]string) map[string]string
	after  func(id string, err error)
}

func (h *hookNotifier) Before(_ context.Context, _ topic.Topic, key string, _ []byte, headers map[string]string) (map[string]string, func(string, error)) {
	if headers == nil {
		headers = map[string]string{}
	}
	return h.before(key, headers), h.after
}

func (h *hookNotifier) Sent(topic.Topic, int)     {}
func (h *hookNotifier) Removed(topic.Topic, bool) {}
