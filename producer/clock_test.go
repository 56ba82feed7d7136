package producer_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A single send's first-send time is Redis's clock at the send, though
// send1.lua reads it only when the producer has no fresh estimate of it:
// the first send asks (one TIME), the next ones carry the estimate. Each
// stays within Redis's clock read just before and just after its send,
// for every type (range-merge windows start from Redis's own clock).
func TestSingleSendFirstSentIsRedisClock(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	p := newProducer(rdb, "rmq")
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	checkFirstSent(t, p, rdb, "rmq")
	// Range-merge sends read Redis's clock each time (20), which also keeps
	// the estimate fresh for the others: 60 sends, 20 TIME calls (the test
	// itself made 120).
	assert.Equal(t, 20, commandStats(t, rdb)["time"]-120, "TIME calls inside the scripts")
}

// On a cluster each node has its own clock: every single send reads its
// node's (the test's nodes share this machine's, so the bounds hold).
func TestSingleSendFirstSentOnCluster(t *testing.T) {
	p, rdb, prefix := setup(t, "cluster")
	checkFirstSent(t, p, rdb, prefix)
}

// checkFirstSent sends 20 messages of each type through p and checks each
// envelope's first-sent ms against Redis's clock read around its send.
func checkFirstSent(t *testing.T, p *producer.Producer, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	for _, typ := range []topic.Type{topic.RangeMerge, topic.Priority, topic.FixedTime} {
		tp := topic.MustNew("clock-"+typ.String(), typ, 1)
		for i := range 20 {
			before, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			body := []byte(fmt.Sprintf("m%d", i))
			switch typ {
			case topic.RangeMerge:
				_, err = p.SendRangeMerge(ctx, tp, body, time.Hour)
			case topic.Priority:
				_, err = p.SendPriority(ctx, tp, body, 20)
			default:
				_, err = p.SendFixedTime(ctx, tp, body, time.Now().Add(time.Hour))
			}
			require.NoError(t, err)
			after, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			raw, err := rdb.HGet(ctx, keyspace.KeysFor(prefix, tp, 0).Msg, producer.BodyID(body)).Bytes()
			require.NoError(t, err)
			e, err := scripts.DecodeEnvelope(raw)
			require.NoError(t, err)
			// The estimate is a lower bound off by at most the round trip
			// it came from: a ms before Redis's clock at worst.
			assert.GreaterOrEqual(t, int64(e.FirstSentMs), before.UnixMilli()-1, "%s send %d", typ, i)
			assert.LessOrEqual(t, int64(e.FirstSentMs), after.UnixMilli(), "%s send %d", typ, i)
			if typ == topic.RangeMerge {
				assert.GreaterOrEqual(t, int64(e.Score), before.UnixMilli()+time.Hour.Milliseconds(), "window from Redis's clock")
				assert.LessOrEqual(t, int64(e.Score), after.UnixMilli()+1+time.Hour.Milliseconds(), "window from Redis's clock")
			}
		}
	}
}

// A batch's new messages are stored with envelopes the producer packed
// (sendbatch.lua then packs none; groups of 8 or more) while its estimate
// of Redis's clock is fresh: the first batch has none, the next ones come
// packed; every call returns Redis's clock. Every envelope's first-sent ms
// stays within Redis's clock read around its batch, less the first call's
// time at most (the estimate is a lower bound, off by the round trip of
// the reply it came from), for every type (range-merge groups are never
// packed: their windows start from Redis's clock).
func TestBatchFirstSentIsRedisClock(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	flags := watchBatchFlags(rdb)
	p := newProducer(rdb, "rmq")
	var slackMs int64 // the first call's time, ms rounded up
	for _, typ := range []topic.Type{topic.Priority, topic.FixedTime, topic.RangeMerge} {
		tp := topic.MustNew("bclock-"+typ.String(), typ, 1)
		for i := range 10 {
			msgs := make([]producer.BatchMessage, 10)
			for j := range msgs {
				msgs[j] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d-%d", i, j)), Priority: 20, At: time.Now().Add(time.Hour), TimeRange: time.Hour}
			}
			before, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			began := time.Now()
			ids, err := p.SendBatch(ctx, tp, msgs)
			require.NoError(t, err)
			if slackMs == 0 {
				slackMs = time.Since(began).Milliseconds() + 1
			}
			after, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			for k, id := range ids {
				raw, err := rdb.HGet(ctx, keyspace.KeysFor("rmq", tp, 0).Msg, id).Bytes()
				require.NoError(t, err)
				e, err := scripts.DecodeEnvelope(raw)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, int64(e.FirstSentMs), before.UnixMilli()-slackMs, "%s batch %d", typ, i)
				assert.LessOrEqual(t, int64(e.FirstSentMs), after.UnixMilli(), "%s batch %d", typ, i)
				assert.Equal(t, msgs[k].Body, e.Body, "%s batch %d", typ, i)
			}
		}
	}
	// 30 calls, each asking for the clock: the 19 priority and fixed-time
	// ones after the first come packed, the range-merge ones never.
	assert.EqualValues(t, 30, flags.calls.Load())
	assert.EqualValues(t, 30, flags.asked.Load())
	assert.EqualValues(t, 19, flags.packed.Load())
}

// batchFlags counts the sendbatch.lua calls a client makes, and those
// whose first group comes packed or asks for Redis's clock.
type batchFlags struct{ calls, packed, asked atomic.Int64 }

func watchBatchFlags(rdb redis.UniversalClient) *batchFlags {
	f := &batchFlags{}
	rdb.AddHook(redistest.Observer{Before: func(cmd redis.Cmder) {
		args := cmd.Args()
		if len(args) < 4 || fmt.Sprint(args[1]) != scripts.SendBatch.Hash() {
			return
		}
		nkeys, _ := strconv.Atoi(fmt.Sprint(args[2]))
		typ, _ := strconv.Atoi(fmt.Sprint(args[3+nkeys+1]))
		f.calls.Add(1)
		if typ&scripts.SendBatchPacked != 0 {
			f.packed.Add(1)
		}
		if typ&scripts.SendBatchClock != 0 {
			f.asked.Add(1)
		}
	}})
	return f
}
