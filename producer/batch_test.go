package producer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// sendBatchCounter counts the send calls (send1.lua, sendbatch.lua) that leave for Redis,
// pipelined or not. It loads both scripts first: a call refused by an empty
// script cache (a test run alone on a fresh server) is sent again with its
// source, which would count twice.
func sendBatchCounter(t *testing.T, rdb redis.UniversalClient) *rmqtest.ScriptCounter {
	t.Helper()
	for _, s := range []*redis.Script{scripts.Send1, scripts.SendBatch} {
		require.NoError(t, s.Load(context.Background(), rdb).Err())
	}
	counter := rmqtest.NewScriptCounter(scripts.Send1, scripts.SendBatch)
	rdb.AddHook(redistest.Observer{Before: counter.Observe})
	return counter
}

// singleCounted is a producer on the shared single node whose send scripts
// calls are counted.
func singleCounted(t *testing.T) (*producer.Producer, redis.UniversalClient, *rmqtest.ScriptCounter, string) {
	t.Helper()
	p, rdb, prefix := setup(t, "single")
	return p, rdb, sendBatchCounter(t, rdb), prefix
}

// Concurrent single sends to one slot share script calls, and every sender
// still gets its own result.
func TestGroupCommitCoalescesConcurrentSends(t *testing.T) {
	p, rdb, counter, prefix := singleCounted(t)
	ctx := context.Background()
	tp := topic.MustNew("gc", topic.FixedTime, 1)
	_, err := p.SendFixedTime(ctx, tp, []byte("warm-up"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	warm := counter.N()

	const senders, each = 32, 50
	var wg sync.WaitGroup
	ids := make([][]string, senders)
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m-%d-%d", g, i)), time.Now().Add(time.Hour))
				if !assert.NoError(t, err) {
					return
				}
				ids[g] = append(ids[g], id)
			}
		}()
	}
	wg.Wait()
	k := keyspace.KeysFor(prefix, tp, 0)
	n, err := rdb.ZCard(ctx, k.Store).Result()
	require.NoError(t, err)
	assert.EqualValues(t, senders*each+1, n, "every message stored once")
	for g := range ids {
		for i, id := range ids[g] {
			assert.Equal(t, producer.BodyID([]byte(fmt.Sprintf("m-%d-%d", g, i))), id)
		}
	}
	calls := counter.N() - warm
	assert.Less(t, calls, int64(senders*each), "sends shared calls")
	t.Logf("%d sends in %d script calls", senders*each, calls)
}

func TestSendBatch(t *testing.T) {
	p, rdb, counter, prefix := singleCounted(t)
	ctx := context.Background()
	tp := topic.MustNew("batch", topic.Priority, 8)

	msgs := priorityJobs(1000)
	ids, err := p.SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	require.Len(t, ids, 1000)
	assert.Equal(t, "k999", ids[999])
	assert.EqualValues(t, 1, counter.N(), "one script call across the 8 slots (a single node)")
	assert.EqualValues(t, 1000, storeSizes(t, rdb, prefix, tp))

	// One bad message fails the whole batch before anything is written.
	bad := []producer.BatchMessage{{Body: []byte("ok"), Key: "fresh-1", Priority: 50}, {Body: []byte("x"), Priority: 16}}
	_, err = p.SendBatch(ctx, tp, bad)
	assert.ErrorIs(t, err, producer.ErrInvalidPriority)
	assert.ErrorContains(t, err, "batch message 1")
	slot := slots.IndexString("fresh-1", 8)
	assert.Equal(t, redis.Nil, rdb.ZScore(ctx, keyspace.KeysFor(prefix, tp, slot).Store, "fresh-1").Err())

	// Re-sending the batch merges: still 1000 messages.
	_, err = p.SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	assert.EqualValues(t, 1000, storeSizes(t, rdb, prefix, tp))
}

// priorityJobs is n priority messages: body job-i, key ki, priority 17+i.
func priorityJobs(n int) []producer.BatchMessage {
	msgs := make([]producer.BatchMessage, n)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("job-%d", i)), Key: fmt.Sprintf("k%d", i), Priority: int64(17 + i)}
	}
	return msgs
}

// hourAhead is n fixed-time messages due in an hour, body and key mi.
func hourAhead(n int) []producer.BatchMessage {
	msgs := make([]producer.BatchMessage, n)
	for i := range msgs {
		msgs[i] = producer.BatchMessage{Body: []byte(fmt.Sprintf("m%d", i)), Key: fmt.Sprintf("m%d", i), At: time.Now().Add(time.Hour)}
	}
	return msgs
}
