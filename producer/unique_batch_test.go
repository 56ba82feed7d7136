package producer_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// In a batch each unique message is refused or accepted on its own: a
// duplicate gets ErrDuplicate and an empty id while the others are
// stored, and a second message of one id in the batch is a duplicate of
// the first. SendMany reports it in the message's own error. On both
// backends (the unique keys lie in the slot's hash tag).
func TestUniqueInBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		p, rdb, prefix := setup(t, backend)
		ctx := context.Background()
		tp := topic.MustNew("uniq-batch", topic.FixedTime, 4)
		uniq := []producer.SendOption{producer.WithUniqueFor(time.Hour)}
		msg := func(key, body string, opts ...producer.SendOption) producer.BatchMessage {
			return producer.BatchMessage{Key: key, Body: []byte(body), At: time.Now(), Options: opts}
		}
		_, err := p.SendFixedTime(ctx, tp, []byte("earlier"), time.Now(), producer.WithKey("old"), producer.WithUniqueFor(time.Hour))
		require.NoError(t, err)

		ids, err := p.SendBatch(ctx, tp, []producer.BatchMessage{
			msg("a", "a1", uniq...),
			msg("old", "old2", uniq...),
			msg("b", "b1", uniq...),
			msg("a", "a2", uniq...),
			msg("plain", "p1"),
			msg("plain", "p2"),
			msg("g", "g1", producer.WithUniqueFor(time.Hour), producer.WithGroup("grp")),
			msg("g", "g2", producer.WithUniqueFor(time.Hour), producer.WithGroup("grp")),
		})
		require.ErrorIs(t, err, producer.ErrDuplicate)
		assert.Equal(t, []string{"a", "", "b", "", "plain", "plain", "g", ""}, ids)
		for id, body := range map[string]string{"a": "a1", "old": "earlier", "b": "b1", "plain": "p2"} {
			assert.Equal(t, body, string(envelopeOf(t, rdb, prefix, tp, id).Body), id)
		}
		raw, err := rdb.HGet(ctx, keyspace.KeysFor(prefix, tp, slots.IndexString("grp", 4)).Msg, "g").Bytes()
		require.NoError(t, err)
		env, err := scripts.DecodeEnvelope(raw)
		require.NoError(t, err)
		assert.Equal(t, "g1", string(env.Body))

		// All good: no error.
		ids, err = p.SendBatch(ctx, tp, []producer.BatchMessage{msg("c", "c1", uniq...), msg("d", "d1", uniq...)})
		require.NoError(t, err)
		assert.Equal(t, []string{"c", "d"}, ids)

		ids, errs := p.SendMany(ctx, []producer.TopicMessage{
			{Topic: tp, BatchMessage: msg("c", "c2", uniq...)},
			{Topic: tp, BatchMessage: msg("e", "e1", uniq...)},
			{Topic: tp, BatchMessage: msg("e", "e2", uniq...)},
			{Topic: tp, BatchMessage: msg("f", "f1", producer.WithUniqueFor(0))},
		})
		assert.Equal(t, []string{"", "e", "", ""}, ids)
		assert.ErrorIs(t, errs[0], producer.ErrDuplicate)
		assert.NoError(t, errs[1])
		assert.ErrorIs(t, errs[2], producer.ErrDuplicate)
		assert.ErrorIs(t, errs[3], producer.ErrInvalidUniqueFor)
		assert.Equal(t, "c1", string(envelopeOf(t, rdb, prefix, tp, "c").Body))
		assert.Equal(t, "e1", string(envelopeOf(t, rdb, prefix, tp, "e").Body))
	})
}

// A reply lost after Redis ran a unique send makes go-redis run the script
// again; the rerun finds its own claim (the call's nonce) and answers
// success without writing again, and a later send of the id is refused.
// For a send without a group (sendbatch.lua) and with one (gsend.lua).
func TestUniqueSurvivesLostReply(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	p := newProducer(rdb, prefix)
	ctx := context.Background()
	tp := topic.MustNew("uniq-lost", topic.RangeMerge, 1)

	for _, c := range []struct {
		script *redis.Script
		opts   []producer.SendOption
	}{
		{scripts.SendBatch, nil},
		{scripts.GSend, []producer.SendOption{producer.WithGroup("grp")}},
	} {
		// Define the topic and load the script first so the armed request
		// is the send.
		_, err = p.SendRangeMerge(ctx, tp, []byte("warm-up "+c.script.Hash()), time.Hour, append(c.opts, producer.WithUniqueFor(time.Hour))...)
		require.NoError(t, err)

		dropped := proxy.Dropped()
		proxy.DropReplyTo([]byte(c.script.Hash()))
		key := "k" + c.script.Hash()[:6]
		opts := append([]producer.SendOption{producer.WithKey(key), producer.WithUniqueFor(time.Hour)}, c.opts...)
		id, err := p.SendRangeMerge(ctx, tp, []byte("once"), time.Hour, opts...)
		require.NoError(t, err)
		assert.Equal(t, key, id)
		assert.Equal(t, dropped+1, proxy.Dropped(), "the fault happened")

		k := keyspace.KeysFor(prefix, tp, 0)
		raw, err := direct.HGet(ctx, k.Msg, key).Bytes()
		require.NoError(t, err)
		env, err := scripts.DecodeEnvelope(raw)
		require.NoError(t, err)
		assert.Equal(t, "once", string(env.Body))

		_, err = p.SendRangeMerge(ctx, tp, []byte("twice"), time.Hour, opts...)
		require.ErrorIs(t, err, producer.ErrDuplicate)
	}
}

// commandStats returns the calls of each command since the last CONFIG
// RESETSTAT (INFO commandstats: a script's own calls count too).
func commandStats(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(calls)
		require.NoError(t, err)
		out[name] = n
	}
	return out
}

// A send without WithUniqueFor runs the commands it ran before the option
// existed (send1.lua's path for a new id, nothing of the unique keys); a
// unique send adds the check, the claim and the trim; a refused one writes
// nothing (no envelope, no store entry, no wake). Counted on a server of
// its own with INFO commandstats.
func TestUniqueCommandCounts(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	p := newProducer(rdb, "rmq")
	ctx := context.Background()
	tp := topic.MustNew("uniq-cost", topic.FixedTime, 1)
	// The topic defined and both scripts loaded (sendbatch.lua for the
	// unique sends, send1.lua for the others) before counting.
	_, err := p.SendFixedTime(ctx, tp, []byte("warm-up"), time.Now(), producer.WithKey("w"), producer.WithUniqueFor(time.Hour))
	require.NoError(t, err)
	_, err = p.SendFixedTime(ctx, tp, []byte("warm-up"), time.Now(), producer.WithKey("w2"))
	require.NoError(t, err)

	count := func(send func() error) map[string]int {
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		require.NoError(t, send())
		got := commandStats(t, rdb)
		delete(got, "config|resetstat")
		return got
	}
	plain := count(func() error {
		_, err := p.SendFixedTime(ctx, tp, []byte("plain"), time.Now().Add(time.Hour), producer.WithKey("p"))
		return err
	})
	t.Logf("a send without WithUniqueFor: %v", plain)
	// No TIME: the warm-up's reply gave the producer Redis's clock.
	assert.Equal(t, map[string]int{"evalsha": 1, "zrange": 1, "zscore": 1, "hsetnx": 1, "zadd": 1}, plain)

	unique := count(func() error {
		_, err := p.SendFixedTime(ctx, tp, []byte("unique"), time.Now().Add(time.Hour), producer.WithKey("u"), producer.WithUniqueFor(time.Hour))
		return err
	})
	t.Logf("a send with WithUniqueFor: %v", unique)
	assert.Equal(t, map[string]int{"evalsha": 1, "time": 1, "zrange": 2, "hsetnx": 1, "zscore": 2, "zadd": 2, "hset": 1}, unique)

	refused := count(func() error {
		_, err := p.SendFixedTime(ctx, tp, []byte("again"), time.Now(), producer.WithKey("u"), producer.WithUniqueFor(time.Hour))
		if assert.ErrorIs(t, err, producer.ErrDuplicate) {
			return nil
		}
		return err
	})
	t.Logf("a refused send: %v", refused)
	assert.Equal(t, map[string]int{"evalsha": 1, "time": 1, "zrange": 2, "zscore": 1, "hget": 1}, refused)
}

// Unique sends in a packed group (8 or more messages to one slot, the
// producer's estimate of Redis's clock fresh after the first batch): the
// duplicates are refused and write nothing, the others are stored with
// their own bodies.
func TestUniqueInPackedBatch(t *testing.T) {
	p, rdb, prefix := setup(t, "single")
	flags := watchBatchFlags(rdb)
	ctx := context.Background()
	tp := topic.MustNew("uniq-packed", topic.Priority, 1)
	batch := func(from, to int, tag string) []producer.BatchMessage {
		var msgs []producer.BatchMessage
		for i := from; i < to; i++ {
			msgs = append(msgs, producer.BatchMessage{Key: fmt.Sprint("u", i), Body: []byte(fmt.Sprint(tag, i)), Priority: 20,
				Options: []producer.SendOption{producer.WithUniqueFor(time.Hour)}})
		}
		return msgs
	}
	_, err := p.SendBatch(ctx, tp, batch(0, 10, "first"))
	require.NoError(t, err)
	packedBefore := flags.packed.Load()
	ids, err := p.SendBatch(ctx, tp, batch(5, 15, "second"))
	require.ErrorIs(t, err, producer.ErrDuplicate)
	require.EqualValues(t, packedBefore+1, flags.packed.Load(), "the second batch came packed")
	assert.Equal(t, []string{"", "", "", "", "", "u10", "u11", "u12", "u13", "u14"}, ids)
	for i := range 15 {
		want := fmt.Sprint("first", i)
		if i >= 10 {
			want = fmt.Sprint("second", i)
		}
		assert.Equal(t, want, string(envelopeOf(t, rdb, prefix, tp, fmt.Sprint("u", i)).Body))
	}
}
